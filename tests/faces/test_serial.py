"""The handlers' threads: one object's events one at a time, the newest replacing a waiting one."""

from __future__ import annotations

import threading

from controller.faces.serial import Serial
from controller.metrics import Metrics
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
