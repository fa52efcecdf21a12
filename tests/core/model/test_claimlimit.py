"""Tekton's one-claim limit in `workspaces` mode (Tekton v1.15 pkg/workspace/validate.go
ValidateOnlyOnePVCIsUsed, from pkg/reconciler/taskrun/taskrun.go): decided from the run's spec
and the mode alone."""

from __future__ import annotations

from typing import Any

import pytest

from controller.core.model import claimlimit, tekton
from controller.core.model.assistant import Mode
from tests import factories

WORKSPACES = [
    {"name": "src", "persistentVolumeClaim": {"claimName": "source"}},
    {"name": "also-src", "persistentVolumeClaim": {"claimName": "source"}},
    {"name": "cache", "volumeClaimTemplate": {"metadata": {"name": "cache"}}},
    {"name": "cfg", "configMap": {"name": "settings"}},
]


def _run(tasks: list[dict[str, Any]], finally_: list[dict[str, Any]] | None = None
         ) -> tekton.PipelineRun:
    body = factories.pipelinerun(workspaces=WORKSPACES)
    body["spec"]["pipelineSpec"] = {"tasks": tasks, "finally": finally_ or []}
    return tekton.PipelineRun.from_body(body)


def _task(name: str, *bound: str, **more: Any) -> dict[str, Any]:
    return {"name": name, "taskRef": {"name": "t"},
            "workspaces": [{"name": f"w{i}", "workspace": w} for i, w in enumerate(bound)],
            **more}


def test_a_task_that_binds_two_claims_is_refused_in_workspaces_mode_only() -> None:
    run = _run([_task("build", "src", "cache"), _task("lint", "src")])
    cache = tekton.tekton_pvc_name("cache", "cache", factories.RUN_UID)
    [refused] = claimlimit.refused(run, Mode.WORKSPACES)
    assert refused == claimlimit.Refused("build", tuple(sorted(("source", cache))), True)
    for mode in (Mode.DISABLED, Mode.PIPELINERUNS, Mode.ISOLATE_PIPELINERUN, None):
        assert claimlimit.refused(run, mode) == [], mode


def test_one_claim_bound_twice_a_config_map_or_an_unbound_workspace_is_one_claim() -> None:
    """Tekton counts claims, not workspaces: two workspaces on one claim are one; a ConfigMap
    is no claim; an optional workspace the run does not bind is nothing."""
    run = _run([_task("a", "src", "also-src", "cfg", "missing"),
                {"name": "b", "taskRef": {"name": "t"},
                 "workspaces": [{"name": "src"}, {"name": "cfg"}]}])  # by the same name
    assert claimlimit.refused(run, Mode.WORKSPACES) == []


def test_finally_tasks_and_workspaces_an_embedded_task_uses_unbound_count() -> None:
    """Tekton propagates to an embedded taskSpec the run's workspaces its steps name."""
    embedded = {"name": "inline", "workspaces": [{"name": "src"}], "taskSpec": {"steps": [
        {"name": "s", "image": "x", "script": "cp $(workspaces.cache.path)/a ."}]}}
    run = _run([embedded], [_task("report", "src", "cache")])
    assert [r.task for r in claimlimit.refused(run, Mode.WORKSPACES)] == ["inline", "report"]


@pytest.mark.parametrize(("more", "why_not"), [
    ({"when": [{"input": "a", "operator": "in", "values": ["a"]}]}, "when expressions"),
    ({"onError": "continue"}, "onError: continue"),
])
def test_a_task_the_run_may_be_spared_is_said_but_not_as_a_warning(
        more: dict[str, Any], why_not: str) -> None:
    refusals = claimlimit.refused(_run([_task("maybe", "src", "cache", **more)]), Mode.WORKSPACES)
    said = claimlimit.notice(refusals)
    assert said is not None and not said.warning
    assert why_not in said.message


def test_the_event_says_tekton_s_words_where_they_are_and_what_to_do() -> None:
    refusals = claimlimit.refused(_run([_task("build", "src", "cache")]), Mode.WORKSPACES)
    said = claimlimit.notice(refusals)
    assert said is not None and said.warning and said.reason == "TektonRefusesTaskClaims"
    for words in ("more than one PersistentVolumeClaim is bound", "TaskRunValidationFailed",
                  "pkg/workspace/validate.go", "task build binds", "source",
                  "coschedule: workspaces", "bind one claim per task"):
        assert words in said.message, words
    assert claimlimit.notice([]) is None


def test_a_pipeline_not_resolved_yet_or_of_any_shape_gets_an_answer() -> None:
    body = factories.pipelinerun(workspaces=WORKSPACES)  # a pipelineRef, not resolved
    assert claimlimit.refused(tekton.PipelineRun.from_body(body), Mode.WORKSPACES) == []
    body["spec"]["pipelineSpec"] = {"tasks": ["x", {"workspaces": "y"}, {"taskSpec": 3}]}
    assert claimlimit.refused(tekton.PipelineRun.from_body(body), Mode.WORKSPACES) == []
