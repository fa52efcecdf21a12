"""Pure: whether a node can keep an anchor, and how a taint meets a pod's tolerations.

A node stops being a good anchor when it is cordoned, NotReady, gone, or tainted NoSchedule or
NoExecute with a taint the balloon does not tolerate. Toleration matching follows the API's
rules (k8s.io/api/core/v1 Toleration.ToleratesTaint).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# Taints the node lifecycle controller and the scheduler put on nodes for conditions we see
# directly (cordon, NotReady): the reason names the condition, not the taint.
CONDITION_TAINTS = {
    "node.kubernetes.io/unschedulable": "cordoned",
    "node.kubernetes.io/not-ready": "NotReady",
    "node.kubernetes.io/unreachable": "NotReady",
}
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    if not key:
        return operator == "Exists"  # an empty key with Exists tolerates every taint
    if key != taint.get("key"):
        return False
    if operator == "Exists":
        return True
    return (toleration.get("value") or "") == (taint.get("value") or "")


def tolerated(taint: Mapping[str, Any], tolerations: Iterable[Mapping[str, Any]]) -> bool:
    return any(tolerates(t, taint) for t in tolerations)


def ready(node: Mapping[str, Any]) -> bool:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def unavailable(
    node: Mapping[str, Any] | None, tolerations: Sequence[Mapping[str, Any]]
) -> str | None:
    """Why the node can no longer anchor a balloon with these tolerations; None if it can."""
    if node is None:
        return "deleted"
    if (node.get("metadata") or {}).get("deletionTimestamp"):
        return "deleted"
    if (node.get("spec") or {}).get("unschedulable"):
        return "cordoned"
    if not ready(node):
        return "NotReady"
    for taint in (node.get("spec") or {}).get("taints") or []:
        if not isinstance(taint, dict) or taint.get("effect") not in BLOCKING_EFFECTS:
            continue
        if taint.get("key") in CONDITION_TAINTS or tolerated(taint, tolerations):
            continue
        value = f"={taint['value']}" if taint.get("value") else ""
        return f"tainted {taint.get('key')}{value}:{taint.get('effect')}"
    return None


def hostname(node: Mapping[str, Any]) -> str:
    return str(((node.get("metadata") or {}).get("labels") or {}).get(
        "kubernetes.io/hostname") or (node.get("metadata") or {}).get("name") or "")


def reads(node: Mapping[str, Any]) -> object:
    """What of a node anything here reads: all of it but the kubelet's heartbeats (each
    condition's times) and versions, which change every few seconds on every node and would
    otherwise wake every listener of every node each time."""
    meta = node.get("metadata") or {}
    status = node.get("status") or {}
    conditions = [
        (c.get("type"), c.get("status"), c.get("reason"))
        for c in status.get("conditions") or [] if isinstance(c, Mapping)
    ]
    return (meta.get("labels"), meta.get("annotations"), meta.get("deletionTimestamp"),
            node.get("spec"), {k: v for k, v in status.items() if k != "conditions"},
            conditions)
