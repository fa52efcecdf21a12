"""Pure: what a pod's status says about where it is and why it is not there yet."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

HOSTNAME = "kubernetes.io/hostname"


def scheduled_condition(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    """The PodScheduled condition (the scheduler's own words on why a pod has no node)."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "PodScheduled":
            return cond
    return {}
