"""What Tekton does with a run when admission is down, and what policy mode guarantees.

Tekton treats a pod-creation error it does not recognise as permanent (handlePodCreationError
in pkg/reconciler/taskrun/taskrun.go): with a webhook that cannot be reached and failurePolicy
Fail the TaskRun fails, and so the PipelineRun; with Ignore the pods are created without the
term. Policy mode has no server in the pod-creation path: our replica can be dead while a run
creates its pods, and the run still succeeds with every pod beside its balloon.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from controller.core.placement import gate
from e2e.harness import tekton_runs as tr
from e2e.harness.cluster import ClusterHandle, present
from e2e.harness.cluster.processes import free_port
from e2e.harness.coscheduler import Coscheduler
from e2e.harness.runs import Runs, assert_co_located, our_terms
from e2e.harness.tekton_runs import PodRecorder

pytestmark = pytest.mark.e2e

OUTAGE_LABEL = "e2e.tekton-coscheduler.dev/outage"
TWO_TASKS = [tr.task("first"), tr.task("second", after=["first"])]


@pytest.fixture
def unreachable_webhook(
    cluster: ClusterHandle, tekton: ClusterHandle, coscheduler: Coscheduler, nodes: list[str]
) -> Iterator[tuple[Runs, Coscheduler]]:
    """A namespace served only by a webhook configuration whose server is gone (a URL nothing
    listens on), as during an outage of every replica."""
    ns = cluster.create_namespace(f"out-{uuid.uuid4().hex[:6]}", labels={OUTAGE_LABEL: "true"})
    with PodRecorder(cluster, ns) as recorder:
        yield Runs(cluster, ns, recorder), coscheduler
    coscheduler.unregister_webhook("tekton-coscheduler-outage")


@pytest.mark.parametrize(
    ("failure_policy", "expected"),
    [("Fail", ("False", "Failed")), ("Ignore", ("True", "Succeeded"))],
)
def test_with_the_webhook_down_tekton_fails_the_run_or_runs_it_unpinned(
    unreachable_webhook: tuple[Runs, Coscheduler],
    failure_policy: str,
    expected: tuple[str, str],
) -> None:
    s, coscheduler = unreachable_webhook
    coscheduler.register_webhook(
        name="tekton-coscheduler-outage",
        label=OUTAGE_LABEL,
        url=f"https://127.0.0.1:{free_port()}/mutate-pods",
        failure_policy=failure_policy,
    )
    run = s.start(tr.pipelinerun(tr.unique("outage"), TWO_TASKS, {tr.SHARED: {"emptyDir": {}}}))
    done = s.done(run, timeout=120)
    assert tr.outcome(done) == expected
    reasons = {
        t["metadata"]["labels"][tr.LABEL_TASK]: tr.outcome(t)
        for t in tr.task_runs(s.custom, s.ns, run["metadata"]["uid"])
    }
    if failure_policy == "Fail":
        # The first task's pod was refused: Tekton failed the TaskRun for good, not waiting.
        assert reasons == {"first": ("False", "PodCreationFailed")}
        assert s.recorder.pods(run["metadata"]["uid"]) == []
    else:
        pods = s.recorder.pods(run["metadata"]["uid"])
        assert sorted(p.task for p in pods) == ["first", "second"]
        assert all(our_terms(p) == [] for p in pods)  # created, but tied to nothing


def test_in_policy_mode_a_run_outlives_its_dead_replica(
    runs: Runs, coscheduler: Coscheduler
) -> None:
    """The replica (server and reconciler) is killed once the run is anchored and comes back
    20 s later. Meanwhile Tekton creates the later tasks' pods: the API server's policy pins
    them, nothing refuses them, and the run succeeds on its anchor."""
    assert coscheduler.env()["COSCHEDULER_ADMISSION_MODE"] == "policy"
    s = runs
    s.local_pvs_everywhere()
    slow = {"fetch": {tr.RUN_SECONDS: "8"}}
    run = s.start(tr.fan_out_fan_in(tr.unique("dead"), task_annotations=slow))
    anchor = s.anchor(run)
    coscheduler.kill()
    killed = time.monotonic()
    try:
        # Made by Tekton while no process of ours runs: pinned by the policy, bound beside the
        # balloon by the scheduler.
        s.recorder.wait_pods(run["metadata"]["uid"], tr.FAN_OUT, timeout=60)
    finally:
        time.sleep(max(0.0, 20 - (time.monotonic() - killed)))
        coscheduler.start()
    assert tr.outcome(s.done(run)) == ("True", "Succeeded")
    assert_co_located(s, run, anchor, [tr.FETCH, *tr.FAN_OUT, tr.PUBLISH])
    s.wait_no_balloon(run)


def test_in_policy_mode_a_run_started_with_no_replica_waits_gated_and_goes_once_one_leads(
    runs: Runs, coscheduler: Coscheduler
) -> None:
    """No replica at all when the run starts: the policy still ties and gates its first pod,
    which waits (no balloon, no leader to take the gate off) rather than run away from the
    volume. The replica comes back: its pod watch replays the gated pod, the balloon is made and
    bound, the gate comes off, and the run succeeds on its anchor."""
    assert coscheduler.env()["COSCHEDULER_ADMISSION_MODE"] == "policy"
    s = runs
    s.local_pvs_everywhere()
    coscheduler.kill()
    try:
        run = s.start(tr.fan_out_fan_in(tr.unique("gated")))
        uid = run["metadata"]["uid"]
        [first] = s.recorder.wait_pods(uid, [tr.FETCH], bound=False)
        assert first.gates == (gate.GATE,)
        # The scheduler saw it and left it for the gate: it is not tried while no one leads.
        s.cluster.wait_for(lambda: _scheduled_reason(s, first.name) == "SchedulingGated",
                           timeout=30, what=f"{first.name} held by its scheduling gate")
    finally:
        coscheduler.start()
    anchor = s.anchor(run)
    assert tr.outcome(s.done(run)) == ("True", "Succeeded")
    assert_co_located(s, run, anchor, [tr.FETCH, *tr.FAN_OUT, tr.PUBLISH])
    s.wait_no_balloon(run)


def _scheduled_reason(s: Runs, pod: str) -> str:
    status = present(s.core.read_namespaced_pod(pod, s.ns).status)
    found = [c.reason for c in status.conditions or [] if c.type == "PodScheduled"]
    return str(found[0]) if found else ""
