"""Chaos under runs (the short version of `make bench-chaos`): leaders killed, the API server and
the controller-manager restarted, an anchor node cordoned; no run suffers, two leaders never act
at once. And the log reading that tells the latter, on lines made by hand."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from controller.core.basics import names
from e2e.harness import chaos, faults, leaders
from e2e.harness import tekton_runs as tr
from e2e.harness.cluster import ClusterHandle, LocalCluster
from e2e.harness.coscheduler import Coscheduler
from e2e.harness.fleet import Fleet

RUNS = 12
SECONDS = 70.0


def line(at: float, event: str, who: str | None) -> leaders.Line:
    return leaders.Line(at, event, who)


def test_leaders_that_hand_over_do_not_overlap() -> None:
    lines = [
        line(0, "leading", "a"), line(1, "api write", "a"), line(4, "api write", "a"),
        line(9, "leading", "b"), line(10, "api write", "b"),
    ]
    assert leaders.overlapping_leaders(lines) == []
    assert leaders.unheld_writes(lines) == 0


def test_a_write_of_the_old_leader_after_the_new_one_took_over_is_an_overlap() -> None:
    lines = [
        line(0, "leading", "a"), line(1, "api write", "a"),
        line(9, "leading", "b"), line(9.5, "api write", "a"), line(10, "api write", "b"),
    ]
    assert leaders.overlapping_leaders(lines) == [("a", "b")]


def test_a_write_without_a_holder_is_counted() -> None:
    assert leaders.unheld_writes([line(1, "api write", None), line(2, "api write", "a")]) == 1


def test_the_gates_handed_back_without_the_lease_by_design_are_not_counted(tmp_path: Path) -> None:
    """Read from a log as the replica writes it: a gate patch right after `leadership lost`."""
    log = tmp_path / "standby-0-0.log"
    log.write_text("\n".join(json.dumps(e) for e in (
        {"event": "leadership lost", "timestamp": "2026-11-28T01:43:15.044791Z"},
        {"verb": "patch", "resource": "pods", "holder": None, "unfenced": True,
         "event": "api write", "timestamp": "2026-11-28T01:43:15.046491Z"},
        {"verb": "patch", "resource": "pods", "holder": None,
         "event": "api write", "timestamp": "2026-11-28T01:43:16.0Z"})))
    assert leaders.unheld_writes(leaders.read(log)) == 1


def test_leaderless_time_runs_from_a_kill_to_the_next_leading_line() -> None:
    killed = ([line(0, "leading", "a"), line(3, "api write", "a")], 5.0)
    lost = ([line(14, "leading", "b"), line(20, "leadership lost", None)], None)
    last = ([line(22, "waiting for leadership", None), line(23, "leading", "c")], None)
    spans = leaders.leading_spans([killed, lost, last])
    assert spans == [(0, 5.0), (14, 20), (23, 23)]
    assert leaders.longest_gap(spans, 0, 30) == 9  # 5 -> 14
    # The API server's own restart is not counted against the operator.
    assert leaders.longest_gap(spans, 0, 23, excused=[(5, 12)]) == 3


def test_log_lines_are_read_from_json_and_the_rest_skipped(tmp_path: Path) -> None:
    log = tmp_path / "replica-0.log"
    log.write_text("\n".join([
        "$ tekton-coscheduler run",
        json.dumps({"event": "leading", "identity": "r_1", "timestamp": "2026-11-23T10:00:00Z"}),
        json.dumps({"event": "api write", "holder": "r_1", "verb": "create",
                    "timestamp": "2026-11-23T10:00:01.500000Z"}),
        json.dumps({"event": "balloon created", "timestamp": "2026-11-23T10:00:02Z"}),
        "{not json",
    ]))
    lines = leaders.read(log)
    assert [(x.event, x.who) for x in lines] == [("leading", "r_1"), ("api write", "r_1")]
    assert lines[1].at - lines[0].at == 1.5


SERVER = "https://127.0.0.1:44995"
# Tekton v1.15.0's words for a TaskRun it failed while the API server restarted (bench-chaos).
TEKTON_OUTAGE = ('chaos-84-publish: failed to create task run pod "chaos-84-publish": translating '
                 'TaskSpec to Pod: Get "https://127.0.0.1:44995/api/v1/namespaces/chaos/'
                 'serviceaccounts/default": dial tcp 127.0.0.1:44995: connect: connection refused.'
                 ' Maybe invalid TaskSpec')


def test_a_run_tekton_failed_for_want_of_the_api_server_is_told_apart() -> None:
    assert chaos.failed_by_outage([TEKTON_OUTAGE], SERVER)
    # Any other failure, or another address refusing (a webhook of ours), counts against us.
    assert not chaos.failed_by_outage([TEKTON_OUTAGE, "build-a: step exited 1"], SERVER)
    assert not chaos.failed_by_outage([TEKTON_OUTAGE.replace("44995", "8443")], SERVER)
    assert not chaos.failed_by_outage([], SERVER)


@pytest.mark.e2e
@pytest.mark.faults
def test_killed_leaders_and_restarted_control_plane_leave_every_run_whole(
    cluster: ClusterHandle, tekton: ClusterHandle, coscheduler: Coscheduler, nodes: list[str]
) -> None:
    if not isinstance(cluster, LocalCluster):
        pytest.skip("restarts the control plane's own processes")
    lease = float(coscheduler.env()["COSCHEDULER_LEASE_DURATION"])
    ns = cluster.create_namespace(f"chaos-{uuid.uuid4().hex[:6]}",
                                  labels={names.NAMESPACE_LABEL: "true"})
    # Zonal volumes: an anchor on the cordoned node may move within its zone.
    volumes = [faults.add_pv(cluster, faults.ZONE, ("zone-a", "zone-b")[i % 2])
               for i in range(RUNS)]
    bodies = [tr.fan_out_fan_in(tr.unique("chaos"), annotations={tr.RUN_SECONDS: "3"})
              for _ in range(RUNS)]
    fleet = Fleet(cluster, coscheduler, standbys=1)
    fleet.start()
    try:
        said, done, _ = chaos.drive(cluster, fleet, ns, bodies,
                                    chaos.Plan.over(SECONDS, leader_every=20), timeout=240)
    finally:
        fleet.stop_standbys()
        # Runs may have taken other free volumes: those of ours left must not serve later tests.
        faults.remove_unused_pvs(cluster, volumes)
        cluster.wait_for(coscheduler.leads, timeout=60, what="the session's replica leads again")
    print("\n".join(f"{t - done.started:6.1f} s  {what}" for t, what in done.events))
    print(said)
    restarted = {p.name: p.restarts for p in cluster.processes if p.restarts}
    if restarted:  # as the kubelet restarts a static pod (harness/cluster/processes.py)
        print(f"started again after exiting unasked: {restarted}")
    assert said.zero(), said
    assert said.succeeded == RUNS
    assert said.writes > 0 and said.leader_changes >= 3  # the chaos did happen, and was read
    assert said.max_leaderless < 2 * lease
