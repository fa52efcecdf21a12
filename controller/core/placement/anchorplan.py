"""Pure: what one look at a run's anchor does, from one `AnchorView` of it.

The anchor is the run's balloon pod, bound to a node. When the node can no longer keep it
(core/capacity/nodes.unavailable), core/placement/anchor.decide says whether it moves or stays.
A move is deleting the balloon pod (no grace on a node that will not confirm), and the run's
memory says which node it left and why (RunMemory.moving: Placement says AnchorMoved once the
new one is bound). An anchor that stays is said on the run (AnchorNodeUnavailable), remembered
(RunMemory.blocked_on) and looked at again in RECHECK seconds; once the node can keep it again,
what was said may be said again.

Two reads come only when asked (`Ask`), since most anchors are on nodes that are fine: the
mobility of the run's claims, once the node is found unavailable; and the run's pods as the API
server lists them now, before a move: the pod index holds what the pod watch has shown so far,
and a new leader's may not show a task that runs beside the anchor yet.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from controller.core.basics.actions import DeletePod, Planned, Remember, Say, Unsay
from controller.core.capacity import nodes
from controller.core.model.pods import BalloonPod, RunPod
from controller.core.placement import anchor
from controller.core.placement.runplan import reference

# Seconds after which an anchor that had to stay is looked at again: it moves within RECHECK of
# the last pod that held it ending (with the graces of 15-20 s, told within 30 s).
RECHECK = 5.0
UNAVAILABLE = "AnchorNodeUnavailable"


class Ask(enum.Enum):
    CLAIMS = "the mobility of the run's claims (their PVCs and volumes)"
    PODS = "the run's pods as the API server lists them"


@dataclass(frozen=True)
class AnchorView:
    """One look at a run's anchor, as read before anything is done."""

    run_uid: str
    pod: BalloonPod | None  # its balloon pod as the pod index has it
    told: bool = False  # the node watch told of the pod's node
    node: Mapping[str, Any] | None = None  # ... and the node as it last showed it (None: gone)
    blocked_on: str = ""  # RunMemory.blocked_on
    pods: tuple[RunPod, ...] = ()  # the run's pods as the pod index has them
    # Asked for: its claims' mobility, and its pods as the API server lists them (None: not
    # read yet); `unread`: a read asked for failed (looked at again in RECHECK seconds).
    claims: Mapping[str, anchor.Mobility] | None = None
    listed: tuple[RunPod, ...] | None = None
    unread: bool = False


@dataclass(frozen=True)
class AnchorPlan:
    ask: Ask | None = None  # read this and plan again, before acting
    decision: anchor.Decision | None = None  # when the node cannot keep the anchor
    actions: tuple[Planned, ...] = ()  # in order (operator/apply.py)
    requeue_after: float | None = None  # looked at again then (the anchor had to stay)


def plan(view: AnchorView) -> AnchorPlan:
    pod, uid = view.pod, view.run_uid
    unblock = (Remember(uid, {"blocked_on": ""}),) if view.blocked_on else ()
    if pod is None or not pod.node:
        return AnchorPlan(actions=unblock)  # no anchor (yet, or any more)
    if not view.told:
        return AnchorPlan()  # the node watch has not told of the node yet
    reason = nodes.unavailable(view.node, pod.tolerations)
    if reason is None:  # the node keeps it: what was said of a stay may be said again
        return AnchorPlan(actions=(*unblock, Unsay((uid, pod.node), UNAVAILABLE)) if unblock
                          else ())
    stays = AnchorPlan(requeue_after=RECHECK, actions=() if view.blocked_on == pod.node else (
        Remember(uid, {"blocked_on": pod.node}),))
    if view.unread:
        return stays
    if view.claims is None and pod.claims:
        return AnchorPlan(ask=Ask.CLAIMS)
    situation = anchor.Situation(pod.run_name, pod.node, reason, view.pods, view.claims or {})
    decision = anchor.decide(situation)
    if decision.verb is anchor.Verb.MOVE:
        if view.listed is None:
            return AnchorPlan(ask=Ask.PODS, decision=decision)
        decision = anchor.decide(replace(situation, pods=view.listed))
    if decision.verb is anchor.Verb.STAY:
        said = () if decision.notice is None else (
            Say(reference(pod.run_name, pod.namespace, uid), decision.notice, (uid, pod.node)),)
        return replace(stays, decision=decision, actions=stays.actions + said)
    return AnchorPlan(decision=decision, actions=(
        *unblock,
        Remember(uid, {"moving": (pod.node, reason)}),  # what Placement says once it is bound
        DeletePod(pod.namespace, pod.name, pod.uid, 0 if decision.force else None,
                  f"anchor moved off node {pod.node} ({reason})", balloon=True),
    ))

