"""What the pod watch has told the leader, read by claim: a run's decision sees only the other
runs whose balloons mount its claims, however many runs the namespace holds."""

from __future__ import annotations

from typing import Any

from controller.core.basics import names
from controller.core.placement import balloon
from controller.kube.podindex import PodIndex
from tests import factories


def balloon_pod(run_uid: str, claims: list[str], ns: str = "team") -> dict[str, Any]:
    return {"metadata": {"name": f"{balloon.balloon_name(run_uid)}-0", "namespace": ns,
                         "uid": f"pod-{run_uid}",
                         "labels": {**balloon.selector_labels(run_uid), names.LABEL_RUN: "r"}},
            "spec": {"nodeName": "n1", "volumes": [
                {"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]},
            "status": {}}


def test_only_the_runs_whose_balloons_mount_the_run_s_claims_are_its_others() -> None:
    index = PodIndex()
    for i in range(1000):
        index.balloon_event(balloon_pod(f"crowd-{i}", [f"own-{i}"]), deleted=False)
    index.balloon_event(balloon_pod("sharer", ["cache", "own-sharer"]), deleted=False)
    index.balloon_event(balloon_pod("far", ["cache"], ns="elsewhere"), deleted=False)
    index.balloon_event(balloon_pod("me", ["cache", "ws"]), deleted=False)
    assert index.mounted_claims("team", "me", ["cache", "ws"]) == {
        "sharer": ("cache", "own-sharer")}

    index.balloon_event(balloon_pod("sharer", ["cache", "own-sharer"]), deleted=True)
    assert index.mounted_claims("team", "me", ["cache", "ws"]) == {}
    index.balloon_event(balloon_pod("again", ["ws"]), deleted=False)
    index.forget("again")
    assert index.mounted_claims("team", "me", ["cache", "ws"]) == {}
    assert index.mounted_claims("elsewhere", "me", ["cache"]) == {"far": ("cache",)}


def test_a_balloon_that_mounts_other_claims_after_an_update_is_refiled() -> None:
    index = PodIndex()
    index.balloon_event(balloon_pod("other", ["a"]), deleted=False)
    index.balloon_event(balloon_pod("other", ["b"]), deleted=False)
    assert index.mounted_claims("team", "me", ["a"]) == {}
    assert index.mounted_claims("team", "me", ["b"]) == {"other": ("b",)}


def going(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod as its deletion begins (what a watch sends before DELETED)."""
    return {**pod, "metadata": {**pod["metadata"], "deletionTimestamp": "2026-11-26T10:00:00Z"}}


def task_pod(run_uid: str, node: str = "n1") -> dict[str, Any]:
    pod = factories.taskrun_pod(run_uid=run_uid, namespace="team")
    pod["metadata"]["uid"] = f"task-{run_uid}"
    pod["spec"]["nodeName"] = node
    pod["spec"]["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": balloon.selector_labels(run_uid)},
         "topologyKey": "kubernetes.io/hostname"}]}}
    return pod


def test_a_forgotten_run_stays_forgotten_as_its_pods_go() -> None:
    """Measured before: every run served left its state behind (its balloon pod's deletion,
    after the balloon's StatefulSet was deleted and the run forgotten, made it anew), so the
    index grew with every run ever served and node events read them all."""
    index = PodIndex()
    index.balloon_event(balloon_pod("done", ["ws"]), deleted=False)
    index.task_pod_event(task_pod("done"), deleted=False)
    index.forget("done")
    index.balloon_event(going(balloon_pod("done", ["ws"])), deleted=False)
    index.balloon_event(balloon_pod("done", ["ws"]), deleted=True)
    index.task_pod_event(going(task_pod("done")), deleted=False)  # a pruner deletes the run
    index.task_pod_event(task_pod("done"), deleted=True)
    assert not index.knows("done")
    assert index.runs() == {}


def test_a_pod_of_a_live_run_may_go_and_come_back() -> None:
    index = PodIndex()
    index.balloon_event(balloon_pod("live", ["ws"]), deleted=False)
    index.balloon_event(going(balloon_pod("live", ["ws"])), deleted=False)
    index.balloon_event(balloon_pod("live", ["ws"]), deleted=True)
    assert index.knows("live") and index.anchored_ever("live") == ["n1"]
    index.balloon_event(balloon_pod("live", ["ws"]) | {"spec": {"nodeName": "n2"}},
                        deleted=False)
    assert index.anchor("live") == "n2" and index.anchored_ever("live") == ["n1", "n2"]


class Unread(dict[str, Any]):
    """The index's runs, which a read that should go by node or by waiter must not visit."""

    def _visited(self, *_: Any) -> Any:
        raise AssertionError("every run was visited")

    items = values = keys = __iter__ = _visited


def on(run_uid: str, node: str) -> dict[str, Any]:
    pod = balloon_pod(run_uid, ["ws"])
    pod["spec"]["nodeName"] = node
    return pod


def test_a_node_event_reads_only_the_runs_anchored_there() -> None:
    index = PodIndex()
    for i in range(1000):
        index.balloon_event(on(f"crowd-{i}", f"n{i % 100}"), deleted=False)
    index.balloon_event(on("moving", "n7"), deleted=False)
    index._runs = Unread(index._runs)
    assert sorted(index.anchored_on("n7")) == sorted([*(f"crowd-{i}" for i in range(7, 1000, 100)),
                                                      "moving"])
    index.balloon_event(on("moving", "n8"), deleted=False)
    assert "moving" not in index.anchored_on("n7") and "moving" in index.anchored_on("n8")
    index.balloon_event(on("moving", "n8"), deleted=True)
    index.forget("crowd-8")
    assert sorted(index.anchored_on("n8")) == sorted(f"crowd-{i}" for i in range(108, 1000, 100))


def test_the_waiting_pods_are_read_without_visiting_the_runs_that_do_not_wait() -> None:
    index = PodIndex()
    for i in range(1000):
        index.balloon_event(on(f"crowd-{i}", f"n{i % 100}"), deleted=False)
    stuck = balloon_pod("stuck", ["ws"])
    stuck["spec"]["nodeName"] = ""
    stuck["status"] = {"conditions": [{"type": "PodScheduled", "status": "False",
                                       "reason": "Unschedulable", "message": "no room"}]}
    index.balloon_event(stuck, deleted=False)
    index._runs = Unread(index._runs)
    assert [(uid, w.message) for uid, _, _, w in index.waiting()] == [("stuck", "no room")]
    index.balloon_event(on("stuck", "n1"), deleted=False)
    assert index.waiting() == []
