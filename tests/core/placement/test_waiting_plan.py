"""What one look at a run's waiting pods does (core/placement/waiting.plan), and one round's
look at a balloon StatefulSet without a pod (waiting.no_pod_plan): pure, from what was read."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from controller.core.basics.actions import Count, Say
from controller.core.placement import waiting
from controller.core.placement.waiting import Ask, NoPodView, Waiting, WaitingView

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
CPU = "0/4 nodes are available: 1 Insufficient cpu, 3 node(s) didn't match pod affinity rules."
UNFIT = "0/4 nodes are available: 4 Insufficient memory."
NO_CLAIM = '0/3 nodes are available: persistentvolumeclaim "r-ws" not found.'
POD_GRACE, BALLOON_GRACE = 15.0, 20.0


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def view(*pods: Waiting, bound: float | None = 100.0, **more: object) -> WaitingView:
    return WaitingView("run-uid", "team-a", "r", pods, NOW, POD_GRACE, BALLOON_GRACE,
                       None if bound is None else ago(bound), **more)  # type: ignore[arg-type]


def balloon(waited: float, message: str = UNFIT) -> Waiting:
    return Waiting("coschedule-r-0", ago(waited), message, balloon=True)


def task(name: str, waited: float, message: str = CPU) -> Waiting:
    return Waiting(name, ago(waited), message, anchor="n1")


def said(planned: waiting.WaitingPlan) -> list[tuple[object, str]]:
    return [(a.key, a.notice.reason) for a in planned.actions if isinstance(a, Say)]


# -- the run's waiting pods -------------------------------------------------------------------


def test_a_balloon_past_its_grace_is_counted_as_a_balloon_problem_then_said_on_its_run() -> None:
    planned = waiting.plan(view(balloon(21), bound=None))
    count, say = planned.actions
    assert count == Count("balloon_problems", (("reason", "unschedulable"),))
    assert isinstance(say, Say) and say.notice.reason == "BalloonUnschedulable"
    assert say.key == ("run-uid", "coschedule-r-0", "BalloonUnschedulable")
    assert say.involved["metadata"] == {"name": "r", "namespace": "team-a", "uid": "run-uid"}
    assert planned.requeue_after is None


def test_a_pod_within_its_grace_is_not_said_and_the_run_is_looked_at_half_a_second_after_it() -> None:
    planned = waiting.plan(view(task("a-pod", 5), task("b-pod", 10)))
    assert planned.actions == ()
    assert planned.requeue_after == POD_GRACE - 10 + 0.5  # the soonest grace end


def test_a_task_pod_s_grace_starts_once_its_balloon_is_bound_and_not_before() -> None:
    assert waiting.plan(view(task("a-pod", 300), bound=None)) == waiting.WaitingPlan()
    planned = waiting.plan(view(task("a-pod", 300), bound=5))
    assert planned.actions == () and planned.requeue_after == POD_GRACE - 5 + 0.5
    assert said(waiting.plan(view(task("a-pod", 300), bound=16))) == [
        (("run-uid", "a-pod", "PodCannotFollowAnchor"), "PodCannotFollowAnchor")]


def test_each_pod_past_its_grace_is_said_in_the_order_the_index_gives_and_none_is_counted() -> None:
    planned = waiting.plan(view(task("b-pod", 30), task("a-pod", 30), task("c-pod", 3)))
    assert [key[1] for key, _ in said(planned)] == ["b-pod", "a-pod"]  # type: ignore[index]
    assert not any(isinstance(a, Count) for a in planned.actions)
    assert planned.requeue_after == POD_GRACE - 3 + 0.5


def test_a_balloon_waiting_for_a_claim_tekton_makes_is_not_said() -> None:
    assert waiting.plan(view(balloon(60, NO_CLAIM), bound=None,
                             tekton_makes=frozenset({"r-ws"}))).actions == ()
    assert said(waiting.plan(view(balloon(60, NO_CLAIM), bound=None)))


def test_a_task_pod_waiting_for_what_its_siblings_hold_is_not_said() -> None:
    assert waiting.plan(view(task("a-pod", 30), holds=frozenset({"cpu"}))).actions == ()
    assert said(waiting.plan(view(task("a-pod", 30), holds=frozenset({"memory"}))))


def test_a_pod_pinned_to_tekton_s_assistant_is_said_without_waiting_for_the_balloon() -> None:
    pinned = Waiting("a-pod", ago(16), CPU, assistant="affinity-assistant-0123")
    assert [r for _, r in said(waiting.plan(view(pinned, bound=None)))] == [
        "PodWaitsForTektonAssistant"]


pods = st.lists(
    st.builds(
        Waiting,
        pod=st.sampled_from(["coschedule-r-0", "a-pod", "b-pod", "c-pod"]),
        since=st.integers(0, 120).map(ago),
        message=st.sampled_from([CPU, UNFIT, NO_CLAIM, "something new"]),
        balloon=st.booleans(),
        anchor=st.sampled_from(["", "n1"]),
        assistant=st.sampled_from(["", "affinity-assistant-0123"]),
    ),
    max_size=5,
    unique_by=lambda w: w.pod,
)


@st.composite
def views(draw: st.DrawFn) -> WaitingView:
    bound = draw(st.one_of(st.none(), st.integers(0, 120)))
    return view(*draw(pods), bound=bound,
                holds=draw(st.frozensets(st.sampled_from(["cpu", "memory", "pods"]))),
                tekton_makes=draw(st.frozensets(st.sampled_from(["r-ws", "other"]))))


@given(views())
def test_the_waiting_plan_is_deterministic_and_once_said_says_nothing_new_at_the_same_time(
        v: WaitingView) -> None:
    planned = waiting.plan(v)
    assert waiting.plan(v) == planned
    # Applied as the Notifier does: each (key, reason) said once while the process lives.
    world = {(a.key, a.notice.reason) for a in planned.actions if isinstance(a, Say)}
    assert len(world) == len(said(planned))  # no pod said twice in one plan
    again = waiting.plan(v)
    assert [k for k in said(again) if k not in world] == []
    assert again.requeue_after == planned.requeue_after
    # A Count comes only right before its balloon's Say, so nothing is counted without one.
    counts = [i for i, a in enumerate(planned.actions) if isinstance(a, Count)]
    assert all(isinstance(planned.actions[i + 1], Say) for i in counts)


# -- a balloon StatefulSet without a pod --------------------------------------------------------


def no_pod(age: float | None = 30.0, **more: object) -> NoPodView:
    return NoPodView("run-uid", "team-a", "r", age, False, BALLOON_GRACE, 5.0,
                     **more)  # type: ignore[arg-type]


def test_a_young_balloon_or_one_with_a_pod_reads_nothing_and_says_nothing() -> None:
    assert waiting.no_pod_plan(no_pod(10)) == waiting.NoPodPlan()
    assert waiting.no_pod_plan(no_pod(None)) == waiting.NoPodPlan()
    assert waiting.no_pod_plan(replace(no_pod(300), has_pod=True)) == waiting.NoPodPlan()


def test_a_balloon_past_its_grace_asks_for_the_controller_s_failures_then_for_confirmation() -> None:
    assert waiting.no_pod_plan(no_pod()).ask is Ask.FAILURES
    assert waiting.no_pod_plan(no_pod(failures=("exceeded quota",))).ask is Ask.CONFIRM


def test_a_confirmed_failure_is_counted_then_said_on_the_run_with_the_controller_s_words() -> None:
    planned = waiting.no_pod_plan(no_pod(failures=("old", "exceeded quota"), confirmed=True))
    count, say = planned.actions
    assert planned.ask is None
    assert count == Count("balloon_problems", (("reason", "not-placed"),))
    assert isinstance(say, Say) and say.key == "run-uid"
    assert say.notice.reason == "BalloonNotPlaced" and "exceeded quota" in say.notice.message


def test_what_the_api_server_does_not_confirm_is_not_said() -> None:
    assert waiting.no_pod_plan(no_pod(failures=("exceeded quota",), confirmed=False)
                               ) == waiting.NoPodPlan()


def test_a_silent_controller_is_said_only_once_it_has_made_no_balloon_pod_for_long() -> None:
    busy = no_pod(300, failures=(), confirmed=True)  # idle 5 s: working through a burst
    assert waiting.no_pod_plan(busy) == waiting.NoPodPlan()
    idle = waiting.no_pod_plan(replace(busy, idle=float("inf")))
    assert [a.notice.reason for a in idle.actions if isinstance(a, Say)] == ["BalloonNotPlaced"]
    assert waiting.no_pod_plan(replace(busy, idle=float("inf"), confirmed=None)
                               ).ask is Ask.CONFIRM
