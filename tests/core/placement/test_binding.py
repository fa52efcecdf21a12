"""Where a run's balloon pod went, and its task pods' bindings (core/placement/binding.py):
pure plans from one view of an event."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from controller.core.basics import actions, names
from controller.core.placement import balloon, binding, warm
from controller.core.placement.binding import Ask, BalloonView, TaskView
from controller.core.placement.memory import EMPTY, BoundPod, Move, RunMemory

UID = "run-uid"
REF = {"metadata": {"name": "build-42", "namespace": "team-a", "uid": UID}}
CREATED = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)


def sts(anchored: str = "", **more: str) -> dict[str, Any]:
    annotations = {names.ANNOTATION_RUN_CREATED: "2026-11-29T08:00:00Z", **more}
    if anchored:
        annotations[names.ANNOTATION_ANCHORED_NODE] = anchored
    return {"metadata": {"name": balloon.balloon_name(UID), "annotations": annotations}}


def view(node: str = "n1", memory: RunMemory = EMPTY, statefulset: Any = None,
         **more: Any) -> BalloonView:
    fields: dict[str, Any] = dict(
        run_uid=UID, run_name="build-42", namespace="team-a", node=node, deleted=False,
        terminating=False, why="its pod was deleted", known=True, left=None, memory=memory,
        anchored_ever=(node,), now=100.0, bound=CREATED.replace(second=12),
        statefulset=sts() if statefulset is None else statefulset,
        asked=frozenset({Ask.BALLOON, Ask.STATEFULSET, Ask.WARM}))
    fields.update(more)
    return BalloonView(**fields)


def kinds(planned: binding.BindPlan) -> list[str]:
    out = []
    for step in planned.actions:
        if isinstance(step, actions.Say):
            out.append(step.notice.reason)
        elif isinstance(step, actions.Count):
            out.append(f"count {step.metric}")
        elif isinstance(step, actions.Remember):
            out.append("remember " + ",".join(sorted(step.changes)))
        else:
            out.append(type(step).__name__)
    return out


def test_a_first_binding_is_said_anchored_annotated_and_remembered_with_its_time() -> None:
    planned = binding.on_balloon(view())
    assert kinds(planned) == ["Anchored", "AnnotateBalloon", "remember annotated"]
    assert planned.anchor_seconds == 12.0 and planned.requeue_after is None


def test_the_balloon_is_read_from_the_cache_first_and_asked_of_the_api_when_missing() -> None:
    fresh = view(asked=frozenset())
    assert binding.on_balloon(fresh).ask is Ask.BALLOON
    missing = replace(fresh, asked=frozenset({Ask.BALLOON}), statefulset=None)
    assert binding.on_balloon(missing).ask is Ask.STATEFULSET
    gone = replace(missing, asked=frozenset({Ask.BALLOON, Ask.STATEFULSET}))
    assert binding.on_balloon(gone).actions == ()  # no balloon: nothing to anchor


def test_what_is_warm_is_asked_only_for_a_run_to_be_said_anchored() -> None:
    assert binding.on_balloon(view(asked=frozenset({Ask.BALLOON}))).ask is Ask.WARM
    again = view(memory=replace(EMPTY, annotated="n1"), asked=frozenset({Ask.BALLOON}))
    assert binding.on_balloon(again).ask is None


def test_a_warm_anchor_is_counted_remembered_in_the_policy_status_and_said() -> None:
    note = warm.Warmth(frozenset({"maven"}), sizes={"maven": 10**9}, held={"n1": 10**9},
                       cache_key="inline:x", cache_node="n1")
    read = binding.WarmRead(10**9, "warm", {}, "2026-11-29T08:00:12Z")
    planned = binding.on_balloon(view(statefulset=sts(**{warm.ANNOTATION: note.annotation()}),
                                      warm=read))
    assert kinds(planned)[:4] == ["count warm_image_bytes", "count warm_image_bytes",
                                  "count warm_cache_runs", "WritePolicyStatus"]
    [write] = [a for a in planned.actions if isinstance(a, actions.WritePolicyStatus)]
    assert write.status["warmNodes"]["inline:x"]["node"] == "n1"
    [said] = [a for a in planned.actions if isinstance(a, actions.Say)]
    assert "caches are warm there" in said.notice.message


def test_a_move_the_operator_makes_is_said_with_its_reason_once_the_new_pod_is_bound() -> None:
    memory = replace(EMPTY, moving=("n1", "cordoned"), annotated="n1")
    planned = binding.on_balloon(view("n2", memory, sts("n1"), anchored_ever=("n1", "n2")))
    assert kinds(planned) == ["remember moving", "count anchor_moves", "AnchorMoved",
                              "AnnotateBalloon", "remember annotated"]
    assert planned.actions[1] == actions.Count("anchor_moves", (("reason", "cordoned"),))


def test_a_move_not_explained_yet_is_remembered_and_looked_at_again_after_the_grace() -> None:
    planned = binding.on_balloon(view("n2", replace(EMPTY, annotated="n1"), sts("n1"),
                                      anchored_ever=("n1", "n2")))
    assert kinds(planned) == ["remember unexplained", "AnnotateBalloon", "remember annotated"]
    assert planned.requeue_after == binding.MOVE_GRACE
    move = planned.actions[0].changes["unexplained"]  # type: ignore[union-attr]
    assert (move.left, move.to, move.since) == ("n1", "n2", 100.0)


def test_the_old_pod_s_deletion_explains_a_move_seen_first() -> None:
    memory = replace(EMPTY, unexplained=Move("n1", "n2", REF, 100.0))
    planned = binding.on_balloon(view("n1", memory, deleted=True, why="preempted"))
    assert kinds(planned) == ["remember unexplained", "count anchor_moves", "AnchorMoved"]
    assert "from node n1 (preempted) to node n2" in planned.actions[2].notice.message  # type: ignore[union-attr]


def test_a_deletion_seen_first_is_remembered_as_the_move_under_way() -> None:
    planned = binding.on_balloon(view("n1", deleted=True, why="evicted"))
    assert planned.actions == (actions.Remember(UID, {"moving": ("n1", "evicted")}),)
    forgotten = view("n1", deleted=True, known=False)
    assert binding.on_balloon(forgotten).actions == ()


def test_an_unexplained_move_is_said_once_its_grace_is_over() -> None:
    memory = replace(EMPTY, unexplained=Move("n1", "n2", REF, 100.0))
    assert binding.overdue(UID, memory, 105.0).actions == ()
    late = binding.overdue(UID, memory, 110.0)
    assert kinds(late) == ["remember unexplained", "count anchor_moves", "AnchorMoved"]
    assert "(its pod was replaced)" in late.actions[2].notice.message  # type: ignore[union-attr]


def fetch(node: str) -> BoundPod:
    return BoundPod("uid-fetch", "build-42-fetch-pod", "team-a", "build-42", node)


def task(node: str, **more: Any) -> TaskView:
    fields: dict[str, Any] = dict(run_uid=UID, pod=fetch(node), deleted=False, ours=True,
                                  memory=EMPTY, anchored_ever=("n1",))
    fields.update(more)
    return TaskView(**fields)


def test_a_pod_beside_its_anchor_is_fine_and_one_elsewhere_is_checked_before_said() -> None:
    assert binding.on_task_pod(task("n1")) == binding.BindPlan()
    assert binding.on_task_pod(task("n3")).ask is Ask.BALLOON_PODS
    checked = binding.on_task_pod(task("n3", asked=frozenset({Ask.BALLOON_PODS}),
                                       balloon_pods=(("b1", "n1", False),)))
    assert kinds(checked) == ["remember misplaced", "count misplaced_pods", "PodMisplaced"]
    assert "runs on n3, its anchor on n1" in checked.actions[2].notice.message  # type: ignore[union-attr]


def test_a_pod_beside_a_balloon_the_api_server_shows_bound_but_the_watch_not_yet_is_fine(
) -> None:
    late = task("n2", asked=frozenset({Ask.BALLOON_PODS}), balloon_pods=(("b2", "n2", False),))
    assert binding.on_task_pod(late).actions == ()


def test_a_pod_beside_a_balloon_not_bound_yet_is_judged_once_that_one_is() -> None:
    waiting = task("n2", anchored_ever=("n1",), asked=frozenset({Ask.BALLOON_PODS}),
                   balloon_pods=(("b2", "", False),))
    assert binding.on_task_pod(waiting).actions == (
        actions.Remember(UID, {"unjudged": (fetch("n2"),)}),)
    bound = view("n2", replace(EMPTY, annotated="n1", unjudged=(fetch("n3"),),
                               moving=("n1", "cordoned")), sts("n1"), anchored_ever=("n1", "n2"))
    assert kinds(binding.on_balloon(bound))[-3:] == [
        "remember misplaced", "count misplaced_pods", "PodMisplaced"]


def test_a_run_whose_balloon_pod_the_watch_has_not_shown_is_asked_once_and_remembered() -> None:
    unknown = task("n3", anchored_ever=())
    assert binding.on_task_pod(unknown).ask is Ask.BALLOON_NODE
    listed = replace(unknown, asked=frozenset({Ask.BALLOON_NODE}), listed=True, known_node="n3")
    assert binding.on_task_pod(listed).actions == (actions.Remember(UID, {"asked": True}),)


# -- properties -------------------------------------------------------------------------------

NODES = st.sampled_from(["", "n1", "n2"])
MEMORIES = st.builds(
    lambda moving, unexplained, annotated, unjudged: replace(
        EMPTY, moving=moving, unexplained=unexplained, annotated=annotated, unjudged=unjudged),
    st.none() | st.tuples(st.sampled_from(["n1", "n2"]), st.sampled_from(["cordoned", "x"])),
    st.none() | st.builds(lambda left, to: Move(left, to, REF, 90.0),
                          st.sampled_from(["n1", "n2"]), st.sampled_from(["n1", "n2"])),
    NODES, st.lists(st.builds(fetch, st.sampled_from(["n1", "n2", "n3"])), max_size=2).map(
        tuple))
VIEWS = st.builds(
    lambda node, memory, anchored, left, deleted, terminating: view(
        node or "n1", memory, sts(anchored), left=left or None, deleted=deleted,
        terminating=terminating, anchored_ever=tuple(dict.fromkeys(
            [n for n in (left, anchored, node or "n1") if n]))),
    NODES, MEMORIES, NODES, NODES, st.booleans(), st.booleans())


def applied(v: BalloonView, planned: binding.BindPlan) -> BalloonView:
    """The plan's memory changes and annotation applied to a simulated memory and StatefulSet."""
    memory, statefulset = v.memory, v.statefulset
    for step in planned.actions:
        if isinstance(step, actions.Remember):
            memory = replace(memory, **step.changes)
        elif isinstance(step, actions.AnnotateBalloon):
            meta = dict((statefulset or {}).get("metadata") or {})
            meta["annotations"] = {**(meta.get("annotations") or {}), **step.annotations}
            statefulset = {**(statefulset or {}), "metadata": meta}
    return replace(v, memory=memory, statefulset=statefulset)


@given(VIEWS)
def test_a_balloon_pod_s_plan_is_deterministic(v: BalloonView) -> None:
    assert binding.on_balloon(v) == binding.on_balloon(v)


@given(VIEWS)
def test_the_same_balloon_pod_event_planned_again_after_its_plan_writes_nothing(
    v: BalloonView,
) -> None:
    again = binding.on_balloon(applied(v, binding.on_balloon(v)))
    assert [a for a in again.actions if not isinstance(a, actions.Remember)] == []
    assert again.requeue_after is None
