"""A failed item waits a few milliseconds, then twice as long each time, capped; the API
server's Retry-After is a floor."""

from __future__ import annotations

import itertools

from controller.core.replica import backoff


def test_milliseconds_first_doubling_and_capped() -> None:
    waits = [backoff.delay(n) for n in range(1, 20)]
    assert waits[0] == backoff.BASE and waits[1] == 2 * backoff.BASE
    assert all(b >= a for a, b in itertools.pairwise(waits))
    assert waits[-1] == backoff.CAP
    assert backoff.delay(10_000) == backoff.CAP  # no overflow however long it fails


def test_retry_after_is_a_floor_and_has_a_limit_of_its_own() -> None:
    assert backoff.delay(1, asked=5.0) == 5.0
    assert backoff.delay(20, asked=5.0) == backoff.CAP
    assert backoff.delay(1, asked=10_000.0) == backoff.MOST_ASKED
