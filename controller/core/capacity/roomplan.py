"""Pure: a run's reservation step as a plan, from one view of it.

core/capacity/reservation.decide says what the run's reservation pod should be; this says what
carries it out, in order (what the estimate and the headroom found worth saying, an older scout
still ending deleted, the step's own notice, the room deleted or replaced, the new pod made),
with the run's memory at the point it changes (`Remember`: the act waited on until the watch
shows it, core/capacity/settle.py) and when to look again (`requeue_after`). operator/capacity.py
reads the view and applies the plan through the executor.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from controller.core.basics import names
from controller.core.basics.actions import DeletePod, MakePod, Planned, Remember, Say
from controller.core.basics.notices import Notice
from controller.core.capacity import reservation, reservation_pod, settle
from controller.core.capacity.reservation import Act, Seen, Step
from controller.core.capacity.settle import Acted


@dataclass(frozen=True)
class RoomView:
    ref: Mapping[str, Any]  # the run's reference: what is said, is said on it
    said: tuple[Notice, ...]  # what the estimate of its peak found worth saying
    # None: nothing to decide (its peak not estimated, or no balloon made or planned)
    seen: Seen | None
    base: Mapping[str, Any] | None = None  # the balloon, made or planned: the pods copy it
    rooms: tuple[Mapping[str, Any], ...] = ()  # the run's reservation pods, the newest first
    limited: tuple[Notice, ...] = ()  # why the headroom asks less than the run's peak
    priority_class: str = ""
    now: float = 0.0  # time.monotonic(), for what is remembered


@dataclass(frozen=True)
class RoomPlan:
    actions: tuple[Planned, ...]
    step: Step | None  # None: the balloon is re-planned without a reservation
    requeue_after: float | None = None  # time alone may change the step then
    replan: bool = False  # the unbound balloon must not wait for a reservation: re-planned


def plan(view: RoomView) -> RoomPlan:
    uid = str(view.ref["metadata"]["uid"])
    seen, rooms = view.seen, view.rooms
    acts: list[Planned] = [Say(view.ref, notice, uid) for notice in view.said]
    if seen is None or view.base is None:
        return RoomPlan(tuple(acts), None)
    # A replaced scout still ending: only the newest counts.
    acts += (_delete(extra, "an older reservation") for extra in rooms[1:])
    acts += (Say(view.ref, notice, uid) for notice in view.limited)
    if seen.requires_room and not reservation.worth(seen.full) and not seen.balloon_node:
        # The quota leaves no reservation: the unbound balloon must not wait for one (re-planned
        # without; not tended again before the watch shows it).
        acts.append(Remember(uid, {"acted": Acted(view.now, hold=settle.SETTLE)}))
        return RoomPlan(tuple(acts), None, replan=True)
    step = reservation.decide(seen)
    again = reservation.recheck_after(seen)
    if step.notice is not None:
        acts.append(Say(view.ref, step.notice, uid))
    if step.act is Act.NONE:
        return RoomPlan(tuple(acts), step, again)
    manifest = reservation_pod.manifest(
        view.base, uid, reservation.KEEPER if step.act is Act.KEEP else reservation.SCOUT,
        step.size or {}, step.halvings, seen.full, view.priority_class,
    ) if step.act in (Act.SCOUT, Act.REPLACE, Act.KEEP) else None
    gone = str(rooms[0]["metadata"].get("name")) if rooms else ""
    acts.append(Remember(uid, {"acted": Acted(
        view.now, manifest["metadata"]["name"] if manifest else gone, made=manifest is not None,
        hold=settle.SETTLE if seen.between_layers else 0.0)}))
    if step.act in (Act.DELETE, Act.REPLACE) and rooms:
        acts.append(_delete(rooms[0], step.why))
    if manifest is not None:
        acts.append(MakePod(manifest))
    return RoomPlan(tuple(acts), step, again)


def release(pods: tuple[Mapping[str, Any], ...], why: str) -> list[DeletePod]:
    """The run's reservation pods deleted (its balloon goes, or it is no longer live); only
    pods that are ours and reservation pods."""
    return [_delete(pod, why) for pod in pods if (
        (pod.get("metadata") or {}).get("labels") or {}).get(names.LABEL_COMPONENT)
        == names.COMPONENT_RESERVATION]


def _delete(pod: Mapping[str, Any], why: str) -> DeletePod:
    meta = pod.get("metadata") or {}
    return DeletePod(str(meta.get("namespace")), str(meta.get("name")), str(meta.get("uid")),
                     grace=0, why=why)
