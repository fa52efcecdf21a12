"""Pure: the status a CoschedulingPolicy should carry: Ready, or why not."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

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
