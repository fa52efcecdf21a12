"""A run's first pods wait behind the scheduling gate only until its balloon pod is bound."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from controller.core.placement import gate
from controller.kube.nodeindex import NodeIndex
from controller.kube.podindex import PodIndex
from controller.metrics import Metrics
from controller.operator.apply import Applier
from controller.operator.executor import Executor
from controller.operator.marking import Gates
from controller.operator.memory import Memories
from tests import factories
from tests.operator.test_placement import balloon_pod, task_pod
from tests.readings import said


class Kube:
    def __init__(self) -> None:
        self.released: list[tuple[str, str, str]] = []
        self.failing = False

    def release_pod_gate(self, namespace: str, name: str, uid: str, patch: dict[str, Any]) -> bool:
        assert patch == gate.release()
        if self.failing:
            raise ApiException(status=500, reason="etcd leader changed")
        self.released.append((namespace, name, uid))
        return True


def gated(name: str) -> dict[str, Any]:
    pod = task_pod(name, "")
    pod["spec"]["schedulingGates"] = [{"name": gate.GATE}]
    pod["status"] = {"phase": "Pending"}
    return pod


def gates_of(kube: Any, index: PodIndex, nodes: NodeIndex | None = None) -> Gates:
    memory = Memories()
    applier = Applier(Executor(kube, None), Metrics(), index, memory)  # type: ignore[arg-type]
    return Gates(applier, index, memory, nodes)


def make() -> tuple[Gates, PodIndex, Kube]:
    index, kube = PodIndex(), Kube()
    return gates_of(kube, index), index, kube


def released(gates: Gates) -> float | None:
    return said(gates.applier.metrics, "gates_released_total")


def bind(gates: Gates, index: PodIndex, node: str = "node-a") -> None:
    pod = balloon_pod("b-1", node)
    index.balloon_event(pod, deleted=False)
    gates.on_balloon_pod(pod)


def test_gated_pods_are_released_when_the_balloon_pod_is_bound() -> None:
    gates, index, kube = make()
    for name in ("compile", "lint"):
        gates.on_task_pod(gated(name))
    unbound = balloon_pod("b-1", "")
    index.balloon_event(unbound, deleted=False)
    gates.on_balloon_pod(unbound)
    assert kube.released == []  # the balloon waits for its node: so do they
    bind(gates, index)
    assert sorted((ns, uid) for ns, _, uid in kube.released) == [
        ("team-a", "uid-compile"), ("team-a", "uid-lint")]
    bind(gates, index)  # the balloon's next event: nothing held any more, nothing asked
    assert len(kube.released) == 2 and released(gates) == 2


def test_a_gated_pod_seen_after_its_anchor_is_bound_is_released_at_once() -> None:
    """Admission gates by the run's mark: a pod made just before the mark reached its TaskRun
    comes to a bound anchor (and so does one the pod watch replays after a restart)."""
    gates, index, kube = make()
    bind(gates, index)
    gates.on_task_pod(gated("compile"))
    assert [uid for _, _, uid in kube.released] == ["uid-compile"]


def test_a_released_or_deleted_pod_is_forgotten() -> None:
    gates, index, kube = make()
    gates.on_task_pod(gated("compile"))
    gates.on_task_pod(gated("lint"), deleted=True)
    other = gated("test")
    gates.on_task_pod(other)
    other["spec"]["schedulingGates"] = []
    gates.on_task_pod(other)  # released by someone else (a previous leader)
    bind(gates, index)
    assert [uid for _, _, uid in kube.released] == ["uid-compile"]


def test_a_failed_release_is_raised_for_the_queue_to_try_again_and_the_resync_tries_too() -> None:
    gates, index, kube = make()
    gates.on_task_pod(gated("compile"))
    kube.failing = True
    with pytest.raises(ApiException):  # the balloon pod's event, tried again after a backoff
        bind(gates, index)
    assert kube.released == []
    kube.failing = False
    gates.tend()
    assert [uid for _, _, uid in kube.released] == ["uid-compile"]


def test_a_leader_that_stops_releases_every_pod_it_held() -> None:
    """Whoever leads next may not know the gate (a rollback): no pod may wait for this one."""
    gates, _, kube = make()
    gates.on_task_pod(gated("compile"))
    gates.tend()  # no anchor: still held
    assert kube.released == []
    gates.release_all()
    assert [uid for _, _, uid in kube.released] == ["uid-compile"]


def test_a_run_that_ends_leaves_no_pod_held() -> None:
    gates, _, kube = make()
    gates.on_task_pod(gated("compile"))
    gates.forget(factories.RUN_UID)
    assert [uid for _, _, uid in kube.released] == ["uid-compile"]


# -- the placeholders of Tekton's assistant (issue 48) ---------------------------------------------


class Patches:
    """The pods' patches as the API server gets them."""

    def __init__(self) -> None:
        self.patches: list[tuple[str, dict[str, Any]]] = []

    def release_pod_gate(self, namespace: str, name: str, uid: str, patch: dict[str, Any]) -> bool:
        self.patches.append((uid, patch))
        return True


def placeholder(uid: str = "uid-aa", node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    """Tekton's placeholder pod as admission held it in an opted-in namespace."""
    return {"metadata": {"name": f"affinity-assistant-{uid}-0", "namespace": "team-a", "uid": uid,
                         "labels": {"tekton.dev/pipelineRun": "build-42",
                                    "app.kubernetes.io/component": "affinity-assistant"}},
            "spec": {"schedulingGates": [{"name": gate.PLACEHOLDER_GATE}],
                     "nodeSelector": node_selector or {}}}


def with_nodes() -> tuple[Gates, PodIndex, Patches]:
    index, kube, nodes = PodIndex(), Patches(), NodeIndex(Metrics())
    nodes.on_node({"metadata": {"name": "node-a", "labels": {gate.HOSTNAME: "host-a"}}})
    return gates_of(kube, index, nodes), index, kube


BESIDE = {"spec": {"schedulingGates": [{"name": gate.PLACEHOLDER_GATE, "$patch": "delete"}],
                   "nodeSelector": {gate.HOSTNAME: "host-a"}}}
AS_IT_IS = {"spec": {"schedulingGates": [{"name": gate.PLACEHOLDER_GATE, "$patch": "delete"}]}}


def test_placeholders_made_before_the_balloon_follow_it_once_bound_in_one_patch_each() -> None:
    """One per claim (`workspaces` mode): each waits while the balloon does, then gets the
    anchor's node's hostname label and loses its gate in the same patch."""
    gates, index, kube = with_nodes()
    assert gates.on_placeholder(placeholder("uid-aa"), factories.RUN_UID)  # its run looks
    assert gates.on_placeholder(placeholder("uid-bb"), factories.RUN_UID)
    assert kube.patches == []
    bind(gates, index)
    assert kube.patches == [("uid-aa", BESIDE), ("uid-bb", BESIDE)]
    bind(gates, index)
    assert len(kube.patches) == 2


def test_a_placeholder_seen_after_its_anchor_is_bound_follows_it_at_once() -> None:
    gates, index, kube = with_nodes()
    bind(gates, index)
    assert not gates.on_placeholder(placeholder(), factories.RUN_UID)
    assert kube.patches == [("uid-aa", BESIDE)]


def test_a_placeholder_pinned_by_the_run_s_template_keeps_its_own_selector() -> None:
    """A gated pod's nodeSelector may be added to, never changed: one that names a host is let
    go as it is (the balloon, made from the same template, went there)."""
    gates, index, kube = with_nodes()
    gates.on_placeholder(placeholder(node_selector={gate.HOSTNAME: "host-a"}), factories.RUN_UID)
    bind(gates, index)
    assert kube.patches == [("uid-aa", AS_IT_IS)]


def test_a_placeholder_of_a_run_that_gets_no_balloon_goes_as_it_is_and_so_on_leaving() -> None:
    gates, _, kube = with_nodes()
    gates.on_placeholder(placeholder("uid-aa"), factories.RUN_UID)
    gates.forget(factories.RUN_UID)  # opted out, not ours, ended (operator/runs.py)
    gates.on_placeholder(placeholder("uid-bb"), factories.RUN_UID)
    gates.release_all()  # this process stops leading
    assert kube.patches == [("uid-aa", AS_IT_IS), ("uid-bb", AS_IT_IS)]


def test_a_placeholder_released_or_deleted_is_forgotten() -> None:
    gates, index, kube = with_nodes()
    gates.on_placeholder(placeholder("uid-aa"), factories.RUN_UID)
    gates.on_placeholder(placeholder("uid-bb"), factories.RUN_UID)
    gates.on_placeholder(placeholder("uid-aa"), factories.RUN_UID, deleted=True)
    released_by_another = placeholder("uid-bb")
    released_by_another["spec"]["schedulingGates"] = []
    assert not gates.on_placeholder(released_by_another, factories.RUN_UID)
    bind(gates, index)
    assert kube.patches == []
