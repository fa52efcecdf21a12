"""The operator and webhook against a real control plane, with the pods Tekton would create.

The real kube-apiserver calls our webhook; the real scheduler places balloons and pods; the
real StatefulSet, garbage-collector and PV controllers do their part. Runs here are Tekton
objects without the Tekton controller: see test_tekton_runs.py for real Tekton.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterator

import pytest

from controller.core.basics import names
from e2e.harness.cluster import ClusterHandle, present
from e2e.harness.coscheduler import Coscheduler
from e2e.harness.scenario import Scenario, user_affinity

pytestmark = pytest.mark.e2e

REQ = "requiredDuringSchedulingIgnoredDuringExecution"



@pytest.fixture
def disabled(cluster: ClusterHandle, coscheduler: Coscheduler) -> Iterator[Scenario]:
    scenario = Scenario(cluster, cluster.create_namespace(f"off-{uuid.uuid4().hex[:6]}"))
    yield scenario
    scenario.close()


def test_every_pod_of_a_run_lands_on_the_balloon_node(enabled: Scenario, nodes: list[str]) -> None:
    s = enabled
    # No volume: nothing but the balloon decides where the run goes.
    run = s.run(workspaces=[{"name": "shared", "emptyDir": {}}])
    anchor = s.balloon_node(run)
    pods = [s.task_pod(run, t, claims=()) for t in ("clone", "build-a", "build-b", "build-c", "publish")]
    assert {s.pod_node(p) for p in pods} == {anchor}
    for p in pods:
        terms = s.pod(p)["spec"]["affinity"]["podAffinity"][REQ]
        assert len(terms) == 1 and terms[0]["labelSelector"]["matchLabels"][names.LABEL_RUN_UID] == run["metadata"]["uid"]
    anchored = s.events("Anchored")
    assert anchored and anchor in anchored[0].message


def test_run_using_a_claim_bound_on_node_3_is_anchored_on_node_3(enabled: Scenario, nodes: list[str]) -> None:
    s = enabled
    s.claim_on(nodes[3])
    run = s.run()
    assert s.balloon_node(run) == nodes[3]
    pods = [s.task_pod(run, t) for t in ("a", "b", "c")]
    assert {s.pod_node(p) for p in pods} == {nodes[3]}


def test_two_claims_whose_volumes_meet_on_one_node(enabled: Scenario, nodes: list[str]) -> None:
    s = enabled
    s.pvc("source")
    s.pvc("cache")
    s.pv_on(nodes[1], "source")
    s.pv_on(nodes[1], "cache")
    run = s.run(workspaces=[
        {"name": "src", "persistentVolumeClaim": {"claimName": "source"}},
        {"name": "cache", "persistentVolumeClaim": {"claimName": "cache"}},
    ])
    sts = s.wait_balloon(run)
    claims = {v.persistent_volume_claim.claim_name for v in sts.spec.template.spec.volumes}
    assert claims == {"source", "cache"}
    assert s.balloon_node(run) == nodes[1]
    # One task binding both claims (Tekton's own assistant refuses this), others one each.
    pods = [s.task_pod(run, "both", claims=("source", "cache")), s.task_pod(run, "src"),
            s.task_pod(run, "cache-only", claims=("cache",))]
    assert {s.pod_node(p) for p in pods} == {nodes[1]}


def test_namespace_without_label_is_untouched(disabled: Scenario, nodes: list[str]) -> None:
    s = disabled
    s.claim_on(nodes[2])
    run = s.run()
    pod = s.task_pod(run, "a", affinity=user_affinity())
    s.pod_node(pod)
    assert s.pod(pod)["spec"]["affinity"] == user_affinity()
    assert s.balloons() == []


def test_a_run_made_before_its_namespace_was_switched_on_is_anchored_once_it_is(
    disabled: Scenario, coscheduler: Coscheduler, nodes: list[str]
) -> None:
    """The label comes after the run (an administrator switching a team on with a run in
    flight, or a run whose event came before the operator saw the label). A run here has no
    Tekton controller to change it again, so no later event of its own would tell the leader."""
    s = disabled
    s.claim_on(nodes[2])
    dropped = functools.partial(coscheduler.metric, "tekton_coscheduler_watch_events_total",
                                watch="pipelineruns", decoded="false")
    before = dropped()
    run = s.run()
    s.cluster.wait_for(lambda: dropped() > before, timeout=30,
                       what="the leader's run watch to drop the run's event")
    s.core.patch_namespace(s.ns, {"metadata": {"labels": {names.NAMESPACE_LABEL: "true"}}})
    assert s.balloon_node(run, timeout=30) == nodes[2]


def test_opted_out_run_gets_no_balloon_and_its_pods_no_term(enabled: Scenario, nodes: list[str]) -> None:
    s = enabled
    s.claim_on(nodes[0])
    run = s.run(annotations={names.OPT_OUT_ANNOTATION: "false"})
    pod = s.task_pod(run, "a")
    s.pod_node(pod)
    assert "affinity" not in s.pod(pod)["spec"]
    assert s.balloons(run) == []


def test_pods_own_affinity_survives(enabled: Scenario, nodes: list[str]) -> None:
    s = enabled
    s.claim_on(nodes[2])
    run = s.run()
    anchor = s.balloon_node(run)
    pod = s.task_pod(run, "a", affinity=user_affinity())
    assert s.pod_node(pod) == anchor
    got = s.pod(pod)["spec"]["affinity"]
    want = user_affinity()
    assert got["nodeAffinity"] == want["nodeAffinity"]
    assert got["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] == \
        want["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert len(got["podAffinity"][REQ]) == 1


def test_deleting_the_run_removes_the_balloon_by_garbage_collection(
    enabled: Scenario, nodes: list[str], coscheduler: Coscheduler
) -> None:
    s = enabled
    s.claim_on(nodes[0])
    run = s.run()
    s.balloon_node(run)
    coscheduler.stop()  # only the garbage collector can remove it now
    try:
        s.delete_run(run)
        s.wait_no_balloon(run, timeout=60)
    finally:
        coscheduler.start()


def test_finishing_the_run_deletes_the_balloon(enabled: Scenario, nodes: list[str]) -> None:
    s = enabled
    s.claim_on(nodes[0])
    run = s.run()
    s.balloon_node(run)
    s.finish(run, "False")
    s.wait_no_balloon(run, timeout=30)


def test_killing_the_operator_mid_run_makes_no_second_balloon(
    enabled: Scenario, nodes: list[str], coscheduler: Coscheduler
) -> None:
    s = enabled
    s.claim_on(nodes[1])
    run = s.run()
    anchor = s.balloon_node(run)
    first = s.balloons(run)[0].metadata.uid
    coscheduler.kill()
    coscheduler.start()
    late = s.task_pod(run, "after-restart")
    assert s.pod_node(late) == anchor
    # Two resync rounds of the new process later (counted, not timed), still the same balloon.
    rounds = "tekton_coscheduler_resync_rounds_total"
    s.cluster.wait_for(lambda: coscheduler.metric(rounds) >= 2, timeout=60,
                       what="two resync rounds")
    balloons = s.balloons(run)
    assert [b.metadata.uid for b in balloons] == [first]


def test_a_balloon_deleted_by_hand_is_made_again_beside_its_claim(
    enabled: Scenario, nodes: list[str], coscheduler: Coscheduler
) -> None:
    """Once its run is settled the resync leaves it alone (and these tests give it no safety
    net): the balloons watch's event of the deletion is what has it made again."""
    s = enabled
    s.claim_on(nodes[2])
    run = s.run()
    assert s.balloon_node(run) == nodes[2]
    first = s.balloons(run)[0]
    # Three rounds: one may skip it for its last event, the next keeps it (settled), the third
    # leaves it alone. Nothing else writes this run (no Tekton controller in this module).
    rounds = coscheduler.metric("tekton_coscheduler_resync_rounds_total")
    s.cluster.wait_for(
        lambda: coscheduler.metric("tekton_coscheduler_resync_rounds_total") >= rounds + 3,
        timeout=60, what="three resync rounds")
    s.apps.delete_namespaced_stateful_set(first.metadata.name, s.ns,
                                          propagation_policy="Background")
    again = s.cluster.wait_for(
        lambda: [b for b in s.balloons(run) if b.metadata.uid != first.metadata.uid],
        timeout=30, what="a new balloon")[0]

    def bound_pod_of_new_balloon() -> str | None:
        for pod in s.core.list_namespaced_pod(s.ns, label_selector=names.BALLOON_SELECTOR).items:
            owners = {o.uid for o in present(pod.metadata).owner_references or []}
            if present(again.metadata).uid in owners and present(pod.spec).node_name:
                return str(present(pod.spec).node_name)
        return None

    assert s.cluster.wait_for(bound_pod_of_new_balloon, timeout=60,
                              what="the new balloon's pod bound") == nodes[2]
