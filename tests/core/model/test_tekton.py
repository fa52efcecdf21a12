from __future__ import annotations

import hashlib
from typing import Any

import pytest

from controller.core.model import assistant, tekton
from tests import factories


def test_volume_claim_template_names_follow_tekton() -> None:
    run = tekton.PipelineRun.from_body(factories.pipelinerun(workspaces=[
        {"name": "shared", "volumeClaimTemplate": {"metadata": {"name": "cache"},
                                                   "spec": {"accessModes": ["ReadWriteOnce"]}}},
        {"name": "scratch", "volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOncePod"]}}},
        {"name": "src", "persistentVolumeClaim": {"claimName": "source"}},
        {"name": "cfg", "configMap": {"name": "settings"}},
        {"name": "tmp", "emptyDir": {}},
    ]))
    claims = {c.name: c for c in run.claims()}
    digest = hashlib.sha256(("shared" + factories.RUN_UID).encode()).hexdigest()[:10]
    assert f"cache-{digest}" in claims
    scratch = next(n for n in claims if n.startswith("pvc-"))
    assert len(scratch) == len("pvc-") + 10
    assert not claims[scratch].mountable_by_balloon
    assert claims[f"cache-{digest}"].mountable_by_balloon
    assert "source" in claims
    assert len(claims) == 3


def _h(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def test_with_tekton_s_assistant_on_per_run_its_statefulset_makes_the_templated_claims() -> None:
    """pipelineruns / isolate-pipelinerun (Tekton v1.15 affinity_assistant.go): the claim is the
    StatefulSet controller's `<template>-<set>-0`, the template named as in the other modes (cut
    to 63 characters with a hash), the set named from "" + the run's name; named claims stay."""
    long = "c" * 60
    run = tekton.PipelineRun.from_body(factories.pipelinerun(workspaces=[
        {"name": "shared", "volumeClaimTemplate": {"metadata": {"name": "cache"}}},
        {"name": "big", "volumeClaimTemplate": {"metadata": {"name": long}}},
        {"name": "src", "persistentVolumeClaim": {"claimName": "source"}},
    ]))
    placeholder = f"affinity-assistant-{_h(run.name)}"
    cache = f"cache-{_h('shared' + factories.RUN_UID)}"
    big = f"{long}-{_h('big' + factories.RUN_UID)}"
    big = f"{big[:52]}-{_h(big)}"
    per_run = {f"{cache}-{placeholder}-0", f"{big}-{placeholder}-0"}
    assert run.claims_tekton_makes(per_run=True) == per_run
    assert {c.name for c in run.claims(per_run=True)} == per_run | {"source"}
    assert run.claims_tekton_makes() == {cache, f"{long}-{_h('big' + factories.RUN_UID)}"}


def test_claim_name_depends_on_run_uid_so_reruns_do_not_collide() -> None:
    assert tekton.tekton_pvc_name("", "ws", "uid-1") != tekton.tekton_pvc_name("", "ws", "uid-2")


@pytest.mark.parametrize(
    ("status", "finished"), [("True", True), ("False", True), ("Unknown", False), (None, False)]
)
def test_finished(status: str | None, finished: bool) -> None:
    assert tekton.PipelineRun.from_body(factories.pipelinerun(succeeded=status)).finished is finished


def test_pending_and_opt_out() -> None:
    run = tekton.PipelineRun.from_body(factories.pipelinerun(
        spec_status="PipelineRunPending", annotations={"tekton-coscheduler.dev/coschedule": "False "}))
    assert run.pending and run.opted_out
    assert not tekton.PipelineRun.from_body(factories.pipelinerun(
        annotations={"tekton-coscheduler.dev/coschedule": "true"})).opted_out


@pytest.mark.parametrize(
    "body",
    [{}, {"metadata": None}, {"metadata": {"name": 3}}, {"spec": "x", "status": []},
     {"metadata": {"name": "a", "namespace": "b", "uid": "c"}, "spec": {"workspaces": [None, 1, {"name": 2}]}}],
)
def test_views_tolerate_missing_and_mistyped_fields(body: dict[str, Any]) -> None:
    run = tekton.PipelineRun.from_body(body)
    assert not run.finished and not run.pending and not run.opted_out
    assert run.claims() == [] and run.pod_template == {} and run.task_pod_templates == {}


def test_owned_claims_are_found_whatever_their_name() -> None:
    pvcs: list[dict[str, Any]] = [
        {"metadata": {"name": "renamed-by-a-future-tekton", "ownerReferences": [{"uid": "R"}]},
         "spec": {"accessModes": ["ReadWriteOnce"]}},
        {"metadata": {"name": "someone-else", "ownerReferences": [{"uid": "X"}]}},
        {"metadata": {"name": "no-owner"}},
    ]
    assert [c.name for c in tekton.claims_owned_by(pvcs, "R")] == ["renamed-by-a-future-tekton"]


def test_taskrun_pod_recognition() -> None:
    pod = factories.taskrun_pod()
    assert tekton.task_run_pod_run(pod["metadata"]["labels"]) == tekton.RunRef("build-42", factories.RUN_UID)
    older = factories.taskrun_pod(run_uid=None)
    assert tekton.task_run_pod_run(older["metadata"]["labels"]) == tekton.RunRef("build-42", "")
    assistant = {"tekton.dev/pipelineRun": "build-42", "app.kubernetes.io/component": "affinity-assistant"}
    assert tekton.task_run_pod_run(assistant) is None


@pytest.mark.parametrize(
    ("flags", "on"),
    [(None, True), ({}, True), ({"coschedule": "workspaces"}, True), ({"coschedule": "pipelineruns"}, True),
     ({"coschedule": "isolate-pipelinerun"}, True), ({"coschedule": "disabled"}, False)],
)
def test_assistant_detection(flags: dict[str, str] | None, on: bool) -> None:
    assert assistant.assistant_enabled(flags) is on


@pytest.mark.parametrize(("data", "expected"), [
    (None, "tekton-pipelines"),
    ({}, "tekton-pipelines"),
    ({"default-managed-by-label-value": "ci-platform"}, "ci-platform"),
    ({"default-managed-by-label-value": ""}, "tekton-pipelines"),
    ({"default-managed-by-label-value": "not a label value!"}, "tekton-pipelines"),
])
def test_the_managed_by_value_tekton_gives_its_pods(data: Any, expected: str) -> None:
    assert tekton.managed_by_value(data) == expected


def test_the_assistant_a_pod_must_run_beside_is_read_from_tekton_s_term() -> None:
    term = factories.TEKTON_ASSISTANT_TERM
    other = {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}
    spec = {"affinity": {"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [other, term]}}}
    assert assistant.assistant_required(spec) == "affinity-assistant-0123456789"
    assert assistant.assistant_required({"affinity": {"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [other]}}}) == ""
    assert assistant.assistant_required({"affinity": "nonsense"}) == ""
    assert assistant.assistant_required({}) == ""
