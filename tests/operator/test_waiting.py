"""Pods that wait for a node, as the waiting check says them: a task pod waits for its anchor
first, and its own grace starts once the balloon is bound."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from controller.core.model import tekton
from controller.core.placement import balloon
from controller.kube.podindex import PodIndex
from controller.metrics import Metrics
from controller.operator.anchors import WaitingPods
from controller.operator.apply import Applier
from controller.operator.executor import Executor
from controller.operator.memory import Memories
from controller.settings import Settings

T0 = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
AFFINITY = "0/4 nodes are available: 4 node(s) didn't match pod affinity rules."


def stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def balloon_pod(node: str, bound: datetime | None) -> dict[str, Any]:
    cond = ({"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp(bound)}
            if bound else {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                           "message": "0/4 nodes are available: 4 Insufficient cpu.",
                           "lastTransitionTime": stamp(T0)})
    return {"metadata": {"name": "coschedule-r-0", "namespace": "ns", "uid": "b1",
                         "labels": balloon.selector_labels("run-uid")},
            "spec": {"nodeName": node} if node else {},
            "status": {"conditions": [cond]}}


def task_pod() -> dict[str, Any]:
    return {
        "metadata": {"name": "build-pod", "namespace": "ns", "uid": "p1",
                     "labels": {tekton.LABEL_PIPELINE_RUN: "r", tekton.LABEL_TASK_RUN: "r-build",
                                tekton.LABEL_PIPELINE_RUN_UID: "run-uid"}},
        "spec": {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": balloon.selector_labels("run-uid")},
             "topologyKey": "kubernetes.io/hostname"}]}},
            "containers": [{"name": "step-work"}]},
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": AFFINITY, "lastTransitionTime": stamp(T0)}]},
    }


def applier(said: Any) -> Applier:
    """What the plans are applied by, its executor telling `said` of each Event."""
    executor = Executor(None, said)  # type: ignore[arg-type]
    return Applier(executor, Metrics(), None,  # type: ignore[arg-type]
                   Memories())


class Said:
    def __init__(self) -> None:
        self.reasons: list[str] = []

    def tell(self, ref: Any, notice: Any, key: Any) -> None:
        self.reasons.append(notice.reason)


def test_a_task_pod_waiting_for_an_anchor_not_yet_bound_is_not_said_and_its_grace_starts_at_the_binding() -> None:
    index, said = PodIndex(), Said()
    check = WaitingPods(Settings(), index, Metrics(), applier(said))
    index.balloon_event(balloon_pod("", None), deleted=False)
    index.task_pod_event(task_pod(), deleted=False)
    check.look("run-uid", T0 + timedelta(minutes=5))
    assert said.reasons == ["BalloonUnschedulable"]  # the anchor's wait, not its pod's
    bound = T0 + timedelta(minutes=6)
    index.balloon_event(balloon_pod("n1", bound), deleted=False)
    check.look("run-uid", bound + timedelta(seconds=Settings().pod_stuck_after - 1))
    assert said.reasons == ["BalloonUnschedulable"]
    check.look("run-uid", bound + timedelta(seconds=Settings().pod_stuck_after + 1))
    assert said.reasons == ["BalloonUnschedulable", "PodCannotFollowAnchor"]


def test_each_grace_s_end_is_work_the_run_put_for_later_under_its_key() -> None:
    """No loop says who waits too long: a look at the run's waiting pods (at each of its pods'
    events) puts the next look for when the next grace ends, and says the pod then."""
    index, said = PodIndex(), Said()
    put: list[tuple[str, str, float, Any]] = []
    look = WaitingPods(Settings(), index, Metrics(), applier(said),
                       later=lambda key, slot, act, seconds: put.append((key, slot, seconds, act)))
    bound = T0 + timedelta(minutes=1)
    index.balloon_event(balloon_pod("n1", bound), deleted=False)
    index.task_pod_event(task_pod(), deleted=False)
    look.look("run-uid", bound + timedelta(seconds=5))
    [(key, slot, seconds, _)] = put
    assert (key, slot) == ("run-uid", "waiting")
    assert seconds == Settings().pod_stuck_after - 5 + 0.5 and said.reasons == []
    look.look("run-uid", bound + timedelta(seconds=Settings().pod_stuck_after + 1))
    assert said.reasons == ["PodCannotFollowAnchor"] and len(put) == 1  # none left to wait for
