"""Leader election's pure rules (the protocol runs against a real API server in e2e)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from controller.core.replica.lease import claimed, may_take, observe

NOW = datetime(2026, 11, 22, 3, 0, 0, tzinfo=UTC)


def held_by(holder: str, renewed: datetime, duration: int = 15) -> dict[str, object]:
    return {"holderIdentity": holder, "leaseDurationSeconds": duration,
            "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), "leaseTransitions": 2}


def test_free_or_own_lease_may_be_taken() -> None:
    for spec in ({}, {"holderIdentity": ""}, held_by("me", NOW)):
        assert may_take(spec, "me", observe(None, spec, 0.0), 0.0)


def test_another_holders_lease_expires_by_what_this_candidate_observed() -> None:
    """Not by comparing its renewTime with our clock: the holder's renewTime reads an hour old
    (its clock, or ours, is off), yet it renews; it must not be taken over."""
    seen = None
    for second in range(0, 60, 3):  # the holder renews every 3 s for a minute
        spec = held_by("other", NOW - timedelta(hours=1) + timedelta(seconds=second))
        seen = observe(seen, spec, float(second))
        assert not may_take(spec, "me", seen, float(second))


def test_a_lease_nobody_renews_is_taken_once_its_duration_has_passed_here() -> None:
    spec = held_by("other", NOW + timedelta(hours=1))  # even with a renewTime in our future
    seen = observe(None, spec, 100.0)
    assert not may_take(spec, "me", observe(seen, spec, 114.0), 114.0)
    assert may_take(spec, "me", observe(seen, spec, 115.5), 115.5)


def test_garbled_lease_is_taken_rather_than_blocking_forever() -> None:
    spec = {"holderIdentity": "other", "renewTime": "yesterday", "leaseDurationSeconds": "x"}
    assert may_take(spec, "me", observe(None, spec, 0.0), 0.0)


def test_taking_over_counts_a_transition_and_renewing_does_not() -> None:
    taken = claimed(held_by("other", NOW - timedelta(seconds=60)), "me", 15, NOW)
    assert taken["holderIdentity"] == "me" and taken["leaseTransitions"] == 3
    renewed = claimed(taken, "me", 15, NOW + timedelta(seconds=3))
    assert renewed["leaseTransitions"] == 3 and renewed["acquireTime"] == taken["acquireTime"]
    assert renewed["renewTime"] != taken["renewTime"]
