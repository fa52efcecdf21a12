"""Tekton's affinity assistant as its pods show it: its mode, its placeholders, and the parts of
their specs admission takes away in a namespace that opted in (Tekton v1.15's shapes)."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest

from controller.core.model import assistant, tekton
from controller.core.model.assistant import Mode
from tests import factories

AA = "affinity-assistant-c7b485007a"
PINNED = {"labelSelector": {"matchLabels": {"app.kubernetes.io/instance": AA,
                                            "app.kubernetes.io/component": "affinity-assistant"}},
          "topologyKey": "kubernetes.io/hostname"}
REPEL = {"labelSelector": {"matchLabels": {"app.kubernetes.io/component": "affinity-assistant"}},
         "topologyKey": "kubernetes.io/hostname"}
USERS = {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "zone"}


@pytest.mark.parametrize(("flags", "expected"), [
    (None, Mode.WORKSPACES), ({}, Mode.WORKSPACES), ({"coschedule": "disabled"}, Mode.DISABLED),
    ({"coschedule": " pipelineruns "}, Mode.PIPELINERUNS),
    ({"coschedule": "isolate-pipelinerun"}, Mode.ISOLATE_PIPELINERUN),
    ({"coschedule": "sometimes"}, None),
])
def test_the_mode_is_tekton_s_flag_and_its_default_is_workspaces(
        flags: dict[str, str] | None, expected: Mode | None) -> None:
    assert assistant.mode(flags) is expected


def test_a_placeholder_names_its_run_and_no_other_pod_does() -> None:
    labels = {"app.kubernetes.io/component": "affinity-assistant",
              "app.kubernetes.io/instance": AA, "tekton.dev/pipelineRun": "build-42"}
    assert assistant.placeholder_run(labels) == "build-42"
    assert assistant.placeholder_run({**labels, "app.kubernetes.io/component": "balloon"}) == ""
    assert assistant.placeholder_run({"tekton.dev/pipelineRun": "build-42",
                                      "tekton.dev/taskRun": "build-42-fetch"}) == ""


def spec(kind: str, *terms: dict[str, Any]) -> dict[str, Any]:
    return {"containers": [], "affinity": {kind: {assistant.REQUIRED: list(terms)}}}


def applied(pod_spec: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    return jsonpatch.apply_patch({"spec": copy.deepcopy(pod_spec)}, ops)["spec"]  # type: ignore[no-any-return]


def test_tekton_s_term_is_taken_off_a_task_pod_and_the_user_s_terms_stay() -> None:
    pod = spec("podAffinity", USERS, PINNED, USERS)
    after = applied(pod, assistant.unpin(pod))
    assert after["affinity"]["podAffinity"][assistant.REQUIRED] == [USERS, USERS]
    assert not assistant.pinned_to_assistant(after)
    assert assistant.unpin(after) == []  # replayed: nothing more to take


def test_a_placeholder_s_required_repulsion_goes_and_its_preference_stays() -> None:
    pod = spec("podAntiAffinity", REPEL)
    pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = [
        {"weight": 100, "podAffinityTerm": REPEL}]
    after = applied(pod, assistant.unrepel(pod))
    assert after["affinity"]["podAntiAffinity"][assistant.REQUIRED] == []
    assert after["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"] == REPEL


@pytest.mark.parametrize("pod_spec", [
    {}, {"affinity": None}, {"affinity": {"podAffinity": {assistant.REQUIRED: "x"}}},
    {"affinity": {"podAffinity": {assistant.REQUIRED: [None, 3, {"labelSelector": []}]}}},
])
def test_a_spec_of_any_shape_gets_an_answer_and_loses_nothing(pod_spec: dict[str, Any]) -> None:
    assert assistant.unpin(pod_spec) == [] and assistant.unrepel(pod_spec) == []


def test_every_term_of_tekton_s_goes_however_many_there_are_and_only_those() -> None:
    """Tekton's own aliasing can give a pod a term twice (its pod template's affinity is
    appended to in place); a user's term naming the assistants in another way stays."""
    pod = spec("podAntiAffinity", REPEL, PINNED, USERS, REPEL)
    assert applied(pod, assistant.unrepel(pod))["affinity"]["podAntiAffinity"][
        assistant.REQUIRED] == [PINNED, USERS]
    pod = spec("podAffinity", PINNED, REPEL, PINNED)
    assert applied(pod, assistant.unpin(pod))["affinity"]["podAffinity"][
        assistant.REQUIRED] == [REPEL]


# -- what each mode means beside us (what `check` says) ---------------------------------------


@pytest.mark.parametrize(("flags", "state", "placeholder", "others"), [
    ({"coschedule": "disabled"}, "off (coschedule: disabled)", "Tekton makes no placeholder",
     "no co-location by Tekton either"),
    (None, "on, mode workspaces (coschedule unset: Tekton's default): a placeholder per claim",
     "Tekton still makes its placeholders", "the pods that share a claim follow its placeholder"),
    ({"coschedule": "workspaces"}, "on, mode workspaces: a placeholder per claim",
     "Tekton still makes its placeholders", "the pods that share a claim follow its placeholder"),
    ({"coschedule": "pipelineruns"}, "on, mode pipelineruns (alpha): one placeholder per run",
     "Tekton still makes its placeholder", "every pod of a run follows its placeholder"),
    ({"coschedule": "isolate-pipelinerun"},
     "on, mode isolate-pipelinerun (alpha): one placeholder per run, one run per node",
     "without its repulsion of other runs' placeholders", "one run per node"),
])
def test_each_mode_says_what_it_means_for_opted_in_namespaces_and_for_the_others(
        flags: dict[str, str] | None, state: str, placeholder: str, others: str) -> None:
    said = assistant.meaning(flags)
    assert said.known
    assert said.state.startswith(state), said.state
    # Opted in: ours, whatever the mode; Tekton's placeholder (if any) follows our anchor.
    assert said.opted_in.startswith("tekton-coscheduler anchors each run: a balloon, a "
                                    "reservation for its peak, our affinity term"), said.opted_in
    assert placeholder in said.opted_in
    # Every other namespace: never ours.
    assert "untouched by tekton-coscheduler" in said.others and others in said.others
    assert said.old_flag == ""


def test_only_workspaces_mode_has_tekton_s_limit_of_one_claim_per_task_run() -> None:
    limit = assistant.meaning({}).limit
    assert "more than one PersistentVolumeClaim is bound" in limit
    assert "pkg/workspace/validate.go" in limit and "not tekton-coscheduler's" in limit
    for other in ("disabled", "pipelineruns", "isolate-pipelinerun"):
        assert assistant.meaning({"coschedule": other}).limit == ""


def test_a_mode_tekton_does_not_know_is_said_and_nothing_is_promised() -> None:
    said = assistant.meaning({"coschedule": "sometimes"})
    assert not said.known and said.mode is None
    assert said.state.startswith("coschedule='sometimes' is not a mode Tekton knows (disabled, "
                                 "workspaces, pipelineruns, isolate-pipelinerun)")
    assert (said.opted_in, said.others, said.limit) == ("", "", "")


@pytest.mark.parametrize("value", ["true", "false"])
def test_the_old_disable_flag_is_said_to_be_read_no_more_and_changes_nothing(value: str) -> None:
    said = assistant.meaning({"disable-affinity-assistant": value})
    assert said.mode is Mode.WORKSPACES  # Tekton v1.x reads coschedule alone
    assert said.old_flag == (f"disable-affinity-assistant={value!r} is set, but Tekton v1.0 "
                             "and later do not read it (tektoncd/pipeline#8603): coschedule "
                             "alone says the mode")


@pytest.mark.parametrize(("flags", "label"), [
    (None, "workspaces"), ({"coschedule": "disabled"}, "disabled"),
    ({"coschedule": "isolate-pipelinerun"}, "isolate-pipelinerun"),
    ({"coschedule": "sometimes"}, "unknown"),
])
def test_the_metric_s_mode_label_is_one_of_a_fixed_few(
        flags: dict[str, str] | None, label: str) -> None:
    assert assistant.mode_label(assistant.mode(flags)) == label
    assert label in assistant.MODE_LABELS
    assert assistant.MODE_LABELS == ("disabled", "workspaces", "pipelineruns",
                                     "isolate-pipelinerun", "unknown")


# -- a run's claims, named as Tekton made them -------------------------------------------------


def _vct_run() -> tekton.PipelineRun:
    return tekton.PipelineRun.from_body(factories.pipelinerun(workspaces=[
        {"name": "shared", "volumeClaimTemplate": {"metadata": {"name": "cache"}}},
        {"name": "src", "persistentVolumeClaim": {"claimName": "source"}}]))


def test_a_run_s_claims_are_named_as_tekton_made_them_whatever_the_flag_says_now() -> None:
    """Tekton makes a run's templated claims once, before its first TaskRun, named by the mode
    then (pkg/reconciler/pipelinerun: createOrUpdateAffinityAssistantsAndPVCs): a run started
    under one mode keeps that naming when the flag changes mid-run."""
    run = _vct_run()
    shared, per_run = run.claims_tekton_makes(False), run.claims_tekton_makes(True)
    for now in (False, True):
        assert assistant.claims_per_run(run, shared | {"source"}, now) is False, now
        assert assistant.claims_per_run(run, per_run | {"source"}, now) is True, now


def test_a_run_with_no_claim_made_yet_follows_the_flag_as_it_is_now() -> None:
    run = _vct_run()
    for now in (False, True):
        assert assistant.claims_per_run(run, (), now) is now
        assert assistant.claims_per_run(run, {"source", "unrelated"}, now) is now
        # Both namings made (the flag changed between two of Tekton's looks before the first
        # TaskRun): Tekton binds the TaskRuns it makes now by the flag as it is now.
        both = run.claims_tekton_makes(False) | run.claims_tekton_makes(True)
        assert assistant.claims_per_run(run, both, now) is now
