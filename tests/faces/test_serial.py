"""The handlers' threads: one object's events one at a time, the newest replacing a waiting one."""

from __future__ import annotations

import threading
import time

import pytest
from kubernetes.client.exceptions import ApiException

from controller.core.replica import backoff
from controller.faces.serial import Serial
from controller.kube import errors
from controller.metrics import Metrics
from tests import factories
from tests.readings import said


def test_an_object_s_events_are_handled_one_at_a_time_and_the_newest_wins() -> None:
    release = threading.Event()
    handled: list[str] = []
    busy: set[str] = set()
    overlaps: list[str] = []
    done = threading.Semaphore(0)

    def handle(event: str) -> None:
        key = event.split(":")[0]
        if key in busy:
            overlaps.append(event)
        busy.add(key)
        if event == "a:1":
            release.wait(5)
        handled.append(event)
        busy.discard(key)
        done.release()

    metrics = Metrics()
    work: Serial[str] = Serial(handle, workers=4, name="test", metrics=metrics)
    work.start()
    work.put("a", "a:1")
    while "a" not in busy:  # a:1 has begun
        threading.Event().wait(0.01)
    for i in range(2, 6):
        work.put("a", f"a:{i}")  # waits behind a:1; each replaces the one before
    work.put("b", "b:1")  # another object is not held up by a
    assert done.acquire(timeout=5)
    assert handled == ["b:1"]
    assert said(metrics, "events_waiting") == 1  # a:5, behind a:1
    release.set()
    assert done.acquire(timeout=5) and done.acquire(timeout=5)
    work.stop()
    assert handled == ["b:1", "a:1", "a:5"]
    assert overlaps == []
    assert said(metrics, "events_superseded_total") == 3
    assert said(metrics, "events_waiting") == 0


def test_a_handler_that_fails_does_not_stop_the_others() -> None:
    handled: list[str] = []
    done = threading.Semaphore(0)

    def handle(event: str) -> None:
        try:
            if event == "bad":
                raise RuntimeError("boom")
            handled.append(event)
        finally:
            done.release()

    work: Serial[str] = Serial(handle, workers=1, name="test")
    work.start()
    for key in ("bad", "good"):
        work.put(key, key)
    assert done.acquire(timeout=5) and done.acquire(timeout=5)
    work.stop()
    assert handled == ["good"]


class Flaky:
    """A handler whose calls fail as told, recording when each began."""

    def __init__(self, failures: dict[str, list[BaseException]]) -> None:
        self.failures = failures
        self.calls: list[tuple[str, float]] = []
        self.done = threading.Semaphore(0)

    def __call__(self, event: str) -> None:
        self.calls.append((event, time.monotonic()))
        try:
            queued = self.failures.get(event.split(":")[0])
            if queued:
                raise queued.pop(0)
        finally:
            self.done.release()

    def wait(self, count: int) -> None:
        for _ in range(count):
            assert self.done.acquire(timeout=10)


def throttled(after: str | None = None) -> ApiException:
    exc = ApiException(status=429, reason="Too Many Requests")
    exc.headers = {"Retry-After": after} if after else {}
    return exc


def test_a_failed_event_is_tried_again_after_a_backoff_that_doubles_with_no_new_event() -> None:
    handle = Flaky({"a": [ApiException(status=503), TimeoutError(), OSError("reset")]})
    metrics = Metrics()
    work: Serial[str] = Serial(handle, workers=2, name="test", metrics=metrics)
    work.start()
    work.put("a", "a:1")
    handle.wait(4)
    work.stop()
    assert [e for e, _ in handle.calls] == ["a:1"] * 4
    gaps = [b - a for (_, a), (_, b) in zip(handle.calls, handle.calls[1:], strict=False)]
    assert gaps[0] >= 0.02 and gaps[1] >= 0.04 and gaps[2] >= 0.08, gaps
    assert said(metrics, "work_retries_total", reason="server") == 1
    assert said(metrics, "work_retries_total", reason="timeout") == 1
    assert said(metrics, "work_retries_total", reason="connection") == 1
    assert work.settled(["a"])


def test_the_api_server_s_retry_after_is_honoured() -> None:
    handle = Flaky({"a": [throttled("0.3")]})
    work: Serial[str] = Serial(handle, workers=1, name="test")
    work.start()
    work.put("a", "a:1")
    handle.wait(2)
    work.stop()
    assert handle.calls[1][1] - handle.calls[0][1] >= 0.3


def quota_exceeded() -> ApiException:
    return factories.api_error(403, 'statefulsets.apps "x" is forbidden: exceeded quota: q')


def denied() -> ApiException:
    return factories.api_error(403, factories.DENIED)


def test_what_trying_again_cannot_mend_is_dropped_and_counted() -> None:
    handle = Flaky({"a": [quota_exceeded(), quota_exceeded()]})
    metrics = Metrics()
    work: Serial[str] = Serial(handle, workers=1, name="test", metrics=metrics)
    work.start()
    work.put("a", "a:1")
    handle.wait(1)
    time.sleep(0.3)  # a retry, were there one, would have come by now (its backoff is 20 ms)
    work.stop()
    assert len(handle.calls) == 1
    assert said(metrics, "work_dropped_total", reason="forbidden") == 1


def test_a_newer_event_does_not_wait_out_the_backoff_of_a_failed_one() -> None:
    handle = Flaky({"a": [throttled("30")]})
    work: Serial[str] = Serial(handle, workers=1, name="test")
    work.start()
    work.put("a", "a:1")
    handle.wait(1)
    assert not work.settled(["a"]) and work.oldest() >= 0  # waiting out 30 s
    work.put("a", "a:2")
    handle.wait(1)
    work.stop()
    assert [e for e, _ in handle.calls] == ["a:1", "a:2"]
    assert handle.calls[1][1] - handle.calls[0][1] < 5


def test_a_resync_s_look_never_replaces_an_event_waiting() -> None:
    gate = threading.Event()
    seen: list[str] = []

    def handle(event: str) -> None:
        gate.wait(5)
        seen.append(event)

    work: Serial[str] = Serial(handle, workers=1, name="test")
    work.start()
    work.put("busy", "busy")
    work.put("a", "a:watch")
    work.put("a", "a:resync", replace=False)
    gate.set()
    for _ in range(100):
        if len(seen) == 2:
            break
        time.sleep(0.05)
    work.stop()
    assert seen == ["busy", "a:watch"]


def test_a_denial_is_tried_again_and_worth_saying_only_once_it_has_lasted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A restarted API server's first answers are 403s of its authorizer: retried at once, no
    Warning; the same denial ten tries in a row (a Role taken away) is worth saying."""
    monkeypatch.setattr(backoff, "delay", lambda failures, asked=None: 0.001)
    sayable: list[bool] = []

    def handle(event: str) -> None:
        try:
            raise denied()
        except ApiException as exc:
            sayable.append(errors.worth_saying(errors.classify(exc)))
            if len(sayable) < errors.LASTING + 1:
                raise

    metrics = Metrics()
    work: Serial[str] = Serial(handle, workers=1, name="test", metrics=metrics)
    work.start()
    work.put("a", "a:1")
    deadline = time.monotonic() + 10
    while len(sayable) < errors.LASTING + 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    work.stop()
    assert sayable == [False] * (errors.LASTING - 1) + [True, True]
    assert said(metrics, "work_retries_total", reason="denied") == errors.LASTING
    assert not said(metrics, "work_dropped_total", reason="denied")


def test_work_put_for_later_comes_when_due_and_never_replaces_a_newer_event() -> None:
    """A wait a handler asks for (an anchor that must stay, looked at again in a few seconds)
    is work put for later on the same queue, not a timer of its own."""
    handled: list[tuple[str, float]] = []
    done = threading.Semaphore(0)

    def handle(event: str) -> None:
        handled.append((event, time.monotonic()))
        done.release()

    work: Serial[str] = Serial(handle, workers=1, name="test")
    work.start()
    begun = time.monotonic()
    work.put_after("a", "a:later", 0.3)
    work.put("b", "b:now")
    assert done.acquire(timeout=5) and done.acquire(timeout=5)
    work.stop()
    assert [e for e, _ in handled] == ["b:now", "a:later"]
    assert handled[1][1] - begun >= 0.3
