"""Pure: the reservation pod that finds a run a node with room for its peak, and keeps the room.

The balloon asks for almost nothing, so alone it would anchor a run wherever a pause container
fits, and the run's widest layer would then wait there for room it may never get (its pods are
pinned by required affinity, and a new node cannot help them). So, for a run whose peak asks
for more than pod slots, a reservation pod goes first:

- the *scout* carries the balloon's constraints and claims and asks for the run's whole peak;
  the scheduler puts it where the peak fits (an autoscaler adds a node for it when none does);
  the balloon's template requires a pod beside one of the run's reservation pods, so the
  balloon, and with it the run, follows the scout;
- the reservation runs at the chart's low PriorityClass (below every task pod, above the
  autoscalers' expendable cutoff, never preempting): a task pod of the run that needs its room
  preempts it, so the room is kept for the run without being held against it;
- while a layer runs, the operator puts a *keeper* back, pinned beside the balloon, asking for
  what the rest of the run will need beyond what its running pods hold; when the layer ends
  the keeper goes, so that the next layer's pods find the room free instead of preempting it.

When no node has room for the peak within the policy's wait, the scout asks for half as much,
and so on, and the run is told (`PeakDoesNotFit`): it is anchored where most of it fits. (A
peak larger than any node the run may use asks at once for the most one holds, unless an
autoscaler can add a bigger node: core/capacity/nodefit.py.)
In-place resize of the balloon (GA in 1.35) was tried first: the API server refuses it for a
pod whose node reports no container resources (`isPodResizeRequestSupported`), as kwok's nodes
do, and a resized pod's room is freed only once its kubelet acts; a second pod needs neither.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from controller.core.basics import names, quantity
from controller.core.basics.notices import Notice
from controller.core.basics.quantity import PODS, Amounts

HOSTNAME = "kubernetes.io/hostname"
SCOUT, KEEPER = "scout", "keeper"
MAX_HALVINGS = 6  # then the scout asks only for a pod slot: anchored wherever the run fits
PAST = 0.5  # seconds past a wait's end that a run is tended again (recheck_after)
ANNOTATION_ROLE = f"{names.DOMAIN}/reservation-role"
ANNOTATION_HALVINGS = f"{names.DOMAIN}/reservation-halvings"
ANNOTATION_PEAK = f"{names.DOMAIN}/peak"


def selector_labels(run_uid: str) -> dict[str, str]:
    return {
        names.LABEL_MANAGED_BY: names.APP,
        names.LABEL_COMPONENT: names.COMPONENT_RESERVATION,
        names.LABEL_RUN_UID: run_uid,
    }


def balloon_term(run_uid: str) -> dict[str, Any]:
    """The balloon's required pod-affinity term: beside one of the run's reservation pods."""
    return {"labelSelector": {"matchLabels": selector_labels(run_uid)}, "topologyKey": HOSTNAME}


def requires_room(balloon_template_spec: Mapping[str, Any], run_uid: str) -> bool:
    """Whether a balloon waits for a reservation pod (its template was planned with a peak)."""
    pod_affinity = (balloon_template_spec.get("affinity") or {}).get("podAffinity") or {}
    terms = pod_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or []
    return balloon_term(run_uid) in terms


def worth(amounts: Mapping[str, int]) -> bool:
    """A reservation holds room only for what a pod spec can ask: pod slots are not held."""
    return any(a > 0 for r, a in amounts.items() if r != PODS)


def nothing_to_tend(peak: Mapping[str, int], unknown: bool, reserved: bool,
                    balloon_waits: bool) -> bool:
    """The run's peak, known for good, asks only for pod slots (so does what it still needs),
    it has no reservation pod and its balloon waits for none: nothing to decide on its events."""
    return not (unknown or worth(peak) or reserved or balloon_waits)


def halved(full: Mapping[str, int], times: int) -> Amounts:
    if times >= MAX_HALVINGS:
        return {}
    return {r: a >> times for r, a in full.items() if r != PODS and a >> times > 0}


def close(a: Mapping[str, int], b: Mapping[str, int]) -> bool:
    """Within a tenth of each other in every resource: not worth a new pod."""
    return all(
        abs(a.get(r, 0) - b.get(r, 0)) <= max(a.get(r, 0), b.get(r, 0)) // 10
        for r in set(a) | set(b)
        if r != PODS
    )


@dataclass(frozen=True)
class Room:
    """A reservation pod of the run, as the pod watch shows it."""

    name: str
    role: str
    size: Amounts
    node: str  # "" while the scheduler has not placed it
    age: float  # seconds since it was made
    halvings: int = 0


@dataclass(frozen=True)
class Seen:
    full: Amounts  # the peak of what is left of the run
    need: Amounts  # of that, what the run's running pods do not hold already
    requires_room: bool  # the balloon's template waits for a reservation pod
    balloon_node: str | None  # None: the balloon pod is not bound (or not made yet)
    balloon_waiting: float  # seconds the balloon pod has waited for a node
    # A pod of the run waits for a node, or Tekton made a TaskRun whose pod is still to come:
    # a layer is starting.
    pods_pending: bool
    room: Room | None
    wait_seconds: float
    say_after: float = 20.0  # a scout pending this long is said (the run waits for room)
    # Every pod of the run seen so far has ended: the next layer's pods are being made.
    between_layers: bool = False


class Act(enum.StrEnum):
    NONE = "none"
    SCOUT = "scout"  # make a scout of `size`
    KEEP = "keep"  # make a keeper of `size`
    DELETE = "delete"
    REPLACE = "replace"  # delete the room, make a scout of `size`


@dataclass(frozen=True)
class Step:
    act: Act
    why: str
    size: Amounts | None = None
    halvings: int = 0
    notice: Notice | None = None


def decide(seen: Seen) -> Step:
    room = seen.room
    if seen.balloon_node is None:
        return _before_anchor(seen, room)
    if room is not None and room.node and room.node != seen.balloon_node:
        return Step(Act.DELETE, f"reservation on {room.node}, the anchor on {seen.balloon_node}")
    if not worth(seen.need):
        if room is not None:
            return Step(Act.DELETE, "the run's running pods hold what it still needs")
        return Step(Act.NONE, "nothing to keep")
    if seen.between_layers:
        # The next layer's pods come within moments and take the room. A reservation in their
        # way would have them preempt it, and kube-scheduler may then leave a preemptor
        # waiting for an unrelated event, up to its 5-minute flush (kubernetes#141694): seen
        # here as a build that waited for its sibling to end.
        if room is not None:
            return Step(Act.DELETE, "a layer ended: the next one takes the room")
        return Step(Act.NONE, "a layer ended: the next one takes the room")
    if seen.pods_pending:
        # A layer is starting: its pods take the room (preempting the reservation); a new
        # reservation now would compete with them.
        return Step(Act.NONE, "a layer is starting")
    if room is None:
        return Step(Act.KEEP, "room for the rest of the run", seen.need)
    if not close(room.size, seen.need) and (room.node or room.role == KEEPER):
        return Step(Act.DELETE, "the reservation no longer matches what the run needs")
    if not room.node and room.age > seen.wait_seconds:
        return Step(Act.NONE, "room taken", notice=Notice(
            "RoomTaken",
            f"the room the rest of the run needs on {seen.balloon_node} "
            f"({quantity.describe(seen.need)}) is taken by other pods; its next tasks may "
            "wait for them",
            warning=False,
        ))
    return Step(Act.NONE, "room kept")


def recheck_after(seen: Seen) -> float | None:
    """Seconds until time alone may change `decide`'s answer (a scout's wait, or the wait before
    it is said, running out; a balloon that waits too long beside a bound scout), or None: only
    an event will. Just past the mark, since each is a strict "longer than"."""
    room = seen.room
    if room is None:
        return None
    if not room.node:
        marks = [seen.wait_seconds - room.age]
        if seen.balloon_node is None:
            marks.append(seen.say_after - room.age)
    elif seen.balloon_node is None and seen.requires_room:
        marks = [seen.wait_seconds - seen.balloon_waiting]
    else:
        return None
    ahead = [m for m in marks if m >= 0]
    return min(ahead) + PAST if ahead else None


def _before_anchor(seen: Seen, room: Room | None) -> Step:
    if not seen.requires_room:
        if room is not None:
            return Step(Act.DELETE, "the balloon does not wait for a reservation")
        return Step(Act.NONE, "the balloon anchors alone")
    if room is None:
        return Step(Act.SCOUT, "find a node with room for the peak", dict(seen.full))
    if room.role == KEEPER:
        return Step(Act.DELETE, "the anchor moves: a scout finds it room")
    stuck = (not room.node and room.age > seen.wait_seconds) or (
        room.node and seen.balloon_waiting > seen.wait_seconds
    )
    if not stuck and not room.node and room.age > seen.say_after:
        return Step(Act.NONE, "waiting for room", notice=Notice(
            "WaitingForRoom",
            f"no node has room for the run's peak ({quantity.describe(seen.full)}) yet; it "
            f"waits up to {int(seen.wait_seconds)}s for one (an autoscaler may add it), then "
            "asks for less",
            warning=False,
        ))
    if not stuck or room.halvings >= MAX_HALVINGS:
        return Step(Act.NONE, "the balloon follows its scout")
    times = room.halvings + 1
    size = halved(seen.full, times)
    where = "the balloon could not follow it" if room.node else "no node had room for it"
    return Step(Act.REPLACE, where, size, times, Notice(
        "PeakDoesNotFit",
        f"the run's peak ({quantity.describe(seen.full)}) was asked for {int(seen.wait_seconds)}s"
        f" and {where}; the reservation now asks for "
        + (f"{quantity.describe(size)}, and the run will be anchored where that fits"
           if worth(size) else "no more than a pod, and the run will be anchored wherever it fits")
        + ", its widest layer waiting there for room",
    ))


def cannot_reserve(why: str) -> Notice:
    return Notice(
        "RoomNotReserved",
        f"the reservation pod that keeps room for the run's peak could not be made ({why}); "
        "the run is anchored without it",
    )


def not_estimated(why: str) -> Notice:
    """Normal: the run still starts, anchored as it would be without capacity-aware anchoring."""
    return Notice(
        "PeakNotEstimated",
        f"the run's peak could not be estimated ({why}); it is anchored by its balloon alone, "
        "with no room kept for its widest layer",
        warning=False,
    )


def room_of(pod: Mapping[str, Any], age: float) -> Room:
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    annotations = meta.get("annotations") or {}
    containers = spec.get("containers") or [{}]
    try:
        halvings = int(annotations.get(ANNOTATION_HALVINGS) or 0)
    except ValueError:
        halvings = MAX_HALVINGS
    return Room(
        name=str(meta.get("name") or ""),
        role=str(annotations.get(ANNOTATION_ROLE) or SCOUT),
        size=quantity.amounts(((containers[0] or {}).get("resources") or {}).get("requests")),
        node=str(spec.get("nodeName") or ""),
        age=age,
        halvings=halvings,
    )
