"""Pure: Tekton's own affinity assistant, as its feature flags and the pods it pins say: whether
it is on, and which assistant a pod must run beside."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.core.model.tekton import (
    AFFINITY_ASSISTANT_COMPONENT,
    LABEL_COMPONENT,
    LABEL_INSTANCE,
    _dict,
)


def _assistant_selectors(pod_spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The matchLabels of the required pod-affinity terms that select a Tekton assistant: the
    term Tekton adds while its assistant is on."""
    affinity = _dict(pod_spec.get("affinity"))
    terms = _dict(affinity.get("podAffinity")).get("requiredDuringSchedulingIgnoredDuringExecution")
    selectors = [_dict(_dict(_dict(t).get("labelSelector")).get("matchLabels"))
                 for t in (terms if isinstance(terms, list) else [])]
    return [s for s in selectors if s.get(LABEL_COMPONENT) == AFFINITY_ASSISTANT_COMPONENT]


def pinned_to_assistant(pod_spec: Mapping[str, Any]) -> bool:
    """Does the pod require a Tekton affinity assistant beside it? (As the chart's policy's
    `not-pinned-to-tekton-s-assistant` matchCondition asks.)"""
    return bool(_assistant_selectors(pod_spec))


def assistant_required(pod_spec: Mapping[str, Any]) -> str:
    """The name of the Tekton affinity assistant a pod must run beside; "" if none."""
    for labels in _assistant_selectors(pod_spec):
        instance = labels.get(LABEL_INSTANCE)
        return instance if isinstance(instance, str) else ""
    return ""


def assistant_enabled(feature_flags: Mapping[str, Any] | None) -> bool:
    """Is Tekton's own affinity assistant on? Absent flags mean Tekton's default, which is on."""
    # Tekton >= 0.60 reads only `coschedule` (default "workspaces"). Older releases also read
    # `disable-affinity-assistant`; DESIGN asks for `coschedule: disabled`, so only that counts.
    return str(_dict(feature_flags).get("coschedule", "workspaces")).strip() != "disabled"
