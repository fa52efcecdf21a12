"""Warm anchors with the real scheduler and Tekton: a run is anchored where its images already
are, and a pipeline's runs where its last run was (its caches warm), as preferences that
capacity always overrides.

On a pool of three kwok nodes, one of which reports the run's step image in `status.images`:
the scheduler alone, placing a pause container, would spread the runs over the pool.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from e2e.harness import capacity, warm
from e2e.harness import tekton_runs as tr
from e2e.harness.cluster import ClusterHandle
from e2e.harness.coscheduler import Coscheduler
from e2e.harness.runs import Runs
from e2e.harness.warm import MB, WarmPool

pytestmark = [pytest.mark.e2e]
RUNS = 4


@pytest.fixture
def pool(cluster: ClusterHandle, tekton: ClusterHandle) -> Iterator[WarmPool]:
    made = warm.make_pool(cluster)
    yield made
    warm.remove_pool(cluster, made)


def test_runs_are_anchored_where_their_images_already_are(
    runs: Runs, pool: WarmPool, coscheduler: Coscheduler
) -> None:
    s = runs
    builder = warm.image("maven")
    held_by = pool.nodes[1]
    warm.hold(s.cluster, held_by, {builder: 900 * MB}, coscheduler)
    made = [s.start(warm.run(tr.unique("img"), builder, pool)) for _ in range(RUNS)]
    anchors = [s.anchor(run) for run in made]
    print(f"anchors: {anchors}, the image on {held_by}")
    assert anchors == [held_by] * RUNS
    said = s.said(made[0], "Anchored")
    assert said.message == (f"the run's pods go to node {held_by}: 900.0 MB of the run's "
                            "900.0 MB of images already there"), said.message
    for run in made:
        assert tr.outcome(s.done(run)) == ("True", "Succeeded")
        assert {p.node for p in s.recorder.pods(run["metadata"]["uid"])} == {held_by}


def test_a_new_leader_s_first_decision_knows_where_the_images_are(
    runs: Runs, pool: WarmPool, coscheduler: Coscheduler
) -> None:
    """The run is made while no replica leads (its first pod waits, tied and gated: policy
    mode). The replica that comes back decides it in its first resync round, before kopf's
    node watch has listed a node: it must know the nodes already (the code before anchored it
    where the scheduler put a pause container)."""
    if coscheduler.env()["COSCHEDULER_ADMISSION_MODE"] != "policy":
        pytest.skip("with the webhook down Tekton fails the run's first pod (admission outage)")
    s = runs
    builder = warm.image("node")
    held_by = pool.nodes[2]
    warm.hold(s.cluster, held_by, {builder: 800 * MB}, coscheduler)
    coscheduler.kill()
    try:
        run = s.start(warm.run(tr.unique("first"), builder, pool))
        s.recorder.wait_pods(run["metadata"]["uid"], [tr.FETCH], bound=False)
    finally:
        coscheduler.start()
    assert s.anchor(run) == held_by
    assert tr.outcome(s.done(run)) == ("True", "Succeeded")


def test_capacity_wins_over_images_and_a_policy_turns_the_preference_off(
    runs: Runs, pool: WarmPool, coscheduler: Coscheduler
) -> None:
    """The node with the image has no room for the run's peak: the run goes where it fits,
    and the Event says where its images were. Then the namespace's policy turns images off:
    its balloon prefers no node."""
    s = runs
    builder = warm.image("golang")
    full, free = pool.nodes[0], pool.nodes[2]
    warm.hold(s.cluster, full, {builder: 700 * MB}, coscheduler)
    capacity.filler(s.cluster, s.ns, full, "3500m")
    capacity.filler(s.cluster, s.ns, pool.nodes[1], "3500m")
    body = warm.run(tr.unique("full"), builder, pool)
    for task in body["spec"]["pipelineSpec"]["tasks"]:
        task["taskSpec"]["steps"][0]["computeResources"] = {"requests": {"cpu": "1"}}
    run = s.start(body)
    assert s.anchor(run) == free
    said = s.said(run, "Anchored").message
    assert f"none of the run's 700.0 MB of images reported there (most on {full}" in said, said
    assert tr.outcome(s.done(run)) == ("True", "Succeeded")

    s.policy("cold", {"warm": {"images": False}}, wait=True)
    off = s.start(warm.run(tr.unique("off"), builder, pool))
    balloon = s.wait_balloon(off)
    affinity = balloon.spec.template.spec.affinity
    node_affinity = affinity.node_affinity if affinity else None
    assert node_affinity is None or not node_affinity.preferred_during_scheduling_ignored_during_execution


def test_a_pipeline_s_runs_are_anchored_where_its_last_run_was_and_that_is_remembered(
    runs: Runs, pool: WarmPool, coscheduler: Coscheduler, cluster: ClusterHandle
) -> None:
    """A team's Pipeline whose tasks keep a cache on the node: with the policy's pipelineCache,
    each run goes where the last one ran (a hit), which the policy's status remembers, across
    a restart of the operator too. A last node without room is given up (a miss)."""
    s = runs
    s.policy("warm", {"warm": {"pipelineCache": True}}, wait=True)
    warm.pipeline(s.custom, s.ns, "build", "busybox")
    first = s.start(warm.run_of("build", pool))
    node = s.anchor(first)
    assert tr.outcome(s.done(first)) == ("True", "Succeeded")
    if warm.weighs(coscheduler):  # code before warm anchors remembers nothing: see weighs
        cluster.wait_for(lambda: warm.warm_nodes(s.custom, s.ns, "warm").get("build", {})
                         .get("node") == node, timeout=30, what="the pipeline's node remembered")
    anchors = []
    for i in range(RUNS - 1):
        if i == 1:
            coscheduler.stop()  # a new leader reads where the pipeline last ran back
            coscheduler.start()
        run = s.start(warm.run_of("build", pool))
        anchors.append(s.anchor(run, timeout=90))
        assert tr.outcome(s.done(run)) == ("True", "Succeeded")
    print(f"first run on {node}, then {anchors}")
    assert anchors == [node] * (RUNS - 1)
    assert "its pipeline's first run here" in s.said(first, "Anchored").message
    said = s.said(run, "Anchored").message
    assert "its pipeline's caches are warm there" in said, said
    # Both runs since the restart, counted by the replica that reads the node back.
    assert coscheduler.metric("tekton_coscheduler_warm_cache_runs_total", outcome="hit") >= 2

    capacity.filler(s.cluster, s.ns, node, "3900m")
    body = warm.run_of("build", pool)
    body["spec"]["taskRunSpecs"] = [{"pipelineTaskName": t, "computeResources": {
        "requests": {"cpu": "500m"}}} for t in (tr.FETCH, "build")]
    moved = s.start(body)
    elsewhere = s.anchor(moved)
    assert elsewhere != node
    assert f"its pipeline's last run was on {node}, which could not take it" in s.said(
        moved, "Anchored").message
    assert tr.outcome(s.done(moved)) == ("True", "Succeeded")
    cluster.wait_for(lambda: warm.warm_nodes(s.custom, s.ns, "warm")["build"]["node"] ==
                     elsewhere, timeout=30, what="the pipeline's new node remembered")
