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
from controller.core.placement.gate import PLACEHOLDER_GATE
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


def lasting(seconds: int) -> dict[str, dict[str, str]]:
    """Each of fetch, the builds and publish runs this long: a run lasts about 3 x seconds."""
    return {t: {tr.RUN_SECONDS: str(seconds)} for t in (tr.FETCH, *tr.FAN_OUT, tr.PUBLISH)}


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


# Tekton's assistant switched disabled -> workspaces -> pipelineruns -> disabled, a wave of runs
# started in each mode (SWITCH_RUNS in all; E2E_ASSISTANT_SWITCH_RUNS for more or fewer).
SWITCH_RUNS = int(os.environ.get("E2E_ASSISTANT_SWITCH_RUNS", "20"))
MODES = ("disabled", "workspaces", "pipelineruns", "disabled")
# fetch in flight over the switch after its wave starts (with some 10 s to spare), not the next
# one; the rest brief.
BRIEF = {**lasting(5), tr.FETCH: {tr.RUN_SECONDS: "14"}}
ONE_LAYER = ("lint", "unit", "docs")  # the other namespace's runs: every TaskRun made at once


def their_run(name: str, claim: str) -> dict[str, Any]:
    """Three tasks at once on one claim, each about 20 s: in flight over the next switch, with
    nothing left for Tekton to make after it (why: the scenario's docstring)."""
    return tr.pipelinerun(name, [tr.task(t) for t in ONE_LAYER], {tr.SHARED: tr.claim(claim)},
                          task_annotations={t: {tr.RUN_SECONDS: "20"} for t in ONE_LAYER})


@pytest.mark.timeout(600)
def test_tekton_s_assistant_mode_switched_with_runs_in_flight_in_both_namespaces(
    cluster: ClusterHandle, runs: Runs, unlabelled: Runs, coscheduler: Coscheduler
) -> None:
    """Issue 48: `coschedule` goes disabled -> workspaces -> pipelineruns -> disabled, a wave of
    runs started in each mode in the namespace that opted in (A) and in one that did not (B),
    each wave in flight over the next switch. None fails, none is misplaced: each run's pods on
    one node; A's on its anchor, each with our term and not Tekton's (admission takes Tekton's
    off the pods it pins, those made after a switch included), its placeholders gated and beside
    the balloon; B's with no term or object of ours, pinned to Tekton's placeholder when made
    while the assistant was on; no pod anywhere with both terms (it would never start).

    A's runs are fan-out/fan-in, fetch made before the switch and the rest after it (asserted:
    their TaskRuns name the two modes' assistants). B's make every TaskRun at once: Tekton
    makes a run's placeholders only before its first TaskRun and names them, and templated
    claims, by the mode at each TaskRun's creation (pkg/reconciler/pipelinerun/pipelinerun.go,
    IsBeforeFirstTaskRun; affinity_assistant.go), so a TaskRun that Tekton makes after a switch
    waits for good for a placeholder or claim never made: Tekton's own behaviour, ours or not.
    Named claims for the same reason: a volumeClaimTemplate's claim is named otherwise per run."""
    ours, theirs = runs, unlabelled
    ours.local_pvs_everywhere(per_node=SWITCH_RUNS // 4 + 1)  # cluster-wide: B's claims too
    per_wave = SWITCH_RUNS // len(MODES)
    waves: list[tuple[str, list[dict[str, Any]], list[dict[str, Any]]]] = []
    anchors: dict[str, str] = {}

    def start(s: Runs, body: Any, claim: str) -> dict[str, Any]:
        s.pvc(claim)
        return s.start(body)

    def made_all(s: Runs, run: dict[str, Any], count: int) -> None:
        cluster.wait_for(lambda: len(tr.task_runs(s.custom, s.ns, run["metadata"]["uid"]))
                         >= count, timeout=60, what=f"TaskRuns of {run['metadata']['name']}")

    def switch(mode: str) -> None:
        tekton_cluster.configure(cluster, {"coschedule": mode})
        cluster.wait_for(
            lambda: coscheduler.metric("tekton_coscheduler_tekton_affinity_assistant_mode",
                                       mode=mode) == 1,
            timeout=30, what=f"the operator sees coschedule: {mode}")

    try:
        for i, mode in enumerate(MODES):
            if i:
                switch(mode)
                _, a, b = waves[-1]
                assert not ended(ours, a) and not ended(theirs, b), "a wave ended before it"
                # Admission serves A and leaves B alone whatever the mode.
                assert ours.pinned_now(a[0]) and not theirs.pinned_now(b[0])
                for run in a:  # the last wave's builds, made in this mode, before the next
                    made_all(ours, run, 1 + len(tr.FAN_OUT))
            a = [start(ours, tr.fan_out_fan_in(name, tr.claim(f"c-{name}"),
                                               task_annotations=BRIEF), f"c-{name}")
                 for name in (tr.unique(f"a{i}") for _ in range(per_wave - per_wave // 2))]
            b = [start(theirs, their_run(name, f"c-{name}"), f"c-{name}")
                 for name in (tr.unique(f"b{i}") for _ in range(per_wave // 2))]
            for run in a:
                anchors[run["metadata"]["uid"]] = ours.anchor(run)
                made_all(ours, run, 1)
            for run in b:
                made_all(theirs, run, len(ONE_LAYER))
            waves.append((mode, a, b))
    finally:
        tekton_cluster.configure(cluster, None)  # the suite's default, whatever happened

    both = [p.name for s in (ours, theirs) for p in s.recorder.all()
            if our_terms(p) and pinned_to_assistant(p.spec)]
    for i, (mode, a, b) in enumerate(waves):
        for run in a + b:
            s = ours if run in a else theirs
            name, uid = run["metadata"]["name"], run["metadata"]["uid"]
            assert tr.outcome(s.done(run, timeout=300)) == ("True", "Succeeded"), name
            pods = s.recorder.pods(uid)
            assert len({p.node for p in pods}) == 1, f"{name}: {[(p.name, p.node) for p in pods]}"
            if s is theirs:
                assert not any(our_terms(p) for p in pods), name
                assert {pinned_to_assistant(p.spec) for p in pods} == {mode != "disabled"}, name
                continue
            assert {p.node for p in pods} == {anchors[uid]}, name
            assert all(len(our_terms(p)) == 1 and not pinned_to_assistant(p.spec)
                       for p in pods), [p.name for p in pods]
            if i + 1 < len(waves):  # fetch made in this wave's mode, the builds in the next's
                named = {t["metadata"]["labels"][tr.LABEL_TASK]: (t["metadata"].get(
                    "annotations") or {}).get(tekton_cluster.ASSISTANT_ANNOTATION)
                    for t in tr.task_runs(s.custom, s.ns, uid)}
                then, after = (tekton_cluster.assistant_name(m, name, tr.SHARED)
                               for m in (mode, waves[i + 1][0]))
                assert named == {tr.FETCH: then, **dict.fromkeys(tr.FAN_OUT, after),
                                 tr.PUBLISH: named[tr.PUBLISH]}, f"{name} straddled no switch"
            held = [p for p in s.recorder.all() if p.labels.get("tekton.dev/pipelineRun") == name
                    and p.labels.get("app.kubernetes.io/component") == "affinity-assistant"]
            assert bool(held) == (mode != "disabled"), f"{name}: placeholders {held}"
            assert all(p.node == anchors[uid] and p.gates == (PLACEHOLDER_GATE,) for p in held), held
    assert not both, both
    assert theirs.balloons() == []
    for _, a, _ in waves:
        for run in a:
            ours.wait_no_balloon(run, timeout=60)
