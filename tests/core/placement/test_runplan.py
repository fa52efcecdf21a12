"""One look at a run: admitted before it is observed, planned after, asking for a read first
where a decision could not be trusted without it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from controller.core.basics import actions, names
from controller.core.basics.notices import Notice
from controller.core.capacity import reservation, roomplan
from controller.core.model.tekton import PipelineRun
from controller.core.placement import gate, runplan
from controller.core.placement.memory import Gated, Placeholder
from controller.core.placement.reconcile import Verb
from controller.core.placement.runplan import Ask
from tests import factories
from tests.core.placement.test_reconcile import current_balloon, observe


def run(**kwargs: Any) -> PipelineRun:
    return PipelineRun.from_body(factories.pipelinerun(**kwargs))


MARKING = runplan.Marking("tekton-coscheduler.dev/enabled=true", "kubernetes.io/hostname",
                          marked=False)


def view(observed: Any, newest: bool = True, asked: frozenset[Ask] = frozenset(),
         **kwargs: Any) -> runplan.View:
    """A view of the run, its reservation read already (nothing to tend, unless `room`)."""
    return runplan.View(observed, newest, kwargs.pop("marking", MARKING),
                        asked=asked | {Ask.ROOM}, **kwargs)


def test_a_live_run_of_ours_is_kept_live_and_looked_at_further() -> None:
    admitted = runplan.admit(run(), serves=True, may_have_balloon=True, has_room=False)
    assert (admitted.live, admitted.forget_settled, admitted.forget_ended) == (True, False, False)
    assert admitted.done is None


def test_a_run_not_ours_is_dropped_at_once_and_costs_no_further_read() -> None:
    admitted = runplan.admit(run(), serves=False, may_have_balloon=True, has_room=False)
    assert not admitted.live and admitted.forget_settled and not admitted.forget_ended
    assert admitted.done is not None and admitted.done.why == "namespace not enabled"


def test_a_finished_run_forgets_its_work_and_stops_once_its_balloon_is_known_gone() -> None:
    ended = run(succeeded="True")
    admitted = runplan.admit(ended, serves=True, may_have_balloon=True, has_room=False)
    assert not admitted.live and admitted.forget_ended and admitted.done is None  # its balloon goes
    gone = runplan.admit(ended, serves=True, may_have_balloon=False, has_room=True)
    assert gone.done is not None and gone.release_room  # it ended while its scout looked


def test_an_invalid_run_is_done_with() -> None:
    body = factories.pipelinerun()
    del body["metadata"]["uid"]
    admitted = runplan.admit(PipelineRun.from_body(body), False, True, False)
    assert admitted.done is not None and admitted.done.verb is Verb.NONE


def test_a_statefulset_of_the_balloon_s_name_and_another_run_is_not_ours() -> None:
    existing = current_balloon()
    assert not runplan.name_taken(run(), existing)
    existing["metadata"]["labels"][names.LABEL_RUN_UID] = "another"
    assert runplan.name_taken(run(), existing)
    assert not runplan.name_taken(run(), None)


def test_a_balloon_made_from_a_body_that_may_be_old_asks_for_the_run_first() -> None:
    observed = observe()
    assert runplan.plan(view(observed)).decision.verb is Verb.CREATE
    asked = runplan.plan(view(observed, newest=False))
    assert asked.ask is Ask.RUN
    planned = runplan.plan(view(observed, False, frozenset({Ask.RUN})))
    assert planned.ask is None and planned.decision.verb is Verb.CREATE
    assert "MakeBalloon" in kinds(planned)


def test_a_template_replaced_asks_first_where_the_balloon_pod_is_bound() -> None:
    existing = current_balloon()
    existing["spec"]["template"]["spec"]["volumes"] = []  # it lacks the run's claim: UPDATE
    observed = observe(existing=existing)
    assert runplan.plan(view(observed)).ask is Ask.BALLOON_NODE
    bound = runplan.plan(view(replace(observed, balloon_pod_node="n1"), True,
                                      frozenset({Ask.BALLOON_NODE})))
    assert bound.decision.verb is Verb.KEEP and bound.ask is None  # placed: never moved
    unbound = runplan.plan(view(observed, True, frozenset({Ask.BALLOON_NODE})))
    assert unbound.decision.verb is Verb.UPDATE and unbound.ask is None


@pytest.mark.parametrize("finished", [False, True])
def test_what_the_observation_found_is_said_before_the_decision_s_own(finished: bool) -> None:
    said = Notice("PeakNotEstimated", "the pipeline cannot be estimated")
    observed = replace(observe(factories.pipelinerun(succeeded="True" if finished else None)),
                       notices=(said,))
    planned = runplan.plan(view(observed))
    assert planned.decision.notices[:1] == (said,)
    # A run that ended gets no balloon, and is neither marked nor tended.
    assert ("MakeBalloon" in kinds(planned)) is not finished


def ready(body: dict[str, Any]) -> dict[str, Any]:
    """A run Tekton has made its first writes to (core/placement/mark.ready)."""
    body["metadata"].setdefault("labels", {})["tekton.dev/pipeline"] = "fan-out-in"
    body.setdefault("status", {})["pipelineSpec"] = {"tasks": []}
    return body


def kinds(planned: runplan.Plan) -> list[str]:
    return [type(a).__name__ for a in planned.actions]


def test_a_new_balloon_s_plan_makes_it_then_the_budget_then_marks_the_run_and_its_task_runs(
) -> None:
    observed = observe(ready(factories.pipelinerun()))
    marking = replace(MARKING, task_runs=("build-42-fetch",))
    planned = runplan.plan(view(observed, marking=marking, budget_kept=False))
    assert kinds(planned) == ["MakeBalloon", "MakeBudget", "Mark", "Mark", "Remember"]
    marks = [a for a in planned.actions if isinstance(a, actions.Mark)]
    assert [(m.plural, m.name) for m in marks] == [("pipelineruns", "build-42"),
                                                  ("taskruns", "build-42-fetch")]
    assert planned.actions[-1] == actions.Remember(factories.RUN_UID, {"marked": True})
    budget_known = runplan.plan(view(observed, marking=marking))
    assert kinds(budget_known) == ["MakeBalloon", "Mark", "Mark", "Remember"]


def test_a_run_marked_already_or_not_ready_for_its_mark_is_not_marked() -> None:
    unready = runplan.plan(view(observe()))
    marked = runplan.plan(view(observe(ready(factories.pipelinerun())),
                               marking=replace(MARKING, marked=True)))
    for planned in (unready, marked):
        assert kinds(planned) == ["MakeBalloon"]


def test_a_balloon_deleted_takes_its_reservation_pods_with_it_and_only_those() -> None:
    existing = current_balloon()
    ended = observe(factories.pipelinerun(succeeded="True"), existing=existing)
    room = {"metadata": {"name": "room", "namespace": "team-a", "uid": "r1", "labels": {
        names.LABEL_COMPONENT: names.COMPONENT_RESERVATION}}}
    other = {"metadata": {"name": "balloon-0", "namespace": "team-a", "uid": "b1",
                          "labels": {names.LABEL_COMPONENT: names.COMPONENT_BALLOON}}}
    planned = runplan.plan(view(ended, existing=existing, rooms=(room, other)))
    assert planned.decision.verb is Verb.DELETE
    assert kinds(planned) == ["DeleteBalloon", "DeletePod"]
    assert planned.actions[-1] == actions.DeletePod("team-a", "room", "r1", grace=0,
                                                   why=planned.decision.why)


def test_what_is_said_comes_first_on_the_run_s_reference_under_its_key() -> None:
    said = Notice("PeakNotEstimated", "the pipeline cannot be estimated")
    planned = runplan.plan(view(replace(observe(), notices=(said,))))
    first = planned.actions[0]
    assert isinstance(first, actions.Say) and first.notice == said
    assert first.key == factories.RUN_UID
    assert first.involved["metadata"] == {"name": "build-42", "namespace": "team-a",
                                          "uid": factories.RUN_UID}


def test_a_plan_asking_for_a_read_first_acts_on_nothing() -> None:
    asked = runplan.plan(view(observe(ready(factories.pipelinerun())), newest=False,
                              budget_kept=False))
    assert asked.ask is Ask.RUN and asked.actions == ()


def test_a_run_that_keeps_a_balloon_reads_its_reservation_for_it_then_tends_it_last() -> None:
    """Its reservation's view is read for the balloon as planned (one read, the decision not
    taken twice); the step's actions come after the balloon's and the mark's, and its wait is
    the plan's."""
    observed = observe(ready(factories.pipelinerun()))
    first = runplan.plan(runplan.View(observed, True, MARKING))
    assert first.ask is Ask.ROOM and first.actions == () and first.decision.verb is Verb.CREATE
    assert first.decision.manifest is not None
    ref = runplan.reference("build-42", "team-a", factories.RUN_UID)
    waiting = reservation.Room("scout", reservation.SCOUT, {"cpu": 6000}, node="", age=5.0)
    seen = reservation.Seen(full={"cpu": 6000}, need={"cpu": 6000}, requires_room=True,
                            balloon_node=None, balloon_waiting=0.0, pods_pending=False,
                            room=waiting, wait_seconds=60.0)
    room = roomplan.RoomView(ref, (), seen, first.decision.manifest)
    planned = runplan.plan(runplan.View(observed, True, MARKING, asked=frozenset({Ask.ROOM}),
                                        room=room, decided=first.decision))
    assert kinds(planned) == ["MakeBalloon", "Mark", "Remember"]  # the scout still looks
    assert planned.room is not None and planned.requeue_after == planned.room.requeue_after
    assert planned.requeue_after is not None and 14 < planned.requeue_after < 16  # its 20 s
    none_yet = replace(room, seen=replace(seen, room=None))
    scouting = runplan.plan(replace(runplan.View(observed, True, MARKING, room=none_yet,
                                                 decided=first.decision),
                                    asked=frozenset({Ask.ROOM})))
    assert kinds(scouting)[-2:] == ["Remember", "MakePod"]  # the act remembered, the scout made


def test_a_run_that_is_to_have_no_balloon_lets_its_held_pods_go_first() -> None:
    """Opted out after admission held its pods (its first pod, Tekton's placeholder): they go
    as they are, before anything else of the plan, and nothing of a run that anchors does."""
    gated = Gated("p1", "team-a", "build-42-fetch-pod")
    held = Placeholder("a1", "team-a", "affinity-assistant-0")
    opted_out = observe(factories.pipelinerun(
        annotations={"tekton-coscheduler.dev/coschedule": "false"}))
    planned = runplan.plan(view(opted_out, gated=(gated,), placeholders=(held,), host="n1"))
    assert planned.actions[:2] == (
        actions.ReleaseGate("team-a", "build-42-fetch-pod", "p1", gate.release(),
                            factories.RUN_UID),
        actions.ReleaseGate("team-a", "affinity-assistant-0", "a1",
                            gate.release_placeholder("n1", False), factories.RUN_UID))
    anchored = runplan.plan(view(observe(), gated=(gated,), placeholders=(held,), host="n1"))
    assert not any(isinstance(a, actions.ReleaseGate) for a in anchored.actions)


def test_a_run_whose_anchor_waits_for_tekton_s_resolvers_is_remembered_so_and_looked_at_when_its_hold_ends(
) -> None:
    waiting = replace(observe(), resolving="task build")
    planned = runplan.plan(view(waiting, hold_left=30.0))
    assert planned.decision.verb is Verb.NONE  # its peak is not known yet
    assert planned.actions == (actions.Remember(factories.RUN_UID, {"resolving": True}),)
    assert planned.requeue_after == 30.5
    again = runplan.plan(view(waiting, hold_left=12.0, resolving=True))
    assert again.actions == () and again.requeue_after == 12.5  # remembered already
    resolved = runplan.plan(view(observe(), resolving=True))
    assert resolved.actions[0] == actions.Remember(factories.RUN_UID, {"resolving": False})
    assert resolved.requeue_after is None and "MakeBalloon" in kinds(resolved)
