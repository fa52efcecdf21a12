"""Anchors on nodes that go away (operator/anchors.py): a move is decided on the pod index and
confirmed with the API server before the balloon pod goes."""

from __future__ import annotations

from typing import Any

from controller.core.placement import balloon
from controller.core.placement.anchorplan import RECHECK
from controller.kube.client import ApiError
from controller.kube.nodeindex import NodeIndex
from controller.kube.podindex import PodIndex
from controller.metrics import Metrics
from controller.operator.anchors import AnchorGuard
from controller.operator.apply import Applier
from controller.operator.executor import Executor
from controller.operator.memory import Memories
from tests import factories
from tests.operator.test_placement import balloon_pod, task_pod

BALLOON_POD = f"{balloon.balloon_name(factories.RUN_UID)}-0"


class Kube:
    """The API server as the guard asks it: claims, volumes, the run's pods; deletions kept."""

    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self.pods = pods
        self.failing: ApiError | None = None
        self.refusing: ApiError | None = None  # a deletion's answer
        self.deleted: list[str] = []

    def get_pvc(self, namespace: str, name: str) -> None:
        return None

    def get_pv(self, name: str) -> None:
        return None

    def list_run_pods(self, namespace: str, run_name: str) -> list[dict[str, Any]]:
        if self.failing is not None:
            raise self.failing
        return self.pods

    def delete_pod(self, namespace: str, name: str, uid: str, grace: int | None = None) -> None:
        if self.refusing is not None:
            raise self.refusing
        self.deleted.append(name)


class Said:
    def __init__(self) -> None:
        self.reasons: list[str] = []

    def tell(self, involved: Any, notice: Any, key: Any) -> None:
        self.reasons.append(notice.reason)

    def forget(self, key: Any, reason: str) -> None:
        pass


def guard(kube: Kube, said: Said | None = None, index: PodIndex | None = None) -> AnchorGuard:
    """A guard whose pod index knows the run's balloon pod on n1, and none of its tasks (or
    the index given)."""
    if index is None:
        index = PodIndex()
        index.balloon_event(balloon_pod("b1", "n1"), deleted=False)
    memory, executor = Memories(), Executor(kube, said or Said())  # type: ignore[arg-type]
    applier = Applier(executor, Metrics(), None, memory)  # type: ignore[arg-type]
    return AnchorGuard(kube, index, NodeIndex(Metrics()), Metrics(), applier, memory)  # type: ignore[arg-type]


class Queue:
    """The work queue as AnchorGuard.soon puts on it: what is put, and its work to run."""

    def __init__(self) -> None:
        self.put: list[tuple[str, Any, float]] = []
        self.acts: list[Any] = []

    def __call__(self, key: str, slot: Any, act: Any, seconds: float) -> None:
        self.put.append((key, slot, seconds))
        self.acts.append(act)


def tell(guard: AnchorGuard, node: dict[str, Any]) -> None:
    """The node watch's event, as Operator.on_node hands it on: kept in the node index, then
    the anchors on the node looked at."""
    guard.nodes.on_node(node)
    guard.on_node(node["metadata"]["name"])


def not_ready(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}


def test_a_task_the_pod_watch_has_not_shown_yet_keeps_the_anchor() -> None:
    """A new leader's pod index fills as its pod watches replay the cluster, while its node
    watch may already say the anchor's node is NotReady: the balloon pod is known, the task that
    runs beside it not yet. The API server, asked before the balloon pod goes, says it runs
    there: the anchor stays, and the run is told why. (It was moved: a running task separated
    from its volume.)"""
    kube, said = Kube([task_pod("fetch", "n1")]), Said()
    tell(guard(kube, said), not_ready("n1"))
    assert kube.deleted == []
    assert said.reasons == ["AnchorNodeUnavailable"]


def test_an_anchor_no_pod_of_its_run_holds_moves_at_once() -> None:
    finished = task_pod("fetch", "n1")
    finished["status"] = {"phase": "Succeeded"}
    kube = Kube([finished, task_pod("build", "n2")])
    tell(guard(kube), not_ready("n1"))
    assert kube.deleted == [BALLOON_POD]


def test_an_anchor_whose_pods_cannot_be_read_stays_and_is_looked_at_again() -> None:
    kube, queue = Kube([]), Queue()
    kube.failing = ApiError(status=503, reason="Service Unavailable")
    watched = guard(kube)
    watched.soon = queue
    tell(watched, not_ready("n1"))
    queue.acts.pop()()  # the queue's worker: the read fails
    assert kube.deleted == []
    assert queue.put[1:] == [(factories.RUN_UID, ("later", "anchor"), RECHECK)]
    kube.failing = None
    queue.acts.pop()()  # the look put for later
    assert kube.deleted == [BALLOON_POD]


def test_a_balloon_pod_shown_on_a_node_already_known_unavailable_is_looked_at_at_once() -> None:
    """A new leader knows the nodes before its pod watches replay the cluster (and hears no
    heartbeat): the node that went NotReady before it led sends no further event. The balloon
    pod's own event brings its anchor to be looked at; a finished run moves at once."""
    finished = task_pod("fetch", "n1")
    finished["status"] = {"phase": "Succeeded"}
    kube = Kube([finished])
    watched = guard(kube, index=PodIndex())
    tell(watched, not_ready("n1"))  # the nodes' first list: no balloon known there yet
    assert kube.deleted == []
    pod = balloon_pod("b1", "n1")
    watched.index.balloon_event(pod, deleted=False)  # as Placement files it
    watched.on_balloon_pod(pod, deleted=False)
    assert kube.deleted == [BALLOON_POD]


def test_a_balloon_pod_on_its_way_out_is_not_looked_at_again() -> None:
    """The move begun: the pod's own events while it terminates delete nothing more."""
    kube = Kube([])
    watched = guard(kube)
    tell(watched, not_ready("n1"))  # no pod of the run holds it: moved
    assert kube.deleted == [BALLOON_POD]
    going = balloon_pod("b1", "n1")
    going["metadata"]["deletionTimestamp"] = "2026-11-27T10:00:00Z"
    watched.index.balloon_event(going, deleted=False)
    watched.on_balloon_pod(going, deleted=False)
    assert kube.deleted == [BALLOON_POD]


def test_a_node_s_event_looks_at_its_runs_on_their_keys_and_a_held_anchor_again_later() -> None:
    """The node watch's thread never acts on a run: each run anchored on the node is looked at
    under its own key on the work queue. An anchor that must stay is looked at again a few
    seconds later, once however often it is found so, and moves as soon as it may."""
    kube, queue = Kube([task_pod("fetch", "n1")]), Queue()
    put, acts = queue.put, queue.acts
    watched = guard(kube)
    watched.soon = queue
    tell(watched, not_ready("n1"))
    assert put == [(factories.RUN_UID, "anchor", 0.0)] and kube.deleted == []  # nothing yet
    acts.pop()()  # the queue's worker: the task still runs there, so the anchor stays
    assert put[1:] == [(factories.RUN_UID, ("later", "anchor"), RECHECK)]
    tell(watched, not_ready("n1"))
    acts.pop()()  # found so again: no second look put for later
    assert len(put) == 3 and kube.deleted == []
    kube.pods = []  # the task ended
    acts.pop()()  # the look put for later
    assert kube.deleted == [BALLOON_POD]


def test_a_balloon_pod_deletion_the_api_server_refuses_is_logged_not_raised() -> None:
    """The pod gone or replaced already (404, a precondition's 409): nothing to try again, and
    the look ends as any other."""
    kube = Kube([])
    kube.refusing = ApiError(status=404, reason="Not Found")
    watched = guard(kube)
    tell(watched, not_ready("n1"))
    assert watched.memory.get(factories.RUN_UID).moving == ("n1", "NotReady")
