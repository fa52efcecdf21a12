"""Capacity-aware anchoring, the snapshot's part: what a run's reservation step reads
(core/capacity/roomplan.RoomView), for the peak operator/estimates.py keeps and what
operator/headroom.py says its namespace and nodes leave room for; and what the reservation pods'
watch shows of the acts on them. Reads only: the step is planned in core/capacity/roomplan.py
and applied by operator/apply.py. Every step may be replayed: the view reads only what the
watches show, and creating or deleting twice changes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from controller.core.basics.notices import Notice
from controller.core.capacity import peak, reservation, roomplan
from controller.core.model import progress, tekton
from controller.core.placement.memory import RunMemory
from controller.core.placement.runplan import reference
from controller.kube.caches import Caches
from controller.kube.clusterview import Facts
from controller.kube.podindex import PodIndex
from controller.operator.estimates import Estimates, Sources, age, read_sources, rooms_of
from controller.operator.headroom import Headroom
from controller.operator.memory import Memories
from controller.settings import Settings

# Seconds a namespace's runs do without a reservation after one was refused there.
REFUSED_FOR = 300.0


class Capacity:
    """What a run's reservation step reads; what its balloon's decision reads of it."""

    def __init__(
        self,
        settings: Settings,
        caches: Caches | None,
        index: PodIndex,
        estimates: Estimates,
        headroom: Headroom,
        memory: Memories,
    ) -> None:
        self.settings = settings
        self.caches = caches
        self.index = index
        self.estimates = estimates
        self.headroom = headroom
        # RunMemory.acted: the last act on the run's reservation; when one was refused in a
        # namespace (Memories.refused).
        self.memory = memory

    def _on(self, run: tekton.PipelineRun, facts: Facts) -> bool:
        if not facts.policy_for(run.namespace).policy.capacity.anchor:
            return False
        refused = self.memory.refused(run.namespace)
        return refused is None or time.monotonic() - refused >= REFUSED_FOR

    def waits_for_resolution(self, run: tekton.PipelineRun, facts: Facts,
                             src: Sources) -> str | None:
        """What Tekton still resolves of the run, for which its anchor waits (estimates.py)."""
        return self.estimates.resolving.pending(run, src) if self._on(run, facts) else None

    def wants_room(self, run: tekton.PipelineRun, facts: Facts, src: Sources
                   ) -> tuple[bool, tuple[Notice, ...]]:
        """The balloon should follow a reservation pod: on, and the peak asks for more than
        pod slots. With what the estimate and the headroom found worth saying on the run."""
        if not self._on(run, facts):
            return False, ()
        found, unestimated = self.estimates.estimate(run, facts, src)
        said: tuple[Notice, ...] = () if unestimated is None else (unestimated,)
        if found is None or not reservation.worth(found.peak):
            return False, said
        own = reservation.room_of(src.rooms[0], 0).size if src.rooms else {}
        full, _, limited = self.headroom.asks(run, facts, found, own, None)
        return reservation.worth(full), said + limited

    def forget(self, run_uid: str) -> None:
        self.estimates.forget(run_uid)
        self.headroom.forget(run_uid)
        self.memory.reset(run_uid, "acted")

    # -- the reservation ----------------------------------------------------------------------

    def view(self, run: tekton.PipelineRun, facts: Facts, existing: Mapping[str, Any] | None,
             planned: Mapping[str, Any] | None = None, src: Sources | None = None
             ) -> roomplan.RoomView | None:
        """What the run's reservation step reads (`existing`: its balloon; `planned`: the
        balloon as its plan makes it, before it exists). None: nothing to tend now (its peak
        known to need no reservation, or an act on it a moment ago the watch has not shown)."""
        if planned is None and self._nothing_to_tend(run.uid, existing):
            return None
        acted = self.memory.get(run.uid).acted
        if acted is not None and acted.waits(time.monotonic()):
            return None
        src = src or read_sources(self.caches, self.index, run)
        found, unestimated = self.estimates.estimate(run, facts, src)
        ref = reference(run.name, run.namespace, run.uid)
        said: tuple[Notice, ...] = () if unestimated is None else (unestimated,)
        base = existing or planned
        if base is None or found is None:
            return roomplan.RoomView(ref, said, None)
        return self._view(run, facts, ref, said, base, found)

    def _nothing_to_tend(self, run_uid: str, existing: Mapping[str, Any] | None) -> bool:
        known = self.estimates.known(run_uid)  # kept only once complete
        if known is None:
            return False
        template = (((existing or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
        return reservation.nothing_to_tend(known.peak, bool(known.unknown),
                                           bool(self.index.rooms(run_uid)),
                                           reservation.requires_room(template, run_uid))

    def _view(self, run: tekton.PipelineRun, facts: Facts, ref: Mapping[str, Any],
              said: tuple[Notice, ...], base: Mapping[str, Any], found: peak.Estimate
              ) -> roomplan.RoomView:
        now = datetime.now(UTC)
        # Read again, not from the caller's sources: they may predate the last act (a second
        # scout would be made for a first the watch already shows).
        rooms = rooms_of(self.index, run.uid, now)
        pods = self.index.run_pods(run.uid)  # read once: the progress and the layers both
        _, _, pending = progress.progress(pods)
        pending = pending or progress.pods_to_come(run.status.get("childReferences"), pods)
        own = reservation.room_of(rooms[0], 0).size if rooms else {}
        spec = base["spec"]["template"]["spec"]
        full, need, limited = self.headroom.asks(run, facts, found, own, spec)
        pod = self.index.balloon(run.uid)
        waiting = self.index.balloon_waiting(run.uid)
        capacity = facts.policy_for(run.namespace).policy.capacity
        seen = reservation.Seen(
            full=full,
            need=need,
            requires_room=reservation.requires_room(spec, run.uid),
            balloon_node=(pod.node or None) if pod else None,
            balloon_waiting=(now - waiting.since).total_seconds() if waiting else 0.0,
            pods_pending=pending,
            room=reservation.room_of(rooms[0], age(rooms[0], now)) if rooms else None,
            wait_seconds=capacity.wait_seconds,
            say_after=self.settings.balloon_stuck_after,
            between_layers=progress.between_layers(pods),
        )
        return roomplan.RoomView(ref, said, seen, base, tuple(rooms), limited,
                                 self.settings.reservation_priority_class_name, time.monotonic())

    def on_room_pod(self, pod: Mapping[str, Any], deleted: bool) -> str:
        """A reservation pod changed: filed in the index, and the act that made or deleted it,
        now seen, no longer waited on; its run's uid."""
        uid = self.index.room_event(pod, deleted)
        meta = pod.get("metadata") or {}
        gone = deleted or bool(meta.get("deletionTimestamp"))

        def seen(m: RunMemory) -> RunMemory:  # what holds it now is its hold
            acted = m.acted
            if acted is not None and acted.pod == meta.get("name") and acted.made != gone:
                return replace(m, acted=replace(acted, pod=""))
            return m

        self.memory.update(uid, seen)
        return uid

    def rooms(self, run_uid: str) -> tuple[Mapping[str, Any], ...]:
        return tuple(self.index.rooms(run_uid))

    def orphans(self, live: set[str]) -> list[str]:
        """Runs with reservation pods that are not live (a missed event, a restart)."""
        return [uid for uid in self.index.runs() if uid not in live]
