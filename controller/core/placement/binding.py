"""Pure: where a run's balloon pod went, and what its task pods' bindings mean, as plans.

The operator's idea of a run's anchor follows its balloon pod: when the pod is replaced (moved
by us off an unavailable node, evicted, preempted, or garbage-collected with its deleted node)
and the new one is bound elsewhere, the anchor is the new node (AnchorMoved), and pods bound
beside the old one were not misplaced. A run's first binding is said Anchored, with what is
warm on its node (its pipeline's node remembered in the policy status). A pod of an anchored
run bound where the run never was is PodMisplaced.

Each event is one frozen view (`BalloonView`, `TaskView`: the pod, the run's memory, its
StatefulSet, the nodes its anchor had, what was asked) planned into a `BindPlan`: the actions in
order, the run's memory where it changes (`Remember`), what is counted, when to look again, or
a read it needs first (`Ask`). operator/placement.py reads, plans and applies.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from controller.core.basics import names
from controller.core.basics.actions import (
    AnnotateBalloon,
    Count,
    Planned,
    Remember,
    Say,
    WritePolicyStatus,
)
from controller.core.basics.notices import Notice
from controller.core.basics.times import parse_time
from controller.core.placement import anchor, balloon, warm, warmcache
from controller.core.placement.memory import BoundPod, Move, RunMemory
from controller.core.placement.runplan import reference

# Seconds a move seen before the old balloon pod's deletion waits for it (which says why).
MOVE_GRACE = 10.0

# What a run's memory holds of its placement (forgotten with its balloon).
FORGOTTEN = ("moving", "asked", "annotated", "unjudged", "unexplained")

# The DisruptionTarget condition's reasons (k8s.io/api/core/v1): how a balloon pod went.
GONE_BECAUSE = {
    "EvictionByEvictionAPI": "evicted",
    "PreemptionByScheduler": "preempted",
    "DeletionByTaintManager": "its node's NoExecute taint",
    "DeletionByPodGC": "its node was deleted",
    "TerminationByKubelet": "ended by its kubelet",
}


def gone_because(pod: Mapping[str, Any]) -> str:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "DisruptionTarget":
            return GONE_BECAUSE.get(str(cond.get("reason")), str(cond.get("reason")))
    return "its pod was deleted"


class Ask(enum.Enum):
    BALLOON = "the balloon StatefulSet (the balloons cache)"
    STATEFULSET = "the balloon StatefulSet from the API server (the cache does not show it)"
    WARM = "what the anchor's node holds of the run's images, and its policy's status"
    BALLOON_NODE = "where the run's balloon pod is bound (its event not seen)"
    BALLOON_PODS = "the run's balloon pods as the API server has them now"


@dataclass(frozen=True)
class WarmRead:
    """Asked once a run is to be said Anchored (Ask.WARM): what is warm on its node."""

    held: int  # bytes of the run's images the node reports holding
    policy: str  # the namespace's CoschedulingPolicy that asked ("": none, or deleted)
    status: Mapping[str, Any] | None  # that policy's status, as the facts hold it
    now: str  # the time remembered beside the node


@dataclass(frozen=True)
class BalloonView:
    """An event of a run's balloon pod, read after the pod index filed it."""

    run_uid: str
    run_name: str
    namespace: str
    node: str  # where the pod is bound ("": not yet)
    deleted: bool
    terminating: bool  # its deletionTimestamp set
    why: str  # gone_because(pod)
    known: bool  # the pod index knows the run (not forgotten)
    left: str | None  # the node of the run's balloon pod this one replaced (the index's)
    memory: RunMemory
    anchored_ever: tuple[str, ...]  # every node its anchor had, this one filed
    now: float  # time.monotonic()
    bound: datetime | None = None  # the pod's binding time (its PodScheduled condition)
    statefulset: Mapping[str, Any] | None = None  # Ask.BALLOON's, or Ask.STATEFULSET's
    warm: WarmRead | None = None
    asked: frozenset[Ask] = frozenset()


@dataclass(frozen=True)
class TaskView:
    """An event of a pod of a run's TaskRun, read after the pod index filed it."""

    run_uid: str
    pod: BoundPod
    deleted: bool
    ours: bool  # it asks to be beside its run's balloon by hostname
    memory: RunMemory
    anchored_ever: tuple[str, ...]
    seen: tuple[str, str] | None = None  # the index's balloon pod of the run: uid, node
    # Ask.BALLOON_NODE: where the API server has its balloon pod bound; whether it was listed
    # for that (once per run: remembered).
    known_node: str | None = None
    listed: bool = False
    # Ask.BALLOON_PODS: its balloon pods now: uid, node ("": unbound), terminating.
    balloon_pods: tuple[tuple[str, str, bool], ...] = ()
    asked: frozenset[Ask] = frozenset()


@dataclass(frozen=True)
class BindPlan:
    actions: tuple[Planned, ...] = ()
    ask: Ask | None = None  # read this and plan again, before acting
    requeue_after: float | None = None  # look again (overdue) then: a move not explained yet
    anchor_seconds: float | None = None  # from the run's creation to its anchor's binding


def on_balloon(v: BalloonView) -> BindPlan:
    m, uid, node = v.memory, v.run_uid, v.node
    if v.deleted:
        # A run not held any more (its balloon deleted, the run forgotten) moves nowhere.
        if not node or not v.known:
            return BindPlan()
        move = m.unexplained
        if move is not None and move.left == node:
            return BindPlan((Remember(uid, {"unexplained": None}),
                             *moved(uid, move.run, node, move.to, v.why)))
        return BindPlan(() if m.moving is not None else (Remember(uid, {"moving": (node, v.why)}),))
    if not node or v.terminating:
        # Waiting for a node (core/placement/waiting.py decides when that is worth saying), or
        # on its way out: the anchor is where its successor will be bound.
        return BindPlan()
    if Ask.BALLOON not in v.asked:
        return BindPlan(ask=Ask.BALLOON)
    if v.statefulset is None and Ask.STATEFULSET not in v.asked:
        # The cache may not show yet a StatefulSet made a moment ago (a replica that has just
        # come to lead): taken for gone, the run would never be said Anchored. Asked then.
        return BindPlan(ask=Ask.STATEFULSET)
    ref = reference(v.run_name, v.namespace, uid)
    moving = m.moving
    acts: list[Planned] = []
    changes: dict[str, Any] = {"unjudged": ()} if m.unjudged else {}
    if moving is not None and moving[0] != node:
        changes["moving"] = None
    if changes:
        acts.append(Remember(uid, changes))
    annotations = ((v.statefulset or {}).get("metadata") or {}).get("annotations") or {}
    anchored = node if m.annotated == node else str(
        annotations.get(names.ANNOTATION_ANCHORED_NODE) or "")
    if v.statefulset is None or anchored == node:
        return BindPlan((*acts, *judge(uid, m.unjudged, v.anchored_ever, m.misplaced)))
    requeue, seconds = None, None
    if moving is not None and moving[0] != node:
        acts += moved(uid, ref, moving[0], node, moving[1])
    elif anchored or (v.left and v.left != node):
        # kopf handles each pod's events in a worker of its own, so the old pod's deletion,
        # which says why it went, may come after its successor's binding: the move is said
        # then, or after a grace with what is known (overdue).
        acts.append(Remember(uid, {"unexplained": Move(anchored or str(v.left), node, ref,
                                                        v.now)}))
        requeue = MOVE_GRACE
    else:
        if Ask.WARM not in v.asked:
            return BindPlan(ask=Ask.WARM)
        created = parse_time(annotations.get(names.ANNOTATION_RUN_CREATED))
        if created is not None and v.bound is not None:
            seconds = max(0.0, (v.bound - created).total_seconds())
        steps, warmth = warm_anchored(v.namespace, v.run_name, annotations, node, v.warm)
        acts += steps
        acts.append(Say(ref, Notice(
            "Anchored", f"the run's pods go to node {node}" + (f": {warmth}" if warmth else ""),
            warning=False), (uid, node)))
    acts.append(AnnotateBalloon(v.namespace, balloon.balloon_name(uid),
                                {names.ANNOTATION_ANCHORED_NODE: node}))
    acts.append(Remember(uid, {"annotated": node}))
    acts += judge(uid, m.unjudged, v.anchored_ever, m.misplaced)
    return BindPlan(tuple(acts), requeue_after=requeue, anchor_seconds=seconds)


def overdue(run_uid: str, memory: RunMemory, now: float, grace: float = MOVE_GRACE) -> BindPlan:
    """A move whose old pod's deletion was never seen (a watch that restarted), said after
    `grace` seconds with what is known."""
    move = memory.unexplained
    if move is None or now - move.since < grace:
        return BindPlan()
    return BindPlan((Remember(run_uid, {"unexplained": None}),
                     *moved(run_uid, move.run, move.left, move.to, "its pod was replaced")))


def on_task_pod(v: TaskView) -> BindPlan:
    """A pod of an anchored run bound where its run never was is misplaced (said once)."""
    pod, uid, m = v.pod, v.run_uid, v.memory
    if v.deleted or not pod.node or pod.uid in m.misplaced or not v.ours:
        return BindPlan()
    acts: list[Planned] = []
    anchors = v.anchored_ever
    if not anchors:
        if Ask.BALLOON_NODE not in v.asked:
            return BindPlan(ask=Ask.BALLOON_NODE)
        if v.listed:  # asked of the API server at most once per run
            acts.append(Remember(uid, {"asked": True}))
        anchors = (v.known_node,) if v.known_node else ()
    if not anchors or pod.node in anchors:
        return BindPlan(tuple(acts))
    # The pod watch delivers different pods' events in no fixed order: a task pod bound beside
    # a new balloon can come before the balloon's own event. Asked before saying.
    if Ask.BALLOON_PODS not in v.asked:
        return BindPlan(ask=Ask.BALLOON_PODS)
    if pod.node in {node for _, node, _ in v.balloon_pods}:
        return BindPlan(tuple(acts))
    binding = [p_uid for p_uid, node, terminating in v.balloon_pods
               if not node and not terminating]
    if binding:
        # The scheduler binds a pod beside the balloon it has assumed on a node before that
        # balloon's own binding is written: the pod is judged once the balloon is bound ...
        late = (*m.unjudged, pod)
        if v.seen is not None and v.seen[0] in binding and v.seen[1]:
            # ... at once if its event came first
            acts += [Remember(uid, {"unjudged": ()})] if m.unjudged else []
            acts += judge(uid, late, v.anchored_ever or anchors, m.misplaced)
        else:
            acts.append(Remember(uid, {"unjudged": late}))
        return BindPlan(tuple(acts))
    return BindPlan((*acts, *misplace(uid, pod, anchors[-1], m.misplaced)))


def judge(run_uid: str, pods: Sequence[BoundPod], anchors: Sequence[str],
          misplaced: frozenset[str]) -> list[Planned]:
    """Pods bound while the run's new balloon pod was not: misplaced unless beside an anchor
    of the run (`anchors`: each node its anchor had, the last the newest)."""
    acts: list[Planned] = []
    for pod in pods:
        if pod.node not in anchors:
            acts += misplace(run_uid, pod, anchors[-1] if anchors else "", misplaced)
            misplaced = misplaced | {pod.uid}
    return acts


def misplace(run_uid: str, pod: BoundPod, anchor_node: str,
             misplaced: frozenset[str]) -> list[Planned]:
    return [
        Remember(run_uid, {"misplaced": misplaced | {pod.uid}}),
        Count("misplaced_pods"),
        Say(reference(pod.run_name, pod.namespace, run_uid),
            Notice("PodMisplaced",
                   f"pod {pod.name} runs on {pod.node}, its anchor on {anchor_node}"),
            pod.uid),
    ]


def moved(run_uid: str, ref: Mapping[str, Any], left: str, node: str, why: str) -> list[Planned]:
    return [Count("anchor_moves", (("reason", _label(why)),)),
            Say(ref, anchor.moved_notice(left, node, why), (run_uid, "moved", node))]


def warm_anchored(namespace: str, run_name: str, annotations: Mapping[str, Any], node: str,
                  read: WarmRead | None) -> tuple[list[Planned], str]:
    """A run anchored for the first time on `node` (`read`: None without warm anchors): what
    is warm there counted, its pipeline's node remembered in its policy's status; with what
    to say of it in the Anchored Event."""
    if read is None:
        return [], ""
    note = warm.noted(annotations.get(warm.ANNOTATION))
    steps: list[Planned] = []
    if note.total:
        steps += [Count("warm_image_bytes", (("on_anchor", "held"),), read.held),
                  Count("warm_image_bytes", (("on_anchor", "to_pull"),), note.total - read.held)]
    if note.cache_key:
        outcome = ("first" if not note.cache_node
                   else "hit" if note.cache_node == node else "miss")
        steps.append(Count("warm_cache_runs", (("outcome", outcome),)))
        if read.policy:  # else the policy that asked was deleted since
            steps.append(WritePolicyStatus(namespace, read.policy, warmcache.remember(
                read.status, note.cache_key, node, run_name, read.now)))
    return steps, warm.said(note, node, read.held)


def _label(why: str) -> str:
    """A bounded metric label from a reason text."""
    for key in ("cordoned", "NotReady", "deleted", "tainted", "evicted", "preempted"):
        if key in why:
            return key
    return "replaced"
