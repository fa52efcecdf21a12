"""Typed views of the Tekton fields we read (DESIGN section 5). Pure: dicts in, values out.

Every accessor tolerates missing or mistyped fields: a PipelineRun from an unknown Tekton
version must not crash the operator.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller.core.basics import names
from controller.core.basics.fragments import is_label_value

GROUP = "tekton.dev"
VERSION = "v1"
PIPELINE_RUN_KIND = "PipelineRun"

LABEL_PIPELINE_RUN = "tekton.dev/pipelineRun"
LABEL_PIPELINE_RUN_UID = "tekton.dev/pipelineRunUID"
LABEL_TASK_RUN = "tekton.dev/taskRun"
LABEL_PIPELINE_TASK = "tekton.dev/pipelineTask"
LABEL_PIPELINE = "tekton.dev/pipeline"  # Tekton's first reconcile of a run writes it
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_COMPONENT = "app.kubernetes.io/component"
AFFINITY_ASSISTANT_COMPONENT = "affinity-assistant"
LABEL_INSTANCE = "app.kubernetes.io/instance"  # names the assistant a pod must run beside

SPEC_STATUS_PENDING = "PipelineRunPending"
READ_WRITE_ONCE_POD = "ReadWriteOncePod"

FEATURE_FLAGS_CONFIGMAP = "feature-flags"
DEFAULTS_CONFIGMAP = "config-defaults"
# Tekton's own record of its release (data.version, e.g. "v1.15.0"), beside its config.
PIPELINES_INFO_CONFIGMAP = "pipelines-info"
# Tekton writes this into every TaskRun pod's app.kubernetes.io/managed-by, over any value the
# TaskRun carries, unless config-defaults names another (default-managed-by-label-value).
DEFAULT_MANAGED_BY = "tekton-pipelines"


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def dig(obj: Any, *path: str) -> Any:
    for key in path:
        obj = _dict(obj).get(key)
    return obj


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def tekton_pvc_name(template_name: str, workspace: str, owner_uid: str) -> str:
    """Tekton's name for a volumeClaimTemplate workspace's claim (pkg/reconciler/volumeclaim)."""
    return f"{template_name or 'pvc'}-{_hash(workspace + owner_uid)}"


def per_run_pvc_name(claim: str, run_name: str) -> str:
    """The claim a volumeClaimTemplate workspace gets while Tekton's assistant is on per run
    (`pipelineruns`, `isolate-pipelinerun`): its placeholder's StatefulSet makes it,
    `<template>-<set>-0`, the template named as in the other modes and cut to a volume's 63
    characters, the set `affinity-assistant-<hash of "" + run name>` (Tekton v1.15
    affinity_assistant.go getPersistentVolumeClaimNameWithAffinityAssistant, sanitizeVolumeName,
    GetAffinityAssistantName; before v1.13 a longer template name made no StatefulSet)."""
    claim = f"{claim[:52]}-{_hash(claim)}" if len(claim) > 63 else claim
    return f"{claim}-{AFFINITY_ASSISTANT_COMPONENT}-{_hash(run_name)}-0"


@dataclass(frozen=True)
class Claim:
    """A PVC the run uses, known by name before or after it exists."""

    name: str
    access_modes: tuple[str, ...] = ()

    @property
    def single_node(self) -> bool:
        """Attachable to one node at a time: no ReadWriteMany or ReadOnlyMany mode (a claim
        whose modes are not known yet counts as such)."""
        return not {"ReadWriteMany", "ReadOnlyMany"} & set(self.access_modes)

    @property
    def mountable_by_balloon(self) -> bool:
        # A ReadWriteOncePod claim held by the balloon would lock the run's own pods out.
        return READ_WRITE_ONCE_POD not in self.access_modes


@dataclass(frozen=True)
class PipelineRun:
    name: str
    namespace: str
    uid: str
    created: str
    annotations: Mapping[str, str]
    labels: Mapping[str, str]
    spec: Mapping[str, Any]
    status: Mapping[str, Any]
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> PipelineRun:
        meta = _dict(body.get("metadata"))
        annotations = {
            k: v for k, v in _dict(meta.get("annotations")).items() if isinstance(v, str)
        }
        return cls(
            name=_str(meta.get("name")),
            namespace=_str(meta.get("namespace")),
            uid=_str(meta.get("uid")),
            created=_str(meta.get("creationTimestamp")),
            annotations=annotations,
            labels={k: v for k, v in _dict(meta.get("labels")).items() if isinstance(v, str)},
            spec=_dict(body.get("spec")),
            status=_dict(body.get("status")),
            raw=body,
        )

    @property
    def valid(self) -> bool:
        return bool(self.name and self.namespace and self.uid)

    @property
    def succeeded_status(self) -> str:
        for cond in _list(self.status.get("conditions")):
            if _dict(cond).get("type") == "Succeeded":
                return _str(_dict(cond).get("status"))
        return ""

    @property
    def finished(self) -> bool:
        return self.succeeded_status in ("True", "False")

    @property
    def pending(self) -> bool:
        return self.spec.get("status") == SPEC_STATUS_PENDING

    @property
    def opted_out(self) -> bool:
        return opted_out(self.annotations)

    @property
    def pod_template(self) -> dict[str, Any]:
        return _dict(dig(self.spec, "taskRunTemplate", "podTemplate"))

    @property
    def task_pod_templates(self) -> dict[str, dict[str, Any]]:
        """Per-task pod templates from spec.taskRunSpecs, by pipeline task name."""
        out = {}
        for entry in _list(self.spec.get("taskRunSpecs")):
            entry = _dict(entry)
            template = _dict(entry.get("podTemplate"))
            if template:
                out[_str(entry.get("pipelineTaskName"))] = template
        return out

    @property
    def task_run_specs(self) -> dict[str, dict[str, Any]]:
        """spec.taskRunSpecs by pipeline task name (steps', sidecars' and task resources)."""
        return {
            _str(_dict(e).get("pipelineTaskName")): _dict(e)
            for e in _list(self.spec.get("taskRunSpecs"))
        }

    @property
    def pipeline_spec(self) -> dict[str, Any]:
        """The pipeline as the run embeds it, or as Tekton resolved it into the status."""
        return _dict(self.spec.get("pipelineSpec")) or _dict(self.status.get("pipelineSpec"))

    @property
    def substituted_pipeline_spec(self) -> dict[str, Any]:
        """The pipeline with the run's params substituted, as Tekton writes it into the status
        once resolved (what its ResolutionRequests' params were taken from); until then as
        embedded."""
        return _dict(self.status.get("pipelineSpec")) or _dict(self.spec.get("pipelineSpec"))

    def task_names(self) -> set[str] | None:
        """Names of the pipeline's tasks and finally tasks; None while the pipeline is unknown
        (a pipelineRef not yet resolved by Tekton)."""
        spec = self.pipeline_spec
        if not spec:
            return None
        return {
            _str(_dict(t).get("name"))
            for t in [*_list(spec.get("tasks")), *_list(spec.get("finally"))]
        }

    def claims(self, per_run: bool = False) -> list[Claim]:
        """Claims the run's pods mount: its workspaces (by claim name, and the claims Tekton makes
        for volumeClaimTemplate workspaces), its pod templates' volumes, and its inline tasks'
        volumes. (Tasks by reference are known once resolved: their TaskRuns' pods show them.)
        `per_run`: Tekton's assistant is on per run, and names the templated claims so."""
        found: dict[str, Claim] = {}
        templates = [self.pod_template, *self.task_pod_templates.values()]
        tasks = [*_list(self.pipeline_spec.get("tasks")), *_list(self.pipeline_spec.get("finally"))]
        volumes = [
            *(v for t in templates for v in _list(t.get("volumes"))),
            *(v for task in tasks for v in _list(dig(task, "taskSpec", "volumes"))),
        ]
        for volume in volumes:
            name = _str(dig(volume, "persistentVolumeClaim", "claimName"))
            if name:
                found.setdefault(name, Claim(name))
        for binding in _list(self.spec.get("workspaces")):
            claim_name = _str(dig(binding, "persistentVolumeClaim", "claimName"))
            claim = Claim(claim_name) if claim_name else self._templated(_dict(binding), per_run)
            if claim is not None:
                found.setdefault(claim.name, claim)
        return list(found.values())

    def claims_tekton_makes(self, per_run: bool = False) -> frozenset[str]:
        """The claims Tekton makes for the run's volumeClaimTemplate workspaces, by its naming
        (`per_run`: its assistant's StatefulSet makes them, named so). It makes them before the
        run's first TaskRun, so until then they do not exist."""
        made = (self._templated(_dict(b), per_run) for b in _list(self.spec.get("workspaces"))
                if not dig(b, "persistentVolumeClaim", "claimName"))
        return frozenset(c.name for c in made if c is not None)

    def _templated(self, binding: Mapping[str, Any], per_run: bool) -> Claim | None:
        template = _dict(binding.get("volumeClaimTemplate"))
        if not template or not binding.get("name"):
            return None
        name = tekton_pvc_name(
            _str(dig(template, "metadata", "name")), _str(binding["name"]), self.uid
        )
        name = per_run_pvc_name(name, self.name) if per_run else name
        modes = tuple(m for m in _list(dig(template, "spec", "accessModes")) if isinstance(m, str))
        return Claim(name, modes)


def opted_out(annotations: Mapping[str, Any]) -> bool:
    return str(annotations.get(names.OPT_OUT_ANNOTATION, "")).strip().lower() == "false"


def claims_owned_by(pvcs: Sequence[Mapping[str, Any]], run_uid: str) -> list[Claim]:
    """Claims whose ownerReferences name the run: Tekton's own, whatever it called them."""
    out = []
    for pvc in pvcs:
        meta = _dict(pvc.get("metadata"))
        if any(_dict(ref).get("uid") == run_uid for ref in _list(meta.get("ownerReferences"))):
            modes = tuple(m for m in _list(dig(pvc, "spec", "accessModes")) if isinstance(m, str))
            out.append(Claim(_str(meta.get("name")), modes))
    return out


def with_access_modes(claims: Sequence[Claim], pvcs: Sequence[Mapping[str, Any]]) -> list[Claim]:
    """The claims, with access modes taken from the PVC objects that exist."""
    modes = {
        _str(dig(pvc, "metadata", "name")): tuple(
            m for m in _list(dig(pvc, "spec", "accessModes")) if isinstance(m, str)
        )
        for pvc in pvcs
    }
    return [Claim(c.name, modes.get(c.name, c.access_modes)) for c in claims]


@dataclass(frozen=True)
class RunRef:
    """Which PipelineRun a pod belongs to, as its labels say."""

    name: str
    uid: str


def task_run_pod_run(labels: Mapping[str, Any]) -> RunRef | None:
    """The PipelineRun of a TaskRun pod, or None for any other pod.

    Tekton's affinity-assistant pods carry tekton.dev/pipelineRun too; TaskRun pods are the
    ones that also carry tekton.dev/taskRun. Our balloons carry neither.
    """
    if labels.get(LABEL_COMPONENT) == AFFINITY_ASSISTANT_COMPONENT:
        return None
    if labels.get(names.LABEL_MANAGED_BY) == names.APP:
        return None
    run = labels.get(LABEL_PIPELINE_RUN)
    if not isinstance(run, str) or not run or not labels.get(LABEL_TASK_RUN):
        return None
    uid = labels.get(LABEL_PIPELINE_RUN_UID)
    return RunRef(run, uid if isinstance(uid, str) else "")


def managed_by_value(config_defaults: Mapping[str, Any] | None) -> str:
    """The app.kubernetes.io/managed-by value of Tekton's TaskRun pods, from the data of its
    config-defaults ConfigMap."""
    value = _dict(config_defaults).get("default-managed-by-label-value")
    if isinstance(value, str) and value and is_label_value(value):
        return value
    return DEFAULT_MANAGED_BY
