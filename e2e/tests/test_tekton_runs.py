"""Real PipelineRuns through the real Tekton controller, our webhook and the real scheduler.

Tekton makes the TaskRuns, PVCs and pods; kwok plays the kubelet (e2e/harness/cluster/stages:
pod-complete-taskrun ends a pod with the exit-code annotation after run-seconds). Each test
checks that every TaskRun pod of the run was bound to the node of the run's balloon (where its
first balloon pod was bound, as our Anchored Event names it too), that the run ends as it
should, and that the balloon is gone afterwards. These tests run last (conftest): the Tekton
controller would fail the hand-made runs of the other suites.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, cast

import pytest
from kubernetes import client

from controller.core.basics import names
from controller.core.placement import gate
from e2e.harness import tekton_runs as tr
from e2e.harness.coscheduler import Coscheduler
from e2e.harness.runs import Runs, assert_co_located, assert_untouched
from e2e.harness.scenario import user_affinity
from e2e.harness.tekton_runs import FAN_OUT, FETCH, PUBLISH

pytestmark = pytest.mark.e2e

REQ = "requiredDuringSchedulingIgnoredDuringExecution"
POLICY = (names.POLICY_GROUP, names.POLICY_VERSION)
ALL_TASKS = [FETCH, *FAN_OUT, PUBLISH]
EMPTY_DIR: dict[str, Any] = {"emptyDir": {}}
DEDICATED = {
    "key": "e2e.tekton-coscheduler.dev/dedicated",
    "operator": "Equal",
    "value": "ci",
    "effect": "NoSchedule",
}
# Long enough for a test to act on a live run (cancel, delete), short of any wait's timeout.
SLOW = {tr.RUN_SECONDS: "30"}


# -- the pipeline shapes --------------------------------------------------------------------


def test_a_run_s_first_pod_waits_behind_the_gate_until_its_balloon_pod_is_bound(
        runs: Runs) -> None:
    """Its claim is bound with the balloon: the first pod comes to a bound volume instead of
    racing the balloon for it. The run's later pods, made once it is marked, are not gated."""
    s = runs
    s.local_pvs_everywhere()
    run = s.start(tr.fan_out_fan_in(tr.unique("gate")))
    uid = run["metadata"]["uid"]
    anchor = s.anchor(run)
    assert tr.outcome(s.done(run)) == ("True", "Succeeded")
    pods = assert_co_located(s, run, anchor, ALL_TASKS)
    [first] = [p for p in pods if p.task == FETCH]
    assert first.gates == (gate.GATE,) and not gate.held(first.spec)
    balloon_bound = min(b.bound_at or 0.0 for b in s.recorder.balloons(uid))
    assert first.bound_at is not None and first.bound_at >= balloon_bound
    for pod in pods:
        if pod.labels.get(names.LABEL_ANCHORED) == uid:
            assert gate.GATE not in pod.gates, pod.name


@pytest.mark.matrix
def test_fan_out_fan_in_shares_one_volume_on_the_balloon_node(runs: Runs) -> None:
    s = runs
    s.local_pvs_everywhere()
    run = s.start(tr.fan_out_fan_in(tr.unique("fan")))
    anchor = s.anchor(run)
    assert tr.outcome(s.done(run)) == ("True", "Succeeded")
    pods = assert_co_located(s, run, anchor, ALL_TASKS)
    claims = s.claims_of(run)
    assert len(claims) == 1
    assert all(claims[0] in str(p.spec["volumes"]) for p in pods)
    assert s.pv_node(claims[0]) == anchor
    s.wait_no_balloon(run)


@pytest.mark.matrix
def test_run_on_a_claim_bound_on_a_chosen_node_lands_there(runs: Runs, nodes: list[str]) -> None:
    s = runs
    s.pvc("source")
    s.pv_on(nodes[2], "source")
    s.wait_bound("source")
    run = s.start(tr.fan_out_fan_in(tr.unique("bound"), tr.claim("source")))
    assert s.anchor(run) == nodes[2]
    assert tr.outcome(s.done(run)) == ("True", "Succeeded")
    assert_co_located(s, run, nodes[2], ALL_TASKS)
    s.wait_no_balloon(run)


def test_a_task_binding_two_claims(runs: Runs) -> None:
    s = runs
    s.local_pvs_everywhere()
    s.pvc("src")
    s.pvc("cache")  # unbound (WaitForFirstConsumer): the balloon's node decides for both
    tasks = [
        tr.task("both", workspaces=("src", "cache")),
        tr.task("src-only", after=["both"], workspaces=("src",)),
        tr.task("cache-only", after=["both"], workspaces=("cache",)),
    ]
    run = s.start(
        tr.pipelinerun(
            tr.unique("two"), tasks, {"src": tr.claim("src"), "cache": tr.claim("cache")}
        )
    )
    anchor = s.anchor(run)
    assert tr.outcome(s.done(run)) == ("True", "Succeeded")
    pods = assert_co_located(s, run, anchor, ["both", "src-only", "cache-only"])
    both = next(p for p in pods if p.task == "both")
    mounted = {
        v["persistentVolumeClaim"]["claimName"]
        for v in both.spec["volumes"]
        if "persistentVolumeClaim" in v
    }
    assert mounted == {"src", "cache"}
    assert (s.pv_node("src"), s.pv_node("cache")) == (anchor, anchor)
    s.wait_no_balloon(run)


# -- finally, retries, failures ---------------------------------------------------------------


def test_finally_task_and_a_retry_after_a_failed_first_attempt(runs: Runs) -> None:
    """The kwok stage reads the exit code from the pod's annotations, and Tekton builds each
    attempt's pod from the TaskRun's annotations at that moment: the TaskRun starts with exit
    code 1, and once its first pod exists the test sets 0, which only the retry's pod gets."""
    s = runs
    body = tr.pipelinerun(
        tr.unique("retry"),
        [
            tr.task("flaky", retries=1, workspaces=()),
            tr.task("after", after=["flaky"], workspaces=()),
        ],
        {},
        finally_tasks=[tr.task("cleanup", workspaces=())],
        task_annotations={"flaky": {tr.EXIT_CODE: "1", tr.RUN_SECONDS: "5"}},
    )
    run = s.start(body)
    first = s.recorder.wait_pods(run["metadata"]["uid"], ["flaky"], bound=False)[0]
    s.custom.patch_namespaced_custom_object(
        *tr.TEKTON,
        s.ns,
        "taskruns",
        first.labels[tr.LABEL_TASK_RUN],
        {"metadata": {"annotations": {tr.EXIT_CODE: "0"}}},
    )
    anchor = s.anchor(run)
    assert tr.outcome(s.done(run)) == ("True", "Succeeded")
    pods = assert_co_located(s, run, anchor, ["flaky", "flaky", "after", "cleanup"])
    exit_codes = sorted(
        (p.name, p.annotations.get(tr.EXIT_CODE)) for p in pods if p.task == "flaky"
    )
    assert [code for _, code in exit_codes] == ["1", "0"]  # <run>-flaky-pod, <run>-flaky-pod-retry1
    flaky = next(
        t
        for t in tr.task_runs(s.custom, s.ns, run["metadata"]["uid"])
        if t["metadata"]["name"].endswith("-flaky")
    )
    assert len(flaky["status"]["retriesStatus"]) == 1
    s.wait_no_balloon(run)


def test_failing_task_with_retries_fails_the_run_all_attempts_beside_the_balloon(
    runs: Runs,
) -> None:
    s = runs
    tasks = [
        tr.task(FETCH, workspaces=()),
        *(
            tr.task(t, after=[FETCH], workspaces=(), retries=1 if t == "build-b" else 0)
            for t in FAN_OUT
        ),
        tr.task(PUBLISH, after=FAN_OUT, workspaces=()),
    ]
    run = s.start(
        tr.pipelinerun(
            tr.unique("fail"),
            tasks,
            {},
            finally_tasks=[tr.task("report", workspaces=())],
            task_annotations={"build-b": {tr.EXIT_CODE: "1"}},
        )
    )
    anchor = s.anchor(run)
    assert tr.outcome(s.done(run)) == ("False", "Failed")
    # publish never runs; build-b runs twice; the finally task runs after the failure
    assert_co_located(s, run, anchor, [FETCH, "build-a", "build-b", "build-b", "build-c", "report"])
    s.wait_no_balloon(run)


# -- runs that end early ------------------------------------------------------------------


def test_cancelled_run(runs: Runs) -> None:
    s = runs
    s.local_pvs_everywhere()
    run = s.start(tr.fan_out_fan_in(tr.unique("cancel"), annotations=SLOW))
    s.recorder.wait_pods(run["metadata"]["uid"], [FETCH])
    anchor = s.anchor(run)
    s.custom.patch_namespaced_custom_object(
        *tr.TEKTON, s.ns, "pipelineruns", run["metadata"]["name"], {"spec": {"status": "Cancelled"}}
    )
    assert tr.outcome(s.done(run, timeout=60)) == ("False", "Cancelled")
    assert_co_located(s, run, anchor, [FETCH])
    s.wait_no_balloon(run)


def test_timed_out_run(runs: Runs) -> None:
    s = runs
    s.local_pvs_everywhere()
    run = s.start(
        tr.fan_out_fan_in(tr.unique("late"), annotations=SLOW, timeouts={"pipeline": "8s"})
    )
    anchor = s.anchor(run)
    assert tr.outcome(s.done(run, timeout=60)) == ("False", "PipelineRunTimeout")
    assert_co_located(s, run, anchor, [FETCH])
    s.wait_no_balloon(run)


def test_run_deleted_mid_flight_leaves_no_balloon_and_no_claim(runs: Runs) -> None:
    s = runs
    s.local_pvs_everywhere()
    run = s.start(tr.fan_out_fan_in(tr.unique("gone"), annotations=SLOW))
    s.recorder.wait_pods(run["metadata"]["uid"], [FETCH])
    anchor = s.anchor(run)
    claims = s.claims_of(run)
    assert len(claims) == 1
    s.delete_run(run)
    s.wait_no_balloon(run)
    # The balloon pod mounts the claim: an orphaned one would hold it (pvc-protection) forever.
    s.cluster.wait_for(
        lambda: not s.core.list_namespaced_persistent_volume_claim(s.ns).items,
        timeout=90,
        what="the run's claim deleted",
    )
    s.cluster.wait_for(
        lambda: not s.core.list_namespaced_pod(s.ns).items, timeout=60, what="every pod gone"
    )
    assert_co_located(s, run, anchor, [FETCH])


# -- what the pods carry, and who is left alone --------------------------------------------------


def test_pod_template_affinity_and_tolerations_are_kept(runs: Runs) -> None:
    s = runs
    template = {"affinity": user_affinity(), "tolerations": [DEDICATED]}
    run = s.start(
        tr.fan_out_fan_in(
            tr.unique("tpl"), EMPTY_DIR, pod_template=template, annotations={tr.RUN_SECONDS: "2"}
        )
    )
    anchor = s.anchor(run)
    balloon = s.wait_balloon(run)  # read while the run is live: it goes when the run ends
    assert tr.outcome(s.done(run)) == ("True", "Succeeded")
    for pod in assert_co_located(s, run, anchor, ALL_TASKS):
        got = pod.spec["affinity"]
        assert got["nodeAffinity"] == user_affinity()["nodeAffinity"]
        assert (
            got["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
            == user_affinity()["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        )
        assert len(got["podAffinity"][REQ]) == 1
        assert DEDICATED in pod.spec["tolerations"]
    # The balloon inherits what every pod of the run will carry.
    spec = client.ApiClient().sanitize_for_serialization(balloon.spec.template.spec)  # type: ignore[no-untyped-call]
    assert DEDICATED in spec["tolerations"]
    assert spec["affinity"]["nodeAffinity"] == user_affinity()["nodeAffinity"]
    s.wait_no_balloon(run)


@pytest.mark.matrix
def test_namespace_without_the_label_is_untouched(unlabelled: Runs) -> None:
    s = unlabelled
    run = s.start(tr.fan_out_fan_in(tr.unique("off"), EMPTY_DIR))
    assert tr.outcome(s.done(run)) == ("True", "Succeeded")
    assert_untouched(s, run, ALL_TASKS)


@pytest.mark.matrix
def test_opted_out_run_is_untouched(runs: Runs) -> None:
    s = runs
    run = s.start(
        tr.fan_out_fan_in(
            tr.unique("optout"), EMPTY_DIR, annotations={names.OPT_OUT_ANNOTATION: "false"}
        )
    )
    assert tr.outcome(s.done(run)) == ("True", "Succeeded")
    assert_untouched(s, run, ALL_TASKS)
    pods = s.recorder.pods(run["metadata"]["uid"])
    assert {p.annotations.get(names.OPT_OUT_ANNOTATION) for p in pods} == {
        "false"
    }  # Tekton copied it


def test_isolation_required_keeps_two_concurrent_runs_apart(runs: Runs) -> None:
    s = runs
    s.custom.create_namespaced_custom_object(
        *POLICY,
        s.ns,
        names.POLICY_PLURAL,
        {
            "apiVersion": "/".join(POLICY),
            "kind": names.POLICY_KIND,
            "metadata": {"name": "apart"},
            "spec": {"isolation": "required"},
        },
    )

    def ready() -> bool:
        obj = cast(dict[str, Any], s.custom.get_namespaced_custom_object(*POLICY, s.ns, names.POLICY_PLURAL, "apart"))
        return any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in (obj.get("status") or {}).get("conditions") or []
        )

    s.cluster.wait_for(ready, timeout=30, what="policy Ready")
    time.sleep(1)  # the operator's view of policies is fed by its own watch
    pair = [
        s.start(
            tr.fan_out_fan_in(tr.unique(f"iso{i}"), EMPTY_DIR, annotations={tr.RUN_SECONDS: "3"})
        )
        for i in range(2)
    ]
    anchors = [s.anchor(r) for r in pair]
    assert anchors[0] != anchors[1]
    for run, anchor in zip(pair, anchors, strict=True):
        assert tr.outcome(s.done(run)) == ("True", "Succeeded")
        assert_co_located(s, run, anchor, ALL_TASKS)
        s.wait_no_balloon(run)


# -- many at once ----------------------------------------------------------------------------

MASS_RUNS, MASS_NODES = 50, 10


@pytest.mark.slow
def test_fifty_runs_at_once_on_ten_nodes(runs: Runs, coscheduler: Coscheduler) -> None:
    s = runs
    pool = {"e2e.tekton-coscheduler.dev/pool": f"mass-{uuid.uuid4().hex[:4]}"}
    mass = set(s.cluster.add_nodes(MASS_NODES, prefix="mass", pods=250, labels=pool))
    misplaced = coscheduler.metric("tekton_coscheduler_misplaced_pods_total")
    t0 = time.monotonic()
    started = [
        s.start(tr.fan_out_fan_in(f"mass-{i:02d}", EMPTY_DIR, pod_template={"nodeSelector": pool}))
        for i in range(MASS_RUNS)
    ]
    finished = [s.done(r, timeout=max(10.0, 220 - (time.monotonic() - t0))) for r in started]
    print(f"{MASS_RUNS} runs on {MASS_NODES} nodes finished in {time.monotonic() - t0:.0f}s")
    assert [tr.outcome(r) for r in finished] == [("True", "Succeeded")] * MASS_RUNS
    used = set()
    for run in started:
        anchor = s.anchor(run, timeout=10)
        assert anchor in mass, (run["metadata"]["name"], anchor)
        assert_co_located(s, run, anchor, ALL_TASKS)
        used.add(anchor)
    assert len(used) > 1  # the runs were spread, not merely piled onto one node
    assert coscheduler.metric("tekton_coscheduler_misplaced_pods_total") == misplaced
    assert s.events("PodMisplaced") == []
    s.cluster.wait_for(lambda: not s.balloons(), timeout=60, what="every balloon gone")
