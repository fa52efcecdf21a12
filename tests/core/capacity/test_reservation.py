"""The reservation pod: it finds the run a node with room for its peak, and keeps the room."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from controller.core.capacity import reservation, reservation_pod
from controller.core.capacity.reservation import KEEPER, SCOUT, Act, Room, Seen
from controller.core.model.tekton import PipelineRun
from controller.core.placement import balloon
from controller.settings import Settings
from tests import factories


def make_run() -> PipelineRun:
    return PipelineRun.from_body(factories.pipelinerun())


def make_policy() -> Any:
    return Settings().default_policy()

PEAK = {"cpu": 3000, "memory": 3 * 2**30 * 1000, "pods": 3000}


def seen(**changes: Any) -> Seen:
    base: dict[str, Any] = dict(
        full=PEAK, need=PEAK, requires_room=True, balloon_node=None, balloon_waiting=0.0,
        pods_pending=False, room=None, wait_seconds=60,
    )
    return Seen(**{**base, **changes})


def room(role: str = SCOUT, node: str = "", age: float = 1.0, halvings: int = 0,
         size: dict[str, int] | None = None) -> Room:
    return Room("r", role, PEAK if size is None else size, node, age, halvings)


def test_a_balloon_that_waits_for_room_gets_a_scout_asking_the_whole_peak() -> None:
    step = reservation.decide(seen())
    assert step.act is Act.SCOUT and step.size == PEAK


def test_a_balloon_without_the_term_anchors_alone_and_loses_any_reservation() -> None:
    assert reservation.decide(seen(requires_room=False)).act is Act.NONE
    assert reservation.decide(seen(requires_room=False, room=room())).act is Act.DELETE


def test_the_scout_may_wait_for_a_node_for_the_policys_time_then_asks_half() -> None:
    assert reservation.decide(seen(room=room(age=19))).notice is None
    waiting = reservation.decide(seen(room=room(age=59)))
    assert waiting.act is Act.NONE and waiting.notice is not None
    assert waiting.notice.reason == "WaitingForRoom" and not waiting.notice.warning
    step = reservation.decide(seen(room=room(age=61)))
    assert step.act is Act.REPLACE and step.halvings == 1
    assert step.size == {"cpu": 1500, "memory": 3 * 2**29 * 1000}
    assert step.notice is not None and step.notice.reason == "PeakDoesNotFit"
    assert "cpu 3, memory 3Gi, pods 3" in step.notice.message
    assert "now asks for cpu 1500m, memory 1536Mi, and the run will be anchored where that fits" \
        in step.notice.message


def test_after_the_last_halving_the_scout_asks_for_nothing_and_waits_no_more() -> None:
    step = reservation.decide(seen(room=room(age=61, halvings=reservation.MAX_HALVINGS - 1)))
    assert step.act is Act.REPLACE and step.size == {}
    assert "anchored wherever it fits" in (step.notice.message if step.notice else "")
    assert reservation.decide(seen(room=room(age=999, halvings=reservation.MAX_HALVINGS))).act \
        is Act.NONE


def test_a_balloon_that_cannot_follow_its_bound_scout_makes_it_look_again() -> None:
    assert reservation.decide(seen(room=room(node="n1"), balloon_waiting=10)).act is Act.NONE
    assert reservation.decide(seen(room=room(node="n1"), balloon_waiting=61)).act is Act.REPLACE


def test_a_keeper_left_by_a_moving_anchor_makes_way_for_a_scout() -> None:
    assert reservation.decide(seen(room=room(role=KEEPER, node="old"))).act is Act.DELETE


def test_once_anchored_the_scout_is_kept_while_it_matches_what_the_run_needs() -> None:
    assert reservation.decide(seen(balloon_node="n1", room=room(node="n1"))).act is Act.NONE


def test_a_reservation_on_another_node_than_the_anchor_goes() -> None:
    step = reservation.decide(seen(balloon_node="n1", room=room(node="n2")))
    assert step.act is Act.DELETE


def test_running_pods_that_hold_the_rest_of_the_peak_need_no_reservation() -> None:
    step = reservation.decide(seen(balloon_node="n1", need={"pods": 1000}, room=room(node="n1")))
    assert step.act is Act.DELETE
    assert reservation.decide(seen(balloon_node="n1", need={})).act is Act.NONE


def test_between_layers_a_keeper_asks_what_the_rest_of_the_run_needs() -> None:
    need = {"cpu": 2000}
    step = reservation.decide(seen(balloon_node="n1", need=need))
    assert step.act is Act.KEEP and step.size == need


def test_no_reservation_is_made_while_a_layer_is_starting() -> None:
    assert reservation.decide(seen(balloon_node="n1", pods_pending=True)).act is Act.NONE


def test_between_layers_the_keeper_goes_so_that_the_next_layer_need_not_preempt_it() -> None:
    """A layer has ended and Tekton is making the next one's pods: they take the room at once.
    A reservation left in their way would be preempted, and kube-scheduler may then leave a
    preemptor waiting for an unrelated event (kubernetes/kubernetes#141694)."""
    need = {"cpu": 2000}
    kept = room(role=KEEPER, node="n1", size=need)
    step = reservation.decide(seen(balloon_node="n1", need=need, room=kept, between_layers=True))
    assert step.act is Act.DELETE
    pending = room(role=KEEPER, node="", size=need)
    assert reservation.decide(seen(balloon_node="n1", need=need, room=pending,
                                   between_layers=True)).act is Act.DELETE
    assert reservation.decide(seen(balloon_node="n1", need=need, between_layers=True)).act \
        is Act.NONE


def test_a_reservation_far_from_what_is_needed_is_replaced_between_layers() -> None:
    kept = room(role=KEEPER, node="n1", size={"cpu": 3000})
    assert reservation.decide(seen(balloon_node="n1", need={"cpu": 1000}, room=kept)).act \
        is Act.DELETE
    assert reservation.decide(seen(balloon_node="n1", need={"cpu": 2900}, room=kept)).act \
        is Act.NONE


def test_a_keeper_that_finds_its_room_taken_says_so_and_keeps_trying() -> None:
    kept = room(role=KEEPER, age=90, size=PEAK)
    step = reservation.decide(seen(balloon_node="n1", room=kept))
    assert step.act is Act.NONE and step.notice is not None
    assert step.notice.reason == "RoomTaken" and not step.notice.warning


def test_the_balloon_follows_the_reservation_only_when_asked() -> None:
    run = make_run()
    plain = balloon.plan(run, make_policy(), [])
    pinned = balloon.plan(run, make_policy(), [], room=True)
    spec = pinned.manifest["spec"]["template"]["spec"]
    assert not reservation.requires_room(plain.manifest["spec"]["template"]["spec"], run.uid)
    assert reservation.requires_room(spec, run.uid)


def with_uid(sts: dict[str, Any]) -> dict[str, Any]:
    return {**sts, "metadata": {**sts["metadata"], "uid": "sts-uid"}}


def test_a_scout_carries_the_balloons_constraints_and_claims_at_low_priority() -> None:
    run = make_run()
    sts = with_uid(balloon.plan(run, make_policy(), [], room=True).manifest)
    pod = reservation_pod.manifest(sts, run.uid, SCOUT, PEAK, 0, PEAK, "low")
    template = sts["spec"]["template"]["spec"]
    assert pod["spec"]["priorityClassName"] == "low"
    assert pod["spec"].get("volumes") == template.get("volumes")
    assert pod["spec"].get("tolerations") == template.get("tolerations")
    assert not reservation.requires_room(pod["spec"], run.uid)  # it does not wait for itself
    assert pod["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "3", "memory": "3Gi"}, "limits": {"cpu": "3", "memory": "3Gi"}}
    owner = pod["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"]) == ("PipelineRun", run.uid)  # it may precede the balloon
    assert reservation.room_of(pod, 5.0) == Room(pod["metadata"]["name"], SCOUT,
                                                 {"cpu": 3000, "memory": 3 * 2**30 * 1000},
                                                 "", 5.0, 0)


def test_a_keeper_is_pinned_beside_the_balloon_and_mounts_nothing() -> None:
    run = make_run()
    sts = with_uid(balloon.plan(run, make_policy(), [], room=True).manifest)
    pod = reservation_pod.manifest(sts, run.uid, KEEPER, {"cpu": 500}, 0, PEAK, "low")
    terms = pod["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms == [{"labelSelector": {"matchLabels": sts["spec"]["selector"]["matchLabels"]},
                      "topologyKey": "kubernetes.io/hostname"}]
    assert "volumes" not in pod["spec"]
    assert pod["spec"]["containers"][0]["volumeMounts"] == []


def advanced(before: Seen, seconds: float) -> Seen:
    """The same run `seconds` later, with no event meanwhile: its scout and its waiting balloon
    older."""
    return replace(
        before, room=before.room and replace(before.room, age=before.room.age + seconds),
        balloon_waiting=before.balloon_waiting + seconds if before.balloon_waiting else 0.0)


WAITS = [seen()] + [
    seen(room=room(age=age, node=node, halvings=halvings), balloon_node=anchor,
         balloon_waiting=waited)
    for age in (1, 19, 21, 59, 61) for node in ("", "n1") for anchor in (None, "n1")
    for waited in (0.0, 10.0, 61.0) for halvings in (0, reservation.MAX_HALVINGS)
]


def test_a_run_is_tended_again_just_after_a_wait_that_may_change_its_step_runs_out() -> None:
    """No sweep of every run: time alone changes nothing before recheck_after's answer (or
    ever, when it is None), so a run tended then misses no wait running out."""
    changed = 0
    for case in WAITS:
        step, again = reservation.decide(case), reservation.recheck_after(case)
        quiet = 10_000.0 if again is None else again - reservation.PAST
        for seconds in (0.0, quiet / 2, quiet):
            assert reservation.decide(advanced(case, seconds)) == step, (case, seconds)
        changed += again is not None and reservation.decide(advanced(case, again)) != step
    assert changed >= 10
    first = reservation.recheck_after(seen(room=room(age=1)))  # a new scout: said at 20 s
    assert first == 19 + reservation.PAST
    notice = reservation.decide(advanced(seen(room=room(age=1)), first)).notice
    assert notice is not None and notice.reason == "WaitingForRoom"
