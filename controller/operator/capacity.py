"""Capacity-aware anchoring, the adapter: estimate each run's peak from the watch caches, and
keep its reservation pod as core/reservation.py decides. Every step may be replayed: the
decision reads only what the watches show, and creating or deleting twice changes nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import structlog

from controller.core import balloon, names, peak, podrequests, quantity, reservation, tekton
from controller.kube import errors
from controller.kube.caches import Caches
from controller.kube.client import ApiError, Kube, api_message
from controller.kube.clusterview import Facts
from controller.metrics import Metrics
from controller.operator import sources
from controller.operator.headroom import Headroom
from controller.operator.notify import Notifier, pipelinerun_ref
from controller.operator.podindex import PodIndex
from controller.operator.resolving import Resolving, task_reader
from controller.settings import Settings

log = structlog.get_logger(__name__)
# Seconds after acting on a run's reservation before acting again: the watch shows the change
# first (a second scout made before the first is seen would compete with it).
SETTLE = 2.0


class Capacity:
    def __init__(
        self,
        settings: Settings,
        kube: Kube,
        caches: Caches | None,
        index: PodIndex,
        notifier: Notifier,
        metrics: Metrics,
        balloon_of: Callable[[str, str], Mapping[str, Any] | None],
        live: Callable[[str], Mapping[str, Any] | None],
        facts: Callable[[], Facts],
        reconcile: Callable[[Mapping[str, Any]], object],
        live_runs: Callable[[], Iterable[tekton.PipelineRun]] = lambda: (),
        nodes: Callable[[], Iterable[Mapping[str, Any]]] = lambda: (),
        nudge: Callable[[Mapping[str, Any]], object] | None = None,
    ) -> None:
        self.settings = settings
        self.kube = kube
        self.caches = caches
        self.index = index
        self.notifier = notifier
        self.metrics = metrics
        self.balloon_of = balloon_of
        self.live = live
        self.facts = facts
        self.reconcile = reconcile
        # What a ResolutionRequest's event wakes (in the caches' watch thread) goes on the work
        # queue: nudge, not reconcile.
        self.resolving = Resolving(caches, live, nudge or reconcile)
        self._acted: dict[str, float] = {}  # run uid -> when its reservation last changed
        self._estimates: dict[str, peak.Estimate] = {}
        # Guards the dicts here, never held across a call to the API server (one slow call
        # would stall every worker): a run being tended is marked in _tending instead.
        self._lock = threading.Lock()
        self._tending: set[str] = set()
        # Namespace -> when a reservation pod could not be made there (no PriorityClass,
        # admission): its new balloons do not wait for one for a while, and unbound ones are
        # re-planned without.
        self._failed_at: dict[str, datetime] = {}
        self.headroom = Headroom(settings, caches, index, notifier, self._known, live_runs, nodes,
                                 kube)

    # -- the estimate -----------------------------------------------------------------------

    def estimate(self, run: tekton.PipelineRun, facts: Facts, src: sources.Sources
                 ) -> peak.Estimate | None:
        """The run's peak, once its pipeline is known (inline, resolved by Tekton into its
        status, or a Pipeline of its namespace by name); kept for the run's life."""
        with self._lock:
            known = self._estimates.get(run.uid)
        if known is not None:
            return self._learn(run.uid, known)
        spec = run.substituted_pipeline_spec or src.pipeline
        if not spec or self.caches is None:
            return None
        ns = run.namespace
        namespace = podrequests.Namespace(
            limit_ranges=tuple(self.caches.limit_ranges(ns) or ()),
            container_defaults=dict(facts.tekton_container_defaults),
        )
        capacity = facts.policy_for(ns).policy.capacity
        try:
            found = peak.estimate(
                spec, task_reader(self.caches, ns, src), run.task_run_specs, namespace,
                quantity.amounts(capacity.unknown_task),
            )
        except ValueError as exc:
            self.notifier.tell(pipelinerun_ref(run.name, ns, run.uid),
                               reservation.not_estimated(str(exc)), run.uid)
            return None
        if src.tasks_synced and self.resolving.settled(run, src):  # complete: keep it
            with self._lock:
                self._estimates[run.uid] = found
        return self._learn(run.uid, found)

    def _known(self, run_uid: str) -> peak.Estimate | None:
        with self._lock:
            return self._estimates.get(run_uid)

    def _learn(self, run_uid: str, found: peak.Estimate) -> peak.Estimate:
        """Tasks unknown before they ran (resolvers) count as their pods ask, once the pod
        watch has shown one: the keeper then holds room for their siblings."""
        if not found.unknown:
            return found
        better = found.learned(self.index.task_requests(run_uid))
        if better is not found:
            with self._lock:
                if run_uid in self._estimates:
                    self._estimates[run_uid] = better
        return better

    def _on(self, run: tekton.PipelineRun, facts: Facts) -> bool:
        if not facts.policy_for(run.namespace).policy.capacity.anchor:
            return False
        failed = self._failed_at.get(run.namespace)
        return not (failed and (datetime.now(UTC) - failed).total_seconds() < 300)

    def waits_for_resolution(self, run: tekton.PipelineRun, facts: Facts,
                             src: sources.Sources) -> str | None:
        """What Tekton still resolves of the run, for which its anchor waits (resolving.py)."""
        return self.resolving.pending(run, src) if self._on(run, facts) else None

    def wants_room(self, run: tekton.PipelineRun, facts: Facts, src: sources.Sources) -> bool:
        """The balloon should follow a reservation pod: on, and the peak asks for more than
        pod slots."""
        if not self._on(run, facts):
            return False
        found = self.estimate(run, facts, src)
        if found is None or not reservation.worth(found.peak):
            return False
        own = reservation.room_of(src.rooms[0], 0).size if src.rooms else {}
        return reservation.worth(self.headroom.asks(run, facts, found, own, None)[0])

    def forget(self, run_uid: str) -> None:
        self.resolving.forget(run_uid)
        self.headroom.forget(run_uid)
        with self._lock:
            self._estimates.pop(run_uid, None)
            self._acted.pop(run_uid, None)

    # -- the reservation ----------------------------------------------------------------------

    def on_room_pod(self, pod: Mapping[str, Any], deleted: bool) -> None:
        uid = self.index.room_event(pod, deleted)
        body = self.live(uid)
        found_room = not deleted and (pod.get("spec") or {}).get("nodeName")
        if found_room and body is not None and self.balloon_of(
            str((pod.get("metadata") or {}).get("namespace")), balloon.balloon_name(uid)
        ) is None:
            self.reconcile(body)  # the scout found room: now the balloon is made, beside it
        else:
            self.tend(uid)

    def on_pod(self, pod: Mapping[str, Any]) -> None:
        """A balloon or TaskRun pod of a run changed: its reservation may have to follow."""
        labels = (pod.get("metadata") or {}).get("labels") or {}
        run = tekton.task_run_pod_run(labels)
        self.tend(run.uid if run is not None else str(labels.get(names.LABEL_RUN_UID) or ""))

    def tend(self, run_uid: str, plan: Mapping[str, Any] | None = None,
             src: sources.Sources | None = None) -> None:
        """Puts the run's reservation pod where core/reservation.py says. `plan`: the balloon
        as planned, before it exists. One run is tended by one thread at a time, and not again
        within a moment of acting, before the watch has shown what the action did."""
        body = self.live(run_uid)
        if not run_uid or body is None or (plan is None and self._nothing_to_tend(run_uid, body)):
            return
        with self._lock:
            if time.monotonic() - self._acted.get(run_uid, -SETTLE) < SETTLE:
                return
            if run_uid in self._tending:  # another thread tends it now: the watch shows its act
                return
            self._tending.add(run_uid)
        try:
            self._tend(tekton.PipelineRun.from_body(body), plan, src)
        finally:
            with self._lock:
                self._tending.discard(run_uid)

    def _nothing_to_tend(self, run_uid: str, body: Mapping[str, Any]) -> bool:
        known = self._known(run_uid)  # kept only once complete (its pipeline and tasks read)
        if known is None:
            return False
        ns = str((body.get("metadata") or {}).get("namespace") or "")
        spec = ((self.balloon_of(ns, balloon.balloon_name(run_uid)) or {}).get("spec") or {})
        template = (spec.get("template") or {}).get("spec") or {}
        return reservation.nothing_to_tend(known.peak, bool(known.unknown),
                                           bool(self.index.rooms(run_uid)),
                                           reservation.requires_room(template, run_uid))

    def _tend(self, run: tekton.PipelineRun, plan: Mapping[str, Any] | None,
              src: sources.Sources | None) -> None:
        facts = self.facts()
        base = self.balloon_of(run.namespace, balloon.balloon_name(run.uid)) or plan
        src = src or sources.read(self.caches, self.index, run)
        found = self.estimate(run, facts, src)
        if base is None or found is None:
            return
        now = datetime.now(UTC)
        rooms = src.rooms
        for extra in rooms[1:]:  # a replaced scout still ending: only the newest counts
            self._delete(extra, "an older reservation")
        _, _, pending = self.index.progress(run.uid)
        own = reservation.room_of(rooms[0], 0).size if rooms else {}
        spec = base["spec"]["template"]["spec"]
        full, need = self.headroom.asks(run, facts, found, own, spec)
        pod = self.index.balloon(run.uid)
        requires_room = reservation.requires_room(spec, run.uid)
        if requires_room and not reservation.worth(full) and not (pod and pod.node):
            # The quota leaves no reservation: the unbound balloon must not wait for one
            # (re-planned without; not tended again before the watch shows it).
            with self._lock:
                self._acted[run.uid] = time.monotonic()
            self.reconcile(self.live(run.uid) or {})
            return
        waiting = self.index.balloon_waiting(run.uid)
        capacity = facts.policy_for(run.namespace).policy.capacity
        seen = reservation.Seen(
            full=full,
            need=need,
            requires_room=requires_room,
            balloon_node=(pod.node or None) if pod else None,
            balloon_waiting=(now - waiting.since).total_seconds() if waiting else 0.0,
            pods_pending=pending,
            room=reservation.room_of(rooms[0], sources.age(rooms[0], now)) if rooms else None,
            wait_seconds=capacity.wait_seconds,
            say_after=self.settings.balloon_stuck_after,
        )
        step = reservation.decide(seen)
        ref = pipelinerun_ref(run.name, run.namespace, run.uid)
        if step.notice is not None:
            self.notifier.tell(ref, step.notice, run.uid)
        if step.act is reservation.Act.NONE:
            return
        with self._lock:
            self._acted[run.uid] = time.monotonic()
        self.metrics.reservations.labels(action=str(step.act)).inc()
        log.info("reservation", run=f"{run.namespace}/{run.name}", act=str(step.act),
                 why=step.why, size=quantity.describe(step.size or {}))
        if step.act in (reservation.Act.DELETE, reservation.Act.REPLACE) and rooms:
            self._delete(rooms[0], step.why)
        if step.act in (reservation.Act.SCOUT, reservation.Act.REPLACE, reservation.Act.KEEP):
            role = reservation.KEEPER if step.act is reservation.Act.KEEP else reservation.SCOUT
            manifest = reservation.manifest(
                base, run.uid, role, step.size or {}, step.halvings, full,
                self.settings.reservation_priority_class_name,
            )
            try:
                self.kube.create_pod(manifest)
            except ApiError as exc:
                if not errors.worth_saying(errors.classify(exc)):
                    with self._lock:  # it was not made: not waited for either
                        self._acted.pop(run.uid, None)
                    raise  # tried again after a backoff (faces/serial.py)
                with self._lock:
                    self._failed_at[run.namespace] = now
                self.notifier.tell(
                    ref, reservation.cannot_reserve(f"{exc.status} {api_message(exc)}"), run.uid
                )
                if step.act is not reservation.Act.KEEP and self.live(run.uid) is not None:
                    self.reconcile(self.live(run.uid) or {})  # re-planned without it, at once

    def release(self, run_uid: str, why: str) -> None:
        """The run's reservation pods go: its balloon went, or it is no longer live."""
        for pod in self.index.rooms(run_uid):
            self._delete(pod, why)

    def release_orphans(self, live: Iterable[str]) -> None:
        """Reservation pods of runs that are not live (a missed event, a restart)."""
        keep = set(live)
        for uid in self.index.runs():
            if uid not in keep:
                self.release(uid, "its run is not live")

    def _delete(self, pod: Mapping[str, Any], why: str) -> None:
        meta = pod.get("metadata") or {}
        if meta.get("labels", {}).get(names.LABEL_COMPONENT) != names.COMPONENT_RESERVATION:
            return
        log.info("reservation deleted", pod=meta.get("name"), why=why)
        self.kube.delete_pod(str(meta.get("namespace")), str(meta.get("name")),
                             str(meta.get("uid")), grace=0)
