"""Pure: the status a CoschedulingPolicy should carry: Ready, or why not; and the plan that
keeps it (the status written, the first problem said on the policy)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from controller.core.basics import names
from controller.core.basics.actions import Say, WritePolicyStatus
from controller.core.basics.notices import Notice
from controller.core.policy import policy


def problems_of(
    base: policy.EffectivePolicy, obj: Mapping[str, Any], neighbours: Sequence[Mapping[str, Any]]
) -> list[policy.PolicyProblem]:
    """What is wrong with this policy among the namespace's policies (itself included or not: a
    watch event may arrive before a list shows the object). `base` is the default policy."""
    name = (obj.get("metadata") or {}).get("name", "")
    others = [o for o in neighbours if (o.get("metadata") or {}).get("name") != name]
    return [p for p in policy.resolve(base, [*others, obj]).problems if p.name == name]


def wanted_status(
    obj: Mapping[str, Any], problems: list[policy.PolicyProblem], now: str
) -> dict[str, Any] | None:
    """The status to write, or None when the object already says it."""
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


def plan(base: policy.EffectivePolicy, obj: Mapping[str, Any],
         neighbours: Sequence[Mapping[str, Any]], now: str) -> tuple[WritePolicyStatus | Say, ...]:
    """What keeps the policy's status true among `neighbours` (the namespace's policies as the
    API server lists them): nothing when it says so already; else the status written, then its
    first problem said on the policy, once per generation."""
    meta = obj.get("metadata") or {}
    problems = problems_of(base, obj, neighbours)
    status = wanted_status(obj, problems, now)
    if status is None:
        return ()
    write = WritePolicyStatus(str(meta.get("namespace") or ""), str(meta.get("name") or ""),
                              status)
    if not problems:
        return (write,)
    involved = {"apiVersion": f"{names.POLICY_GROUP}/{names.POLICY_VERSION}",
                "kind": names.POLICY_KIND, "metadata": meta}
    notice = Notice(f"Policy{problems[0].reason}", problems[0].message)
    return write, Say(involved, notice, (meta.get("uid"), meta.get("generation")))
