"""Pure: the Lease protocol of leader election, as client-go's leaderelection speaks it."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from controller.core.times import micro_time, parse_time


def may_take(spec: Mapping[str, Any], me: str, now: datetime) -> bool:
    """May `me` hold the Lease whose spec is this, at `now`?"""
    holder = spec.get("holderIdentity")
    if not holder or holder == me:
        return True
    renewed = parse_time(spec.get("renewTime")) or parse_time(spec.get("acquireTime"))
    duration = spec.get("leaseDurationSeconds")
    if renewed is None or not isinstance(duration, int):
        return True
    return now > renewed + timedelta(seconds=duration)


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
