"""Pure: what one look at a run does, in two plans around its observation.

`admit` comes first, from what is known without observing the run (is it ours, has it ended,
may it still have a balloon): whether it is among the live runs, what is forgotten of it, and
whether there is anything more to do. `plan` comes after the observation: the decision
(core/placement/reconcile.decide), or a read it needs before it can be trusted (`Ask`): the
node of a balloon pod the pod watch has not shown yet, or the run as the API server has it now
when the decision would write from a body that may be old. The operator reads what is asked and
plans again; then it acts on the plan (operator/runs.py).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from controller.core.basics import names
from controller.core.model import tekton
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


@dataclass(frozen=True)
class Plan:
    decision: Decision
    ask: Ask | None = None  # read this and plan again, before acting
    # After the balloon: the run is marked and its reservation tended; else its reservation
    # pods, if any, go.
    keeps: bool = False
    # The run has, or is to have, a balloon (core/placement/reconcile.anchors).
    anchors: bool = True


def plan(observed: Observed, newest: bool, asked: frozenset[Ask] = frozenset()) -> Plan:
    """`newest`: no newer body of the run is known (a watch event's, or the API server's just
    read); `asked`: what was read for this look already (each is asked once)."""
    decision = decide(observed)
    if (decision.verb is Verb.UPDATE and observed.balloon_pod_node is None
            and Ask.BALLOON_NODE not in asked):
        # Before a template is replaced: the pod watch may not have shown the balloon's pod
        # yet (just after a restart).
        return Plan(decision, Ask.BALLOON_NODE)
    if decision.verb in (Verb.CREATE, Verb.UPDATE) and not newest and Ask.RUN not in asked:
        return Plan(decision, Ask.RUN)
    # What the observation found worth saying is said first, as the decision's own notices.
    decision = replace(decision, notices=observed.notices + decision.notices)
    keeps = decision.verb in (Verb.CREATE, Verb.UPDATE, Verb.KEEP) or bool(decision.manifest)
    return Plan(decision, keeps=keeps, anchors=anchors(observed))
