"""Pure: the Lease protocol of leader election, as client-go's leaderelection speaks it.

Expiry is judged as client-go does, by the candidate's own clock and what it observed: a Lease
held by another expires when its record has not changed for leaseDurationSeconds since this
candidate first saw it as it is. The holder's renewTime is never compared with the local
clock, so clocks that disagree cannot make two leaders.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from controller.core.basics.times import micro_time


@dataclass(frozen=True)
class Observed:
    """The Lease's record as this candidate last saw it change, and when (a monotonic clock of
    its own, in seconds)."""

    record: tuple[Any, ...]
    at: float


def record_of(spec: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(
        spec.get(k)
        for k in ("holderIdentity", "renewTime", "acquireTime", "leaseTransitions",
                  "leaseDurationSeconds")
    )


def observe(previous: Observed | None, spec: Mapping[str, Any], now: float) -> Observed:
    """The observation after reading `spec` at `now`: unchanged records keep their time."""
    record = record_of(spec)
    if previous is not None and previous.record == record:
        return previous
    return Observed(record, now)


def may_take(spec: Mapping[str, Any], me: str, observed: Observed, now: float) -> bool:
    """May `me` hold the Lease whose spec is this, having observed it as `observed`?"""
    holder = spec.get("holderIdentity")
    if not holder or holder == me:
        return True
    duration = spec.get("leaseDurationSeconds")
    if not isinstance(duration, int) or duration <= 0:
        return True
    return now > observed.at + duration


def claimed(spec: Mapping[str, Any], me: str, duration: int, now: datetime) -> dict[str, Any]:
    """The Lease spec after `me` takes or renews it."""
    taking_over = spec.get("holderIdentity") != me
    transitions = int(spec.get("leaseTransitions") or 0)
    return {
        "holderIdentity": me,
        "leaseDurationSeconds": duration,
        "acquireTime": micro_time(now) if taking_over else spec.get("acquireTime", micro_time(now)),
        "renewTime": micro_time(now),
        "leaseTransitions": transitions + 1
        if taking_over and spec.get("holderIdentity")
        else transitions,
    }
