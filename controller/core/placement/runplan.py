"""Pure: what one look at a run does, in two plans around its observation.

`admit` comes first, from what is known without observing the run (is it ours, has it ended,
may it still have a balloon): whether it is among the live runs, what is forgotten of it, and
whether there is anything more to do. `plan` comes after the observation, from one `View` of
the run: the decision (core/placement/reconcile.decide) and the actions that carry it out, in
order (what the observation found worth saying, the balloon made, re-planned or deleted, the
namespace's budget, the run's mark, its reservation's step from core/capacity/roomplan.py, or
its reservation pods released), with the run's memory where it changes and when to look again;
or a read it needs first (`Ask`): the node of a balloon pod the pod watch has not shown yet, the
run as the API server has it now when the decision would write from a body that may be old,
what its reservation step reads for the balloon as made or planned. The operator reads what is
asked and plans again; then operator/apply.Applier hands the actions to the executor in order.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from controller.core.basics import names
from controller.core.basics.actions import (
    DeleteBalloon,
    MakeBalloon,
    MakeBudget,
    Mark,
    Planned,
    Remember,
    ReplanBalloon,
    Say,
)
from controller.core.capacity import roomplan
from controller.core.model import tekton
from controller.core.placement import budget, gate, mark
from controller.core.placement.memory import Gated, Placeholder
from controller.core.placement.reconcile import Decision, Observed, Verb, anchors, decide


@dataclass(frozen=True)
class Admission:
    live: bool  # kept among the live runs (else dropped from them)
    forget_settled: bool  # no longer left alone by the resync
    forget_ended: bool  # what is remembered for a live run's work goes (its run has ended)
    done: Decision | None = None  # nothing more to do: why
    release_room: bool = False  # ... but its reservation pods go (it ended while they looked)


def admit(run: tekton.PipelineRun, serves: bool, may_have_balloon: bool,
          has_room: bool) -> Admission:
    """`serves`: the run is ours (its namespace enabled, it was anchored before it was not, or
    it has pods we know); `may_have_balloon`: its balloon is not known gone; `has_room`: it has
    reservation pods."""
    if not run.valid:
        return Admission(False, False, False, Decision(Verb.NONE, "invalid run"))
    live = serves and not run.finished
    admission = Admission(live, not live, run.finished)
    if not serves and not run.finished:
        # The common case, cheap; balloons left by a de-labelled namespace are finished off by
        # the resync once their runs end.
        return replace(admission, done=Decision(Verb.NONE, "namespace not enabled"))
    if run.finished and not may_have_balloon:
        return replace(admission, done=Decision(Verb.NONE, "run finished"), release_room=has_room)
    return admission


def name_taken(run: tekton.PipelineRun, existing: Mapping[str, Any] | None) -> bool:
    """A StatefulSet has the balloon's name but is not the run's: it is left alone."""
    return existing is not None and (
        (existing.get("metadata") or {}).get("labels") or {}).get(names.LABEL_RUN_UID) != run.uid


class Ask(enum.Enum):
    BALLOON_NODE = "where the run's balloon pod is bound"
    RUN = "the run as the API server has it now"
    # What its reservation step reads (core/capacity/roomplan.RoomView), for the balloon as
    # made or as this plan makes it: read once the run is known to keep a balloon.
    ROOM = "the run's reservation, for its balloon"


def reference(name: str, namespace: str, uid: str) -> dict[str, Any]:
    """A PipelineRun's reference, what its Events are said on."""
    return {
        "apiVersion": f"{tekton.GROUP}/{tekton.VERSION}",
        "kind": tekton.PIPELINE_RUN_KIND,
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
    }


@dataclass(frozen=True)
class Marking:
    """What the run's mark reads (core/placement/mark.py)."""

    installation: str  # our namespace label, `label=value`
    topology_key: str  # the namespace's, for a run not marked yet
    marked: bool  # by its label, or by this process before the watch shows it
    task_runs: tuple[str, ...] = ()  # its TaskRuns the pod watch has shown


@dataclass(frozen=True)
class View:
    """One look at a run, as read before anything is done: its observation, and what the
    actions after its balloon's read."""

    observed: Observed
    newest: bool  # no newer body of the run is known (a watch event's, or one just read)
    marking: Marking
    existing: Mapping[str, Any] | None = None  # its balloon StatefulSet
    budget_kept: bool = True  # its namespace's budget for balloons is known made
    rooms: tuple[Mapping[str, Any], ...] = ()  # its reservation pods
    asked: frozenset[Ask] = frozenset()  # what was read for this look already (each once)
    # Its pods admission held (RunMemory.gated, .placeholders), and its anchor's hostname:
    # let go at once when it is to have no balloon.
    gated: tuple[Gated, ...] = ()
    placeholders: tuple[Placeholder, ...] = ()
    host: str = ""
    # Asked for (Ask.ROOM): what its reservation step reads (None: nothing to tend now), and
    # the decision it was read for, not taken twice.
    room: roomplan.RoomView | None = None
    decided: Decision | None = None
    # Its memory says its anchor waits for what Tekton resolves (RunMemory.resolving), and the
    # seconds until that wait ends (core/model/resolution.hold_left; None: not known).
    resolving: bool = False
    hold_left: float | None = None


@dataclass(frozen=True)
class Plan:
    decision: Decision
    ask: Ask | None = None  # read this and plan again, before acting
    # What carries the decision out, in order, and the run's memory where it changes (marked
    # by this process, once its marks are done; its reservation's last act). Applied one by one
    # (operator/apply.py): a failure the work queue may mend ends it there, and the run is
    # planned again.
    actions: tuple[Planned, ...] = ()
    room: roomplan.RoomPlan | None = None  # its reservation's step, whose actions are among them
    requeue_after: float | None = None  # seconds until time alone may change the plan
    replan: bool = False  # planned again at once: its balloon is not to wait for a reservation


def plan(view: View) -> Plan:
    observed, asked = view.observed, view.asked
    decision = view.decided or decide(observed)
    if (decision.verb is Verb.UPDATE and observed.balloon_pod_node is None
            and Ask.BALLOON_NODE not in asked):
        # Before a template is replaced: the pod watch may not have shown the balloon's pod
        # yet (just after a restart).
        return Plan(decision, Ask.BALLOON_NODE)
    if decision.verb in (Verb.CREATE, Verb.UPDATE) and not view.newest and Ask.RUN not in asked:
        return Plan(decision, Ask.RUN)
    # It keeps a balloon: after it, the run is marked and its reservation tended; else its
    # reservation pods, if any, go.
    keeps = decision.verb in (Verb.CREATE, Verb.UPDATE, Verb.KEEP) or bool(decision.manifest)
    if keeps and Ask.ROOM not in asked:
        return Plan(decision, Ask.ROOM)
    # What the observation found worth saying is said first, as the decision's own notices.
    decision = replace(decision, notices=observed.notices + decision.notices)
    run = observed.run
    ref = reference(run.name, run.namespace, run.uid)
    acts: list[Planned] = [] if anchors(observed) else [  # opted out: nothing waits for it
        *gate.releases(run.uid, view.gated, view.placeholders, view.host)]
    acts += (Say(ref, notice, run.uid) for notice in decision.notices)
    acts += _balloon(run, decision, view)
    if keeps and not view.marking.marked and mark.ready(run):
        # The run and the TaskRuns Tekton made before it (it copies the mark to those after).
        m = view.marking
        patch = mark.patch(run.uid, m.topology_key, m.installation)
        acts.append(Mark("pipelineruns", run.namespace, run.name, patch))
        acts += (Mark("taskruns", run.namespace, name, patch) for name in m.task_runs)
        acts.append(Remember(run.uid, {"marked": True}))  # before the watch shows it
    room = roomplan.plan(view.room) if keeps and view.room is not None else None
    if room is not None:  # its reservation, kept where the balloon is or is to be
        acts += room.actions
    if not keeps:  # no balloon to follow: its reservation pods go
        acts += roomplan.release(view.rooms, decision.why)
    waits, hold = _resolution(view)
    return Plan(decision, actions=(*waits, *acts), room=room,
                requeue_after=_soonest(room.requeue_after if room else None, hold),
                replan=room.replan if room else False)


def _resolution(view: View) -> tuple[list[Planned], float | None]:
    """A run with no balloon yet may wait for what Tekton resolves: remembered where that
    changes (a ResolutionRequest's event looks again at the runs that wait), and looked at
    again when its hold ends (then anchored with what is known)."""
    if view.existing is not None:
        return [], None
    waits = bool(view.observed.resolving)
    remember: list[Planned] = ([] if waits is view.resolving
                               else [Remember(view.observed.run.uid, {"resolving": waits})])
    return remember, (view.hold_left + 0.5 if waits and view.hold_left is not None else None)


def _soonest(*seconds: float | None) -> float | None:
    return min((s for s in seconds if s is not None), default=None)


def _balloon(run: tekton.PipelineRun, decision: Decision, view: View) -> list[Planned]:
    if decision.verb is Verb.CREATE:
        assert decision.manifest is not None
        # With a namespace's first balloon comes its PodDisruptionBudget.
        made = [] if view.budget_kept else [MakeBudget(budget.of_namespace(run.namespace))]
        return [MakeBalloon(decision.manifest), *made]
    if decision.verb is Verb.UPDATE:
        assert decision.manifest is not None
        return [ReplanBalloon(decision.manifest, decision.why)]
    if decision.verb is Verb.DELETE and view.existing is not None:
        meta = view.existing["metadata"]
        return [DeleteBalloon(meta["namespace"], meta["name"], meta.get("uid"), run.uid,
                              decision.why)]
    return []

