"""What Tekton's resolvers fetched for a run, read from its ResolutionRequests."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from controller.core.capacity import peak
from controller.core.model import resolution
from controller.core.model.tekton import PipelineRun
from tests import factories

GIT = {"url": "https://git.example/ci.git", "revision": "main", "pathInRepo": "task/build.yaml"}
REF = {"resolver": "git", "params": [{"name": k, "value": v} for k, v in GIT.items()]}


def task(cpu: str, kind: str = "Task") -> dict[str, Any]:
    return {"apiVersion": "tekton.dev/v1", "kind": kind, "metadata": {"name": "build"},
            "spec": {"steps": [{"name": "s", "image": "x",
                                "computeResources": {"requests": {"cpu": cpu}}}]}}


def run(tasks: list[dict[str, Any]] | None, remote_pipeline: bool = True,
        children: bool = False) -> PipelineRun:
    body = factories.pipelinerun()
    if remote_pipeline:
        body["spec"]["pipelineRef"] = {"resolver": "bundles", "params": []}
    if tasks is not None:
        body["status"]["pipelineSpec"] = {"tasks": tasks}
    if children:
        body["status"]["childReferences"] = [{"name": "build-42-build", "kind": "TaskRun"}]
    return PipelineRun.from_body(body)


def test_a_task_behind_a_resolver_is_read_from_the_request_tekton_made_for_the_run() -> None:
    requests = resolution.owned_by([factories.resolution_request(GIT, task("3"))],
                                   factories.RUN_UID)
    assert resolution.resolved_spec(REF, requests) == task("3")["spec"]
    spec = {"tasks": [{"name": "build", "taskRef": REF}]}
    got = peak.estimate(spec, lambda ref: resolution.resolved_spec(ref, requests), {})
    assert got.unknown == ()
    assert got.peak["cpu"] == 3000


def test_json_data_is_read_as_well_as_yaml() -> None:
    obj = factories.resolution_request(GIT, task("1"))
    obj["status"]["data"] = base64.b64encode(json.dumps(task("2")).encode()).decode()
    [request] = resolution.owned_by([obj], factories.RUN_UID)
    assert resolution.resolved_spec(REF, [request]) == task("2")["spec"]


@pytest.mark.parametrize("other", [
    factories.resolution_request(GIT, task("3"), owner_uid="another-run"),
    factories.resolution_request(GIT, task("3"), resolver="bundles"),
    factories.resolution_request({**GIT, "revision": "v2"}, task("3")),
    factories.resolution_request(GIT),  # still resolving
    factories.resolution_request(GIT, task("3", kind="Pipeline")),
], ids=["another run's", "another resolver", "other params", "resolving", "not a Task"])
def test_only_the_run_s_own_resolved_request_for_that_reference_counts(
    other: dict[str, Any],
) -> None:
    requests = resolution.owned_by([other], factories.RUN_UID)
    assert resolution.resolved_spec(REF, requests) is None


@pytest.mark.parametrize("data", [
    "not base64!", base64.b64encode(b"{unclosed: [").decode(), base64.b64encode(b"- a list").decode(),
    "QQ==" * (resolution.MAX_DATA // 4 + 1),
], ids=["not base64", "not YAML", "not a mapping", "too large"])
def test_data_that_is_not_an_object_counts_as_unknown_and_raises_nothing(data: str) -> None:
    obj = factories.resolution_request(GIT, task("3"))
    obj["status"]["data"] = data
    requests = resolution.owned_by([obj], factories.RUN_UID)
    assert resolution.resolved_spec(REF, requests) is None


def test_a_request_without_metadata_spec_or_status_is_ignored_not_fatal() -> None:
    assert resolution.owned_by([{}, {"metadata": {"ownerReferences": "x"}}], "u") == []
    [bare] = resolution.owned_by(
        [{"metadata": {"ownerReferences": [{"uid": "u"}]}}], "u")
    assert bare.state == resolution.RESOLVING and resolution.resolved_spec(REF, [bare]) is None


def test_the_pipeline_is_pending_until_tekton_writes_it_into_the_run_s_status() -> None:
    assert resolution.pending(run(None), []) == "its pipeline"
    assert resolution.pending(run([{"name": "t", "taskSpec": {}}]), []) is None
    assert resolution.pending(run(None, remote_pipeline=False), []) is None  # by name


def test_a_remote_task_is_pending_until_its_request_is_made_and_has_ended() -> None:
    later = {"name": "publish", "taskRef": {**REF, "params": []}}
    tasks = [{"name": "build", "taskRef": REF}, later]
    made = factories.resolution_request(GIT)
    assert resolution.pending(run(tasks), []) == "task build"
    assert resolution.pending(run(tasks), resolution.owned_by([made], factories.RUN_UID)) == (
        "task build")
    done = factories.resolution_request(GIT, task("1"))
    failed = factories.resolution_request({}, failed=True)
    assert resolution.pending(run(tasks), resolution.owned_by([done], factories.RUN_UID)) == (
        "task publish")
    assert resolution.pending(
        run(tasks), resolution.owned_by([done, failed], factories.RUN_UID)) is None


def test_once_tekton_has_made_task_runs_only_a_request_the_watch_shows_resolving_is_pending(
) -> None:
    """Tekton makes TaskRuns only once every request is resolved: one still resolving in the
    cache is the watch lagging (its event is on the way); an unmatched task is not waited for."""
    tasks = [{"name": "b", "taskRef": REF}]
    assert resolution.pending(run(None, children=True), []) is None
    assert resolution.pending(run(tasks, children=True), []) is None
    lagging = resolution.owned_by([factories.resolution_request(GIT)], factories.RUN_UID)
    assert resolution.pending(run(tasks, children=True), lagging) is not None
    done = resolution.owned_by([factories.resolution_request(GIT, task("1"))], factories.RUN_UID)
    assert resolution.pending(run(tasks, children=True), done) is None


def test_a_run_has_remote_parts_when_its_pipeline_or_a_task_is_behind_a_resolver() -> None:
    assert resolution.has_remote(run(None))
    assert resolution.has_remote(run([{"name": "b", "taskRef": REF}], remote_pipeline=False))
    assert not resolution.has_remote(run([{"name": "b", "taskRef": {"name": "build"}}],
                                         remote_pipeline=False))


def test_an_embedded_pipeline_s_task_is_matched_by_the_params_tekton_substituted() -> None:
    """Tekton takes a request's params from the pipeline after substituting the run's params,
    and writes that pipeline into the run's status: `$(params.revision)` matches no request."""
    body = factories.pipelinerun()
    templated = {**REF, "params": [*REF["params"][:1], {"name": "revision",
                                                         "value": "$(params.revision)"},
                                   *REF["params"][2:]]}
    body["spec"]["pipelineSpec"] = {"tasks": [{"name": "build", "taskRef": templated}]}
    requests = resolution.owned_by([factories.resolution_request(GIT, task("3"))],
                                   factories.RUN_UID)
    assert resolution.pending(PipelineRun.from_body(body), requests) == "task build"
    body["status"]["pipelineSpec"] = {"tasks": [{"name": "build", "taskRef": REF}]}
    assert resolution.pending(PipelineRun.from_body(body), requests) is None
