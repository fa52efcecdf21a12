"""Anchors in a real cluster: nodes that go away, pods that cannot follow.

Each scenario gets a pool of two kwok nodes of its own in one zone: `small` (2 CPUs) and `big`
(8 CPUs); every pod of its runs, balloon included, is held to the pool by the run's pod
template. The anchor is made to land on `small` (big cordoned meanwhile), and the first task
asks for more CPU than `small` has: it cannot follow its anchor, which is said (with the
scheduler's words) within 30 s. Then `small` goes away in one of the ways a real node does;
the anchor moves to `big` (the run's claim is a zonal volume, so it can follow), the waiting
pod follows it, and the run succeeds. Where the anchor must not move (a task still runs there,
or its volume lives on that node only) the run is told why and what frees it. Times from the
node event to what we say are measured and printed.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from e2e.harness import faults
from e2e.harness import tekton_runs as tr
from e2e.harness.faults import Pool
from e2e.harness.runs import Runs

pytestmark = [pytest.mark.e2e, pytest.mark.faults]


def anchored_on_small(s: Runs, pool: Pool, run_body: dict[str, Any]) -> dict[str, Any]:
    """Anchored where its first task cannot fit, on purpose: a pod that waits beside its anchor.
    Capacity-aware anchoring would not let that happen (e2e/tests/test_capacity.py), so these
    scenarios of nodes going away turn it off."""
    s.policy("anchor-alone", {"capacity": {"anchor": False}}, wait=True)
    faults.cordon(s.cluster, pool.big)
    try:
        run = s.start(run_body)
        assert s.anchor(run) == pool.small
    finally:
        faults.cordon(s.cluster, pool.big, on=False)
    return run


@pytest.mark.matrix
@pytest.mark.parametrize("kind", ["cordon", "taint", "lost", "deleted"])
def test_the_anchor_moves_off_a_node_that_goes_away_and_the_waiting_pod_follows(
    runs: Runs, pool: Pool, kind: str
) -> None:
    s = runs
    faults.volumes_across_the_pool(s.cluster, pool)
    run = anchored_on_small(s, pool, faults.pool_pipeline(tr.unique(kind), pool, first_cpu="4"))
    waited = s.said(run, "PodCannotFollowAnchor")
    assert "Insufficient cpu" in waited.message and pool.small in waited.message
    started = time.monotonic()
    faults.node_event(s.cluster, kind, pool.small)
    moved = s.said(run, "AnchorMoved", timeout=120 if kind == "lost" else 45)
    took = time.monotonic() - started
    print(f"\n{kind}: AnchorMoved {took:.1f}s after the node event: {moved.message}")
    assert f"from node {pool.small}" in moved.message and f"to node {pool.big}" in moved.message
    assert tr.outcome(s.done(run)) == ("True", "Succeeded")
    pods = s.recorder.pods(run["metadata"]["uid"])
    assert {p.task: p.node for p in pods} == {tr.FETCH: pool.big, "build": pool.big}
    assert s.events("PodMisplaced") == []


def test_a_drain_waits_for_the_anchor_to_move_and_no_longer(runs: Runs, pool: Pool) -> None:
    """kubectl drain through the Eviction API: the balloon's budget refuses its eviction, the
    operator sees the cordon and moves the anchor itself (no pod of the run runs there), and
    the drain completes."""
    s = runs
    faults.volumes_across_the_pool(s.cluster, pool)
    run = anchored_on_small(s, pool, faults.pool_pipeline(tr.unique("drain"), pool, first_cpu="4"))
    s.said(run, "PodCannotFollowAnchor")
    [balloon] = s.recorder.balloons(run["metadata"]["uid"])
    assert faults.evict(s.cluster, s.ns, balloon.name) == 429  # the budget: not while it anchors
    seconds, refused = faults.drain(s.cluster, pool.small)
    print(f"\ndrain: done in {seconds:.1f}s, {refused} eviction(s) refused by the budget")
    assert seconds < 30
    s.said(run, "AnchorMoved")
    assert tr.outcome(s.done(run)) == ("True", "Succeeded")


def test_a_running_task_keeps_the_anchor_until_it_ends(runs: Runs, pool: Pool) -> None:
    """Cordoned while fetch runs beside the anchor (held running until the test lets it go):
    the anchor stays (a running task is never separated from its volume) and the run is told
    so; once fetch ends, it moves and build follows."""
    s = runs
    faults.volumes_across_the_pool(s.cluster, pool)
    run = anchored_on_small(
        s, pool, faults.pool_pipeline(tr.unique("busy"), pool, first_cpu="100m", first_held=True))
    s.recorder.wait_pods(run["metadata"]["uid"], [tr.FETCH])
    started = time.monotonic()
    faults.cordon(s.cluster, pool.small)
    stays = s.said(run, "AnchorNodeUnavailable")
    print(f"\nrunning task: AnchorNodeUnavailable {time.monotonic() - started:.1f}s after the cordon")
    assert "cordoned" in stays.message and "fetch" in stays.message and "those pods end" in stays.message
    assert s.events("AnchorMoved") == []
    s.release([run])
    s.said(run, "AnchorMoved", timeout=60)
    assert tr.outcome(s.done(run)) == ("True", "Succeeded")
    pods = {p.task: p.node for p in s.recorder.pods(run["metadata"]["uid"])}
    assert pods == {tr.FETCH: pool.small, "build": pool.big}


def test_a_claim_on_the_nodes_own_disk_keeps_the_anchor_and_says_what_frees_it(
    runs: Runs, pool: Pool
) -> None:
    s = runs
    faults.add_pv(s.cluster, faults.HOSTNAME, pool.small)
    run = anchored_on_small(s, pool, faults.pool_pipeline(tr.unique("local"), pool, first_cpu="100m",
                                              first_seconds="1"))
    s.recorder.wait_pods(run["metadata"]["uid"], [tr.FETCH])
    faults.taint(s.cluster, pool.small, "e2e.tekton-coscheduler.dev/maintenance")
    stays = s.said(run, "AnchorNodeUnavailable")
    assert "live on volumes of that node only" in stays.message
    assert "the taint is removed" in stays.message
    time.sleep(5)
    assert s.events("AnchorMoved") == []
    faults.untaint(s.cluster, pool.small, "e2e.tekton-coscheduler.dev/maintenance")
    assert tr.outcome(s.done(run)) == ("True", "Succeeded")
    assert {p.node for p in s.recorder.pods(run["metadata"]["uid"])} == {pool.small}
