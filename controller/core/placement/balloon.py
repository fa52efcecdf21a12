"""Pure: the balloon StatefulSet of a PipelineRun under a policy.

The balloon is one pause container that mounts the run's claims and carries every scheduling
constraint the run's pods will carry, so the node the scheduler picks for it suits the run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.core.basics import names
from controller.core.basics.fragments import is_label_value
from controller.core.capacity import reservation
from controller.core.model.tekton import GROUP, PIPELINE_RUN_KIND, VERSION, Claim, PipelineRun
from controller.core.placement import scheduling, warm
from controller.core.policy.policy import EffectivePolicy, Isolation

NAME_PREFIX = "coschedule-"
HOSTNAME = "kubernetes.io/hostname"
# The StatefulSet controller labels pods with "<name>-<10 char hash>"; labels stop at 63.
MAX_NAME = 52


def balloon_name(run_uid: str) -> str:
    """Stable, valid for any run, and distinct for a run re-created under the same name."""
    slug = re.sub(r"[^a-z0-9-]", "", run_uid.lower()).strip("-")
    return (NAME_PREFIX + slug)[:MAX_NAME].rstrip("-")


def balloon_labels(run: PipelineRun) -> dict[str, str]:
    labels = {
        names.LABEL_NAME: names.APP,
        names.LABEL_COMPONENT: names.COMPONENT_BALLOON,
        names.LABEL_MANAGED_BY: names.APP,
        names.LABEL_RUN_UID: run.uid,
        names.LABEL_BUDGET: names.BUDGET_NAMESPACE,
    }
    if is_label_value(run.name):
        labels[names.LABEL_RUN] = run.name
    return labels


def selector_labels(run_uid: str) -> dict[str, str]:
    return {
        names.LABEL_MANAGED_BY: names.APP,
        names.LABEL_COMPONENT: names.COMPONENT_BALLOON,
        names.LABEL_RUN_UID: run_uid,
    }


def claim_names(statefulset: Mapping[str, Any]) -> set[str]:
    """The claims an existing balloon mounts."""
    volumes = (((statefulset.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
        "volumes"
    ) or []
    return {
        v["persistentVolumeClaim"]["claimName"]
        for v in volumes
        if isinstance(v, dict) and isinstance(v.get("persistentVolumeClaim"), dict)
    }


@dataclass(frozen=True)
class BalloonPlan:
    manifest: dict[str, Any]
    claims: tuple[str, ...]
    # Claims left out (ReadWriteOncePod): the run is then anchored by affinity alone.
    skipped_claims: tuple[str, ...]
    # Constraints of single tasks (taskRunSpecs) that no common node can meet.
    conflicts: tuple[str, ...]
    # The policy's tolerations the run's pods do not carry: left off the balloon, which would
    # otherwise anchor the run where its pods cannot follow.
    dropped_tolerations: tuple[Mapping[str, Any], ...] = ()
    # Pod-template constraints that may keep pods off the anchor's node.
    cautions: tuple[str, ...] = ()
    # Other live runs this one shares a ReadWriteOnce claim with: anchored on their node.
    sharing: tuple[str, ...] = ()


def plan(
    run: PipelineRun,
    policy: EffectivePolicy,
    claims: Sequence[Claim],
    tekton_default_template: Mapping[str, Any] | None = None,
    others: Mapping[str, Sequence[str]] | None = None,
    room: bool = False,
    warmth: warm.Warmth | None = None,
) -> BalloonPlan:
    """The balloon of `run`; `others` are the claims mounted by the other live balloons of its
    namespace (run uid -> claim names); `room`: it follows the run's reservation pod, which
    finds a node with room for the run's peak (core/capacity/reservation.py); `warmth`: the nodes
    where the run starts fastest, preferred (core/placement/warm.py)."""
    template = scheduling.effective_template(tekton_default_template, run.pod_template)
    pods = scheduling.constraints_of(template)  # the run's own: priority, pull secrets
    every = scheduling.combine(
        scheduling.pod_templates(
            tekton_default_template, run.pod_template, run.task_pod_templates, run.task_names()
        )
    )
    node_selector, conflicts = scheduling.merge_selectors(policy.node_selector, every.node_selector)
    conflicts = [*every.conflicts, *conflicts]
    carried = [t for t in policy.tolerations if any(
        scheduling.covers(u, t) for u in every.tolerations
    )]
    dropped = tuple(t for t in policy.tolerations if t not in carried)
    mounted = sorted({c.name for c in claims if c.mountable_by_balloon})
    skipped = sorted({c.name for c in claims if not c.mountable_by_balloon} - set(mounted))
    name = balloon_name(run.uid)
    labels = balloon_labels(run)

    spec: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 1,
        # No user or group fixed: the pause image's numeric USER (65535) runs, or the UID the
        # cluster assigns (OpenShift's restricted SCC refuses one outside the namespace's range).
        "securityContext": {
            "runAsNonRoot": True,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [
            {
                "name": "balloon",
                "image": policy.image,
                "resources": policy.resources.to_k8s(),
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"]},
                    "readOnlyRootFilesystem": True,
                    "runAsNonRoot": True,
                },
                "volumeMounts": [
                    {"name": f"claim-{i}", "mountPath": f"/claims/{i}", "readOnly": True}
                    for i in range(len(mounted))
                ],
            }
        ],
        "volumes": [
            {"name": f"claim-{i}", "persistentVolumeClaim": {"claimName": claim, "readOnly": True}}
            for i, claim in enumerate(mounted)
        ],
    }
    if node_selector:
        spec["nodeSelector"] = node_selector
    tolerations = scheduling.union([*every.tolerations, *carried])
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    if every.runtime_class:
        # Its RuntimeClass adds the same scheduling rules to the balloon as to the pods.
        spec["runtimeClassName"] = every.runtime_class
    sharing = sharing_runs([c for c in claims if c.name in mounted], others or {})
    preferred = warmth.terms() if warmth is not None else []
    affinity = _affinity(run.uid, policy, every.node_affinity, sharing, room, preferred)
    if affinity:
        spec["affinity"] = affinity
    priority = policy.priority_class_name or pods.priority_class_name
    if priority:
        spec["priorityClassName"] = priority
    secrets = policy.image_pull_secrets or pods.image_pull_secrets
    if secrets:
        spec["imagePullSecrets"] = [dict(s) for s in secrets]

    manifest = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": name,
            "namespace": run.namespace,
            "labels": labels,
            "annotations": {names.ANNOTATION_RUN_CREATED: run.created,
                            **({warm.ANNOTATION: warmth.annotation()} if warmth else {})},
            "ownerReferences": [
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": PIPELINE_RUN_KIND,
                    "name": run.name,
                    "uid": run.uid,
                    "controller": True,
                    # True would need the finalizers permission on PipelineRuns.
                    "blockOwnerDeletion": False,
                }
            ],
        },
        "spec": {
            "replicas": 1,
            "podManagementPolicy": "Parallel",
            # A changed template must never move an anchored pod; the operator replaces the
            # pod itself, and only while it is not yet bound.
            "updateStrategy": {"type": "OnDelete"},
            "revisionHistoryLimit": 1,
            "selector": {"matchLabels": selector_labels(run.uid)},
            "template": {
                "metadata": {
                    "labels": labels,
                    # Autoscalers leave the anchor's node alone while the run lives.
                    "annotations": {
                        "cluster-autoscaler.kubernetes.io/safe-to-evict": "false",
                        "karpenter.sh/do-not-disrupt": "true",
                    },
                },
                "spec": spec,
            },
        },
    }
    return BalloonPlan(
        manifest,
        tuple(mounted),
        tuple(skipped),
        tuple(conflicts),
        dropped,
        every.cautions,
        tuple(sharing),
    )


def sharing_runs(
    mounted: Sequence[Claim], others: Mapping[str, Sequence[str]]
) -> list[str]:
    """Other live runs whose balloons mount one of this run's ReadWriteOnce claims: a volume
    attached to one node at a time, so their anchors must share a node (concurrent runs on one
    claim, a parent and its child PipelineRun)."""
    rwo = {c.name for c in mounted if c.single_node}
    return sorted(uid for uid, claims in others.items() if rwo & set(claims))


def _affinity(
    run_uid: str,
    policy: EffectivePolicy,
    pods_node_affinity: Mapping[str, Any],
    sharing: Sequence[str] = (),
    room: bool = False,
    preferred: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    affinity: dict[str, Any] = {}
    node = scheduling.and_node_affinity(
        policy.affinity.get("nodeAffinity") or {}, pods_node_affinity,
        {"preferredDuringSchedulingIgnoredDuringExecution": list(preferred)},
    )
    if node:
        affinity["nodeAffinity"] = node
    pod_affinity = dict(policy.affinity.get("podAffinity") or {})
    for other in sharing:
        key = "requiredDuringSchedulingIgnoredDuringExecution"
        pod_affinity[key] = [
            *pod_affinity.get(key, []),
            {"labelSelector": {"matchLabels": selector_labels(other)}, "topologyKey": HOSTNAME},
        ]
    if room:
        key = "requiredDuringSchedulingIgnoredDuringExecution"
        pod_affinity[key] = [*pod_affinity.get(key, []), reservation.balloon_term(run_uid)]
    if pod_affinity:
        affinity["podAffinity"] = pod_affinity
    anti = dict(policy.affinity.get("podAntiAffinity") or {})
    if policy.isolation is not Isolation.NONE:
        term = {
            "labelSelector": {
                "matchLabels": {
                    names.LABEL_MANAGED_BY: names.APP,
                    names.LABEL_COMPONENT: names.COMPONENT_BALLOON,
                },
                # A run sharing a claim with this one must share its node, isolated or not.
                "matchExpressions": [
                    {
                        "key": names.LABEL_RUN_UID,
                        "operator": "NotIn",
                        "values": [run_uid, *sharing],
                    }
                ],
            },
            "topologyKey": policy.topology_key,
        }
        if policy.isolation is Isolation.REQUIRED:
            key = "requiredDuringSchedulingIgnoredDuringExecution"
            anti[key] = [*anti.get(key, []), term]
        else:
            key = "preferredDuringSchedulingIgnoredDuringExecution"
            anti[key] = [*anti.get(key, []), {"weight": 100, "podAffinityTerm": term}]
    if anti:
        affinity["podAntiAffinity"] = anti
    return affinity
