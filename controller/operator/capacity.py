"""Capacity-aware anchoring, the adapter: keep each run's reservation pod as
core/capacity/reservation.py decides, for the peak operator/estimates.py keeps and what
operator/headroom.py says its namespace and nodes leave room for. Every step may be replayed: the
decision reads only what the watches show, and creating or deleting twice changes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import structlog

from controller.core.basics import quantity
from controller.core.basics.actions import DeletePod, MakePod, Planned, Remember, Say
from controller.core.basics.notices import Notice
from controller.core.capacity import peak, reservation, roomplan, settle
from controller.core.capacity.settle import Acted
from controller.core.model import progress, tekton
from controller.core.placement.memory import RunMemory
from controller.kube import errors
from controller.kube.caches import Caches
from controller.kube.client import api_message
from controller.kube.clusterview import Facts
from controller.kube.podindex import PodIndex
from controller.metrics import Metrics
from controller.operator.estimates import Estimates, Sources, age, read_sources, rooms_of
from controller.operator.executor import Done, Executor, pipelinerun_ref
from controller.operator.headroom import Headroom
from controller.operator.memory import Memories
from controller.settings import Settings

log = structlog.get_logger(__name__)


class Capacity:
    """Keeps each run's reservation pod. Reads what its caller observed (the run, the facts,
    its balloon) and acts on the reservation pods alone: a balloon to be planned again is
    returned to the caller (Operator.tend_room), which puts the run back on the work queue."""

    def __init__(
        self,
        settings: Settings,
        executor: Executor,
        caches: Caches | None,
        index: PodIndex,
        metrics: Metrics,
        estimates: Estimates,
        headroom: Headroom,
        memory: Memories,
        later: Callable[[str, float], None] = lambda _uid, _seconds: None,
    ) -> None:
        self.settings = settings
        self.executor = executor
        self.caches = caches
        self.index = index
        self.metrics = metrics
        self.estimates = estimates
        self.headroom = headroom
        # RunMemory.acted: the last act on the run's reservation; RunMemory.tending: a worker
        # tends it now (no lock is held across a call to the API server: one slow call would
        # stall every worker).
        self.memory = memory
        # Tends the run again in some seconds (Operator.later): when a wait runs out, or an act
        # is no longer waited on. No timer of its own, and no sweep of every run.
        self.later = later
        # Namespace -> when a reservation pod could not be made there (no PriorityClass,
        # admission): its new balloons do not wait for one for a while, and unbound ones are
        # re-planned without. One key's get or set at a time: no lock.
        self._failed_at: dict[str, datetime] = {}

    def _on(self, run: tekton.PipelineRun, facts: Facts) -> bool:
        if not facts.policy_for(run.namespace).policy.capacity.anchor:
            return False
        failed = self._failed_at.get(run.namespace)
        return not (failed and (datetime.now(UTC) - failed).total_seconds() < 300)

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

    def tend(self, body: Mapping[str, Any], facts: Facts, existing: Mapping[str, Any] | None,
             plan: Mapping[str, Any] | None = None, src: Sources | None = None) -> bool:
        """Puts the run's reservation pod where core/capacity/reservation.py says (`existing`: its
        balloon; `plan`: the balloon as planned, before it exists). One run is tended by one
        thread at a time, and not again within a moment of acting, before the watch has shown
        what the action did. True: the run's balloon is to be planned again now (without a
        reservation: the quota leaves none, or none could be made)."""
        run_uid = str((body.get("metadata") or {}).get("uid") or "")
        if not run_uid or (plan is None and self._nothing_to_tend(run_uid, existing)):
            return False
        now = time.monotonic()

        def busy(m: RunMemory) -> bool:  # acted a moment ago, or another worker tends it now
            return (m.acted is not None and m.acted.waits(now)) or m.tending

        if busy(self.memory.update(run_uid, lambda m: m if busy(m) else replace(m, tending=True))):
            return False
        try:
            return self._tend(tekton.PipelineRun.from_body(body), facts, existing or plan, src)
        finally:
            acted = self.memory.set(run_uid, tending=False).acted
            if acted is not None and (left := acted.left(time.monotonic())) > 0:
                self.later(run_uid, left)

    def _nothing_to_tend(self, run_uid: str, existing: Mapping[str, Any] | None) -> bool:
        known = self.estimates.known(run_uid)  # kept only once complete
        if known is None:
            return False
        template = (((existing or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
        return reservation.nothing_to_tend(known.peak, bool(known.unknown),
                                           bool(self.index.rooms(run_uid)),
                                           reservation.requires_room(template, run_uid))

    def _tend(self, run: tekton.PipelineRun, facts: Facts, base: Mapping[str, Any] | None,
              src: Sources | None) -> bool:
        src = src or read_sources(self.caches, self.index, run)
        found, unestimated = self.estimates.estimate(run, facts, src)
        ref = pipelinerun_ref(run.name, run.namespace, run.uid)
        if unestimated is not None:
            self.executor.do(Say(ref, unestimated, run.uid))
        if base is None or found is None:
            return False
        return self._apply(run, roomplan.plan(self._view(run, facts, ref, base, found)))

    def _view(self, run: tekton.PipelineRun, facts: Facts, ref: Mapping[str, Any],
              base: Mapping[str, Any], found: peak.Estimate) -> roomplan.RoomView:
        """What the run's reservation step reads, from the watches (the snapshot)."""
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
        return roomplan.RoomView(ref, base, tuple(rooms), seen, limited,
                                 self.settings.reservation_priority_class_name, time.monotonic())

    def _apply(self, run: tekton.PipelineRun, plan: roomplan.RoomPlan) -> bool:
        """The step's actions done in order (True: the balloon is to be planned again now)."""
        if plan.requeue_after is not None:
            self.later(run.uid, plan.requeue_after)
        if (step := plan.step) is not None and step.act is not reservation.Act.NONE:
            self.metrics.reservations.labels(action=str(step.act)).inc()
            log.info("reservation", run=f"{run.namespace}/{run.name}", act=str(step.act),
                     why=step.why, size=quantity.describe(step.size or {}))
        for action in plan.actions:
            if isinstance(action, Remember):
                self.memory.set(action.run_uid, **action.changes)
                continue
            done = self.executor.do(action)
            if isinstance(action, DeletePod):
                self._deleted(action, done)
            elif isinstance(action, MakePod) and (exc := done.api_error) is not None:
                if done.failure is None or not errors.worth_saying(done.failure):
                    self.memory.reset(run.uid, "acted")  # it was not made: not waited for either
                    done.get()  # tried again after a backoff (faces/serial.py)
                self._failed_at[run.namespace] = datetime.now(UTC)
                self.memory.set(run.uid, acted=Acted(time.monotonic(), hold=settle.SETTLE))
                self.executor.do(Say(pipelinerun_ref(run.name, run.namespace, run.uid),
                                     reservation.cannot_reserve(
                                         f"{exc.status} {api_message(exc)}"), run.uid))
                # re-planned without it, at once
                return step is not None and step.act is not reservation.Act.KEEP
            else:
                done.get()  # no answer at all: tried again after a backoff (faces/serial.py)
        return plan.replan

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

    def release(self, run_uid: str, why: str) -> None:
        """The run's reservation pods go: its balloon went, or it is no longer live."""
        self._apply_release(roomplan.release(tuple(self.index.rooms(run_uid)), why))

    def release_orphans(self, live: Iterable[str]) -> None:
        """Reservation pods of runs that are not live (a missed event, a restart)."""
        keep = set(live)
        for uid in self.index.runs():
            if uid not in keep:
                self.release(uid, "its run is not live")

    def _apply_release(self, deletions: Iterable[Planned]) -> None:
        for action in deletions:
            assert isinstance(action, DeletePod)
            self._deleted(action, self.executor.do(action))

    @staticmethod
    def _deleted(action: DeletePod, done: Done) -> None:
        log.info("reservation deleted", pod=action.name, why=action.why)
        done.get()  # tried again after a backoff (faces/serial.py)
