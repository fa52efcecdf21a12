"""Which pods the leader's pod watch asks the API server for, and which runs and pods its
handlers are given."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import kopf
import pytest

from controller.core import names
from controller.faces import kopf_handlers, reconciler
from controller.kube.clusterview import Facts
from controller.settings import Settings
from tests import factories
from tests.operator.test_runs import make


def resource(group: str, plural: str, kind: str) -> kopf.Resource:
    return kopf.Resource(group=group, version="v1", plural=plural, kind=kind,
                         singular=kind.lower(), namespaced=True, preferred=True)


PODS = resource("", "pods", "Pod")
PIPELINERUNS = resource("tekton.dev", "pipelineruns", "PipelineRun")


def matches(selector: str, labels: dict[str, str]) -> bool:
    """Enough of label selector semantics for `key in (a,b)`."""
    key, _, values = selector.partition(" in ")
    return labels.get(key) in values.strip("()").split(",")


def test_only_the_pod_watch_is_filtered_server_side() -> None:
    selector = kopf_handlers.pod_label_selector("tekton-pipelines")
    settings = reconciler.kopf_settings(Settings(), selector)
    assert list(settings.watching.label_selectors.collect(PODS)) == [selector]
    assert list(settings.watching.label_selectors.collect(PIPELINERUNS)) == []


@pytest.mark.parametrize("managed_by", ["tekton-pipelines", "ci-platform"])
def test_the_pod_selector_keeps_balloons_and_task_pods_and_drops_the_rest(managed_by: str) -> None:
    selector = kopf_handlers.pod_label_selector(managed_by)
    task_pod = factories.taskrun_pod()["metadata"]["labels"]
    task_pod["app.kubernetes.io/managed-by"] = managed_by
    assert matches(selector, task_pod)
    assert matches(selector, kopf_handlers.BALLOON_LABELS)
    assert not matches(selector, {"app": "web"})
    assert not matches(selector, {"app.kubernetes.io/managed-by": "Helm"})


def when(handler_id: str) -> Any:
    [handler] = [h for h in kopf_handlers.registry._watching.get_all_handlers()
                 if h.id == handler_id]
    return handler.when


def test_runs_and_task_pods_of_namespaces_that_did_not_opt_in_reach_no_handler() -> None:
    """kopf has no namespace-label selector: its `when` filters drop them in its event loop,
    before a thread is given to them."""
    operator, _ = make()
    memo = SimpleNamespace(operator=operator)
    run_when, pod_when = when("pipelinerun_event"), when("task_pod_event")
    pod = factories.taskrun_pod(namespace="not-opted", run_uid="their-uid")["metadata"]
    assert not run_when(namespace="not-opted", uid="their-uid", labels={}, memo=memo)
    assert not pod_when(namespace="not-opted", labels=pod["labels"], memo=memo)
    assert run_when(namespace="team-a", uid="ours", labels={}, memo=memo)
    assert pod_when(namespace="team-a", labels=factories.taskrun_pod()["metadata"]["labels"],
                    memo=memo)


def test_runs_held_here_still_reach_their_handlers_after_their_namespace_opts_out() -> None:
    """A marked run, a run with a balloon, or any event before the namespaces are known."""
    operator, _ = make()
    memo = SimpleNamespace(operator=operator)
    run_when, pod_when = when("pipelinerun_event"), when("task_pod_event")
    marked = {names.LABEL_ANCHORED: "uid-1"}
    assert run_when(namespace="off", uid="uid-1", labels=marked, memo=memo)
    assert pod_when(namespace="off", memo=memo, labels={
        **factories.taskrun_pod(run_uid="uid-1")["metadata"]["labels"], **marked})
    operator.index.balloon_event({"metadata": {
        "name": "b-0", "namespace": "off", "uid": "pod-uid",
        "labels": {names.LABEL_RUN_UID: "uid-2"}}, "spec": {}}, deleted=False)
    assert run_when(namespace="off", uid="uid-2", labels={}, memo=memo)
    operator.view.facts = Facts()  # not synced: nothing is known to be not ours
    assert run_when(namespace="off", uid="uid-3", labels={}, memo=memo)


def test_kopf_copies_nothing_of_an_event_s_object_to_diff_it() -> None:
    """kopf builds a diff base of every event's object before filters run (a deep copy);
    on.event handlers are given no diff, so ours is empty."""
    settings = reconciler.kopf_settings(Settings(), "x")
    body = kopf.Body(factories.pipelinerun())
    assert settings.persistence.diffbase_storage.build(body=body) == {}


def test_the_handlers_are_all_on_event_so_an_empty_diff_base_loses_nothing() -> None:
    """A create/update/resume or daemon handler would need kopf's diff base (and would write
    kopf's state onto Tekton's objects): adding one means revisiting EventsOnly."""
    registry = kopf_handlers.registry
    assert list(registry._changing.get_all_handlers()) == []
    assert list(registry._spawning.get_all_handlers()) == []
    assert len(list(registry._watching.get_all_handlers())) == 6
