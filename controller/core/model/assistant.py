"""Pure: Tekton's own affinity assistant, as its feature flags and the pods it pins say: its
mode, which assistant a pod must run beside, which pods are its placeholders, and the parts of
their specs that admission takes away in a namespace that opted in.

Tekton v1.15 (pkg/reconciler/pipelinerun/affinity_assistant.go, pkg/internal/affinityassistant):
a placeholder StatefulSet per claim (`workspaces`) or per run (`pipelineruns`,
`isolate-pipelinerun`), its pod labelled with every label of the run plus tekton.dev/pipelineRun,
app.kubernetes.io/instance and app.kubernetes.io/component=affinity-assistant; a TaskRun pod pinned
to it by one appended required term on those two labels; placeholders repelling each other on a
node, required in `isolate-pipelinerun`, preferred otherwise.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from controller.core.model.tekton import (
    AFFINITY_ASSISTANT_COMPONENT,
    LABEL_COMPONENT,
    LABEL_INSTANCE,
    LABEL_PIPELINE_RUN,
    PipelineRun,
    _dict,
)

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


class Mode(enum.StrEnum):
    """Tekton's `coschedule` feature flag (pkg/apis/config/feature_flags.go)."""

    DISABLED = "disabled"
    WORKSPACES = "workspaces"  # the default: a placeholder per claim
    PIPELINERUNS = "pipelineruns"  # alpha: one per run
    ISOLATE_PIPELINERUN = "isolate-pipelinerun"  # alpha: one per run, one run per node


def mode(feature_flags: Mapping[str, Any] | None) -> Mode | None:
    """The assistant's mode; absent flags mean Tekton's default. None: a value Tekton does not
    know (its controller refuses to start with it)."""
    value = str(_dict(feature_flags).get("coschedule", Mode.WORKSPACES)).strip()
    try:
        return Mode(value)
    except ValueError:
        return None


# The metric's `mode` label: Tekton's modes, and "unknown" for a value Tekton does not know (a
# fixed few, whatever the ConfigMap holds).
MODE_LABELS = (*(m.value for m in Mode), "unknown")


def mode_label(mode_: Mode | None) -> str:
    return mode_.value if mode_ is not None else "unknown"


def per_run(mode_: Mode | None) -> bool:
    """Does Tekton make one placeholder per run, whose StatefulSet makes the run's templated
    claims (core/model/tekton.per_run_pvc_name)?"""
    return mode_ in (Mode.PIPELINERUNS, Mode.ISOLATE_PIPELINERUN)


def claims_per_run(run: PipelineRun, made: Collection[str], now: bool) -> bool:
    """How Tekton named this run's templated claims (`per_run`'s naming or the other), from the
    claims that exist (`made`: names); the flag as it is `now` only for a run with none made yet.

    Tekton makes them once, before the run's first TaskRun, named by the mode then (v1.15
    pipelinerun.go: createOrUpdateAffinityAssistantsAndPVCs behind IsBeforeFirstTaskRun): a
    mode changed mid-run leaves the run's claims as they were made, and a run judged by the new
    naming would wait for claims that never come or warn of some that never appear. Where both
    namings were made (the flag changed between two of Tekton's looks before the first TaskRun)
    the TaskRuns Tekton makes now are bound by the flag as it is now."""
    if run.claims_tekton_makes(now) & set(made):
        return now
    return (not now) if run.claims_tekton_makes(not now) & set(made) else now


def _assistant_selectors(pod_spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The matchLabels of the required pod-affinity terms that select a Tekton assistant: the
    term Tekton adds while its assistant is on."""
    affinity = _dict(pod_spec.get("affinity"))
    terms = _dict(affinity.get("podAffinity")).get("requiredDuringSchedulingIgnoredDuringExecution")
    selectors = [_dict(_dict(_dict(t).get("labelSelector")).get("matchLabels"))
                 for t in (terms if isinstance(terms, list) else [])]
    return [s for s in selectors if s.get(LABEL_COMPONENT) == AFFINITY_ASSISTANT_COMPONENT]


def placeholder_run(labels: Mapping[str, Any]) -> str:
    """The run whose placeholder a pod is (Tekton's assistant's StatefulSet pod); "" for any
    other pod."""
    if labels.get(LABEL_COMPONENT) != AFFINITY_ASSISTANT_COMPONENT:
        return ""
    run = labels.get(LABEL_PIPELINE_RUN)
    return run if isinstance(run, str) else ""


def _selects_assistant(term: Any, instance: bool) -> bool:
    labels = _dict(_dict(_dict(term).get("labelSelector")).get("matchLabels"))
    return (labels.get(LABEL_COMPONENT) == AFFINITY_ASSISTANT_COMPONENT
            and (LABEL_INSTANCE in labels) is instance)


def _removals(pod_spec: Mapping[str, Any], kind: str, instance: bool) -> list[dict[str, Any]]:
    """JSONPatch operations that take away the required terms of `kind` (podAffinity or
    podAntiAffinity) selecting an assistant, by index, the last first (each removal shifts
    the ones after it)."""
    terms = _dict(_dict(pod_spec.get("affinity")).get(kind)).get(REQUIRED)
    if not isinstance(terms, list):
        return []
    path = f"/spec/affinity/{kind}/{REQUIRED}"
    return [{"op": "remove", "path": f"{path}/{i}"}
            for i in reversed(range(len(terms))) if _selects_assistant(terms[i], instance)]


def unpin(pod_spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What takes Tekton's term off a TaskRun pod: in a namespace that opted in, ours stands in
    its place (the scheduler wants ONE pod matching all of a pod's required terms, and no pod is
    both the placeholder and our balloon), and the placeholder itself follows the balloon."""
    return _removals(pod_spec, "podAffinity", instance=True)


def unrepel(pod_spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What takes a placeholder's required anti-affinity to every other placeholder off
    (`isolate-pipelinerun`): in a namespace that opted in, two runs anchored on one node must
    not wait for each other's placeholder for good; the namespace's policy says isolation."""
    return _removals(pod_spec, "podAntiAffinity", instance=False)


def pinned_to_assistant(pod_spec: Mapping[str, Any]) -> bool:
    """Does the pod require a Tekton affinity assistant beside it?"""
    return bool(_assistant_selectors(pod_spec))


def assistant_required(pod_spec: Mapping[str, Any]) -> str:
    """The name of the Tekton affinity assistant a pod must run beside; "" if none."""
    for labels in _assistant_selectors(pod_spec):
        instance = labels.get(LABEL_INSTANCE)
        return instance if isinstance(instance, str) else ""
    return ""


def assistant_enabled(feature_flags: Mapping[str, Any] | None) -> bool:
    """Is Tekton's own affinity assistant on? Absent flags mean Tekton's default, which is on."""
    # Tekton v1.0 and later read only `coschedule` (default "workspaces"): v1.0 removed
    # `disable-affinity-assistant` (tektoncd/pipeline#8603), and every release tested is later.
    return str(_dict(feature_flags).get("coschedule", "workspaces")).strip() != "disabled"


# -- what the mode means beside tekton-coscheduler (what `check` says) -----------------------------
# In an opted-in namespace the run is ours whatever the mode; Tekton's placeholders follow our
# anchor (core/admission, operator/marking.py). Every other namespace is Tekton's, untouched.

OURS = ("tekton-coscheduler anchors each run: a balloon, a reservation for its peak, our "
        "affinity term")
UNTOUCHED = "untouched by tekton-coscheduler"
FOLLOWS = "held until the balloon is bound, then given its node"
# Tekton v1.x's TaskRun reconciler, in `workspaces` mode only (pkg/reconciler/taskrun/taskrun.go
# calling workspace.ValidateOnlyOnePVCIsUsed).
ONE_CLAIM = (
    "Tekton fails a TaskRun that binds more than one claim-backed workspace (\"more than one "
    "PersistentVolumeClaim is bound\", pkg/workspace/validate.go), in every namespace, opted in "
    "or not: Tekton's limit in this mode, not tekton-coscheduler's; the other modes have none"
)
# Tekton v1.0 removed it (tektoncd/pipeline#8603); the releases we test read coschedule alone.
OLD_FLAG = "disable-affinity-assistant"

_PLACEHOLDERS = {
    Mode.WORKSPACES: ": a placeholder per claim of each run",
    Mode.PIPELINERUNS: " (alpha): one placeholder per run, which makes the run's claims",
    Mode.ISOLATE_PIPELINERUN: " (alpha): one placeholder per run, one run per node",
}
_OTHERS = {
    Mode.DISABLED: f"{UNTOUCHED}; no co-location by Tekton either: each pod is placed on its "
                   "own (tasks that share a ReadWriteOnce claim may land on different nodes)",
    Mode.WORKSPACES: f"Tekton's assistant alone, {UNTOUCHED}: the pods that share a claim "
                     "follow its placeholder",
    Mode.PIPELINERUNS: f"Tekton's assistant alone, {UNTOUCHED}: every pod of a run follows its "
                       "placeholder",
    Mode.ISOLATE_PIPELINERUN: f"Tekton's assistant alone, {UNTOUCHED}: every pod of a run "
                              "follows its placeholder, one run per node",
}


@dataclass(frozen=True)
class Meaning:
    """Tekton's assistant as its flags set it, and what that means beside tekton-coscheduler."""

    mode: Mode | None
    state: str  # the mode and what Tekton makes in it
    opted_in: str  # in the namespaces that opted in; "" when the mode is unknown
    others: str  # in every other namespace; "" when the mode is unknown
    limit: str = ""  # Tekton's own limit in this mode
    old_flag: str = ""  # the flag Tekton no longer reads, when it is still set

    @property
    def known(self) -> bool:
        return self.mode is not None


def meaning(feature_flags: Mapping[str, Any] | None) -> Meaning:
    """What Tekton's feature-flags make of its assistant, and what that means for the namespaces
    that opted in and for the others, in a person's words (`check`, the leader's log)."""
    flags = _dict(feature_flags)
    mode_ = mode(flags)
    old = (f"{OLD_FLAG}={str(flags[OLD_FLAG])!r} is set, but Tekton v1.0 and later do not read "
           "it (tektoncd/pipeline#8603): coschedule alone says the mode") if OLD_FLAG in flags \
        else ""
    if mode_ is None:
        known = ", ".join(m.value for m in Mode)
        return Meaning(None, f"coschedule={str(flags.get('coschedule'))!r} is not a mode Tekton "
                       f"knows ({known}): Tekton's controller does not start with it, or keeps "
                       "the flags it read before", "", "", old_flag=old)
    if mode_ is Mode.DISABLED:
        return Meaning(mode_, "off (coschedule: disabled)",
                       f"{OURS} on its pods; Tekton makes no placeholder", _OTHERS[mode_],
                       old_flag=old)
    unset = "" if "coschedule" in flags else " (coschedule unset: Tekton's default)"
    what = _PLACEHOLDERS[mode_]
    if mode_ is Mode.WORKSPACES:
        placeholders = f"Tekton still makes its placeholders, each {FOLLOWS}"
    else:
        placeholders = f"Tekton still makes its placeholder, {FOLLOWS}"
    if mode_ is Mode.ISOLATE_PIPELINERUN:
        placeholders += (", without its repulsion of other runs' placeholders (the namespace's "
                         "CoschedulingPolicy isolation says whether runs share a node)")
    return Meaning(mode_, f"on, mode {mode_.value}{unset}{what}",
                   f"{OURS} in place of Tekton's; {placeholders}", _OTHERS[mode_],
                   limit=ONE_CLAIM if mode_ is Mode.WORKSPACES else "", old_flag=old)
