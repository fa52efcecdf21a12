"""Runs behind Tekton's resolvers: the anchor waits while Tekton resolves, then the tasks it
fetched give the run's peak."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from controller.core.capacity import reservation
from controller.core.model.resolution import HOLD
from controller.core.policy.policy import Capacity, PolicyResolution
from tests import factories
from tests.operator.test_capacity import BUILDS
from tests.operator.test_runs import make

GIT = {"url": "https://git.example/ci.git", "pathInRepo": "build.yaml"}
REF = {"resolver": "git", "params": [{"name": k, "value": v} for k, v in GIT.items()]}
BUILD = {"apiVersion": "tekton.dev/v1", "kind": "Task", "metadata": {"name": "build"},
         "spec": {"steps": [{"name": "s", "image": "x",
                             "computeResources": {"requests": {"cpu": "2"}}}]}}


def remote_run(age: float = 1.0) -> dict[str, Any]:
    """A run whose pipeline is behind a resolver, made `age` seconds ago."""
    body = factories.pipelinerun()
    body["spec"]["pipelineRef"] = {"resolver": "bundles", "params": [
        {"name": "bundle", "value": "registry.example/ci:1"}, {"name": "name", "value": "ci"}]}
    made = datetime.now(UTC) - timedelta(seconds=age)
    body["metadata"]["creationTimestamp"] = made.strftime("%Y-%m-%dT%H:%M:%SZ")
    return body


def pipeline_resolved(body: dict[str, Any]) -> None:
    """Tekton has written the resolved pipeline (fan-out of three remote builds) into the run."""
    body["status"]["pipelineSpec"] = {"tasks": [
        {"name": b, "taskRef": REF} for b in BUILDS]}


def seen(operator: Any, kube: Any, request: dict[str, Any]) -> None:
    """The ResolutionRequest watch brings the request (the cache holds it)."""
    kube.objects.setdefault("resolutionrequests", {})[request["metadata"]["name"]] = request
    operator.caches.changed("resolutionrequests", request)


def test_the_anchor_waits_while_tekton_resolves_then_the_scout_asks_for_the_fetched_peak() -> None:
    operator, kube = make(caches=True)
    body = remote_run()
    kube.runs[body["metadata"]["name"]] = body
    operator.reconcile_run(body)
    assert kube.statefulsets == {} and kube.pods == {}  # its pipeline is being resolved
    pipeline_resolved(body)
    operator.reconcile_run(body)
    assert kube.statefulsets == {} and kube.pods == {}  # its tasks are being resolved
    seen(operator, kube, factories.resolution_request(GIT))
    assert kube.pods == {}  # made, not resolved yet
    seen(operator, kube, factories.resolution_request(GIT, BUILD))
    [scout] = kube.pods.values()  # the run was looked at again: three builds of 2 CPUs
    assert scout["metadata"]["annotations"][reservation.ANNOTATION_ROLE] == reservation.SCOUT
    assert scout["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "6"}
    assert kube.statefulsets == {}  # the balloon follows the scout, as for any run


def test_a_request_of_another_run_neither_wakes_the_run_nor_counts_for_it() -> None:
    operator, kube = make(caches=True)
    body = remote_run()
    pipeline_resolved(body)
    kube.runs[body["metadata"]["name"]] = body
    operator.reconcile_run(body)
    woken: list[str] = []
    resolving = operator.estimates.resolving
    reconcile = resolving.reconcile

    def woke(b: Mapping[str, Any]) -> object:
        woken.append(b["metadata"]["uid"])
        return reconcile(b)

    resolving.reconcile = woke
    seen(operator, kube, factories.resolution_request(GIT, BUILD, owner_uid="another-run"))
    assert woken == [] and kube.pods == {} and kube.statefulsets == {}
    operator.reconcile_run(body)  # the resync
    assert kube.pods == {} and kube.statefulsets == {}
    seen(operator, kube, factories.resolution_request(GIT, BUILD))
    assert woken == [factories.RUN_UID] and len(kube.pods) == 1
    seen(operator, kube, factories.resolution_request(GIT, BUILD, name="again"))
    assert woken == [factories.RUN_UID]  # no longer held: its requests cost nothing


def test_once_tekton_has_made_task_runs_the_anchor_no_longer_waits() -> None:
    operator, kube = make(caches=True)
    body = remote_run()
    pipeline_resolved(body)
    body["status"]["childReferences"] = [{"kind": "TaskRun", "name": "build-42-build-a"}]
    kube.runs[body["metadata"]["name"]] = body
    operator.reconcile_run(body)
    assert len(kube.statefulsets) == 1  # nothing known to size a scout: the balloon alone


def test_a_resolution_slower_than_the_hold_anchors_with_what_is_known() -> None:
    operator, kube = make(caches=True)
    body = remote_run(age=HOLD + 1)
    pipeline_resolved(body)
    kube.runs[body["metadata"]["name"]] = body
    operator.reconcile_run(body)
    assert len(kube.statefulsets) == 1


def test_with_capacity_aware_anchoring_off_the_anchor_does_not_wait() -> None:
    operator, kube = make(caches=True)
    facts = operator.view.facts
    assert facts.defaults is not None
    off = replace(facts.defaults.policy, capacity=Capacity(anchor=False))
    operator.view.facts = replace(facts, defaults=PolicyResolution(off))
    body = remote_run()
    kube.runs[body["metadata"]["name"]] = body
    operator.reconcile_run(body)
    assert len(kube.statefulsets) == 1


def test_a_pipeline_by_name_whose_tasks_are_behind_a_resolver_waits_for_them_too() -> None:
    operator, kube = make(caches=True)
    kube.objects["pipelines"] = {"fan-out-in": {"spec": {"tasks": [
        {"name": b, "taskRef": REF} for b in BUILDS]}}}
    body = remote_run()
    body["spec"]["pipelineRef"] = {"name": "fan-out-in"}
    kube.runs[body["metadata"]["name"]] = body
    operator.reconcile_run(body)
    assert kube.statefulsets == {} and kube.pods == {}
    seen(operator, kube, factories.resolution_request(GIT, BUILD))
    [scout] = kube.pods.values()
    assert scout["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "6"}


def test_a_hold_s_end_is_work_the_run_put_for_later_and_then_it_anchors_with_what_is_known(
) -> None:
    """No sweep looks at every held run: the hold's end is the run's own work, put for later
    under its key when it began to wait."""
    operator, kube = make(caches=True)
    put: list[tuple[str, Any, float, Any]] = []
    operator.enqueue = lambda key, slot, act, seconds: put.append((key, slot, seconds, act))
    body = remote_run(age=HOLD - 30)
    pipeline_resolved(body)
    kube.runs[body["metadata"]["name"]] = body
    operator.reconcile_run(body)
    operator.reconcile_run(body)  # looked at again while it waits: not put twice
    assert kube.statefulsets == {}  # its tasks are being resolved
    [(key, slot, seconds, act)] = put
    assert (key, slot) == (factories.RUN_UID, ("later", "look")) and 29 < seconds <= 31.5
    made = datetime.now(UTC) - timedelta(seconds=HOLD + 1)  # as it is when the work comes
    body["metadata"]["creationTimestamp"] = made.strftime("%Y-%m-%dT%H:%M:%SZ")
    act()
    assert len(kube.statefulsets) == 1  # anchored with what is known
