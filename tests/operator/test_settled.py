"""Which live runs a resync round reconciles: not those whose balloon stays as it is while
nothing they read changes (operator/observe.py), and each of those at least one round in N.
The work is counted (runs reconciled), not timed."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from controller.core.basics import names
from controller.core.model import tekton
from controller.core.placement import balloon, reconcile
from controller.core.policy import policy
from controller.faces.resync import Resync
from controller.faces.streams import Streams
from controller.kube.client import ApiError
from controller.kube.podindex import PodIndex
from controller.operator.memory import Memories
from controller.operator.observe import Settled
from controller.operator.runs import Operator
from controller.settings import Settings
from tests import factories
from tests.operator.test_runs import MemoryKube, make

ROUNDS = 5


def settled_runs(n: int, namespace: str = "team-a", prefix: str = "run"
                 ) -> tuple[Operator, MemoryKube, Resync]:
    """n live runs with their balloon made (round one) and kept (round two): settled."""
    operator, kube = make(caches=True, settings=Settings(resync_settled_rounds=ROUNDS))
    operator.view.facts = replace(
        operator.view.facts, enabled_namespaces=frozenset({"team-a", "team-b"}))
    add_runs(kube, n, namespace, prefix)
    resync = Resync(operator)
    resync()
    resync()
    return operator, kube, resync


def add_runs(kube: MemoryKube, n: int, namespace: str, prefix: str) -> None:
    for i in range(n):
        body = factories.pipelinerun(name=f"{prefix}-{i}", uid=f"{prefix}-{i}-uid",
                                     namespace=namespace)
        kube.runs[body["metadata"]["name"]] = body


def event_of(kube: MemoryKube, name: str, namespace: str) -> dict[str, Any]:
    """A run made after the resync's first round: the operator knows it from its event."""
    body = factories.pipelinerun(name=name, uid=f"{name}-uid", namespace=namespace)
    kube.runs[name] = body
    return body


def counting(operator: Operator) -> list[str]:
    reconciled: list[str] = []
    reconcile = operator.reconcile_run

    def counted(body: Any, *args: Any, **kwargs: Any) -> Any:
        reconciled.append(body["metadata"]["name"])
        return reconcile(body, *args, **kwargs)

    operator.reconcile_run = counted  # type: ignore[method-assign]
    return reconciled


def test_a_round_leaves_alone_the_live_runs_an_event_has_reconciled_since_the_last() -> None:
    """A long-lived run is not reconciled again every round while its events keep it current:
    its cost does not grow with how long it lives (here no run is ever settled)."""
    operator, kube = make(settings=Settings(resync_settled_rounds=1))
    add_runs(kube, 3, "team-a", "run")
    resync = Resync(operator)
    resync()  # the first round: every run, listed
    event = operator.reconcile_run
    reconciled = counting(operator)
    resync()  # no event since the first round: every live run, the safety net
    assert sorted(reconciled) == ["run-0", "run-1", "run-2"]
    reconciled.clear()
    event(kube.runs["run-1"])  # an event of run-1 reconciles it
    resync()
    assert sorted(reconciled) == ["run-0", "run-2"]


def test_a_round_reconciles_no_settled_run_however_many_there_are() -> None:
    for n in (10, 200):
        operator, _, resync = settled_runs(n)
        reconciled = counting(operator)
        resync()
        assert reconciled == []
        assert operator.metrics.registry.get_sample_value(
            "tekton_coscheduler_resync_runs_left_alone") == n


def test_a_settled_run_is_reconciled_by_one_round_in_n_the_safety_net() -> None:
    operator, _kube, resync = settled_runs(3)
    reconciled = counting(operator)
    per_round = []
    for _ in range(2 * ROUNDS):
        resync()
        per_round.append(len(reconciled))
        reconciled.clear()
    assert per_round == [0, 0, 0, 0, 3, 0, 0, 0, 0, 3]  # settled again by each of those rounds


def test_a_run_whose_balloon_could_not_be_made_is_tried_again_every_round() -> None:
    operator, kube, resync = settled_runs(1)
    create = kube.create_statefulset

    def refused(manifest: Any) -> Any:
        raise ApiError(status=403, reason="exceeded quota: count/statefulsets.apps")

    kube.create_statefulset = refused  # type: ignore[method-assign]
    with pytest.raises(ApiError):  # said on the run, and dropped by the queue (permanent)
        operator.reconcile_run(event_of(kube, "refused", "team-a"))
    reconciled = counting(operator)
    resync()  # not reconciled to its end since: every round tries it
    resync()
    resync()
    assert reconciled == ["refused", "refused", "refused"]
    kube.create_statefulset = create  # type: ignore[method-assign]
    resync()
    assert balloon.balloon_name("refused-uid") in kube.statefulsets


def test_a_deleted_balloon_is_made_again_by_the_next_round() -> None:
    operator, kube, resync = settled_runs(2)
    gone = kube.statefulsets.pop(balloon.balloon_name("run-0-uid"))
    operator.caches.changed("balloons", gone, old=gone, deleted=True)  # type: ignore[union-attr]
    reconciled = counting(operator)
    resync()
    assert reconciled == ["run-0"]
    assert balloon.balloon_name("run-0-uid") in kube.statefulsets


def test_a_claim_unsettles_the_run_that_owns_it_or_else_its_namespace() -> None:
    operator, kube, resync = settled_runs(2)
    operator.reconcile_run(event_of(kube, "other", "team-b"))  # its balloon made
    resync()
    resync()  # kept: settled
    reconciled = counting(operator)
    for owner in ("run-1-uid", "a-run-not-settled-yet"):  # neither unsettles the namespace
        operator.caches.changed("claims", claim("pvc-" + owner, owner))  # type: ignore[union-attr]
    resync()
    assert reconciled == ["run-1"]
    reconciled.clear()
    named = {"metadata": {"name": "source", "namespace": "team-a"}}  # what the runs name
    operator.caches.changed("claims", named)  # type: ignore[union-attr]
    resync()
    assert sorted(reconciled) == ["run-0", "run-1"]


def test_a_claim_s_binding_or_a_balloon_s_status_leaves_its_run_settled() -> None:
    operator, kube, resync = settled_runs(2)
    reconciled = counting(operator)
    caches = operator.caches
    made = claim("pvc-1", "run-1-uid")
    annotated = {**made["metadata"], "annotations": {"pv.kubernetes.io/bind-completed": "yes"}}
    bound = {**made, "metadata": annotated, "spec": {**made["spec"], "volumeName": "pv-1"},
             "status": {"phase": "Bound"}}
    caches.changed("claims", bound, old=made)  # type: ignore[union-attr]
    sts = kube.statefulsets[balloon.balloon_name("run-0-uid")]
    counted = {**sts, "status": {"replicas": 1, "readyReplicas": 1}}
    caches.changed("balloons", counted, old=sts)  # type: ignore[union-attr]
    resync()
    assert reconciled == []
    respecified = {**counted, "spec": {**sts["spec"], "replicas": 0}}
    caches.changed("balloons", respecified, old=counted)  # type: ignore[union-attr]
    gone = {**bound, "metadata": {**bound["metadata"], "ownerReferences": []}}
    caches.changed("claims", gone, old=bound)  # type: ignore[union-attr]  # now named, perhaps
    resync()
    assert sorted(reconciled) == ["run-0", "run-1"]


def test_a_resolution_request_unsettles_the_run_that_owns_it_a_task_run_s_none() -> None:
    operator, _kube, resync = settled_runs(2)
    reconciled = counting(operator)
    for kind, uid in (("TaskRun", "a-taskrun-uid"), ("PipelineRun", "run-0-uid")):
        request = {"metadata": {"name": "r-" + uid, "namespace": "team-a",
                                "ownerReferences": [{"kind": kind, "uid": uid}]}}
        operator.caches.changed("resolutionrequests", request)  # type: ignore[union-attr]
    resync()
    assert reconciled == ["run-0"]


def claim(name: str, owner: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "team-a",
                         "ownerReferences": [{"kind": "PipelineRun", "uid": owner}]},
            "spec": {"accessModes": ["ReadWriteOnce"]}, "status": {"phase": "Pending"}}


def test_a_quota_limit_range_task_or_pipeline_unsettles_its_namespace_s_runs_only() -> None:
    for kind in ("resourcequotas", "limitranges", "tasks", "pipelines"):
        operator, kube, resync = settled_runs(2)
        operator.reconcile_run(event_of(kube, "other", "team-b"))
        resync()
        resync()
        reconciled = counting(operator)
        operator.caches.changed(kind, {"metadata": {"name": "x", "namespace": "team-b"}})  # type: ignore[union-attr]
        resync()
        assert reconciled == ["other"], kind


def test_a_change_of_the_cluster_s_facts_unsettles_every_run_but_a_policy_s_status_none() -> None:
    operator, _kube, resync = settled_runs(2)
    reconciled = counting(operator)
    view = operator.view
    status_only = replace(view.facts, policy_objects=({"status": {"conditions": []}},))
    view.change(status_only)  # type: ignore[attr-defined]
    assert operator.settled.skips("run-0-uid") and operator.settled.skips("run-1-uid")
    changed = replace(view.facts, policy_objects=(), defaults=policy.PolicyResolution(
        replace(Settings().default_policy(), topology_key="topology.kubernetes.io/zone")))
    view.change(changed)  # type: ignore[attr-defined]
    resync()
    assert sorted(reconciled) == ["run-0", "run-1"]


def test_a_run_s_balloon_pod_made_bound_or_deleted_unsettles_it_its_status_alone_not() -> None:
    operator, _kube, resync = settled_runs(2)
    api = SimpleNamespace(custom=SimpleNamespace(list_cluster_custom_object=None),
                          core=SimpleNamespace(list_pod_for_all_namespaces=None))
    streams = Streams(operator, api, 30.0)  # type: ignore[arg-type]
    reconciled = counting(operator)
    pod: dict[str, Any] = {"metadata": {"name": f"{balloon.balloon_name('run-0-uid')}-0", "namespace": "team-a",
                        "uid": "pod-uid", "creationTimestamp": "2026-11-22T03:00:01Z",
                        "labels": {names.LABEL_MANAGED_BY: names.APP,
                                   names.LABEL_COMPONENT: names.COMPONENT_BALLOON,
                                   names.LABEL_RUN_UID: "run-0-uid"}},
           "spec": {"nodeName": "node-1"}, "status": {"phase": "Running"}}
    streams.on_pod("MODIFIED", pod)  # bound: news to the pod index
    resync()
    assert reconciled == ["run-0"]
    reconciled.clear()
    resync()  # settled again (the round above kept it)
    pod["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    streams.on_pod("MODIFIED", pod)  # its status alone
    resync()
    assert reconciled == []
    streams.on_pod("DELETED", pod)
    resync()
    assert reconciled == ["run-0"]


def test_a_finished_run_leaves_nothing_settled() -> None:
    operator, kube, _resync = settled_runs(1)
    assert operator.settled.skips("run-0-uid")
    kube.statefulsets.clear()  # its balloon already gone: the finished run's cheap exit
    done = factories.pipelinerun(name="run-0", uid="run-0-uid", succeeded="True")
    operator.reconcile_run(done)
    assert not operator.settled.skips("run-0-uid")
    assert operator.memory.runs(lambda m: m.kept) == []


def _claim_of_run_0(operator: Operator) -> None:
    operator.caches.changed("claims", {"metadata": {  # type: ignore[union-attr]
        "name": "pvc-0", "namespace": "team-a",
        "ownerReferences": [{"kind": "PipelineRun", "uid": "run-0-uid"}]}})


def _quota_of_team_a(operator: Operator) -> None:
    operator.caches.changed("resourcequotas", {  # type: ignore[union-attr]
        "metadata": {"name": "q", "namespace": "team-a"}})


def _facts(operator: Operator) -> None:
    view = operator.view
    view.change(replace(view.facts, defaults=policy.PolicyResolution(  # type: ignore[attr-defined]
        replace(Settings().default_policy(), topology_key="topology.kubernetes.io/zone"))))


@pytest.mark.parametrize("change", [_claim_of_run_0, _quota_of_team_a, _facts],
                         ids=["run", "namespace", "facts"])
def test_a_change_said_while_the_run_is_being_decided_is_not_lost_by_its_keep(
        change: Any) -> None:
    """A watch event that comes after the decision has read the caches, and before its "keep"
    is recorded, leaves the run for the next round (not for the safety net's): a change to
    the run itself, to what every run of its namespace reads, or to the cluster's facts."""
    operator, _, resync = settled_runs(1)
    observe = operator.observer.observe

    def observed_then_claim_changes(*args: Any, **kw: Any) -> Any:
        seen = observe(*args, **kw)
        change(operator)
        return seen

    operator.observer.observe = observed_then_claim_changes  # type: ignore[method-assign]
    for _ in range(ROUNDS):  # the safety net's round reconciles it, meanwhile the claim
        resync()
    operator.observer.observe = observe  # type: ignore[method-assign]
    reconciled = counting(operator)
    resync()
    assert reconciled == ["run-0"]


def test_a_settled_run_s_event_that_changes_nothing_its_decision_reads_is_not_reconciled(
) -> None:
    """Tekton rewrites a running run's status a few dozen times: a TaskRun made, a condition's
    message. Only what the decision reads of the run wakes it; its newest body is kept."""
    operator, kube, _resync = settled_runs(1)
    reconciled = counting(operator)
    body = kube.runs["run-0"]

    def written(children: int, message: str, succeeded: str = "Unknown") -> dict[str, Any]:
        status = {"conditions": [{"type": "Succeeded", "status": succeeded, "message": message}],
                  "childReferences": [{"name": f"run-0-t{i}"} for i in range(children)]}
        return {**body, "status": status}

    operator.run_event(written(1, "Tasks Completed: 0"))  # its first TaskRun: read
    operator.run_event(written(2, "Tasks Completed: 1"))
    operator.run_event(written(3, "Tasks Completed: 2"))
    assert reconciled == ["run-0"]
    live = operator.live.get("run-0-uid")
    assert live is not None
    assert live["status"]["conditions"][0]["message"] == "Tasks Completed: 2"
    operator.run_event(written(3, "Completed", succeeded="True"))
    assert reconciled == ["run-0", "run-0"]
    assert kube.statefulsets == {}


def test_a_run_whose_mark_could_not_be_made_is_not_settled_its_next_event_tries_again(
) -> None:
    operator, kube = make(caches=True, settings=Settings(resync_settled_rounds=ROUNDS))
    body = event_of(kube, "run-0", "team-a")
    body["metadata"]["labels"] = {tekton.LABEL_PIPELINE: "fan-out-in"}
    body["status"]["pipelineSpec"] = {"tasks": []}  # Tekton's first writes: the mark is due
    patch = kube.patch_tekton

    def refused(*args: Any, **kwargs: Any) -> None:
        raise ApiError(status=500, reason="etcd leader changed")

    kube.patch_tekton = refused  # type: ignore[method-assign]
    for _ in range(2):  # made, then kept, but not marked: raised for the queue to try again
        with pytest.raises(ApiError):
            operator.reconcile_run(body)
    reads = reconcile.reads(tekton.PipelineRun.from_body(body))
    assert not operator.settled.quiet("run-0-uid", reads)
    kube.patch_tekton = patch  # type: ignore[method-assign]
    reconciled = counting(operator)
    operator.run_event(body)
    assert reconciled == ["run-0"]
    assert names.LABEL_ANCHORED in kube.runs["run-0"]["metadata"]["labels"]


def test_a_change_to_a_run_is_remembered_two_rounds_then_forgotten() -> None:
    """A claim's or request's event may name a run already gone: what is kept of it goes once
    two whole rounds have ended since (decisions take less), so the memory grows with the runs acted on, not with
    the events."""
    memory = Memories()
    settled = Settled(ROUNDS, PodIndex(), memory)
    begun = settled.begin()
    settled.touch(["gone-uid"])
    settled.settle("gone-uid", "team-a", begun)  # a decision that read before the change
    assert memory.runs(lambda m: True) == ["gone-uid"]
    assert not settled.skips("gone-uid")
    for _ in range(2):  # the round it came in ends, and two more begin
        settled.next_round()
        assert memory.runs(lambda m: True) == ["gone-uid"]
    settled.next_round()  # the second ends
    assert memory.runs(lambda m: True) == []
