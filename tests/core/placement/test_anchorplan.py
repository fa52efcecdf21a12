"""One look at a run's anchor (core/placement/anchorplan.plan): left alone on a node that keeps
it, moved off one that cannot when nothing of the run holds it there, else said and looked at
again; the reads it needs asked for first. Deterministic, and it converges: its actions applied
to a simulated world, planning again writes nothing more."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.basics.actions import DeletePod, Remember, Say, Unsay
from controller.core.model.pods import BalloonPod, RunPod
from controller.core.placement.anchor import Mobility
from controller.core.placement.anchorplan import RECHECK, AnchorPlan, AnchorView, Ask, plan

UID = "run-1"


def balloon(node: str = "n1", claims: tuple[str, ...] = ()) -> BalloonPod:
    return BalloonPod("coschedule-run-1-0", "team-a", "b1", "build-42", node, (), claims)


def node(name: str = "n1", ready: bool = True, cordoned: bool = False) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"unschedulable": cordoned},
            "status": {"conditions": [{"type": "Ready", "status": str(ready)}]}}


def task(name: str = "fetch", where: str = "n1", phase: str = "Running") -> RunPod:
    return RunPod(name, where, phase)


def look(pod: BalloonPod | None = None, known: dict[str, Any] | None = None,
         **kwargs: Any) -> AnchorView:
    """The anchor on n1, the node watch told of it (Ready unless `known` says otherwise)."""
    return AnchorView(UID, pod if pod is not None else balloon(), True,
                      known if known is not None else node(), **kwargs)


def kinds(planned: AnchorPlan) -> list[str]:
    return [type(a).__name__ for a in planned.actions]


def test_an_anchor_on_a_node_that_keeps_it_is_left_alone_without_any_read() -> None:
    assert plan(look()) == AnchorPlan()


def test_an_anchor_blocked_before_whose_node_keeps_it_again_is_unblocked_and_may_be_said_again(
) -> None:
    planned = plan(look(blocked_on="n1"))
    assert planned.actions == (Remember(UID, {"blocked_on": ""}),
                               Unsay((UID, "n1"), "AnchorNodeUnavailable"))
    assert planned.requeue_after is None


def test_a_run_without_a_bound_balloon_pod_only_forgets_it_was_blocked() -> None:
    gone = AnchorView(UID, None, blocked_on="n1")
    assert plan(gone).actions == (Remember(UID, {"blocked_on": ""}),)
    assert plan(replace(gone, pod=balloon(node=""))).actions == (
        Remember(UID, {"blocked_on": ""}),)
    assert plan(replace(gone, blocked_on="")) == AnchorPlan()


def test_an_anchor_on_a_node_the_node_watch_has_not_told_of_is_left_alone() -> None:
    assert plan(replace(look(blocked_on="n1"), told=False, node=None)) == AnchorPlan()


def test_an_unavailable_node_asks_first_how_the_run_s_claims_can_follow() -> None:
    with_claims = look(balloon(claims=("ws",)), node(ready=False))
    assert plan(with_claims).ask is Ask.CLAIMS
    assert plan(replace(with_claims, claims={"ws": Mobility.UNBOUND})).ask is Ask.PODS
    assert plan(look(known=node(ready=False))).ask is Ask.PODS  # no claim: nothing to read


def test_a_move_the_pod_index_allows_is_confirmed_with_the_api_server_s_pods_first() -> None:
    """A new leader's pod index may not show a task that runs beside the anchor yet."""
    planned = plan(look(known=node(ready=False)))
    assert planned.ask is Ask.PODS and planned.actions == ()


def test_an_anchor_nothing_holds_on_a_not_ready_node_moves_at_once_without_grace() -> None:
    planned = plan(look(known=node(ready=False), listed=(task("done", phase="Succeeded"),),
                        blocked_on="n1"))
    assert planned.actions == (
        Remember(UID, {"blocked_on": ""}),
        Remember(UID, {"moving": ("n1", "NotReady")}),
        DeletePod("team-a", "coschedule-run-1-0", "b1", 0, "anchor moved off node n1 (NotReady)",
                  balloon=True),
    )
    assert planned.requeue_after is None


def test_an_anchor_on_a_cordoned_node_moves_with_its_pod_s_own_grace() -> None:
    planned = plan(look(known=node(cordoned=True), listed=(task(where="n2"),)))
    assert kinds(planned) == ["Remember", "DeletePod"]
    delete = planned.actions[-1]
    assert isinstance(delete, DeletePod) and delete.grace is None and delete.balloon


def test_a_task_the_api_server_shows_running_there_keeps_the_anchor_said_and_looked_at_again(
) -> None:
    planned = plan(look(known=node(ready=False), listed=(task(),)))
    assert planned.ask is None and planned.requeue_after == RECHECK
    assert kinds(planned) == ["Remember", "Say"]
    remember, say = planned.actions
    assert remember == Remember(UID, {"blocked_on": "n1"})
    assert isinstance(say, Say) and say.key == (UID, "n1")
    assert say.notice.reason == "AnchorNodeUnavailable" and "fetch" in say.notice.message
    assert say.involved["metadata"] == {"name": "build-42", "namespace": "team-a", "uid": UID}


def test_an_anchor_found_held_again_is_said_again_but_not_remembered_twice() -> None:
    planned = plan(look(known=node(ready=False), listed=(task(),), blocked_on="n1"))
    assert kinds(planned) == ["Say"] and planned.requeue_after == RECHECK


def test_a_task_the_pod_index_shows_running_there_keeps_the_anchor_without_listing_pods() -> None:
    planned = plan(look(known=node(ready=False), pods=(task(),)))
    assert planned.ask is None and kinds(planned) == ["Remember", "Say"]


def test_a_claim_on_a_volume_of_that_node_only_keeps_the_anchor() -> None:
    planned = plan(look(balloon(claims=("ws",)), node(cordoned=True),
                        claims={"ws": Mobility.NODE_LOCAL}))
    assert planned.ask is None and kinds(planned) == ["Remember", "Say"]
    assert "uncordoned" in planned.actions[1].notice.message  # type: ignore[union-attr]


def test_an_anchor_whose_reads_failed_stays_blocked_and_is_looked_at_again() -> None:
    planned = plan(look(known=node(ready=False), unread=True))
    assert planned == AnchorPlan(actions=(Remember(UID, {"blocked_on": "n1"}),),
                                 requeue_after=RECHECK)


# -- the plan converges ----------------------------------------------------------------------------


@dataclass
class World:
    """The run's anchor as the cluster has it (the API server's pods and claims), and what the
    plan's actions change: the balloon pod deleted, the memory set, what was said."""

    view: AnchorView
    listed: tuple[RunPod, ...]
    claims: dict[str, Mobility]
    failing: bool = False  # every read fails (the API server unavailable a while)
    said: set[object] = field(default_factory=set)
    memory: dict[str, object] = field(default_factory=dict)

    def answer(self, ask: Ask) -> None:
        if self.failing:
            self.view = replace(self.view, unread=True)
        elif ask is Ask.CLAIMS:
            self.view = replace(self.view, claims=self.claims)
        else:
            self.view = replace(self.view, listed=self.listed)

    def apply(self, planned: AnchorPlan) -> None:
        for action in planned.actions:
            if isinstance(action, Remember):
                self.memory.update(action.changes)
            elif isinstance(action, Say):
                self.said.add(action.key)
            elif isinstance(action, Unsay):
                self.said.discard(action.key)
            elif isinstance(action, DeletePod):  # the pod index shows it gone
                self.view = replace(self.view, pod=None)
        # The next look: its memory as set, no read of the last look kept.
        self.view = replace(self.view, blocked_on=str(self.memory.get("blocked_on", "")),
                            claims=None, listed=None, unread=False)

    def left(self, planned: AnchorPlan) -> list[object]:
        """What planning again still does: all but an Event said already (said once a key)."""
        return [a for a in planned.actions if not (isinstance(a, Say) and a.key in self.said)]


NODES = st.sampled_from([None, node(), node(ready=False), node(cordoned=True)])
PODS = st.lists(st.builds(task, st.sampled_from(["fetch", "build"]), st.sampled_from(["n1", "n2"]),
                          st.sampled_from(["Running", "Pending", "Succeeded", "Failed"])),
                max_size=3).map(tuple)
CLAIMS = st.dictionaries(st.sampled_from(["ws", "cache"]), st.sampled_from(list(Mobility)),
                         max_size=2)


@st.composite
def worlds(draw: st.DrawFn) -> World:
    claims = draw(CLAIMS)
    pod = draw(st.sampled_from([None, balloon(node=""), balloon(claims=tuple(sorted(claims)))]))
    view = AnchorView(UID, pod, draw(st.booleans()), draw(NODES),
                      draw(st.sampled_from(["", "n1", "n0"])), draw(PODS))
    return World(view, draw(PODS), claims, draw(st.booleans()),
                 memory={"blocked_on": view.blocked_on})


def settle(world: World) -> AnchorPlan:
    """One look: planned, each read it asks for answered, once."""
    asked: list[Ask] = []
    while (planned := plan(world.view)).ask is not None:
        assert planned.ask not in asked, f"asked twice for {planned.ask}"
        asked.append(planned.ask)
        world.answer(planned.ask)
    return planned


@settings(max_examples=400, deadline=None)
@given(worlds())
def test_the_plan_is_deterministic_and_applied_it_writes_nothing_more(world: World) -> None:
    assert plan(copy.deepcopy(world.view)) == plan(world.view)
    first = settle(world)
    world.apply(first)
    again = settle(world)
    assert world.left(again) == [], f"after {first.actions}"
    # Only an anchor that stays is looked at again, and it stays blocked on its node (the
    # node watch told of, as it always has been by the time a run is blocked on it).
    if world.view.told:
        assert (again.requeue_after is not None) == bool(world.memory.get("blocked_on"))
