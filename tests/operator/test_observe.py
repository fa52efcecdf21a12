"""One observation per event: a run's event reads what it needs of the caches once, however
many parts of the decision (capacity, resolution, the balloon's plan) use it."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from controller.core.capacity import settle
from tests import factories
from tests.operator.test_capacity import pipeline, task_pod
from tests.operator.test_runs import make


class CountingCaches:
    """The caches, each read counted by method and kind."""

    def __init__(self, caches: object) -> None:
        self.caches = caches
        self.reads: Counter[tuple[str, str]] = Counter()

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.caches, name)
        if not callable(found):
            return found

        def counted(*args: Any, **kwargs: Any) -> Any:
            kind = args[0] if args and name in ("get", "owned_by", "in_namespace") else ""
            self.reads[name, kind] += 1
            return found(*args, **kwargs)
        return counted


def test_a_run_s_event_reads_its_pipeline_and_its_resolution_requests_once() -> None:
    operator, kube = make(caches=True)
    counting = CountingCaches(operator.caches)
    for part in (operator, operator.capacity, operator.estimates, operator.capacity.headroom,
                 operator.observer):
        part.caches = counting  # type: ignore[assignment]  # a stand-in: the caches, counted
    kube.objects["pipelines"] = {"fan-out-in": pipeline("2")}
    kube.objects["tasks"] = {"fetch": {"spec": {"steps": [
        {"name": "s", "image": "x", "computeResources": {"requests": {"cpu": "1"}}}]}}}
    body = factories.pipelinerun()
    kube.runs[body["metadata"]["name"]] = body
    operator.reconcile_run(body)
    assert kube.pods, "capacity-aware: a reservation goes first"
    assert counting.reads["get", "pipelines"] == 1
    assert counting.reads["owned_by", "resolutionrequests"] == 1


def test_a_pod_event_of_a_run_that_asks_only_for_pod_slots_reads_nothing_for_a_reservation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its peak is known for good and asks for no room: its pods' events (five or more per
    task) leave the reservation's sources unread. A run that asks for cpu still reads them."""
    monkeypatch.setattr(settle, "SETTLE", 0.0)  # the event comes long after the last act
    monkeypatch.setattr(settle, "SETTLE_MAX", 0.0)
    for cpu, reads in ((None, 0), ("1", 1)):
        operator, kube = make(caches=True)
        counting = CountingCaches(operator.caches)
        for part in (operator, operator.capacity, operator.estimates, operator.capacity.headroom,
                 operator.observer):
            part.caches = counting  # type: ignore[assignment]  # a stand-in: the caches, counted
        step: dict[str, Any] = {"name": "s", "image": "x"}
        if cpu:
            step["computeResources"] = {"requests": {"cpu": cpu}}
        kube.objects["pipelines"] = {"fan-out-in": {"spec": {"tasks": [
            {"name": "t", "taskSpec": {"steps": [step]}}]}}}
        kube.objects["tasks"] = {}
        body = factories.pipelinerun()
        kube.runs[body["metadata"]["name"]] = body
        operator.reconcile_run(body)
        counting.reads.clear()
        operator.on_run_pod(task_pod("t", "Running", cpu or "0"))
        assert counting.reads["get", "pipelines"] == reads, cpu
