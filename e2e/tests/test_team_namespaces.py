"""Team namespaces as platform teams run them (issue 22): quotas, runs larger than any node,
switching a namespace off while runs are in flight, and bursts, with the real Tekton
controller, scheduler and quota admission."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from controller.core.basics import names
from controller.core.basics.times import parse_time
from e2e.harness import capacity, faults
from e2e.harness import tekton_runs as tr
from e2e.harness.cluster import ClusterHandle, present
from e2e.harness.coscheduler import Coscheduler
from e2e.harness.runs import Runs, assert_co_located, assert_untouched
from e2e.harness.tekton_runs import FAN_OUT, FETCH, PUBLISH, PodRecorder

pytestmark = pytest.mark.e2e

ALL_TASKS = [FETCH, *FAN_OUT, PUBLISH]
# A workspace no volume ties to a node: only the term keeps the run's pods together.
EMPTY_DIR: dict[str, Any] = {"emptyDir": {}}
WEBHOOK_LABEL = "e2e.tekton-coscheduler.dev/switch-webhook"


def switched_off_mid_run(s: Runs, label: str) -> None:
    """A run whose fetch ran beside its balloon when the namespace's label is removed: its
    builds and publish, made after the switch, keep the term and go to the anchor; a run made
    after the switch gets nothing."""
    run = s.start(tr.fan_out_fan_in(tr.unique("kept"), EMPTY_DIR, task_annotations={
        FETCH: {tr.RUN_SECONDS: "4"}}))
    anchor = s.anchor(run)
    s.cluster.wait_for(lambda: [p for p in s.recorder.pods(run["metadata"]["uid"])
                                if p.task == FETCH and p.node == anchor],
                       timeout=60, what="fetch bound beside the balloon")
    s.core.patch_namespace(s.ns, {"metadata": {"labels": {label: None}}})
    later = s.start(tr.fan_out_fan_in(tr.unique("after"), EMPTY_DIR))
    assert tr.outcome(s.done(run)) == ("True", "Succeeded")
    assert_co_located(s, run, anchor, ALL_TASKS)
    assert tr.outcome(s.done(later)) == ("True", "Succeeded")
    assert_untouched(s, later, ALL_TASKS)
    s.wait_no_balloon(run)


def test_a_run_anchored_before_its_namespace_is_switched_off_stays_anchored_to_its_end(
    runs: Runs,
) -> None:
    """The session's admission mode (policy where the API server serves it)."""
    switched_off_mid_run(runs, names.NAMESPACE_LABEL)


@pytest.fixture
def webhook_runs(
    cluster: ClusterHandle, tekton: ClusterHandle, coscheduler: Coscheduler, nodes: list[str]
) -> Iterator[Runs]:
    """A namespace served by an installation in webhook mode (its own opt-in label, Lease and
    webhook configuration, as the chart makes it), whatever the session's mode."""
    replica = Coscheduler(cluster, name="switch-webhook", kubeconfig=coscheduler.kubeconfig,
                          env_overrides={**coscheduler.env_overrides,
                                         "COSCHEDULER_ADMISSION_MODE": "webhook",
                                         "COSCHEDULER_NAMESPACE_LABEL": WEBHOOK_LABEL,
                                         "COSCHEDULER_LEASE_NAME": "tekton-coscheduler-switch"})
    replica.start()
    config = replica.register_webhook(name="tekton-coscheduler-switch", label=WEBHOOK_LABEL)
    cluster.wait_for(replica.leads, timeout=60, what="the webhook installation leads")
    ns = cluster.create_namespace(f"sw-{uuid.uuid4().hex[:6]}", labels={WEBHOOK_LABEL: "true"})
    try:
        with PodRecorder(cluster, ns) as recorder:
            scenario = Runs(cluster, ns, recorder)
            yield scenario
            scenario.close()
    finally:
        replica.unregister_webhook(config)
        replica.stop()


def test_a_run_anchored_before_its_namespace_is_switched_off_stays_anchored_in_webhook_mode(
    webhook_runs: Runs,
) -> None:
    switched_off_mid_run(webhook_runs, WEBHOOK_LABEL)


BURST = 30


def test_a_burst_of_runs_that_all_succeed_together_carries_no_warning(runs: Runs) -> None:
    """30 runs of one namespace made at once: each balloon waits for the claim Tekton makes
    for its run, the StatefulSet controller and the scheduler are busy, every wait resolves
    itself, and nothing asks a person to act. At the harness's graces (5 s for a balloon):
    the chart's are longer, which only holds back more."""
    s = runs
    s.local_pvs_everywhere(per_node=BURST // 4 + 1)
    made = [s.start(tr.fan_out_fan_in(tr.unique(f"burst{i}"))) for i in range(BURST)]
    for run in made:
        assert tr.outcome(s.done(run, timeout=300)) == ("True", "Succeeded")
    for run in made:
        pods = s.recorder.pods(run["metadata"]["uid"])
        assert len({p.node for p in pods}) == 1 and len(pods) == len(ALL_TASKS)
    assert s.warnings() == {}


def team_limits(s: Runs) -> None:
    """A team namespace's LimitRange (100m per container by default) and a quota that holds
    the run's widest layer (three 1-CPU builds) and a little."""
    s.core.create_namespaced_limit_range(s.ns, {"metadata": {"name": "defaults"}, "spec": {  # type: ignore[arg-type]
        "limits": [{"type": "Container", "defaultRequest": {"cpu": "100m"}}]}})
    s.core.create_namespaced_resource_quota(s.ns, {"metadata": {"name": "team"}, "spec": {  # type: ignore[arg-type]
        "hard": {"requests.cpu": "3500m"}}})
    s.cluster.wait_for(lambda: present(s.core.read_namespaced_resource_quota("team", s.ns).status).used,
                       timeout=30, what="quota counted")


def seconds(run: dict[str, Any]) -> float:
    status = run["status"]
    began, ended = (parse_time(status[k]) for k in ("startTime", "completionTime"))
    assert began is not None and ended is not None
    return (ended - began).total_seconds()


def test_a_run_in_a_quota_d_namespace_is_never_refused_a_pod_for_our_reservation(
    runs: Runs, unlabelled: Runs
) -> None:
    """The same run with and without coscheduling, side by side in two namespaces alike: the
    reservation takes only what the quota leaves beyond the run's own pods (said, Normal), no
    pod is refused (Tekton would retry it a minute later), and it ends as soon."""
    for s in (runs, unlabelled):
        team_limits(s)
        s.local_pvs_everywhere(per_node=1)
    body = capacity.fan_out(tr.unique("quota"), None, build_cpu="1", fetch_cpu="1",
                            publish_cpu="1", build_seconds="4")
    ours, none = runs.start(body), unlabelled.start(body)
    ended = {"ours": runs.done(ours), "none": unlabelled.done(none)}
    assert {k: tr.outcome(r) for k, r in ended.items()} == dict.fromkeys(ended, ("True", "Succeeded"))
    said = runs.said(ours, "RoomLimited", timeout=5)
    assert said.type == "Normal" and "ResourceQuota team" in said.message, said.message
    refused = [e.message for s in (runs, unlabelled) for e in s.core.list_namespaced_event(s.ns).items
               if "exceeded quota" in (e.message or "")]
    assert refused == []
    took = {k: seconds(r) for k, r in ended.items()}
    print(f"run time with coscheduling {took['ours']:.0f} s, without {took['none']:.0f} s")
    assert took["ours"] <= took["none"] + 10
    assert len({p.node for p in runs.recorder.pods(ours["metadata"]["uid"])}) == 1


def test_a_limit_range_smaller_than_the_peak_caps_the_reservation_and_hangs_nothing(
    runs: Runs,
) -> None:
    """A LimitRange whose per-pod maximum (1 CPU) is below the run's peak (3 CPUs): the
    reservation asks for what it allows, is made, and the run ends."""
    s = runs
    s.core.create_namespaced_limit_range(s.ns, {"metadata": {"name": "max"}, "spec": {  # type: ignore[arg-type]
        "limits": [{"type": "Pod", "max": {"cpu": "1"}},
                   {"type": "Container", "max": {"cpu": "1"}, "default": {"cpu": "1"},
                    "defaultRequest": {"cpu": "100m"}}]}})
    s.local_pvs_everywhere(per_node=1)
    run = s.start(capacity.fan_out(tr.unique("maxed"), None, build_cpu="1", build_seconds="2"))
    said = s.said(run, "RoomLimited", timeout=30)
    assert "LimitRange max" in said.message and said.type == "Normal", said.message
    assert tr.outcome(s.done(run, timeout=90)) == ("True", "Succeeded")
    assert s.warnings() == {}


def test_a_run_larger_than_any_node_it_may_use_is_anchored_at_once_and_takes_turns(
    runs: Runs, cluster: ClusterHandle
) -> None:
    """Eight 1-CPU builds, held by their pod template to a pool of 2-CPU nodes: 8 CPUs fit on
    none of them, ever, and no autoscaler can add one. The run is anchored at once where the
    most of its peak fits, its first task (no CPU of its own) starts within seconds, the builds
    take turns there, and every Event says only what is true."""
    s = runs
    pool = faults.make_pool(cluster, big_cpu="2")
    try:
        faults.volumes_across_the_pool(cluster, pool)
        builds = [f"build-{i}" for i in range(8)]
        body = capacity.fan_out(tr.unique("wide"), pool, build_cpu="1", builds=builds,
                                build_seconds="1")
        made = time.time()
        run = s.start(body)
        anchor = s.anchor(run)
        uid = run["metadata"]["uid"]
        fetch = s.cluster.wait_for(lambda: next((p for p in s.recorder.pods(uid)
                                                  if p.task == FETCH and p.bound_at), None),
                                   timeout=60, what="fetch bound")
        assert tr.outcome(s.done(run, timeout=180)) == ("True", "Succeeded")
        print(f"fetch bound {present(fetch.bound_at) - made:.1f} s after the run was made")
        assert (fetch.bound_at or 0) - made < 5
        assert {p.node for p in s.recorder.pods(uid)} == {anchor}
        said = s.said(run, "PeakLargerThanNodes", timeout=5)
        assert said.type == "Normal" and "cpu 8" in said.message and "cpu 1990m" in said.message
        assert s.events("PeakDoesNotFit") == [] and s.warnings() == {}
    finally:
        faults.remove_pool(cluster, pool)
