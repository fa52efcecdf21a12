"""Capacity with a real autoscaler beside the control plane: Karpenter's kwok provider.

A pool of one small node (2 CPUs) that Karpenter grows with nodes of 4 or 8 CPUs. A run fans
out three builds of 2 CPUs: its peak, 6 CPUs, fits no node there is. Ours: the run's scout asks
for the peak, Karpenter makes a node for it, the run is anchored there and its builds start
together; the node stays while the run lives, however idle, and goes once the run has ended.
Tekton's own assistant, side by side: its pod fits the small node, the builds are pinned there
by required affinity beside it, where 2 CPUs are never free, and no node Karpenter could make
would satisfy that affinity: they wait for good.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from e2e.harness import capacity, faults
from e2e.harness import tekton_runs as tr
from e2e.harness.cluster import ClusterHandle, have_binary, karpenter
from e2e.harness.cluster import tekton as tekton_cluster
from e2e.harness.coscheduler import Coscheduler
from e2e.harness.faults import Pool
from e2e.harness.runs import Runs

pytestmark = [pytest.mark.e2e, pytest.mark.autoscaler, pytest.mark.parts("karpenter")]

SIZES = {"e2e-4cpu": 4, "e2e-8cpu": 8}
TOGETHER = 5.0  # seconds: the builds of a layer that started together were bound within this
QUIET = "40"  # seconds of publish alone on the anchor: longer than Karpenter takes to empty it
STUCK = 45  # seconds the assistant's builds are watched not starting (Karpenter decides in ~3)


@pytest.fixture(scope="module")
def autoscaler(cluster: ClusterHandle, tekton: ClusterHandle, coscheduler: Coscheduler
               ) -> Iterator[None]:
    if not have_binary("karpenter-kwok"):
        pytest.skip("Karpenter's kwok provider is not built: e2e/build.sh karpenter")
    cluster.start_karpenter(faults.POOL_ZONE, SIZES)
    yield
    cluster.stop_karpenter()


@pytest.fixture
def grown(cluster: ClusterHandle, autoscaler: None) -> Iterator[tuple[Pool, str]]:
    with capacity.autoscaled_pool(cluster) as made:
        faults.volumes_across_the_pool(cluster, made[0])
        yield made


def peak_run(name: str, pool: Pool, quiet: bool = True) -> dict[str, object]:
    """`quiet`: publish runs alone on the node for QUIET seconds (else for the stage's 1 s)."""
    return capacity.fan_out(tr.unique(name), pool, build_cpu="2", fetch_cpu="1",
                            publish_seconds=QUIET if quiet else None,
                            tolerations=[karpenter.toleration()])


def test_a_peak_that_fits_no_node_gets_a_node_made_for_it_which_stays_while_the_run_lives(
    runs: Runs, grown: tuple[Pool, str]
) -> None:
    s, (pool, node_pool) = runs, grown
    run = s.start(peak_run("grown", pool))
    anchor = s.anchor(run, timeout=120)
    made = karpenter.made_nodes(s.cluster, node_pool)
    assert made == [anchor], f"anchored on {anchor}; the autoscaler made {made}"
    # Watched until the run ends: publish runs alone on the node for QUIET seconds, and
    # Karpenter marks an underused node consolidatable 10 s after its pods last changed.
    disrupted_while_live = []

    def finished() -> dict[str, object] | None:
        if karpenter.disrupting(s.cluster, anchor):
            disrupted_while_live.append(time.monotonic())
        final = tr.get_run(s.custom, s.ns, run["metadata"]["name"])
        return final if tr.outcome(final) else None

    final = s.cluster.wait_for(finished, timeout=240, what="the run finished")
    assert tr.outcome(final) == ("True", "Succeeded")
    assert not disrupted_while_live, "the autoscaler took the anchor's node while the run lived"
    pods = s.recorder.pods(run["metadata"]["uid"])
    assert {p.node for p in pods} == {anchor}
    spread = capacity.layer_spread(pods, tr.FAN_OUT)
    waited = {p.task: round(p.bound_at - p.first_seen, 1) for p in pods
              if p.bound_at and p.bound_at - p.first_seen > TOGETHER}
    print(f"node made and anchored; builds bound within {spread:.1f} s; waited: {waited}")
    assert spread < TOGETHER and not waited, capacity.timeline(
        s.recorder.of_run(run["metadata"]["uid"]))
    s.cluster.wait_for(lambda: not karpenter.made_nodes(s.cluster, node_pool), timeout=150,
                       what=f"the autoscaler removes {anchor} once the run has ended")


def test_with_tekton_s_assistant_the_same_run_gets_no_node_and_its_builds_wait_for_good(
    cluster: ClusterHandle, unlabelled: Runs, grown: tuple[Pool, str], coscheduler: Coscheduler
) -> None:
    """The assistant's pod (50m) takes the small node; builds of 2 CPUs pinned beside it fit
    there never, and Karpenter finds the pod affinity unsatisfiable on any node it could make.
    The run would wait until its timeout; the scenario cancels it after STUCK seconds."""
    s, (pool, node_pool) = unlabelled, grown
    tekton_cluster.configure(cluster, {"coschedule": "workspaces"})
    try:
        run = s.start(peak_run("assistant", pool))
        uid = run["metadata"]["uid"]
        s.recorder.wait_pods(uid, tr.FAN_OUT, bound=False)
        time.sleep(STUCK)
        bound = sorted(p.task for p in s.recorder.pods(uid) if p.task in tr.FAN_OUT and p.node)
        made = karpenter.made_nodes(cluster, node_pool)
        s.cancel(run)
    finally:
        tekton_cluster.configure(cluster, {"coschedule": "disabled"})
    where = {p.task: p.node for p in s.recorder.pods(uid)}
    print(f"assistant: after {STUCK} s builds bound {bound}, nodes made {made}; pods: {where}")
    assert where[tr.FETCH] == pool.small
    assert bound == [] and made == []
    cluster.wait_for(
        lambda: coscheduler.metric("tekton_coscheduler_tekton_affinity_assistant_enabled") == 0,
        timeout=60, what="the operator sees Tekton's assistant off again")


def test_with_tekton_s_assistant_a_node_made_for_its_pod_is_too_small_for_the_fan_out(
    cluster: ClusterHandle, unlabelled: Runs, grown: tuple[Pool, str], coscheduler: Coscheduler
) -> None:
    """The small node cordoned: the assistant's pod (50m) is what Karpenter sees first, and it
    makes the cheapest node that fits it (4 CPUs). The builds are then pinned to that node,
    where only one fits at a time, and no new node can help them: they take turns. The node
    goes once the run has ended and Tekton has removed its assistant."""
    s, (pool, node_pool) = unlabelled, grown
    faults.cordon(cluster, pool.small)
    tekton_cluster.configure(cluster, {"coschedule": "workspaces"})
    try:
        run = s.start(peak_run("assistant-made", pool, quiet=False))
        assert tr.outcome(s.done(run, timeout=300)) == ("True", "Succeeded")
    finally:
        tekton_cluster.configure(cluster, {"coschedule": "disabled"})
    pods = s.recorder.pods(run["metadata"]["uid"])
    made = karpenter.made_nodes(cluster, node_pool)
    spread = capacity.layer_spread(pods, tr.FAN_OUT)
    print(f"assistant on a made node: nodes {made}, builds bound within {spread:.1f} s")
    assert len(made) == 1 and {p.node for p in pods} == set(made)
    assert spread > TOGETHER
    cluster.wait_for(lambda: not karpenter.made_nodes(cluster, node_pool), timeout=150,
                     what="the autoscaler removes the assistant's node once the run has ended")
    cluster.wait_for(
        lambda: coscheduler.metric("tekton_coscheduler_tekton_affinity_assistant_enabled") == 0,
        timeout=60, what="the operator sees Tekton's assistant off again")
