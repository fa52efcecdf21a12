"""Balloons whose StatefulSet made no pod: said with the controller's words, at a cost that does
not grow with how many wait (operator/anchors.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from controller.core.basics.actions import Count, Say
from controller.core.model import tekton
from controller.core.placement import balloon
from controller.metrics import Metrics
from controller.operator.anchors import Unplaced
from controller.operator.runs import Operator
from controller.settings import Settings
from tests import factories
from tests.operator.test_runs import MemoryCaches, MemoryKube, StaticView
from tests.readonly import ReadOnly


class Asked(MemoryKube):
    """No balloon pod exists; the namespace's FailedCreate Events are `failures` (by uid); what
    was asked of the API server is counted."""

    def __init__(self) -> None:
        super().__init__()
        self.failures: dict[str, list[str]] = {}
        self.asked: list[str] = []
        self.told: list[str] = []  # the runs a BalloonNotPlaced was said on

    def list_balloon_pods(self, namespace: str, run_uid: str) -> list[dict[str, Any]]:
        self.asked.append("pods")
        return []

    def event_messages(self, namespace: str, kind: str, reason: str) -> dict[str, list[str]]:
        self.asked.append(f"events {namespace} {kind} {reason}")
        return {uid: list(said) for uid, said in self.failures.items()}

    def post_event(self, involved: Any, reason: str, message: str, **kwargs: Any) -> None:
        super().post_event(involved, reason, message, **kwargs)
        if reason == "BalloonNotPlaced":
            self.told.append(involved["metadata"]["name"])


def with_balloons(n: int, seconds_ago: float) -> tuple[Operator, Asked,
                                                       list[tuple[tekton.PipelineRun, Any]]]:
    kube = Asked()
    operator = Operator(Settings(), kube, StaticView(), Metrics(), MemoryCaches(kube))  # type: ignore[arg-type]
    made = (datetime.now(UTC) - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    waiting = []
    for i in range(n):
        body = factories.pipelinerun(name=f"run-{i}", uid=f"run-{i}-uid")
        kube.runs[body["metadata"]["name"]] = body
        operator.reconcile_run(body)
        sts = kube.statefulsets[balloon.balloon_name(f"run-{i}-uid")]
        sts["metadata"]["creationTimestamp"] = made
        sts["metadata"]["uid"] = f"sts-{i}"
        waiting.append((tekton.PipelineRun.from_body(body), sts))
    return operator, kube, waiting


def said(kube: MemoryKube) -> list[str]:
    return [m for r, m in kube.events if r == "BalloonNotPlaced"]


def test_a_balloon_whose_pod_could_not_be_made_is_said_with_the_controller_s_words() -> None:
    """No pod past the grace: the StatefulSet controller's FailedCreate (quota, LimitRange,
    admission) is the why; without one, nothing is said until the controller has been silent
    for a minute, making neither this pod nor another balloon's (a burst of runs keeps it busy,
    and that resolves itself)."""
    operator, kube, waiting = with_balloons(1, seconds_ago=30)
    operator.unplaced.check(waiting)
    assert said(kube) == []
    kube.failures["sts-0"] = ['pods "coschedule-run-0-uid-0" is forbidden: exceeded quota: q']
    operator.unplaced.check(waiting)
    assert len(said(kube)) == 1 and "exceeded quota: q" in said(kube)[0]

    silent, kube, waiting = with_balloons(1, seconds_ago=61)
    other = {"metadata": {"name": "coschedule-other-0", "namespace": "team-a", "uid": "p-other",
                          "creationTimestamp": (datetime.now(UTC) - timedelta(seconds=30)).strftime(
                              "%Y-%m-%dT%H:%M:%SZ"),
                          "labels": balloon.selector_labels("other-uid")}, "spec": {}}
    silent.index.balloon_event(other, deleted=False)  # another run's, made 30 s ago: a burst
    silent.unplaced.check(waiting)
    assert said(kube) == []
    silent.index.newest_balloon_pod = datetime.now(UTC) - timedelta(seconds=61)
    silent.unplaced.check(waiting)
    assert len(said(kube)) == 1 and "kube-controller-manager" in said(kube)[0]


def test_a_round_asks_a_namespace_s_events_once_however_many_balloons_wait_there() -> None:
    """A burst: many balloons past the grace, the controller busy making others' pods. One
    LIST of the namespace's FailedCreate Events a round; a balloon's pods are listed only when
    a Warning would be said, and a young balloon costs nothing."""
    operator, kube, waiting = with_balloons(6, seconds_ago=30)
    operator.unplaced.check(waiting)
    assert kube.asked == ["events team-a StatefulSet FailedCreate"]
    assert said(kube) == []
    kube.asked.clear()
    kube.failures["sts-2"] = ["exceeded quota: q"]
    operator.unplaced.check(waiting)
    assert kube.asked == ["events team-a StatefulSet FailedCreate", "pods"]
    assert len(said(kube)) == 1

    young, kube, waiting = with_balloons(3, seconds_ago=1)
    young.unplaced.check(waiting)
    assert kube.asked == []


def test_a_balloon_whose_run_ended_or_was_deleted_since_the_round_began_is_not_said() -> None:
    """The round's view of the runs and balloons is older than the API server's: a run that
    ended meanwhile (its balloon deleted, the pod gone with it) gets no Warning."""
    operator, kube, waiting = with_balloons(3, seconds_ago=90)
    operator.index.newest_balloon_pod = datetime.now(UTC) - timedelta(seconds=90)  # idle
    kube.runs["run-0"]["status"]["conditions"][0]["status"] = "True"  # ended
    del kube.statefulsets[balloon.balloon_name("run-1-uid")]  # its balloon deleted
    operator.unplaced.check(waiting)
    assert kube.told == ["run-2"]


class Planned:
    """Takes the plans handed to be applied, and applies none."""

    def __init__(self) -> None:
        self.plans: list[tuple[str, tuple[Any, ...]]] = []

    def apply(self, run: tekton.PipelineRun, planned: Any) -> None:
        self.plans.append((run.name, tuple(planned)))


def test_a_round_s_look_at_the_balloons_only_reads_and_hands_what_it_says_to_be_applied() -> None:
    """What a round reads of each balloon, and what it asks of the API server before a Warning,
    goes through a client that may only read; the Warning and its count come as one plan."""
    operator, kube, waiting = with_balloons(2, seconds_ago=30)
    kube.failures["sts-1"] = ["exceeded quota: q"]
    applier = Planned()
    Unplaced(Settings(), ReadOnly(kube), operator.index, applier).check(  # type: ignore[arg-type]
        waiting)
    [(run, (count, say))] = applier.plans
    assert run == "run-1" and count == Count("balloon_problems", (("reason", "not-placed"),))
    assert isinstance(say, Say) and say.notice.reason == "BalloonNotPlaced"
    assert kube.asked == ["events team-a StatefulSet FailedCreate", "pods"] and said(kube) == []
