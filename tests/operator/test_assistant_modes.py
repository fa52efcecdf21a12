"""Runs of an opted-in namespace beside Tekton's assistant in its modes (issue 48).

The mode may change at any time: Tekton makes a run's templated claims once, before its first
TaskRun, named by the mode then; the operator judges the run by the claims Tekton made for it,
and follows the flag as it is now only for a run with none made yet. What Tekton refuses in a
mode (core/model/claimlimit.py) is said on the run. And no placeholder admission held stays held,
whatever a leader knew of it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from controller.core.basics import names
from controller.core.model.tekton import PipelineRun
from controller.core.placement import balloon, gate
from controller.core.placement.reconcile import Verb
from controller.faces.resync import Resync
from controller.operator.runs import Operator
from tests import factories
from tests.operator.test_runs import Counting, MemoryKube, _bound_balloon_pod, make

WORKSPACES = [{"name": "shared", "volumeClaimTemplate": {"metadata": {"name": "cache"},
                                                         "spec": {"accessModes": ["ReadWriteOnce"]}}}]


def _mode(operator: Operator, mode: str) -> None:
    view: Any = operator.view
    view.change(replace(view.facts, assistant_on=mode != "disabled",
                        feature_flags={"coschedule": mode}))


def _claim(name: str, owner_uid: str = "") -> dict[str, Any]:
    """A claim as Tekton made it: owned by the run in `workspaces` and `disabled`, by nobody
    (the placeholder's StatefulSet made it from its volumeClaimTemplates) per run."""
    meta: dict[str, Any] = {"name": name, "namespace": "team-a", "uid": f"uid-{name}"}
    if owner_uid:
        meta["ownerReferences"] = [{"kind": "PipelineRun", "name": "build-42", "uid": owner_uid}]
    return {"metadata": meta, "spec": {"accessModes": ["ReadWriteOnce"]},
            "status": {"phase": "Bound"}}


def _started(mode: str) -> tuple[Operator, MemoryKube, dict[str, Any], set[str]]:
    """A run started under `mode`: its balloon made, the claims Tekton made for it there."""
    operator, kube = make()
    _mode(operator, mode)
    body = factories.pipelinerun(workspaces=WORKSPACES)
    kube.runs[body["metadata"]["name"]] = body
    assert operator.reconcile_run(body).verb is Verb.CREATE
    run = PipelineRun.from_body(body)
    per_run = mode in ("pipelineruns", "isolate-pipelinerun")
    made = set(run.claims_tekton_makes(per_run))
    claims = [_claim(n, "" if per_run else factories.RUN_UID) for n in made]
    kube.list_pvcs = lambda namespace: claims  # type: ignore[method-assign]
    return operator, kube, body, made


def _balloon_claims(kube: MemoryKube) -> set[str]:
    return balloon.claim_names(kube.statefulsets[balloon.balloon_name(factories.RUN_UID)])


def test_a_run_anchored_before_the_mode_changed_keeps_its_claims_and_no_false_warning() -> None:
    """Its balloon is bound on the claims Tekton made: no ClaimNotAnchored for claims of the
    new mode's naming, which Tekton never makes for it (a Warning is never a false alarm)."""
    for before, after in (("workspaces", "pipelineruns"), ("isolate-pipelinerun", "workspaces"),
                          ("disabled", "isolate-pipelinerun"), ("pipelineruns", "disabled")):
        operator, kube, body, made = _started(before)
        [claim] = made
        operator.index.balloon_event(_bound_balloon_pod(factories.RUN_UID, "node-1", claim),
                                     False)
        _mode(operator, after)
        decision = operator.reconcile_run(body)
        assert decision.verb is Verb.KEEP, (before, after)
        assert not decision.notices, (before, after, decision.notices)
        assert "ClaimNotAnchored" not in {reason for reason, _ in kube.events}
        assert _balloon_claims(kube) == made


def test_a_balloon_not_bound_yet_when_the_mode_changes_waits_for_no_claim_that_never_comes(
) -> None:
    """Not re-planned on the new naming (its claims would never come, and a balloon waiting
    for a claim Tekton makes is not said: it would wait silently); the claims Tekton makes for
    the run, which a waiting balloon's check reads, are those it made."""
    for before, after in (("pipelineruns", "workspaces"), ("workspaces", "isolate-pipelinerun")):
        operator, kube, body, made = _started(before)
        kube.list_balloon_pods = lambda namespace, run_uid: []  # type: ignore[method-assign]
        _mode(operator, after)
        assert operator.reconcile_run(body).verb is Verb.KEEP, (before, after)
        assert _balloon_claims(kube) == made
        assert operator.live.claims_tekton_makes(factories.RUN_UID) == made


def test_a_run_that_starts_after_the_mode_changed_follows_the_new_mode() -> None:
    operator, kube, _, _ = _started("workspaces")
    _mode(operator, "pipelineruns")
    later = factories.pipelinerun(name="later", uid="later-uid", workspaces=WORKSPACES)
    kube.runs["later"] = later
    assert operator.reconcile_run(later).verb is Verb.CREATE
    expected = PipelineRun.from_body(later).claims_tekton_makes(per_run=True)
    assert balloon.claim_names(kube.statefulsets[balloon.balloon_name("later-uid")]) == expected
    assert operator.live.claims_tekton_makes("later-uid") == expected


def test_a_task_tekton_refuses_in_workspaces_mode_is_said_on_the_run_once() -> None:
    """A Warning (the TaskRun fails validation before its pod is made, and the run with it), on
    each run of ours, once however often it is looked at; the run is anchored all the same."""
    operator, kube = make()
    _mode(operator, "workspaces")
    body = factories.pipelinerun(workspaces=[
        {"name": "src", "persistentVolumeClaim": {"claimName": "source"}}, *WORKSPACES])
    body["spec"]["pipelineSpec"] = {"tasks": [{"name": "build", "taskRef": {"name": "t"},
                                               "workspaces": [{"name": "a", "workspace": "src"},
                                                              {"name": "b", "workspace": "shared"}]}]}
    kube.runs[body["metadata"]["name"]] = body
    assert operator.reconcile_run(body).verb is Verb.CREATE
    operator.reconcile_run(body)
    said = [message for reason, message in kube.events if reason == "TektonRefusesTaskClaims"]
    assert len(said) == 1 and "task build binds" in said[0]
    _mode(operator, "pipelineruns")
    other = factories.pipelinerun(name="other", uid="other-uid", workspaces=body["spec"]["workspaces"])
    other["spec"]["pipelineSpec"] = body["spec"]["pipelineSpec"]
    kube.runs["other"] = other
    operator.reconcile_run(other)
    assert len([r for r, _ in kube.events if r == "TektonRefusesTaskClaims"]) == 1


def _held_placeholder(namespace: str, run: str, uid: str) -> dict[str, Any]:
    """A placeholder of Tekton's assistant admission held (its namespace was opted in then)."""
    return {"metadata": {"name": uid, "namespace": namespace, "uid": uid,
                         "labels": {"tekton.dev/pipelineRun": run,
                                    "app.kubernetes.io/component": "affinity-assistant"}},
            "spec": {"schedulingGates": [{"name": gate.PLACEHOLDER_GATE}]}}


def test_a_new_leader_lets_go_of_a_held_placeholder_of_a_namespace_switched_off_meanwhile(
) -> None:
    """The leader that held it crashed (no hand-over), and its namespace was switched off: the
    new leader's pod watch drops that namespace's events and it remembers nothing of it. Its
    first resync round lists the placeholders not scheduled and puts each held one under its
    run's key; the run, not ours, gets no balloon, so the placeholder goes as it is. One of a
    run that is gone is left to the garbage collector; one not held, alone."""
    operator, kube = make()
    off = factories.pipelinerun(name="build-7", namespace="team-b", uid="off-uid")
    kube.runs["build-7"] = off
    kube.pods["uid-held"] = _held_placeholder("team-b", "build-7", "uid-held")
    kube.pods["uid-orphan"] = _held_placeholder("team-b", "gone", "uid-orphan")
    kube.pods["uid-free"] = {**_held_placeholder("team-b", "build-7", "uid-free"), "spec": {}}
    Resync(operator)()
    assert kube.pods["uid-held"]["patches"] == [gate.release_placeholder("", pinned=False)]
    assert "patches" not in kube.pods["uid-orphan"] and "patches" not in kube.pods["uid-free"]
    assert balloon.balloon_name("off-uid") not in kube.statefulsets


def test_a_placeholder_held_as_its_namespace_is_switched_off_is_let_go_by_the_next_rounds(
) -> None:
    """Admission held it while the namespace was opted in; the leader's watch saw it only after
    the label was gone, and dropped it. The rounds after a namespace is switched off list the
    placeholders not scheduled (two rounds: an admission replica's view may lag the leader's);
    the rounds between ask nothing."""
    operator, kube = make()
    counting = Counting(kube)
    operator.kube = operator.observer.kube = counting  # type: ignore[assignment]
    resync = Resync(operator)
    resync()  # seeded: the live runs known
    body = factories.pipelinerun(name="late", uid="late-uid", annotations={
        names.OPT_OUT_ANNOTATION: "false"})  # no balloon, no mark: nothing keeps it ours
    kube.runs["late"] = body
    counting.calls.clear()
    resync()
    assert "list_unscheduled_placeholders" not in counting.calls
    view: Any = operator.view
    view.change(replace(view.facts, enabled_namespaces=frozenset()))
    kube.pods["uid-held"] = _held_placeholder("team-a", "late", "uid-held")
    resync()
    assert kube.pods["uid-held"]["patches"] == [gate.release_placeholder("", pinned=False)]
    kube.pods["uid-again"] = _held_placeholder("team-a", "late", "uid-again")
    resync()  # the round after: an admission replica that still saw the label
    assert kube.pods["uid-again"]["patches"] == [gate.release_placeholder("", pinned=False)]
    counting.calls.clear()
    resync()
    assert "list_unscheduled_placeholders" not in counting.calls


def test_the_round_only_reads_and_puts_each_held_placeholder_under_its_run_s_key() -> None:
    """One the leader knows (its run's memory holds it) is not put again."""
    operator, kube = make()
    body = factories.pipelinerun()
    kube.runs["build-42"] = body
    operator.reconcile_run(body)  # live: its key is its uid
    kube.pods["uid-a"] = _held_placeholder("team-a", "build-42", "uid-a")
    kube.pods["uid-b"] = _held_placeholder("team-a", "build-42", "uid-b")
    kube.pods["uid-known"] = _held_placeholder("team-a", "build-42", "uid-known")
    assert operator.gates.on_placeholder(kube.pods["uid-known"], factories.RUN_UID)
    queued: list[tuple[str, Any, Any]] = []
    operator.enqueue = lambda key, slot, act, seconds: queued.append((key, slot, act))
    Resync(operator, submit=lambda uid, body, listed: None)()
    held = sorted((key, slot) for key, slot, _ in queued if str(slot).startswith("placeholder"))
    assert held == [(factories.RUN_UID, "placeholder/uid-a"), (factories.RUN_UID, "placeholder/uid-b")]
    assert all("patches" not in kube.pods[p] for p in ("uid-a", "uid-b", "uid-known"))
