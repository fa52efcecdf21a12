"""The operator's orchestration against an in-memory API (a stand-in: the real evidence is the
e2e suite). Here: races and replays that are hard to time on a real cluster."""

from __future__ import annotations

import copy
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controller.core.basics import names
from controller.core.model.tekton import PipelineRun
from controller.core.placement import balloon, budget, gate
from controller.core.placement.reconcile import Verb
from controller.core.policy import policy
from controller.faces.resync import Resync
from controller.kube import errors
from controller.kube.caches import hears
from controller.kube.client import ApiError
from controller.kube.clusterview import Facts
from controller.kube.store import owner_uids
from controller.metrics import Metrics
from controller.operator.runs import Operator
from controller.settings import Settings
from tests import factories
from tests.operator.test_placement import balloon_pod


class MemoryKube:
    def __init__(self) -> None:
        self.runs: dict[str, dict[str, Any]] = {}
        self.statefulsets: dict[str, dict[str, Any]] = {}
        self.deleted: list[str] = []
        self.on_list_runs: list[Any] = []
        self.budgets: dict[str, dict[str, Any]] = {}
        self.objects: dict[str, dict[str, dict[str, Any]]] = {}  # kind -> name -> watched
        self.pods: dict[str, dict[str, Any]] = {}
        self.events: list[tuple[str, str]] = []  # (reason, message) posted on runs
        self.task_runs: dict[str, dict[str, Any]] = {}

    def patch_tekton(self, namespace: str, plural: str, name: str, patch: dict[str, Any]) -> None:
        """A merge patch of the metadata (labels, annotations), as the mark is."""
        target = (self.runs if plural == "pipelineruns" else self.task_runs).get(name)
        if target is None:
            return
        for key, values in patch["metadata"].items():
            target["metadata"].setdefault(key, {}).update(values)

    def list_task_runs(self, namespace: str, run_name: str) -> list[dict[str, Any]]:
        return [copy.deepcopy(t) for t in self.task_runs.values()
                if t["metadata"]["labels"].get("tekton.dev/pipelineRun") == run_name]

    def list_pipelineruns(self) -> list[dict[str, Any]]:
        listed = [copy.deepcopy(r) for r in self.runs.values()]
        for hook in self.on_list_runs:  # what happens while the answer travels back
            hook()
        return listed

    def get_pipelinerun(self, namespace: str, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.runs.get(name))

    def list_balloons(self) -> list[dict[str, Any]]:
        return [copy.deepcopy(s) for s in self.statefulsets.values()]

    def get_statefulset(self, namespace: str, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.statefulsets.get(name))

    def create_statefulset(self, manifest: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        name = manifest["metadata"]["name"]
        if name in self.statefulsets:
            return self.statefulsets[name], False
        self.statefulsets[name] = {
            **copy.deepcopy(manifest),
            "metadata": {
                **manifest["metadata"],
                "uid": f"sts-{name}",
                "creationTimestamp": "2026-11-22T03:00:00Z",
            },
        }
        return self.statefulsets[name], True

    def annotate_statefulset(self, namespace: str, name: str, annotations: dict[str, str]) -> None:
        self.statefulsets[name]["metadata"].setdefault("annotations", {}).update(annotations)

    def replace_balloon_template(self, manifest: dict[str, Any]) -> None:
        name = manifest["metadata"]["name"]
        self.statefulsets[name]["spec"]["template"] = copy.deepcopy(manifest["spec"]["template"])

    def create_pdb(self, manifest: dict[str, Any]) -> bool:
        meta = manifest["metadata"]
        made = copy.deepcopy(manifest)
        made["metadata"]["uid"] = f"pdb-{meta['namespace']}"
        key = f"{meta['namespace']}/{meta['name']}"
        return self.budgets.setdefault(key, made) is made

    def delete_pdb(self, namespace: str, name: str, uid: str) -> None:
        self.deleted.append(f"{namespace}/{name}")
        self.budgets.pop(f"{namespace}/{name}", None)

    def delete_statefulset(self, namespace: str, name: str, uid: str | None = None) -> bool:
        self.deleted.append(name)
        return self.statefulsets.pop(name, None) is not None

    def list_pvcs(self, namespace: str) -> list[dict[str, Any]]:
        return []

    def create_pod(self, manifest: dict[str, Any]) -> bool:
        name = manifest["metadata"]["name"]
        if name in self.pods:
            return False
        self.pods[name] = copy.deepcopy(manifest)
        return True

    def delete_pod(self, namespace: str, name: str, uid: str, grace: int | None = None) -> None:
        self.deleted.append(name)
        self.pods.pop(name, None)

    def list_unscheduled_placeholders(self) -> list[dict[str, Any]]:
        return [copy.deepcopy(p) for p in self.pods.values()
                if (p.get("metadata") or {}).get("labels", {}).get(
                    "app.kubernetes.io/component") == "affinity-assistant"
                and not (p.get("spec") or {}).get("nodeName")]

    def list_balloon_pods(self, namespace: str, run_uid: str) -> list[dict[str, Any]]:
        return [{"spec": {"nodeName": "node-1"}}]

    def release_pod_gate(self, namespace: str, name: str, uid: str, patch: dict[str, Any]) -> bool:
        self.pods.setdefault(name, {}).setdefault("patches", []).append(patch)
        return True

    def event_messages(self, namespace: str, kind: str, reason: str) -> dict[str, list[str]]:
        return {}

    def post_event(self, involved: Any, reason: str, message: str, **kwargs: Any) -> None:
        self.events.append((reason, message))


class StaticView:
    def __init__(self) -> None:
        self.facts = Facts(
            synced=True,
            enabled_namespaces=frozenset({"team-a"}),
            assistant_on=False,
            defaults=policy.PolicyResolution(Settings().default_policy()),
        )
        self.listeners: list[Any] = []

    def subscribe(self, listener: Any) -> None:
        self.listeners.append(listener)

    def change(self, facts: Facts) -> None:
        """The cluster view's reflectors saw a change: its listeners hear of it."""
        old, self.facts = self.facts, facts
        for listener in self.listeners:
            listener(old, facts)


def tied_pod(run: str, run_uid: str, task: str) -> dict[str, Any]:
    """A TaskRun pod admission tied to the run's balloon (before the run was marked)."""
    pod = factories.taskrun_pod(run=run, run_uid=run_uid, task=task)
    pod["metadata"]["uid"] = f"{run}-{task}-pod"
    pod["metadata"]["labels"][names.LABEL_TIED] = "true"
    pod["spec"]["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": balloon.selector_labels(run_uid)},
         "topologyKey": "kubernetes.io/hostname"}]}}
    return pod


class MemoryCaches:
    """The leader's watch caches, as synced: what the API server holds, without asking it."""

    synced = True

    def __init__(self, kube: MemoryKube) -> None:
        self.kube = kube
        self.listeners: dict[str, list[Any]] = {}

    def listen(self, kind: str, listener: Any, reads: Any = None) -> None:
        self.listeners.setdefault(kind, []).append((listener, reads))

    def changed(self, kind: str, obj: dict[str, Any], old: dict[str, Any] | None = None,
                deleted: bool = False) -> None:
        """A watch event brought the object (already in `kube.objects`), replacing `old`."""
        for listener, reads in self.listeners.get(kind, []):
            if hears(reads, obj, old, deleted):
                listener(obj)

    def balloon(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.kube.statefulsets.get(name)

    def balloons(self) -> list[dict[str, Any]]:
        return list(self.kube.statefulsets.values())

    def budgets(self) -> list[dict[str, Any]]:
        """Ours: the cache watches by our labels."""
        return [b for b in self.kube.budgets.values()
                if (b["metadata"].get("labels") or {}).get(names.LABEL_MANAGED_BY) == names.APP]

    def claims_of(self, namespace: str, run_uid: str, named: Any) -> list[dict[str, Any]]:
        return []

    def is_synced(self, kind: str) -> bool:
        return True

    def in_namespace(self, kind: str, namespace: str) -> list[dict[str, Any]]:
        return list(self.kube.objects.get(kind, {}).values())

    def owned_by(self, kind: str, uid: str) -> list[dict[str, Any]]:
        return [o for o in self.in_namespace(kind, "") if uid in owner_uids(o)]

    def quotas(self, namespace: str) -> list[dict[str, Any]]:
        return self.in_namespace("resourcequotas", namespace)

    def limit_ranges(self, namespace: str) -> list[dict[str, Any]]:
        return self.in_namespace("limitranges", namespace)

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.kube.objects.get(kind, {}).get(name)


class Counting:
    """Records every call the operator makes to the client."""

    def __init__(self, kube: MemoryKube) -> None:
        self.kube, self.calls = kube, []  # type: ignore[var-annotated]

    def __getattr__(self, name: str) -> Any:
        self.calls.append(name)
        return getattr(self.kube, name)


def make(caches: bool = False, settings: Settings | None = None) -> tuple[Operator, MemoryKube]:
    kube = MemoryKube()
    cache = MemoryCaches(kube) if caches else None
    return Operator(settings or Settings(), kube, StaticView(), Metrics(),  # type: ignore[arg-type]
                    cache), kube  # type: ignore[arg-type]


def test_a_run_created_during_a_resync_keeps_its_new_balloon() -> None:
    operator, kube = make()

    def run_and_balloon_appear() -> None:  # what the event handler does meanwhile
        body = factories.pipelinerun(name="late", uid="late-uid")
        kube.runs["late"] = body
        operator.reconcile_run(body)

    kube.on_list_runs.append(run_and_balloon_appear)
    Resync(operator)()
    assert balloon.balloon_name("late-uid") in kube.statefulsets
    assert kube.deleted == []


def test_resync_deletes_orphans_and_balloons_of_finished_runs_only() -> None:
    operator, kube = make()
    live = factories.pipelinerun(name="live", uid="live-uid")
    done = factories.pipelinerun(name="done", uid="done-uid")
    for body in (live, done):
        kube.runs[body["metadata"]["name"]] = body
        operator.reconcile_run(body)
    orphan = copy.deepcopy(kube.statefulsets[balloon.balloon_name("live-uid")])
    orphan["metadata"]["name"] = "coschedule-gone"
    orphan["metadata"]["labels"][names.LABEL_RUN_UID] = "gone-uid"
    kube.statefulsets["coschedule-gone"] = orphan
    kube.runs["done"]["status"]["conditions"][0]["status"] = "True"
    Resync(operator)()
    assert set(kube.statefulsets) == {balloon.balloon_name("live-uid")}


def test_replayed_events_create_one_balloon() -> None:
    operator, kube = make()
    body = factories.pipelinerun()
    kube.runs[body["metadata"]["name"]] = body
    for _ in range(5):
        operator.reconcile_run(body)
    assert len(kube.statefulsets) == 1


def test_the_balloons_of_a_namespace_share_one_budget_made_once() -> None:
    """No eviction (a drain, an autoscaler) takes an anchor from under a running task; one
    budget a namespace, asked for once while this process leads."""
    operator, kube = make()
    calls = Counting(kube)
    operator.kube = operator.executor.kube = calls  # type: ignore[assignment]
    for i in range(3):
        body = factories.pipelinerun(name=f"run-{i}", uid=f"run-{i}-uid")
        kube.runs[body["metadata"]["name"]] = body
        operator.reconcile_run(body)
    assert len(kube.statefulsets) == 3
    [pdb] = kube.budgets.values()
    assert pdb["metadata"]["namespace"] == "team-a"
    assert pdb["spec"]["maxUnavailable"] == 0
    assert calls.calls.count("create_pdb") == 1


@pytest.mark.parametrize(("status", "reason", "said"), [
    (403, "exceeded quota: count/poddisruptionbudgets.policy", ["BalloonUnprotected"]),
    # Throttled (API Priority and Fairness): it mends itself, nothing to tell the run's owners.
    (429, "Too Many Requests", []),
])
def test_a_budget_not_made_is_said_if_trying_again_cannot_mend_it_and_made_by_the_resync(
    status: int, reason: str, said: list[str]
) -> None:
    operator, kube = make(caches=True)
    create = kube.create_pdb

    def refused(manifest: Any) -> bool:
        raise ApiError(status=status, reason=reason)

    kube.create_pdb = refused  # type: ignore[method-assign]
    body = factories.pipelinerun()
    kube.runs[body["metadata"]["name"]] = body
    operator.reconcile_run(body)
    assert [r for r, _ in kube.events] == said
    kube.create_pdb = create  # type: ignore[method-assign]
    Resync(operator)()
    assert list(kube.budgets) == [f"team-a/{budget.NAME}"]


def test_a_balloon_denied_by_a_restarted_api_server_is_tried_again_and_said_only_if_it_lasts(
) -> None:
    """A restarted API server's authorizer denies for a moment: no Warning, the work queue tries
    again (faces/serial.py). Denied ten tries in a row (a Role taken away) is said."""
    operator, kube = make()
    create = kube.create_statefulset

    def denied(manifest: Any) -> tuple[dict[str, Any], bool]:
        raise ApiError(status=403, reason='statefulsets.apps is forbidden: User "system:service'
                       'account:tcs:op" cannot create resource "statefulsets" in API group "apps"')

    kube.create_statefulset = denied  # type: ignore[method-assign]
    body = factories.pipelinerun()
    kube.runs[body["metadata"]["name"]] = body
    for before in range(errors.LASTING):
        token = errors.failed_before.set(before)
        try:
            with pytest.raises(ApiError):
                operator.reconcile_run(body)
        finally:
            errors.failed_before.reset(token)
        assert [r for r, _ in kube.events] == (["BalloonCreateFailed"]
                                               if before == errors.LASTING - 1 else []), before
    kube.create_statefulset = create  # type: ignore[method-assign]
    operator.reconcile_run(body)
    assert balloon.balloon_name(body["metadata"]["uid"]) in kube.statefulsets


def test_a_budget_of_another_s_that_holds_the_name_is_said_on_the_namespace_s_runs() -> None:
    operator, kube = make(caches=True)
    theirs = {"metadata": {"name": budget.NAME, "namespace": "team-a", "uid": "theirs"},
              "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}
    kube.budgets[f"team-a/{budget.NAME}"] = theirs
    for i in range(2):
        body = factories.pipelinerun(name=f"run-{i}", uid=f"run-{i}-uid")
        kube.runs[body["metadata"]["name"]] = body
        operator.reconcile_run(body)
    assert [r for r, _ in kube.events] == []  # the watch may not have shown ours yet
    Resync(operator)()
    said = [m for r, m in kube.events if r == "BalloonUnprotected"]
    assert len(said) == 2 and "did not make" in said[0]
    assert kube.budgets[f"team-a/{budget.NAME}"] is theirs


def test_a_budget_goes_once_its_namespace_is_switched_off_and_its_last_balloon_is_gone() -> None:
    operator, kube = make(caches=True)
    body = factories.pipelinerun()
    kube.runs[body["metadata"]["name"]] = body
    operator.reconcile_run(body)
    resync = Resync(operator)
    operator.view.facts = replace(operator.view.facts, enabled_namespaces=frozenset())
    resync()  # switched off, its balloon still there (a marked run's, to its end)
    assert list(kube.budgets) == [f"team-a/{budget.NAME}"]
    kube.statefulsets.clear()
    resync()
    assert kube.budgets == {}


def test_a_stale_view_of_a_finished_run_makes_no_balloon_and_leaves_it_no_longer_live() -> None:
    """Seen with 50 runs at once: a resync's list said 'running' after the run had finished
    and its balloon was deleted; the balloon came back on another node. Decided again on the
    API server's body, the run is not kept among the live ones (each round would ask again)."""
    operator, kube = make()
    stale = factories.pipelinerun(name="done")
    kube.runs["done"] = factories.pipelinerun(name="done", succeeded="True")
    decision = operator.reconcile_run(stale)
    assert kube.statefulsets == {}
    assert decision.why == "run finished"
    assert list(operator.live) == []
    gone = factories.pipelinerun(name="gone", uid="gone-uid")  # deleted since: no body to ask
    decision = operator.reconcile_run(gone)
    assert kube.statefulsets == {} and decision.why == "run no longer live"
    assert "gone-uid" not in operator.live


def test_a_round_leaves_to_its_event_a_run_whose_body_an_event_replaced_meanwhile() -> None:
    """The resync decides on a snapshot of the live runs' bodies; one an event has replaced
    since (here: the run's end, its balloon deleted) is not decided again on the old body,
    which would put the ended run back among the live ones."""
    operator, kube = make(caches=True)
    for name in ("first", "ends"):
        kube.runs[name] = factories.pipelinerun(name=name, uid=f"{name}-uid")
        operator.reconcile_run(kube.runs[name])
    resync = Resync(operator)
    resync()  # the first round: its own list
    reconcile = operator.reconcile_run
    decided: list[str] = []

    def meanwhile(body: Any, run: Any = None, newest: bool = False) -> Any:
        name = body["metadata"]["name"]
        decided.append(name)
        if name == "first":  # the other run's end arrives while the round goes on
            kube.runs["ends"] = factories.pipelinerun(name="ends", uid="ends-uid",
                                                      succeeded="True")
            reconcile(kube.runs["ends"])
        return reconcile(body, run, newest)

    operator.reconcile_run = meanwhile  # type: ignore[method-assign]
    resync.last_round = time.monotonic()  # both due this round: reconciled before it
    operator.settled.forget("first-uid")
    operator.settled.forget("ends-uid")
    resync()
    assert decided == ["first"]
    assert list(operator.live) == ["first-uid"]
    assert list(kube.statefulsets) == [balloon.balloon_name("first-uid")]


def test_a_deleted_run_gets_no_balloon_from_an_old_event() -> None:
    operator, kube = make()
    operator.reconcile_run(factories.pipelinerun(name="gone"))
    assert kube.statefulsets == {}


def test_a_run_recreated_under_the_same_name_is_not_the_old_one() -> None:
    operator, kube = make()
    kube.runs["build"] = factories.pipelinerun(name="build", uid="new-uid")
    operator.reconcile_run(factories.pipelinerun(name="build", uid="old-uid"))
    assert kube.statefulsets == {}


def test_once_seeded_a_resync_asks_the_api_server_nothing_when_all_is_well() -> None:
    """Its cost grows with the live runs and balloons, read from the operator's own index and
    caches; finished runs cost nothing."""
    kube = MemoryKube()
    counting = Counting(kube)
    operator = Operator(Settings(), counting, StaticView(), Metrics(), MemoryCaches(kube))  # type: ignore[arg-type]
    for i in range(5):
        body = factories.pipelinerun(name=f"live-{i}", uid=f"live-{i}-uid")
        kube.runs[body["metadata"]["name"]] = body
        operator.reconcile_run(body)
        # its balloon pod, bound, as the leader's pod watch reports it
        operator.index.balloon_event({"metadata": {"name": f"b-{i}", "namespace": "team-a", "uid": f"b{i}",
                                                   "labels": balloon.selector_labels(f"live-{i}-uid")},
                                      "spec": {"nodeName": "node-1"}}, deleted=False)
    for i in range(50):
        kube.runs[f"done-{i}"] = factories.pipelinerun(name=f"done-{i}", uid=f"done-{i}-uid",
                                                       succeeded="True")
    resync = Resync(operator)
    resync()  # the first round lists every run once
    assert counting.calls.count("list_pipelineruns") == 1
    counting.calls.clear()
    resync()
    assert counting.calls == []


def test_runs_waiting_for_their_anchor_are_said_from_the_pod_watch_not_listed() -> None:
    """A balloon with no node past the grace period is said on the run once, with the
    scheduler's words as the pod watch saw them (the waiting check's BalloonUnschedulable): the
    resync neither LISTs pods per waiting run and round nor says it a second time."""
    kube = MemoryKube()
    counting = Counting(kube)
    operator = Operator(Settings(), counting, StaticView(), Metrics(), MemoryCaches(kube))  # type: ignore[arg-type]
    said: list[str] = []
    operator.notifier.tell = lambda involved, notice, key: said.append(notice.message)  # type: ignore[method-assign]
    for i in range(3):
        body = factories.pipelinerun(name=f"wait-{i}", uid=f"wait-{i}-uid")
        kube.runs[body["metadata"]["name"]] = body
        operator.reconcile_run(body)
        operator.index.balloon_event({
            "metadata": {"name": f"b-{i}", "namespace": "team-a", "uid": f"b{i}",
                         "labels": balloon.selector_labels(f"wait-{i}-uid")},
            "spec": {},
            "status": {"conditions": [{"type": "PodScheduled", "status": "False",
                                       "reason": "Unschedulable",
                                       "message": "0/4 nodes are available: 4 Insufficient cpu."}]},
        }, deleted=False)
    resync = Resync(operator)
    resync()
    counting.calls.clear()
    for _ in range(3):
        resync()
    assert "list_balloon_pods" not in counting.calls
    assert said == []
    for i in range(3):  # each grace's end, as work the run put for later
        operator.waiting.look(f"wait-{i}-uid",
                              datetime.now(UTC) + timedelta(seconds=Settings().balloon_stuck_after))
    assert len(said) == 3 and all("4 Insufficient cpu" in m for m in said)


def test_a_run_given_a_balloon_is_marked_with_its_taskruns_and_stays_anchored_when_its_namespace_is_switched_off() -> None:
    """The run and the TaskRun Tekton made before the mark whose pod the watch showed carry it
    (Tekton copies it to later ones and to every pod, where admission reads it), with no LIST
    of the run's TaskRuns; once the namespace is switched off the run is still served: a
    balloon deleted under it comes back, and its TaskRuns are listed and the rest marked. A
    run that starts afterwards gets nothing."""
    kube = MemoryKube()
    view = StaticView()
    operator = Operator(Settings(), kube, view, Metrics(), MemoryCaches(kube))  # type: ignore[arg-type]
    counted = Counting(kube)
    body = factories.pipelinerun(name="kept", uid="kept-uid")
    kube.runs["kept"] = body
    kube.task_runs["kept-fetch"] = {"metadata": {"name": "kept-fetch", "labels": {
        "tekton.dev/pipelineRun": "kept"}}, "status": {"podName": "kept-fetch-pod"}}
    kube.task_runs["kept-build"] = {"metadata": {"name": "kept-build", "labels": {
        "tekton.dev/pipelineRun": "kept"}}}  # no pod yet: Tekton still writes its labels
    operator.reconcile_run(body)
    operator.marks.kube = counted  # type: ignore[assignment]
    operator.index.task_pod_event(tied_pod("kept", "kept-uid", "fetch"), deleted=False)
    # Tekton's first reconcile has not written the run yet: its own label Update would fail on
    # a write of ours in between, and say so as a Warning on the run
    assert names.LABEL_ANCHORED not in (body["metadata"].get("labels") or {})
    body["metadata"].setdefault("labels", {})["tekton.dev/pipeline"] = "kept"
    body["status"]["pipelineSpec"] = {"tasks": [{"name": "fetch"}]}
    operator.reconcile_run(body)
    assert body["metadata"]["labels"][names.LABEL_ANCHORED] == "kept-uid"
    assert names.LABEL_ANCHORED not in kube.task_runs["kept-build"]["metadata"]["labels"]
    assert body["metadata"]["annotations"][names.ANNOTATION_TOPOLOGY_KEY] == "kubernetes.io/hostname"
    assert kube.task_runs["kept-fetch"]["metadata"]["labels"][names.LABEL_ANCHORED] == "kept-uid"
    assert "list_task_runs" not in counted.calls

    kube.task_runs["kept-build"]["status"] = {"podName": "kept-build-pod"}
    off = Facts(**{**view.facts.__dict__, "enabled_namespaces": frozenset()})
    operator.marks.seeded = True
    queued: list[tuple[str, Any, Any]] = []
    operator.enqueue = lambda key, slot, act, seconds: queued.append((key, slot, act))
    operator.marks.on_facts(view.facts, off)  # in the view's watch thread: work put, no write
    assert names.LABEL_ANCHORED not in kube.task_runs["kept-build"]["metadata"]["labels"]
    [(key, _, act)] = queued
    act()  # the queue's worker, under the run's key
    operator.enqueue = None
    view.facts = off
    assert key == "kept-uid"
    assert kube.task_runs["kept-build"]["metadata"]["labels"][names.LABEL_ANCHORED] == "kept-uid"
    kube.statefulsets.clear()
    operator.reconcile_run(copy.deepcopy(body))
    assert balloon.balloon_name("kept-uid") in kube.statefulsets
    assert "kept-uid" in operator.live

    later = factories.pipelinerun(name="later", uid="later-uid")
    kube.runs["later"] = later
    operator.reconcile_run(later)
    assert balloon.balloon_name("later-uid") not in kube.statefulsets
    assert names.LABEL_ANCHORED not in (later["metadata"].get("labels") or {})


def test_a_watch_event_s_body_is_decided_on_as_it_is_a_snapshot_s_is_asked_for_again() -> None:
    """A key's events are handled one at a time, the newest replacing one not begun
    (faces/serial.py): a newer event of the run is decided after this one, so the API server
    is not asked for the run again before its balloon is made. The resync's snapshot is."""
    operator, kube = make()
    counted = Counting(kube)
    operator.kube = operator.observer.kube = counted  # type: ignore[assignment]
    body = factories.pipelinerun(name="new", uid="new-uid")
    kube.runs["new"] = body
    operator.run_event(body)
    assert balloon.balloon_name("new-uid") in kube.statefulsets
    assert "get_pipelinerun" not in counted.calls
    kube.statefulsets.clear()
    operator.reconcile_run(body)  # as a resync round does, from its snapshot
    assert counted.calls.count("get_pipelinerun") == 1
    assert balloon.balloon_name("new-uid") in kube.statefulsets


def test_the_oldest_run_without_a_bound_anchor_is_measured_each_round() -> None:
    """What the chart's TektonCoschedulerRunWithoutAnchor alert reads: a started run whose
    balloon pod is not bound counts from the run's creation; a bound one does not."""
    operator, kube = make()
    kube.runs["build-42"] = factories.pipelinerun()
    resync = Resync(operator)
    resync()
    waited = operator.metrics.registry.get_sample_value(
        "tekton_coscheduler_oldest_unanchored_run_seconds")
    assert waited is not None and waited > 3600  # made 2026-11-22: days ago
    operator.placement.on_balloon_pod(balloon_pod("pod-uid", "n1"))
    resync()
    assert operator.metrics.registry.get_sample_value(
        "tekton_coscheduler_oldest_unanchored_run_seconds") == 0


def _bound_balloon_pod(run_uid: str, node: str, claim: str) -> dict[str, Any]:
    return {"metadata": {"name": f"{balloon.balloon_name(run_uid)}-0", "namespace": "team-a",
                         "uid": f"pod-{run_uid}", "labels": {
                             **balloon.selector_labels(run_uid), names.LABEL_RUN: "first"}},
            "spec": {"nodeName": node, "volumes": [
                {"name": "c", "persistentVolumeClaim": {"claimName": claim}}]}}


def _required_run_uids(kube: MemoryKube, run_uid: str) -> list[str]:
    spec = kube.statefulsets[balloon.balloon_name(run_uid)]["spec"]["template"]["spec"]
    terms = (((spec.get("affinity") or {}).get("podAffinity") or {})
             .get("requiredDuringSchedulingIgnoredDuringExecution") or [])
    return [t["labelSelector"]["matchLabels"][names.LABEL_RUN_UID] for t in terms]


def test_a_read_write_once_claim_is_shared_only_with_the_balloon_of_a_live_run() -> None:
    """A run deleted (or ended) loses its balloon soon: a StatefulSet controller whose watches
    were coming back after an API server restart made such a balloon's pod again for a few
    seconds (CI, 2026-11-27), and the next run on the claim was given a term towards it."""
    operator, kube = make()
    kube.list_pvcs = lambda namespace: [  # type: ignore[method-assign]
        {"metadata": {"name": "source", "namespace": "team-a", "uid": "pvc-uid"},
         "spec": {"accessModes": ["ReadWriteOnce"]}, "status": {"phase": "Bound"}}]
    operator.marks.seeded = True  # the first resync round has looked at every run
    first = factories.pipelinerun(name="first", uid="first-uid")
    kube.runs["first"] = first
    operator.reconcile_run(first)
    operator.index.balloon_event(_bound_balloon_pod("first-uid", "node-1", "source"), False)
    second = factories.pipelinerun(name="second", uid="second-uid")
    kube.runs["second"] = second
    operator.reconcile_run(second)
    assert _required_run_uids(kube, "second-uid") == ["first-uid"]
    operator.forget_run(first)  # deleted; its balloon's pod is still there (made again)
    third = factories.pipelinerun(name="third", uid="third-uid")
    kube.runs["third"] = third
    operator.reconcile_run(third)
    assert "first-uid" not in _required_run_uids(kube, "third-uid")


def test_a_resync_round_with_a_queue_only_reads_and_puts_work_under_each_key() -> None:
    """The resync only enqueues: its round reads, and what it finds to put right (an orphan
    balloon, the sweeps) is work on the queue under the key it concerns, done there as any
    other work of that key. A live run's reservation is not swept: its waits are work the run
    put for later itself."""
    operator, kube = make()
    live = factories.pipelinerun(name="live", uid="live-uid")
    kube.runs["live"] = live
    operator.reconcile_run(live)
    orphan = copy.deepcopy(kube.statefulsets[balloon.balloon_name("live-uid")])
    orphan["metadata"]["name"] = "coschedule-gone"
    orphan["metadata"]["labels"][names.LABEL_RUN_UID] = "gone-uid"
    kube.statefulsets["coschedule-gone"] = orphan
    queued: list[tuple[str, Any, Any]] = []
    operator.enqueue = lambda key, slot, act, seconds: queued.append((key, slot, act))
    acted: list[Any] = []
    do = operator.executor.do
    operator.executor.do = acted.append  # type: ignore[assignment,method-assign]
    Resync(operator, submit=lambda uid, body, listed: None)()
    assert acted == []  # no write, no Event: the round only read
    keys = {(key, slot) for key, slot, _ in queued}
    assert ("gone-uid", "balloon") in keys and "live-uid" not in {key for key, _ in keys}
    assert {"gates", "budgets", "unplaced"} <= {key for key, _ in keys}
    assert "coschedule-gone" in kube.statefulsets  # nothing written by the round itself
    operator.executor.do = do  # type: ignore[method-assign]
    for _, _, act in queued:  # the queue's workers
        act()
    assert set(kube.statefulsets) == {balloon.balloon_name("live-uid")}


def test_with_tekton_s_assistant_on_a_run_of_an_opted_in_namespace_gets_its_balloon() -> None:
    """Issue 48: no standing aside, in any of the assistant's modes; in the per-run modes the
    balloon mounts the claims the placeholder's StatefulSet makes."""
    for mode in ("workspaces", "pipelineruns", "isolate-pipelinerun"):
        operator, kube = make()
        view = operator.view
        view.facts = replace(view.facts, assistant_on=True, feature_flags={"coschedule": mode})
        body = factories.pipelinerun(workspaces=[
            {"name": "shared", "volumeClaimTemplate": {"metadata": {"name": "cache"}}}])
        kube.runs[body["metadata"]["name"]] = body
        assert operator.reconcile_run(body).verb is Verb.CREATE
        claims = balloon.claim_names(kube.statefulsets[balloon.balloon_name(factories.RUN_UID)])
        run = PipelineRun.from_body(body)
        assert claims == set(run.claims_tekton_makes(per_run=mode != "workspaces")), mode


def test_the_placeholder_of_an_opted_out_run_goes_as_it_is_at_the_run_s_look() -> None:
    """Admission holds every placeholder of an opted-in namespace (it carries the run's labels,
    not its annotations): the run's look lets go of one whose run gets no balloon."""
    operator, kube = make()
    body = factories.pipelinerun(annotations={names.OPT_OUT_ANNOTATION: "false"})
    kube.runs[body["metadata"]["name"]] = body
    held = {"metadata": {"name": "affinity-assistant-0123456789-0", "namespace": "team-a",
                         "uid": "uid-aa", "labels": {"tekton.dev/pipelineRun": "build-42",
                                                     "app.kubernetes.io/component": "affinity-assistant"}},
            "spec": {"schedulingGates": [{"name": gate.PLACEHOLDER_GATE}]}}
    assert operator.gates.on_placeholder(held, factories.RUN_UID)  # no anchor: its run decides
    assert operator.reconcile_run(body).verb is Verb.NONE
    assert kube.pods["affinity-assistant-0123456789-0"]["patches"] == [
        {"spec": {"schedulingGates": [{"name": gate.PLACEHOLDER_GATE, "$patch": "delete"}]}}]
    assert kube.statefulsets == {}
