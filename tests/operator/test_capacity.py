"""The operator's reservation pods, over the watch caches (capacity-aware anchoring)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from controller.core.admission import affinity
from controller.core.basics import names
from controller.core.capacity import reservation, roomplan, settle
from controller.core.model.tekton import PipelineRun, RunRef
from controller.core.placement import balloon
from controller.kube.client import ApiError
from tests import factories
from tests.operator.test_runs import make

UID = factories.RUN_UID
BUILDS = ("build-a", "build-b", "build-c")


def pipeline(cpu: str = "2") -> dict[str, Any]:
    step = {"name": "s", "image": "x", "computeResources": {"requests": {"cpu": cpu}}}
    return {"spec": {"tasks": [
        {"name": "fetch", "taskRef": {"name": "fetch"}},
        *({"name": b, "runAfter": ["fetch"], "taskSpec": {"steps": [step]}} for b in BUILDS),
    ]}}


def started(cpu: str = "2", put: list[Any] | None = None) -> tuple[Any, Any, dict[str, Any]]:
    """A run whose scout was made (`put`: the work put on the queue is recorded there)."""
    operator, kube = make(caches=True)
    if put is not None:
        operator.enqueue = lambda key, slot, act, seconds: put.append((key, slot, seconds, act))
    kube.objects["pipelines"] = {"fan-out-in": pipeline(cpu)}
    kube.objects["tasks"] = {"fetch": {"spec": {"steps": [
        {"name": "s", "image": "x", "computeResources": {"requests": {"cpu": "1"}}}]}}}
    body = factories.pipelinerun()
    kube.runs[body["metadata"]["name"]] = body
    operator.reconcile_run(body)
    return operator, kube, body


def bound(manifest: dict[str, Any], node: str) -> dict[str, Any]:
    """The pod as the watch shows it once the scheduler bound it."""
    meta = {**manifest["metadata"], "uid": f"uid-{manifest['metadata']['name']}",
            "creationTimestamp": "2026-11-22T03:00:01Z"}
    return {**manifest, "metadata": meta, "spec": {**manifest["spec"], "nodeName": node}}


def scout_found_room(operator: Any, kube: Any, node: str = "n1") -> dict[str, Any]:
    scout: dict[str, Any]
    [scout] = kube.pods.values()
    operator.on_room_pod(bound(scout, node), deleted=False)  # the watch shows it: acted on
    return scout


def pod(name: str, node: str = "", phase: str = "Pending", **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "team-a", "uid": f"uid-{name}",
                         "labels": labels, "creationTimestamp": "2026-11-22T03:00:01Z"},
            "spec": {"nodeName": node}, "status": {"phase": phase}}


def balloon_running(operator: Any, node: str = "n1") -> None:
    """The watch shows the run's balloon pod running on the node."""
    operator.placement.on_balloon_pod(pod(f"{balloon.balloon_name(UID)}-0", node, "Running", **{
        names.LABEL_MANAGED_BY: names.APP, names.LABEL_COMPONENT: names.COMPONENT_BALLOON,
        names.LABEL_RUN_UID: UID}))


def task_pod(task: str, phase: str, cpu: str, node: str = "n1") -> dict[str, Any]:
    """A TaskRun pod of the run, pinned beside its balloon, asking for `cpu`."""
    made = pod(f"{task}-pod", node, phase, **{
        "tekton.dev/pipelineRun": "build-42", "tekton.dev/pipelineRunUID": UID,
        "tekton.dev/taskRun": f"build-42-{task}", "tekton.dev/pipelineTask": task})
    made["spec"]["containers"] = [{"name": "step-s", "resources": {"requests": {"cpu": cpu}}}]
    term = affinity.term_for(RunRef(name="build-42", uid=UID), "kubernetes.io/hostname")
    made["spec"]["affinity"] = {"podAffinity": {affinity.REQUIRED: [term]}}
    return made


def test_a_run_whose_peak_asks_for_cpu_gets_a_scout_then_a_balloon_that_follows_it() -> None:
    operator, kube, _ = started()
    assert kube.statefulsets == {}  # the scout looks for room first
    scout = scout_found_room(operator, kube)
    [sts] = kube.statefulsets.values()
    assert reservation.requires_room(sts["spec"]["template"]["spec"], UID)
    assert scout["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "6"}
    assert scout["spec"]["priorityClassName"] == "tekton-coscheduler-reservation"
    assert scout["metadata"]["annotations"][reservation.ANNOTATION_ROLE] == reservation.SCOUT


def test_a_decision_read_before_the_scout_was_made_makes_no_second_scout() -> None:
    """A worker's sources read before another made the scout: once the watch shows the scout,
    the run is no longer waited on, and the stale sources must not count it as missing."""
    operator, kube, body = started()
    [scout] = kube.pods.values()
    read: list[Any] = []
    view = operator.capacity.view
    operator.capacity.view = lambda *args, **kw: read.append((args, kw))
    operator.reconcile_run(body)  # as another worker would: its plan and sources
    operator.capacity.view = view
    [(args, kw)] = read
    stale = kw.get("src") or args[-1]
    assert not stale.rooms, "read before the watch showed the scout"
    made = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    shown = {**scout, "metadata": {**scout["metadata"], "uid": "uid-scout",
                                   "creationTimestamp": made}}
    operator.capacity.on_room_pod(shown, deleted=False)  # the watch shows it, pending
    kube.pods.clear()
    room = view(*args, **kw)
    assert room is not None
    operator.applier.apply(PipelineRun.from_body(body), roomplan.plan(room).actions)
    assert kube.pods == {}


def test_a_run_capacity_asks_to_plan_again_goes_back_on_the_work_queue() -> None:
    """The scout's pod event (the pod watch's) and a refused reservation (inside the run's own
    decision) do not decide the run in place: the run goes on the work queue, where a failure
    is retried with a backoff (faces/serial.py), and is decided there."""
    operator, kube, body = started()
    queued: list[str] = []
    operator.submit = lambda uid, looked_at, listed: queued.append(uid)
    scout_found_room(operator, kube)
    assert queued == [UID] and kube.statefulsets == {}
    operator.look(body)  # as the queue hands it back
    [sts] = kube.statefulsets.values()
    assert reservation.requires_room(sts["spec"]["template"]["spec"], UID)


def test_a_scout_s_waits_running_out_are_work_the_run_put_for_later_under_its_key() -> None:
    """No sweep tends every live run: a wait that runs out between events (a scout said waiting
    for room at 20 s, then asking for half at the policy's wait) is the run's own work, put for
    later under its key each time it is tended, and a look at the run when it comes."""
    put: list[tuple[str, Any, float, Any]] = []
    operator, kube, body = started(put=put)
    [scout] = kube.pods.values()
    # Made: looked at again in 10 s, should the watch never show it (core/capacity/settle.py).
    [(key, slot, seconds, again)] = put
    assert (key, slot) == (UID, ("later", "look")) and settle.SETTLE_MAX - 1 < seconds <= 10

    def shown(age: float) -> dict[str, Any]:
        made = (datetime.now(UTC) - timedelta(seconds=age)).strftime("%Y-%m-%dT%H:%M:%SZ")
        return {**scout, "metadata": {**scout["metadata"], "uid": "uid-scout",
                                      "creationTimestamp": made}}

    operator.capacity.on_room_pod(shown(0), deleted=False)  # the watch shows it, pending
    again()  # the queue's worker, 10 s on
    [(key, slot, seconds, again)] = put[1:]  # said waiting for room at 20 s
    assert (key, slot) == (UID, ("later", "look")) and 18 < seconds <= 20.5
    operator.look(body)  # an event of the run: the same wait, not put twice
    assert len(put) == 2
    operator.capacity.on_room_pod(shown(21), deleted=False)  # 21 s on, no event of the run
    assert [r for r, _ in kube.events if r == "WaitingForRoom"] == []
    again()
    assert [r for r, _ in kube.events if r == "WaitingForRoom"] == ["WaitingForRoom"]
    [(key, slot, seconds, _)] = put[2:]  # and the next: the scout asks for half at 60 s
    assert (key, slot) == (UID, ("later", "look")) and 37 < seconds <= 39.5


def test_a_run_of_tasks_without_requests_is_anchored_by_the_balloon_alone() -> None:
    operator, kube = make(caches=True)
    kube.objects["pipelines"] = {"fan-out-in": {"spec": {"tasks": [
        {"name": "t", "taskSpec": {"steps": [{"name": "s", "image": "x"}]}}]}}}
    kube.objects["tasks"] = {}
    body = factories.pipelinerun()
    kube.runs[body["metadata"]["name"]] = body
    operator.reconcile_run(body)
    [sts] = kube.statefulsets.values()
    assert not reservation.requires_room(sts["spec"]["template"]["spec"], UID)
    assert kube.pods == {}


def test_once_anchored_a_keeper_holds_what_the_builds_need_beyond_the_running_fetch() -> None:
    operator, kube, _ = started()
    scout = scout_found_room(operator, kube)
    balloon_running(operator)
    # fetch (1 CPU) bound beside it preempted the scout: the scheduler deleted it
    kube.pods.clear()
    operator.placement.on_task_pod(task_pod("fetch", "Running", "1"))
    operator.on_room_pod(bound(scout, "n1"), deleted=True)  # acted on as soon as it is seen
    [keeper] = kube.pods.values()
    assert keeper["metadata"]["annotations"][reservation.ANNOTATION_ROLE] == reservation.KEEPER
    assert keeper["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "5"}


def test_when_a_layer_ends_its_keeper_goes_so_that_the_next_layer_finds_the_room_free() -> None:
    """The builds would have to preempt a keeper still there, and kube-scheduler may leave a
    preemptor waiting for an unrelated event (core/capacity/reservation.py). The keeper held 59 CPUs
    beside fetch's 1: close enough to the builds' 60 to be kept, were it not for that."""
    operator, kube, _ = started(cpu="20")
    scout = scout_found_room(operator, kube)
    balloon_running(operator)
    kube.pods.clear()  # fetch preempted the scout
    operator.placement.on_task_pod(task_pod("fetch", "Running", "1"))
    operator.on_room_pod(bound(scout, "n1"), deleted=True)
    [keeper] = kube.pods.values()
    operator.on_room_pod(bound(keeper, "n1"), deleted=False)  # the watch shows it
    ended = task_pod("fetch", "Succeeded", "1")
    operator.placement.on_task_pod(ended)
    operator.on_run_pod(ended)
    assert kube.pods == {} and kube.deleted[-1] == keeper["metadata"]["name"]
    operator.on_room_pod(bound(keeper, "n1"), deleted=True)  # the watch shows it gone
    build = task_pod("build-a", "Running", "20")  # its siblings not seen yet
    operator.placement.on_task_pod(build)
    operator.on_run_pod(build)
    assert kube.pods == {}, "no reservation while the next layer's pods are still coming"


def test_once_one_build_of_a_resolver_task_runs_the_keeper_holds_room_for_its_siblings() -> None:
    """Builds behind a resolver are unknown before they run (the policy sets no estimate):
    the first build's pod tells what each asks, and the keeper holds it for the other two."""
    operator, kube = make(caches=True)
    git = {"resolver": "git", "params": [{"name": "pathInRepo", "value": "build.yaml"}]}
    kube.objects["pipelines"] = {"fan-out-in": {"spec": {"tasks": [
        {"name": "fetch", "taskRef": {"name": "fetch"}},
        *({"name": b, "runAfter": ["fetch"], "taskRef": git} for b in BUILDS)]}}}
    kube.objects["tasks"] = {"fetch": {"spec": {"steps": [
        {"name": "s", "image": "x", "computeResources": {"requests": {"cpu": "1"}}}]}}}
    body = factories.pipelinerun()
    kube.runs[body["metadata"]["name"]] = body
    operator.reconcile_run(body)
    scout = scout_found_room(operator, kube)
    assert scout["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1"}
    balloon_running(operator)
    kube.pods.clear()  # the scout went
    operator.on_room_pod(bound(scout, "n1"), deleted=True)
    operator.placement.on_task_pod(task_pod("fetch", "Succeeded", "1"))
    operator.placement.on_task_pod(task_pod("build-a", "Running", "2"))
    [before] = kube.pods.values()  # the keeper for fetch, before any build was known
    assert before["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1"}
    kube.pods.clear()  # build-a preempted it
    for uid in operator.memory.runs(lambda m: m.acted):
        operator.memory.reset(uid, "acted")
    operator.on_room_pod(bound(before, "n1"), deleted=True)
    [keeper] = kube.pods.values()
    assert keeper["metadata"]["annotations"][reservation.ANNOTATION_ROLE] == reservation.KEEPER
    assert keeper["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "4"}


def test_no_keeper_is_made_while_taskruns_of_a_starting_layer_have_no_pod_yet() -> None:
    """build-a runs and Tekton made build-b and build-c (it resolves each remote task again per
    TaskRun, a second apart): their pods would have to preempt a keeper made now."""
    operator, kube, body = started()
    scout = scout_found_room(operator, kube)
    balloon_running(operator)

    def tekton_made(*tasks: str) -> None:
        body["status"] = {"childReferences": [
            {"kind": "TaskRun", "name": f"build-42-{t}", "pipelineTaskName": t} for t in tasks]}
        operator.live.keep(UID, body)  # as the run watch shows it

    def shown(task: str, phase: str, cpu: str) -> None:
        operator.placement.on_task_pod(task_pod(task, phase, cpu))
        operator.on_run_pod(task_pod(task, phase, cpu))

    tekton_made("fetch")
    kube.pods.clear()  # fetch preempted the scout
    shown("fetch", "Running", "1")
    operator.on_room_pod(bound(scout, "n1"), deleted=True)
    [keeper] = kube.pods.values()  # while fetch runs
    operator.on_room_pod(bound(keeper, "n1"), deleted=False)
    shown("fetch", "Succeeded", "1")
    assert kube.pods == {}  # the layer ended
    operator.on_room_pod(bound(keeper, "n1"), deleted=True)
    tekton_made("fetch", *BUILDS)
    shown("build-a", "Running", "2")
    assert kube.pods == {}


def test_a_peak_that_cannot_be_estimated_is_said_and_the_balloon_anchors_alone() -> None:
    operator, kube = make(caches=True)
    kube.objects["pipelines"] = {"fan-out-in": pipeline(cpu="two")}
    kube.objects["tasks"] = {}
    body = factories.pipelinerun()
    kube.runs[body["metadata"]["name"]] = body
    operator.reconcile_run(body)
    operator.reconcile_run(body)  # said once
    [sts] = kube.statefulsets.values()
    assert not reservation.requires_room(sts["spec"]["template"]["spec"], UID)
    [message] = [m for reason, m in kube.events if reason == "PeakNotEstimated"]
    assert "'two'" in message and "balloon alone" in message


def test_a_reservation_that_cannot_be_made_leaves_the_balloon_to_anchor_alone() -> None:
    """Without the PriorityClass (an operator run outside the chart), pods are refused: the
    balloon must not wait for a reservation that will never come."""
    operator, kube = make(caches=True)
    kube.objects["pipelines"] = {"fan-out-in": pipeline()}
    kube.objects["tasks"] = {"fetch": {"spec": {"steps": [{"name": "s", "image": "x"}]}}}

    def refuse(manifest: dict[str, Any]) -> bool:
        raise ApiError(status=403, reason="no PriorityClass tekton-coscheduler-reservation")

    kube.create_pod = refuse  # type: ignore[method-assign]
    body = factories.pipelinerun()
    kube.runs[body["metadata"]["name"]] = body
    operator.reconcile_run(body)  # the scout is refused...
    operator.reconcile_run(body)  # ...so the next event makes a balloon that anchors alone
    [sts] = kube.statefulsets.values()
    assert not reservation.requires_room(sts["spec"]["template"]["spec"], UID)


def test_a_run_that_ends_before_its_balloon_is_made_leaves_no_reservation() -> None:
    operator, kube, body = started()
    assert kube.pods
    [scout] = kube.pods.values()
    operator.on_room_pod(bound(scout, ""), deleted=False)  # pending, in the index
    body["status"]["conditions"][0]["status"] = "False"
    operator.reconcile_run(body)
    assert kube.pods == {}


def test_a_finished_run_keeps_no_estimate() -> None:
    """Finished runs stay in the cluster by the thousand: they cost no memory."""
    operator, _, body = started()
    assert operator.memory.runs(lambda m: m.estimate)
    body["status"]["conditions"][0]["status"] = "True"
    operator.reconcile_run(body)
    assert operator.memory.runs(lambda m: m.estimate) == []
