"""The elector: two candidates never lead at once, and a holder whose renewals hang stops in
time."""

from __future__ import annotations

import asyncio
import copy
import threading
import time
from typing import Any

import pytest
import urllib3

from controller.kube.fencing import Leadership
from controller.kube.leadership import LeaderElector


class Leases:
    """One Lease, with the API server's optimistic concurrency (resourceVersion). `delay`: each
    call answers that late; `refusals`: the next calls raise these."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.delay = 0.0
        self.refusals: list[Exception] = []
        self.calls: list[str] = []
        self.lock = threading.Lock()

    def _answer(self, call: str) -> None:
        self.calls.append(call)
        time.sleep(self.delay)
        if self.refusals:
            raise self.refusals.pop()

    def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        self._answer("get")
        with self.lock:
            return copy.deepcopy(self.lease)

    def create_lease(self, body: dict[str, Any]) -> bool:
        self._answer("create")
        with self.lock:
            if self.lease is not None:
                return False
            self.version += 1
            self.lease = {**copy.deepcopy(body), "metadata": {**body["metadata"],
                                                             "resourceVersion": str(self.version)}}
            return True

    def replace_lease(self, body: dict[str, Any]) -> dict[str, Any] | None:
        self._answer("replace")
        with self.lock:
            assert self.lease is not None
            if body["metadata"]["resourceVersion"] != self.lease["metadata"]["resourceVersion"]:
                return None
            self.version += 1
            self.lease = copy.deepcopy(body)
            self.lease["metadata"]["resourceVersion"] = str(self.version)
            return copy.deepcopy(self.lease)


class Clock:
    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


def test_with_clocks_an_hour_apart_the_second_candidate_never_takes_a_renewed_lease() -> None:
    leases = Leases()
    a = LeaderElector(leases, "ns", "lease", "a", duration=15, clock=Clock(0.0))  # type: ignore[arg-type]
    b_clock = Clock(3600.0)
    b = LeaderElector(leases, "ns", "lease", "b", duration=15, clock=b_clock)  # type: ignore[arg-type]
    assert a.try_hold()
    for _ in range(30):  # a renews every 3 s, b tries every 3 s, for 90 s
        a.clock.now += 3  # type: ignore[attr-defined]
        b_clock.now += 3
        assert a.try_hold()
        assert not b.try_hold()
    for _ in range(6):  # a stops renewing: b takes over after 15 s of its own clock
        b_clock.now += 3
        taken = b.try_hold()
    assert taken and leases.lease is not None
    assert leases.lease["spec"]["holderIdentity"] == "b"


def test_a_holder_whose_renewals_hang_stops_leading_within_its_renew_deadline() -> None:
    leases = Leases()
    elector = LeaderElector(leases, "ns", "lease", "a", duration=5)  # type: ignore[arg-type]
    assert elector.try_hold()
    leases.delay = 8.0  # the API server stops answering in time (longer than the lease)

    async def hold() -> float:
        started = time.monotonic()
        await elector.hold()
        return time.monotonic() - started

    took = asyncio.run(asyncio.wait_for(hold(), timeout=20))
    # Stopped after its renew deadline (2/3 of 5 s) and a retry, long before the lease (5 s)
    # could be taken by another: never two leaders, however slow the API server.
    assert took < elector.duration, took


def test_each_renewal_grants_the_token_until_the_renew_deadline_and_losing_revokes_it() -> None:
    leases, clock, token = Leases(), Clock(100.0), Leadership(clock=lambda: 0.0)
    a = LeaderElector(leases, "ns", "lease", "a", duration=15, clock=clock,  # type: ignore[arg-type]
                      leadership=token)
    assert token.holder is None
    assert a.try_hold()
    assert token.until == 100.0 + a.renew_deadline
    clock.now = 105.0
    assert a.try_hold()
    assert token.until == 105.0 + a.renew_deadline and token.holder == "a"
    a.release()
    assert token.holder is None


def test_a_holder_the_api_server_refuses_for_a_moment_keeps_leading() -> None:
    """A refused connection (the API server restarting; urllib3's error, not an OSError) is a
    round that did not renew, tried again until the renew deadline: it ended the Lease loop at
    once, and a leader gave its Lease up at the first refusal."""
    leases = Leases()
    elector = LeaderElector(leases, "ns", "lease", "a", duration=5)  # type: ignore[arg-type]
    assert elector.try_hold()
    leases.refusals = [urllib3.exceptions.MaxRetryError(None, "/lease", OSError("refused"))]  # type: ignore[arg-type]

    async def hold() -> None:
        await asyncio.wait_for(elector.hold(), timeout=3 * elector.retry)

    with pytest.raises(TimeoutError):  # still holding, three rounds on
        asyncio.run(hold())
    assert not leases.refusals and leases.lease is not None
    assert leases.lease["spec"]["holderIdentity"] == "a"


def test_a_holder_renews_with_one_write_a_round_and_reads_only_once_another_wrote() -> None:
    """client-go's fast path: the Lease as last written, renewed with its resourceVersion (a
    GET and a PUT each round were 0.9 requests a served run in bench-scale). A write of
    another (a candidate that took it while the holder was paused) fails the renewal; the
    holder then reads it and does not take it back."""
    leases, clock = Leases(), Clock(0.0)
    a = LeaderElector(leases, "ns", "lease", "a", duration=15, clock=clock)  # type: ignore[arg-type]
    assert a.try_hold() and a.try_hold()  # made, then read once (its version not yet known)
    leases.calls.clear()
    for _ in range(5):
        clock.now += 3
        assert a.try_hold()
    assert leases.calls == ["replace"] * 5
    assert leases.lease is not None
    leases.lease["spec"]["holderIdentity"] = "b"  # b took it meanwhile
    leases.version += 1
    leases.lease["metadata"]["resourceVersion"] = str(leases.version)
    leases.calls.clear()
    clock.now += 3
    assert not a.try_hold()
    assert leases.calls == ["replace", "get"]
    assert leases.lease["spec"]["holderIdentity"] == "b"
