"""Leader election's pure rules (the protocol runs against a real API server in e2e)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from controller.core.lease import claimed, may_take

NOW = datetime(2026, 11, 22, 3, 0, 0, tzinfo=UTC)


def held_by(holder: str, renewed: datetime, duration: int = 15) -> dict[str, object]:
    return {"holderIdentity": holder, "leaseDurationSeconds": duration,
            "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), "leaseTransitions": 2}


def test_free_or_own_lease_may_be_taken() -> None:
    assert may_take({}, "me", NOW)
    assert may_take({"holderIdentity": ""}, "me", NOW)
    assert may_take(held_by("me", NOW), "me", NOW)


def test_fresh_lease_of_another_is_respected_until_it_expires() -> None:
    assert not may_take(held_by("other", NOW - timedelta(seconds=14)), "me", NOW)
    assert may_take(held_by("other", NOW - timedelta(seconds=16)), "me", NOW)


def test_garbled_lease_is_taken_rather_than_blocking_forever() -> None:
    assert may_take({"holderIdentity": "other", "renewTime": "yesterday"}, "me", NOW)


def test_taking_over_counts_a_transition_and_renewing_does_not() -> None:
    taken = claimed(held_by("other", NOW - timedelta(seconds=60)), "me", 15, NOW)
    assert taken["holderIdentity"] == "me" and taken["leaseTransitions"] == 3
    renewed = claimed(taken, "me", 15, NOW + timedelta(seconds=3))
    assert renewed["leaseTransitions"] == 3 and renewed["acquireTime"] == taken["acquireTime"]
    assert renewed["renewTime"] != taken["renewTime"]
