"""What should exist for a run: the decision table of reconcile.decide."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from controller.core.basics import names
from controller.core.model.assistant import Mode
from controller.core.model.tekton import PipelineRun
from controller.core.placement import balloon, reconcile
from controller.core.placement.reconcile import Verb
from controller.settings import Settings
from tests import factories


def observe(run_body: dict[str, Any] | None = None, *, enabled: bool = True, per_run: bool = False,
            existing: dict[str, Any] | None = None, node: str | None = None,
            pvcs: list[dict[str, Any]] | None = None) -> reconcile.Observed:
    return reconcile.Observed(
        run=PipelineRun.from_body(run_body or factories.pipelinerun()),
        namespace_enabled=enabled, claims_per_run=per_run,
        policy=Settings().default_policy(), tekton_default_template={},
        pvcs=pvcs or [], balloon=existing, balloon_pod_node=node,
    )


def current_balloon(run_body: dict[str, Any] | None = None) -> dict[str, Any]:
    return reconcile.decide(observe(run_body)).manifest  # type: ignore[return-value]


def test_live_run_gets_a_balloon() -> None:
    d = reconcile.decide(observe())
    assert d.verb is Verb.CREATE and d.manifest is not None
    assert balloon.claim_names(d.manifest) == {"source"}


def test_existing_balloon_is_kept_and_replays_change_nothing() -> None:
    existing = current_balloon()
    assert reconcile.decide(observe(existing=existing)).verb is Verb.KEEP
    assert reconcile.decide(observe(existing=existing, node="n1")).verb is Verb.KEEP


@pytest.mark.parametrize("status", ["True", "False"])
def test_finished_run_loses_its_balloon(status: str) -> None:
    body = factories.pipelinerun(succeeded=status)
    assert reconcile.decide(observe(body, existing=current_balloon())).verb is Verb.DELETE
    assert reconcile.decide(observe(body)).verb is Verb.NONE


def test_pending_run_gets_no_balloon_until_it_starts() -> None:
    body = factories.pipelinerun(spec_status="PipelineRunPending", succeeded=None)
    assert reconcile.decide(observe(body)).verb is Verb.NONE
    body["spec"].pop("status")
    assert reconcile.decide(observe(body)).verb is Verb.CREATE


def test_opted_out_run_gets_none() -> None:
    body = factories.pipelinerun(annotations={"tekton-coscheduler.dev/coschedule": "false"})
    assert reconcile.decide(observe(body)).verb is Verb.NONE


def test_opting_out_after_the_balloon_was_made_keeps_it_until_the_run_ends() -> None:
    """Pods already pinned to the balloon would otherwise wait for an anchor that was taken."""
    body = factories.pipelinerun(annotations={"tekton-coscheduler.dev/coschedule": "false"})
    assert reconcile.decide(observe(body, existing=current_balloon())).verb is Verb.KEEP
    body["status"]["conditions"][0]["status"] = "True"
    assert reconcile.decide(observe(body, existing=current_balloon())).verb is Verb.DELETE


def test_namespace_not_enabled_means_no_new_balloon_but_existing_ones_end_with_their_run() -> None:
    assert reconcile.decide(observe(enabled=False)).verb is Verb.NONE
    assert reconcile.decide(observe(enabled=False, existing=current_balloon())).verb is Verb.KEEP
    finished = factories.pipelinerun(succeeded="True")
    assert reconcile.decide(observe(finished, enabled=False, existing=current_balloon())).verb is Verb.DELETE


def test_with_tekton_s_assistant_on_per_run_the_balloon_mounts_the_claims_its_statefulset_makes(
) -> None:
    """The run's balloon is made as with the assistant off (issue 48), and mounts the templated
    claims under the names the placeholder's StatefulSet gives them."""
    body = factories.pipelinerun(workspaces=[
        {"name": "shared", "volumeClaimTemplate": {"metadata": {"name": "cache"}}}])
    run = PipelineRun.from_body(body)
    d = reconcile.decide(observe(body, per_run=True))
    assert d.verb is Verb.CREATE and d.manifest is not None
    assert balloon.claim_names(d.manifest) == set(run.claims_tekton_makes(per_run=True))
    assert reconcile.anchors(observe(body, per_run=True))


def test_a_run_anchors_unless_it_is_done_waiting_opted_out_or_not_ours() -> None:
    """What a held placeholder follows: the balloon the run has or is to have; else it goes as
    it is."""
    opted = factories.pipelinerun(annotations={"tekton-coscheduler.dev/coschedule": "false"})
    assert reconcile.anchors(observe())
    assert not reconcile.anchors(observe(enabled=False))
    assert not reconcile.anchors(observe(opted))
    assert reconcile.anchors(observe(opted, existing=current_balloon()))  # decided once
    assert reconcile.anchors(observe(enabled=False, existing=current_balloon()))
    assert not reconcile.anchors(observe(factories.pipelinerun(succeeded="True")))


def test_claim_appearing_before_placement_updates_the_balloon() -> None:
    existing = current_balloon()
    owned = {"metadata": {"name": "late-claim", "ownerReferences": [{"uid": factories.RUN_UID}]},
             "spec": {"accessModes": ["ReadWriteOnce"]}}
    d = reconcile.decide(observe(existing=existing, pvcs=[owned]))
    assert d.verb is Verb.UPDATE and d.manifest is not None
    assert balloon.claim_names(d.manifest) == {"source", "late-claim"}


def test_claim_appearing_after_placement_never_moves_the_balloon() -> None:
    existing = current_balloon()
    owned = {"metadata": {"name": "late-claim", "ownerReferences": [{"uid": factories.RUN_UID}]}}
    d = reconcile.decide(observe(existing=existing, pvcs=[owned], node="node-3"))
    assert d.verb is Verb.KEEP
    assert [n.reason for n in d.notices] == ["ClaimNotAnchored"]


def test_run_without_identity_is_ignored() -> None:
    assert reconcile.decide(observe({"metadata": {}})).verb is Verb.NONE


def test_task_constraints_no_node_can_meet_are_said() -> None:
    body = factories.pipelinerun(task_run_specs=[
        {"pipelineTaskName": "a", "podTemplate": {"nodeSelector": {"arch": "amd64"}}},
        {"pipelineTaskName": "b", "podTemplate": {"nodeSelector": {"arch": "arm64"}}},
    ])
    d = reconcile.decide(observe(body))
    assert "ConflictingTaskConstraints" in [n.reason for n in d.notices]


def test_a_run_that_needs_room_waits_for_its_reservation_before_its_balloon_is_made() -> None:
    """The scout binds first, then the balloon: never both at once, racing for the claims."""
    base = observe()
    waiting = reconcile.decide(replace(base, room=True))
    assert waiting.verb is Verb.NONE and waiting.manifest is not None  # the plan, for the scout
    assert reconcile.decide(replace(base, room=True, room_node="n1")).verb is Verb.CREATE
    assert reconcile.decide(base).verb is Verb.CREATE


def test_while_tekton_resolves_a_remote_run_no_balloon_is_made_and_an_existing_one_stays() -> None:
    """Tekton makes no TaskRun before it has resolved every task: the anchor waits for the
    run's peak at no cost. A balloon already made is never taken back for it."""
    base = observe()
    held = reconcile.decide(replace(base, resolving="task build"))
    assert held.verb is Verb.NONE and held.manifest is None
    assert "task build" in held.why
    existing = current_balloon()
    assert reconcile.decide(replace(observe(existing=existing), resolving="x")).verb is Verb.KEEP
    assert reconcile.decide(base).verb is Verb.CREATE


def test_with_tekton_s_assistant_per_workspace_a_task_binding_two_claims_is_said_on_the_run(
) -> None:
    """Issue 48: Tekton refuses that task's TaskRun (core/model/claimlimit.py): the decision
    says so on every run it anchors, in `workspaces` mode only; opted out, nothing is said."""
    body = factories.pipelinerun(workspaces=[
        {"name": "src", "persistentVolumeClaim": {"claimName": "source"}},
        {"name": "cache", "volumeClaimTemplate": {"metadata": {"name": "cache"}}}])
    body["spec"]["pipelineSpec"] = {"tasks": [{"name": "build", "taskRef": {"name": "t"},
                                               "workspaces": [{"name": "a", "workspace": "src"},
                                                              {"name": "b", "workspace": "cache"}]}]}
    said = {mode: reconcile.decide(replace(observe(body), assistant_mode=mode))
            for mode in Mode}
    [notice] = said[Mode.WORKSPACES].notices
    assert notice.reason == "TektonRefusesTaskClaims" and notice.warning
    assert said[Mode.WORKSPACES].verb is Verb.CREATE
    existing = said[Mode.WORKSPACES].manifest
    kept = reconcile.decide(replace(observe(body, existing=dict(existing or {}), node="node-1"),
                                    assistant_mode=Mode.WORKSPACES))
    assert kept.verb is Verb.KEEP and [n.reason for n in kept.notices] == [notice.reason]
    assert all(not d.notices for mode, d in said.items() if mode is not Mode.WORKSPACES)
    body["metadata"]["annotations"][names.OPT_OUT_ANNOTATION] = "false"
    assert not reconcile.decide(replace(observe(body), assistant_mode=Mode.WORKSPACES)).notices
