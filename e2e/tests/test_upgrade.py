"""Upgrades that lose nothing: with runs in flight, `helm upgrade` from the previous release
(PREVIOUS_RELEASE in e2e/versions.env: its chart and operator from git history) to the working
tree, then `helm rollback` to it, the operator swapped each time as a one-replica Deployment's
update swaps it. No run fails, no pod lands away from its anchor, no balloon is left behind or
made twice: the balloons the old release made are the new one's to keep and to delete.

On a cluster of its own (the session's runs the working tree's release from the start).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from controller.core.basics import names
from controller.core.model.assistant import pinned_to_assistant
from e2e.harness import chart, release, upgrade
from e2e.harness import tekton_runs as tr
from e2e.harness.cluster import BinaryNotFound, ClusterHandle, LocalCluster, read_versions
from e2e.harness.cluster import tekton as tekton_cluster
from e2e.harness.cluster.versions import pinned
from e2e.harness.coscheduler import REPO, Coscheduler
from e2e.harness.runs import Runs, our_terms
from e2e.harness.tekton_runs import PodRecorder

pytestmark = [pytest.mark.e2e, pytest.mark.upgrade]

RUNS = int(os.environ.get("E2E_UPGRADE_RUNS", "20"))
TEKTON_BEFORE, TEKTON_AFTER = (read_versions()[key]
                                for key in ("TEKTON_UPGRADE_FROM", "TEKTON_PIPELINE_VERSION"))
ASSISTANT_WAVE = 3  # runs per wave in the assistant's on-and-off


def lasting(seconds: int) -> dict[str, dict[str, str]]:
    """Each of fetch, the builds and publish runs this long: a run lasts about 3 x seconds."""
    return {t: {tr.RUN_SECONDS: str(seconds)} for t in (tr.FETCH, *tr.FAN_OUT, tr.PUBLISH)}


SECONDS = lasting(12)  # about 40 s a run
# In flight until the test lets it go: fetch runs until Runs.release, then each task a second.
HELD = {tr.FETCH: {tr.HOLD: "true"}}


def ended(s: Runs, runs: list[dict[str, Any]]) -> list[str]:
    """Those of the runs that have already finished (none may, before a swap)."""
    return [run["metadata"]["name"] for run in runs
            if tr.outcome(tr.get_run(s.custom, s.ns, run["metadata"]["name"]))]


@pytest.fixture(scope="module")
def fresh() -> Iterator[LocalCluster]:
    """A cluster of its own, with the Tekton LTS line before the newest (upgraded in place
    by the Tekton scenario)."""
    cluster = LocalCluster()
    try:
        cluster.start()
        with pinned(TEKTON_PIPELINE_VERSION=TEKTON_BEFORE):
            cluster.start_tekton()
    except BinaryNotFound as exc:
        cluster.stop()
        pytest.skip(str(exc))
    try:
        cluster.add_nodes(4, prefix="up")
        yield cluster
    finally:
        cluster.stop()


@pytest.mark.timeout(600)
@pytest.mark.parts("tekton", "tekton-before")
def test_an_upgrade_and_a_rollback_with_runs_in_flight_lose_nothing(fresh: LocalCluster) -> None:
    """RUNS runs in flight at each swap, each held in its fetch until the swap is done. Wave A
    starts under the previous release and ends under the working tree's (which admits its builds
    and deletes the balloons the previous one made); wave B starts under the working tree's and
    ends under the previous one, rolled back to once A has ended."""
    cluster = fresh
    previous = upgrade.previous_source()
    operator = upgrade.install(cluster, previous)
    ns = cluster.create_namespace(f"up-{uuid.uuid4().hex[:6]}",
                                  labels={names.NAMESPACE_LABEL: "true"})
    with PodRecorder(cluster, ns) as recorder:
        s = Runs(cluster, ns, recorder)
        s.local_pvs_everywhere(per_node=RUNS)
        anchors: dict[str, str] = {}

        def wave(prefix: str) -> list[dict[str, Any]]:
            made = [s.start(tr.fan_out_fan_in(tr.unique(prefix), task_annotations=HELD))
                    for _ in range(RUNS)]
            anchors.update({run["metadata"]["uid"]: s.anchor(run) for run in made})
            return made

        def finished(runs: list[dict[str, Any]]) -> None:
            outcomes = [tr.outcome(s.done(run, timeout=300)) for run in runs]
            assert outcomes == [("True", "Succeeded")] * len(runs)
            for run in runs:  # deleted by the release that saw the run end
                s.wait_no_balloon(run, timeout=60)

        a = wave("a")
        assert not ended(s, a), "wave A ended before the upgrade"
        operator = upgrade.upgrade(cluster, operator, REPO)
        operator.wait_effective()
        s.release(a)
        b = wave("b")
        finished(a)
        assert not ended(s, b), "wave B ended before the rollback"
        operator = upgrade.rollback(cluster, operator, previous)
        operator.wait_effective()
        s.release(b)
        finished(b)
        for run in a + b:
            uid = run["metadata"]["uid"]
            pods = recorder.pods(uid)
            assert {p.node for p in pods} == {anchors[uid]}, [(p.name, p.node) for p in pods]
            balloons = {(b.name, b.node) for b in recorder.balloons(uid)}
            assert len(balloons) == 1, f"{run['metadata']['name']}: balloons {balloons}"
    operator.stop()


@pytest.mark.timeout(600)
@pytest.mark.parts("tekton", "tekton-before")
def test_tekton_upgraded_in_place_with_runs_in_flight_loses_nothing(fresh: LocalCluster) -> None:
    """Tekton's controller, CRDs and config go from the LTS line before the newest to the
    newest while RUNS runs are in flight (held in their fetch until it is done) under the working
    tree's release: every run succeeds, every pod on its anchor, no balloon left."""
    cluster = fresh
    chart.run_helm(["uninstall", chart.RELEASE, "--namespace", chart.NAMESPACE],
                   check=False, kubeconfig=cluster.kubeconfig)  # what an earlier scenario left
    operator = release.deploy(cluster, name="tekton-upgrade")
    ns = cluster.create_namespace(f"tk-up-{uuid.uuid4().hex[:6]}",
                                  labels={names.NAMESPACE_LABEL: "true"})
    with PodRecorder(cluster, ns) as recorder:
        s = Runs(cluster, ns, recorder)
        s.local_pvs_everywhere(per_node=RUNS)
        made = [s.start(tr.fan_out_fan_in(tr.unique("tk"), task_annotations=HELD))
                for _ in range(RUNS)]
        anchors = {run["metadata"]["uid"]: s.anchor(run) for run in made}
        assert not ended(s, made), "runs ended before Tekton's upgrade"
        cluster.upgrade_tekton(TEKTON_AFTER)
        s.release(made)
        outcomes = [tr.outcome(s.done(run, timeout=300)) for run in made]
        assert outcomes == [("True", "Succeeded")] * len(made)
        for run in made:
            pods = recorder.pods(run["metadata"]["uid"])
            assert {p.node for p in pods} == {anchors[run["metadata"]["uid"]]}
            s.wait_no_balloon(run, timeout=60)
    cluster.wait_for(lambda: operator.metric("tekton_coscheduler_version_tested",
                                             component="tekton", version=TEKTON_AFTER) == 1,
                     timeout=30, what=f"the operator says Tekton {TEKTON_AFTER}")
    operator.stop()


def test_tekton_s_assistant_switched_on_and_off_with_runs_in_flight_leaves_every_run_ours(
    cluster: ClusterHandle, runs: Runs, coscheduler: Coscheduler
) -> None:
    """Wave A under ours, then `coschedule: workspaces` while A is in flight and wave B starts,
    then `disabled` again while B is in flight and wave C starts. Beside Tekton's assistant
    (issue 48) the opted-in namespace stays ours throughout: admission puts our term in place of
    Tekton's on the pods it pins (A's made while it was on included), B's placeholders follow
    their balloons. Every run succeeds on one node, and no pod carries both Tekton's term and
    ours (no single pod would match both, and it would never start)."""
    s = runs
    s.local_pvs_everywhere(per_node=6)

    def wave(prefix: str, held: bool = False) -> list[dict[str, Any]]:
        seconds = {**SECONDS, **HELD} if held else SECONDS
        return [s.start(tr.fan_out_fan_in(tr.unique(prefix), task_annotations=seconds))
                for _ in range(ASSISTANT_WAVE)]

    def builds_made(runs: list[dict[str, Any]]) -> bool:
        return all(s.pod_of(run["metadata"]["uid"], build)
                   for run in runs for build in tr.FAN_OUT)

    def assistant(on: bool) -> None:
        tekton_cluster.configure(cluster, {"coschedule": "workspaces"} if on else None)
        cluster.wait_for(
            lambda: coscheduler.metric("tekton_coscheduler_tekton_affinity_assistant_enabled")
            == (1 if on else 0), timeout=30, what=f"the operator sees the assistant {on}")
        assert s.pinned_now(a[0])  # admission serves the namespace either way

    a = wave("ours-a", held=True)
    for run in a:
        s.anchor(run)
    try:
        assistant(True)
        b = wave("assistant-b", held=True)
        # A's fetch and B's end: the builds of both are made while the assistant is on.
        s.release(a + b)
        cluster.wait_for(lambda: builds_made(a + b), timeout=60,
                         what="the builds of A and B made while the assistant is on")
    finally:
        assistant(False)
    c = wave("ours-c")
    for run in a + b + c:
        assert tr.outcome(s.done(run, timeout=300)) == ("True", "Succeeded"), run["metadata"]
        pods = s.recorder.pods(run["metadata"]["uid"])
        assert len({p.node for p in pods}) == 1, f"{run['metadata']['name']}: pods on {pods}"
        assert all(our_terms(p) for p in pods), [p.name for p in pods if not our_terms(p)]
    both = [p.name for p in s.recorder.all() if our_terms(p) and pinned_to_assistant(p.spec)]
    assert not both, both
    for run in a + b + c:
        s.wait_no_balloon(run, timeout=60)
