"""A run's reservation step as a plan: what carries it out, in order, with the run's memory
where it changes and when to look again. Deterministic, and it converges."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.basics import actions, names
from controller.core.basics.notices import Notice
from controller.core.capacity import reservation, roomplan, settle
from controller.core.capacity.reservation import KEEPER, SCOUT, Room, Seen
from controller.core.placement import balloon
from controller.core.placement.runplan import reference
from tests import factories
from tests.core.capacity.test_reservation import PEAK, make_policy, make_run, room, seen, with_uid

REF = reference("build-42", "team-a", factories.RUN_UID)
BASE = with_uid(balloon.plan(make_run(), make_policy(), [], room=True).manifest)
SAID = Notice("PeakNotEstimated", "its pipeline cannot be read")


def pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "team-a", "uid": f"uid-{name}",
                         "labels": {names.LABEL_COMPONENT: names.COMPONENT_RESERVATION}}}


def view(s: Seen | None, rooms: tuple[dict[str, Any], ...] = (), **kw: Any) -> roomplan.RoomView:
    return roomplan.RoomView(REF, kw.pop("said", ()), s, BASE, rooms, priority_class="low",
                             now=100.0, **kw)


def kinds(planned: roomplan.RoomPlan) -> list[str]:
    return [type(a).__name__ for a in planned.actions]


def test_a_scout_is_remembered_then_made_asking_the_whole_peak() -> None:
    planned = roomplan.plan(view(seen()))
    assert kinds(planned) == ["Remember", "MakePod"]
    remember, make = planned.actions
    assert isinstance(remember, actions.Remember) and isinstance(make, actions.MakePod)
    made = make.manifest["metadata"]["name"]
    assert remember.changes == {"acted": settle.Acted(100.0, made, made=True)}
    assert make.manifest["spec"]["priorityClassName"] == "low"


def test_an_older_scout_still_ending_goes_first_and_what_is_said_comes_before_all() -> None:
    rooms = (pod("newest"), pod("older"))
    planned = roomplan.plan(view(seen(room=room(age=1)), rooms, said=(SAID,)))
    assert kinds(planned) == ["Say", "DeletePod"]
    assert planned.actions[1] == actions.DeletePod("team-a", "older", "uid-older", grace=0,
                                                   why="an older reservation")


def test_a_replaced_scout_is_deleted_before_the_smaller_one_is_made() -> None:
    waited = seen(room=room(age=61), balloon_waiting=61)
    planned = roomplan.plan(view(waited, (pod("r"),)))
    assert planned.step is not None and planned.step.act is reservation.Act.REPLACE
    assert kinds(planned) == ["Say", "Remember", "DeletePod", "MakePod"]  # it waited: said


def test_a_balloon_the_quota_leaves_no_reservation_for_is_planned_again_without_one() -> None:
    planned = roomplan.plan(view(seen(full={}, need={})))
    assert planned.replan and planned.step is None
    assert planned.actions == (actions.Remember(factories.RUN_UID, {
        "acted": settle.Acted(100.0, hold=settle.SETTLE)}),)


def test_a_peak_not_estimated_only_says_so() -> None:
    planned = roomplan.plan(view(None, said=(SAID,)))
    assert kinds(planned) == ["Say"] and planned.step is None and not planned.replan


def test_the_wait_that_may_change_the_step_is_the_plan_s() -> None:
    planned = roomplan.plan(view(seen(room=room(age=1))))
    assert planned.actions == () and planned.requeue_after == 19 + reservation.PAST


@st.composite
def seens(draw: st.DrawFn) -> Seen:
    node = draw(st.sampled_from([None, "n1"]))
    r = draw(st.none() | st.builds(
        Room, st.just("r"), st.sampled_from([SCOUT, KEEPER]),
        st.sampled_from([PEAK, {"cpu": 1000}]), st.sampled_from(["", "n1", "n2"]),
        st.sampled_from([1.0, 70.0]), st.integers(0, 2)))
    return seen(balloon_node=node, room=r, requires_room=draw(st.booleans()),
                need=draw(st.sampled_from([PEAK, {}, {"cpu": 1000}])),
                between_layers=draw(st.booleans()), pods_pending=draw(st.booleans()))


def applied(s: Seen, planned: roomplan.RoomPlan) -> Seen:
    """The world after the step, as the next view reads it: a pod made is the run's room (a
    keeper beside the balloon, a scout pending), one deleted is gone."""
    for action in planned.actions:
        if isinstance(action, actions.DeletePod):
            s = replace(s, room=None)
        elif isinstance(action, actions.MakePod):
            role = action.manifest["metadata"]["annotations"][reservation.ANNOTATION_ROLE]
            size = planned.step.size if planned.step and planned.step.size else {}
            node = (s.balloon_node or "") if role == KEEPER else ""
            s = replace(s, room=Room(action.manifest["metadata"]["name"], role, size, node, 0.0))
    return s


@settings(max_examples=400, deadline=None)
@given(seens())
def test_the_step_is_deterministic_and_applied_it_asks_for_nothing_more(s: Seen) -> None:
    assert roomplan.plan(view(s)) == roomplan.plan(view(s))
    for _ in range(3):
        planned = roomplan.plan(view(s, (pod(s.room.name),) if s.room else ()))
        writes = [a for a in planned.actions if isinstance(a, actions.MakePod | actions.DeletePod)]
        if not writes:
            break
        s = applied(s, planned)
    else:
        raise AssertionError(f"still acting after three rounds: {planned}")
