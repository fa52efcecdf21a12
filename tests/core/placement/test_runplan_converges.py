"""A run's whole plan (core/placement/runplan.plan): deterministic, and it converges. Its
actions applied to a simulated world (the balloon made, re-planned or deleted, the budget made,
the run marked, its reservation pods deleted, what was said remembered as the Notifier does),
planning again asks for nothing more."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.basics import actions, names
from controller.core.model.tekton import PipelineRun
from controller.core.placement import reconcile, runplan
from controller.core.placement.runplan import Ask
from tests.core.placement.test_reconcile_converges import observations

INSTALLATION = "tekton-coscheduler.dev/enabled=true"


@dataclass
class World:
    view: runplan.View
    said: set[tuple[object, str]] = field(default_factory=set)

    def apply(self, planned: runplan.Plan, bound: str | None) -> None:
        v = self.view
        for action in planned.actions:
            if isinstance(action, actions.Say):
                self.said.add((action.key, action.notice.reason))
            elif isinstance(action, actions.MakeBalloon | actions.ReplanBalloon):
                made = copy.deepcopy(dict(action.manifest))
                v = replace(v, existing=made, observed=replace(
                    v.observed, balloon=made, balloon_pod_node=bound))
            elif isinstance(action, actions.DeleteBalloon):
                v = replace(v, existing=None, observed=replace(v.observed, balloon=None))
            elif isinstance(action, actions.MakeBudget):
                v = replace(v, budget_kept=True)
            elif isinstance(action, actions.Mark) and action.plural == "pipelineruns":
                labels = {**v.observed.run.labels, names.LABEL_ANCHORED: v.observed.run.uid}
                body = {**v.observed.run.raw, "metadata": {**v.observed.run.raw["metadata"],
                                                            "labels": labels}}
                v = replace(v, marking=replace(v.marking, marked=True), observed=replace(
                    v.observed, run=PipelineRun.from_body(body)))
            elif isinstance(action, actions.Remember) and "resolving" in action.changes:
                v = replace(v, resolving=action.changes["resolving"])
            elif isinstance(action, actions.DeletePod):
                v = replace(v, rooms=tuple(p for p in v.rooms
                                           if p["metadata"]["name"] != action.name))
        self.view = v

    def asks(self, planned: runplan.Plan) -> list[object]:
        """What is left to do: every action but what was said already (said once a key)."""
        return [a for a in planned.actions if not (
            isinstance(a, actions.Say) and (a.key, a.notice.reason) in self.said)]


def room_pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "team-a", "uid": f"uid-{name}", "labels": {
        names.LABEL_COMPONENT: names.COMPONENT_RESERVATION}}}


@st.composite
def views(draw: st.DrawFn) -> runplan.View:
    observed: reconcile.Observed = draw(observations())
    body: dict[str, Any] = copy.deepcopy(dict(observed.run.raw))
    if draw(st.booleans()):  # most runs looked at are live runs of an enabled namespace
        body["status"]["conditions"] = [{"type": "Succeeded", "status": "Unknown"}]
        body["spec"].pop("status", None)
        body["metadata"]["annotations"] = {}
        observed = replace(observed, namespace_enabled=True)
    if draw(st.booleans()):  # Tekton's first writes are done: the run may be marked
        body["metadata"].setdefault("labels", {})["tekton.dev/pipeline"] = "p"
        body.setdefault("status", {})["pipelineSpec"] = {"tasks": []}
    observed = replace(observed, run=PipelineRun.from_body(body))
    marking = runplan.Marking(INSTALLATION, "kubernetes.io/hostname", draw(st.booleans()),
                              tuple(draw(st.lists(st.sampled_from(["t1", "t2"]), unique=True))))
    rooms = tuple(room_pod(n) for n in draw(st.lists(st.sampled_from(["r1", "r2"]), unique=True)))
    # Its reservation's view read already, with nothing to tend (core/capacity/roomplan's own
    # tests hold the step).
    return runplan.View(observed, True, marking, budget_kept=draw(st.booleans()), rooms=rooms,
                        asked=frozenset({Ask.ROOM}), resolving=draw(st.booleans()),
                        hold_left=draw(st.sampled_from([None, 30.0])))


@settings(max_examples=300, deadline=None)
@given(views(), st.sampled_from([None, "n1"]))
def test_the_plan_is_deterministic_and_applied_it_asks_for_nothing_more(
        view: runplan.View, bound: str | None) -> None:
    first = runplan.plan(view)
    assert runplan.plan(copy.deepcopy(view)) == first
    world = World(view)
    for _ in range(3):  # make, then (bound or not) any re-plan; then nothing
        planned = runplan.plan(world.view)
        assert planned.ask is None
        if not world.asks(planned):
            break
        world.apply(planned, bound)
    else:
        raise AssertionError(f"still acting after three rounds: {world.asks(planned)}")
