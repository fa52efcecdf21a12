"""The status of CoschedulingPolicies: Ready, or why not, with an Event for each problem."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from controller.core import names, policy
from controller.kube.client import Kube
from controller.operator.notify import Notifier
from controller.core.reconcile import Notice
from controller.settings import Settings


def problems_of(
    settings: Settings, obj: Mapping[str, Any], neighbours: Sequence[Mapping[str, Any]]
) -> list[policy.PolicyProblem]:
    """Pure: what is wrong with this policy among the namespace's policies (itself included or
    not: a watch event may arrive before a list shows the object)."""
    name = (obj.get("metadata") or {}).get("name", "")
    others = [o for o in neighbours if (o.get("metadata") or {}).get("name") != name]
    return [p for p in policy.resolve(settings, [*others, obj]).problems if p.name == name]


def wanted_status(
    obj: Mapping[str, Any], problems: list[policy.PolicyProblem], now: str
) -> dict[str, Any] | None:
    """Pure: the status to write, or None when the object already says it."""
    generation = (obj.get("metadata") or {}).get("generation")
    status = "False" if problems else "True"
    reason = problems[0].reason if problems else "Active"
    message = problems[0].message if problems else "this policy applies to the namespace"
    conditions = (obj.get("status") or {}).get("conditions") or []
    current: Mapping[str, Any] = next((c for c in conditions if c.get("type") == "Ready"), {})
    if (obj.get("status") or {}).get("observedGeneration") == generation and (
        current.get("status"),
        current.get("reason"),
        current.get("message"),
    ) == (status, reason, message):
        return None
    return {
        "observedGeneration": generation,
        "conditions": [
            {
                "type": "Ready",
                "status": status,
                "reason": reason,
                "message": message,
                "lastTransitionTime": now,
                "observedGeneration": generation,
            }
        ],
    }


def report(settings: Settings, kube: Kube, notifier: Notifier, obj: Mapping[str, Any]) -> None:
    meta = obj.get("metadata") or {}
    # A fresh list rather than our watch's copy, which may not have seen a policy just made.
    neighbours = kube.list_policies(meta.get("namespace", ""))
    problems = problems_of(settings, obj, neighbours)
    status = wanted_status(obj, problems, datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    if status is None:
        return
    kube.patch_policy_status(meta.get("namespace", ""), meta.get("name", ""), status)
    if problems:
        involved = {
            "apiVersion": f"{names.POLICY_GROUP}/{names.POLICY_VERSION}",
            "kind": names.POLICY_KIND,
            "metadata": meta,
        }
        notice = Notice(f"Policy{problems[0].reason}", problems[0].message)
        notifier.tell(involved, notice, (meta.get("uid"), meta.get("generation")))
