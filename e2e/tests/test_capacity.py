"""Capacity-aware anchoring with the real scheduler and Tekton: a run is anchored where its
widest layer fits, that layer starts together, and a peak that fits nowhere is said.

On a pool of two kwok nodes (small: 2 CPUs, big: 8 CPUs, one busy CPU on big so that a pause
container would rather take small), a run fans out three builds of 2 CPUs each.
"""

from __future__ import annotations

import pytest

from e2e.harness import capacity, faults, resolver
from e2e.harness import tekton_runs as tr
from e2e.harness.cluster.tekton import SHIPPED_MODE
from e2e.harness.coscheduler import Coscheduler
from e2e.harness.faults import Pool
from e2e.harness.runs import Runs

pytestmark = [pytest.mark.e2e]

# And beside Tekton's affinity assistant as Tekton ships it (issue 48): its placeholder follows
# the balloon, which follows the scout.
@pytest.mark.parametrize("assistant_mode", [None, SHIPPED_MODE], indirect=True,
                         ids=["assistant off", "assistant as shipped"])
def test_a_run_is_anchored_where_its_widest_layer_fits_and_that_layer_starts_together(
    runs: Runs, pool: Pool, coscheduler: Coscheduler, assistant_mode: str | None
) -> None:
    """fetch (1 CPU) takes the room of the scout (6 CPUs), so a keeper holds the 5 the builds
    will add while it runs; it goes as fetch ends, and the builds find that room free."""
    s = runs
    made = reservations(coscheduler)
    faults.volumes_across_the_pool(s.cluster, pool)
    capacity.filler(s.cluster, s.ns, pool.big, "1")
    run = s.start(capacity.fan_out(tr.unique("peak"), pool, build_cpu="2", fetch_cpu="1"))
    assert s.anchor(run) == pool.big
    assert tr.outcome(s.done(run)) == ("True", "Succeeded")
    pods = s.recorder.pods(run["metadata"]["uid"])
    assert {p.node for p in pods} == {pool.big}
    spread = capacity.layer_spread(pods, tr.FAN_OUT)
    print(f"the three builds were bound within {spread:.1f} s")
    assert spread < 5, capacity.timeline(s.recorder.of_run(run["metadata"]["uid"]))
    now = reservations(coscheduler)
    assert now["scout"] > made["scout"] and now["keep"] > made["keep"], (made, now)


def reservations(coscheduler: Coscheduler) -> dict[str, float]:
    return {a: coscheduler.metric("tekton_coscheduler_reservations_total", action=a)
            for a in ("scout", "keep")}


def test_without_capacity_aware_anchoring_the_fan_out_waits_on_a_node_too_small(
    runs: Runs, pool: Pool
) -> None:
    """The same run where the namespace's policy turns it off: what the reservation prevents."""
    s = runs
    s.policy("capacity", {"capacity": {"anchor": False}}, wait=True)
    faults.volumes_across_the_pool(s.cluster, pool)
    capacity.filler(s.cluster, s.ns, pool.big, "1")
    run = s.start(capacity.fan_out(tr.unique("nopeak"), pool, build_cpu="2"))
    assert s.anchor(run) == pool.small
    said = s.said(run, "PodCannotFollowAnchor", timeout=90)
    assert "Insufficient cpu" in said.message
    s.cancel(run)


def test_a_peak_that_fits_no_node_is_said_and_anchored_at_once_where_most_of_it_fits(
    runs: Runs, pool: Pool
) -> None:
    """Three builds of 4 CPUs: 12 fit on no node of the pool, ever, and no autoscaler grows
    it: the scout asks at once for what the big node holds beside the balloon, and the builds
    take turns there."""
    s = runs
    faults.volumes_across_the_pool(s.cluster, pool)
    run = s.start(capacity.fan_out(tr.unique("toobig"), pool, build_cpu="4", build_seconds="3"))
    said = s.said(run, "PeakLargerThanNodes", timeout=30)
    assert "cpu 12" in said.message and "cpu 7990m" in said.message and said.type == "Normal"
    assert s.anchor(run) == pool.big
    assert tr.outcome(s.done(run)) == ("True", "Succeeded")
    assert {p.node for p in s.recorder.pods(run["metadata"]["uid"])} == {pool.big}


def test_a_run_behind_resolvers_is_anchored_where_the_peak_they_fetched_fits(
    runs: Runs, pool: Pool
) -> None:
    """The same run with its pipeline and every task behind a resolver (as catalogs are
    used): Tekton resolves them one request a second before it makes any TaskRun, and the
    anchor waits for that, so the peak it fetched, not a guess, chooses the node."""
    s = runs
    faults.volumes_across_the_pool(s.cluster, pool)
    capacity.filler(s.cluster, s.ns, pool.big, "1")
    with resolver.Resolver(s.cluster, s.ns, delay=0.3) as fetched:
        body = fetched.remote(capacity.fan_out(tr.unique("remote"), pool, build_cpu="2"))
        run = s.start(body)
        assert s.anchor(run, timeout=90) == pool.big, fetched.errors
        assert tr.outcome(s.done(run)) == ("True", "Succeeded")
    assert len(fetched.answered) >= 4  # the pipeline, fetch, the builds' Task, publish
    pods = s.recorder.pods(run["metadata"]["uid"])
    assert {p.node for p in pods} == {pool.big}
    assert capacity.layer_spread(pods, tr.FAN_OUT) < 5, capacity.timeline(
        s.recorder.of_run(run["metadata"]["uid"]))
