"""The status of CoschedulingPolicies: Ready, or why not, with an Event for each problem."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from controller import names, policy
from controller.clusterview import Facts
from controller.kube import Kube
from controller.notify import Notifier
from controller.reconcile import Notice


def problems_of(facts: Facts, obj: Mapping[str, Any]) -> list[policy.PolicyProblem]:
    meta = obj.get("metadata") or {}
    ns, name = meta.get("namespace", ""), meta.get("name", "")
    problems = [p for p in facts.policy_for(ns).problems if p.name == name]
    if not problems:
        try:
            policy.parse_spec(obj.get("spec", {}))
        except ValueError as exc:
            problems = [policy.PolicyProblem(name, "Invalid", str(exc))]
    return problems


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


def report(kube: Kube, notifier: Notifier, facts: Facts, obj: Mapping[str, Any]) -> None:
    meta = obj.get("metadata") or {}
    problems = problems_of(facts, obj)
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
