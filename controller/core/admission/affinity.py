"""Pure: the pod-affinity term that ties a TaskRun pod to its run's balloon.

The term is appended to whatever affinity the pod already has, never replacing it, and
appending is idempotent: a pod that already carries the term gets no second one.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from controller.core.basics import names
from controller.core.basics.fragments import is_label_value
from controller.core.model.tekton import RunRef

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def term_for(run: RunRef, topology_key: str) -> dict[str, Any] | None:
    """The term selecting the run's balloon: by run UID when the pod knows it, else by name.

    None when the pod's labels cannot make a valid selector: then the pod is left alone
    rather than rejected or pinned to an anchor that cannot be found.
    """
    labels = {
        names.LABEL_MANAGED_BY: names.APP,
        names.LABEL_COMPONENT: names.COMPONENT_BALLOON,
    }
    if run.uid and is_label_value(run.uid):
        labels[names.LABEL_RUN_UID] = run.uid
    elif run.name and is_label_value(run.name):
        labels[names.LABEL_RUN] = run.name
    else:
        return None
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": topology_key}


def _is_ours(term: Any) -> bool:
    selector = term.get("labelSelector") if isinstance(term, dict) else None
    labels = selector.get("matchLabels") if isinstance(selector, dict) else None
    return (
        isinstance(labels, dict)
        and labels.get(names.LABEL_MANAGED_BY) == names.APP
        and labels.get(names.LABEL_COMPONENT) == names.COMPONENT_BALLOON
    )


def balloon_terms(pod_spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The required pod-affinity terms of a pod spec that select a balloon (any run)."""
    affinity = pod_spec.get("affinity")
    pod_affinity = affinity.get("podAffinity") if isinstance(affinity, dict) else None
    terms = pod_affinity.get(REQUIRED) if isinstance(pod_affinity, dict) else None
    return [t for t in terms if _is_ours(t)] if isinstance(terms, list) else []


def carries_our_term(pod_spec: Mapping[str, Any]) -> bool:
    """True if the pod already carries a balloon term, whatever its run or topology key.

    Checking for 'a balloon term' rather than 'this exact term' keeps reinvocation idempotent
    even if the topology key changed between two invocations.
    """
    return bool(balloon_terms(pod_spec))


def patch_for(pod_spec: Mapping[str, Any], term: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The minimal JSONPatch (RFC 6902) that appends the term to the pod's spec."""
    if carries_our_term(pod_spec):
        return []
    affinity = pod_spec.get("affinity")
    if not isinstance(affinity, dict):
        return [
            {"op": "add", "path": "/spec/affinity", "value": {"podAffinity": {REQUIRED: [term]}}}
        ]
    pod_affinity = affinity.get("podAffinity")
    if not isinstance(pod_affinity, dict):
        return [{"op": "add", "path": "/spec/affinity/podAffinity", "value": {REQUIRED: [term]}}]
    required = pod_affinity.get(REQUIRED)
    if not isinstance(required, list):
        return [{"op": "add", "path": f"/spec/affinity/podAffinity/{REQUIRED}", "value": [term]}]
    return [{"op": "add", "path": f"/spec/affinity/podAffinity/{REQUIRED}/-", "value": term}]


def with_term(pod_spec: Mapping[str, Any], term: Mapping[str, Any]) -> dict[str, Any]:
    """The pod spec with the term appended: what applying patch_for gives."""
    spec = copy.deepcopy(dict(pod_spec))
    if carries_our_term(spec):
        return spec
    affinity = spec["affinity"] = _as_dict(spec.get("affinity"))
    pod_affinity = affinity["podAffinity"] = _as_dict(affinity.get("podAffinity"))
    required = pod_affinity.get(REQUIRED)
    pod_affinity[REQUIRED] = [*(required if isinstance(required, list) else []), dict(term)]
    return spec


def _as_dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}
