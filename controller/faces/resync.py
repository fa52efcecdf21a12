"""The periodic repair: what events may have missed, put right. Its cost grows with the live
runs and the balloons, never with the cluster: it reads the operator's own indexes and caches,
and asks the API server only about what looks wrong.

The first round after this replica starts to lead lists every PipelineRun once (a page at a
time), to know the runs that existed before its watch did; later rounds go over the live runs
the events showed, except those an event has reconciled since the round before (a run that
lives half an hour was otherwise reconciled sixty times by the resync alone, and the CPU per
run grew with how long runs live: bench-scale at 1,000 runs, the resync was a third of it) and
those settled (operator/observe.py: their balloon stays, nothing they read has changed).

A balloon whose run is not among the live ones is either the balloon of a run that just
finished or was deleted, or of one the index has not seen: a GET of the run tells which, before
anything is deleted.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import structlog

from controller.core.basics import names
from controller.core.basics.times import parse_time
from controller.core.capacity import roomplan
from controller.core.model import tekton
from controller.faces import placeholders
from controller.kube import errors
from controller.operator.policies import status_key
from controller.operator.runs import Operator

log = structlog.get_logger(__name__)
T = TypeVar("T")


# How long the first round waits for the runs it listed to be looked at once (retries of one
# that keeps failing are not waited for beyond it) before the live runs count as known.
FIRST_ROUND_WAIT = 60.0

# submit(run uid, body, listed): a look at a run, put on the work queue (faces/serial.py)
# without replacing an event of the run already waiting; `listed`: from the first round's list,
# decided whatever the live runs say.
Submit = Callable[[str, Mapping[str, Any], bool], None]


class Resync:
    def __init__(self, operator: Operator, submit: Submit | None = None,
                 settled: Callable[[Iterable[str]], bool] | None = None) -> None:
        self.operator = operator
        # Without a queue (unit tests of the operator alone) each run is reconciled in place.
        self.submit = submit or self._in_place
        self.settled = settled or (lambda _: True)
        self.seeded = False
        self.listing = placeholders.Listing()  # which rounds list the placeholders
        self.last_round = float("-inf")  # when the previous round ended (monotonic)

    def _in_place(self, uid: str, body: Mapping[str, Any], listed: bool) -> None:
        self._step("run", self.operator.look, body, listed)

    def __call__(self) -> None:
        """One round. It only puts runs on the queue, so that one run's failure holds up no
        other and never the round's tail, each of whose steps is on its own too."""
        op = self.operator
        # Balloons before runs: a balloon seen now belongs to a run made earlier.
        balloons = self._balloons()
        since = self.last_round
        listed = not self.seeded
        if listed:
            bodies: Sequence[Mapping[str, Any]] = op.kube.list_pipelineruns()
        else:
            bodies, left_alone = op.live.not_reconciled_since(since, op.settled.skips)
            op.metrics.resync_left_alone.set(left_alone)
        uids = [str((b.get("metadata") or {}).get("uid") or "") for b in bodies]
        for uid, body in zip(uids, bodies, strict=True):
            self.submit(uid, body, listed)
        if listed:
            # The live runs are known once each listed run was looked at (bindings in policy
            # mode keep the namespaces of the anchored ones: operator/marking.py `held`).
            deadline = time.monotonic() + FIRST_ROUND_WAIT
            while not self.settled(uids) and time.monotonic() < deadline:
                time.sleep(0.1)
            self.seeded = True
            op.marks.seeded = True
        if self.listing.round(listed, op.view.facts.enabled_namespaces):
            self._placeholders()
        live = op.live.by_uid()
        op.metrics.oldest_unanchored.set(self._oldest_unanchored(live))
        waiting = [placed for sts in balloons
                   if (placed := self._step("balloon", self._balloon, sts, live))]
        # The rest is work put on the queue, each under the key it concerns (a run's, or the
        # sweep's own): the round itself only reads. (A wait that runs out between events, a
        # reservation's or a move's, is work its run put for later: Operator.later.)
        self._soon("unplaced", functools.partial(op.unplaced.check, waiting))
        self._soon("gates", op.gates.tend)
        # Read again when the sweep runs, not from this round's reading: a run that became live
        # meanwhile must not lose its reservation, nor a namespace its budget.
        self._soon("budgets", lambda: op.budgets.tend(self._balloons(), op.view.facts))
        self._soon("orphan reservations", self._orphan_rooms)
        op.metrics.balloons_active.set(len(balloons))
        for obj in op.view.facts.policy_objects:
            meta = obj.get("metadata") or {}
            ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
            self._soon(status_key(ns, name), functools.partial(op.policies.look, ns, name))
        op.settled.next_round()
        op.metrics.resync_rounds.inc()
        self.last_round = time.monotonic()

    def _placeholders(self) -> None:
        """The placeholders admission held that this leader does not know, each put under its
        run's key (faces/placeholders.py: a namespace switched off, a leader that crashed)."""
        op = self.operator
        for key, run_name, pod in placeholders.held_unknown(
                op, op.kube.list_unscheduled_placeholders()):
            uid = str((pod.get("metadata") or {}).get("uid") or "")
            self._soon(f"placeholder/{uid}", functools.partial(
                placeholders.seen, op, op.kube, self.submit, pod, run_name), key)

    def _oldest_unanchored(self, live: Mapping[str, tekton.PipelineRun]) -> float:
        """Seconds the oldest started run of ours has gone without a bound anchor (the chart's
        alert: a run that waits for its balloon, whatever the reason)."""
        now, oldest = datetime.now(UTC), 0.0
        for uid, run in live.items():
            made = parse_time(run.created)
            if made is not None and not run.pending and not self.operator.index.anchor(uid):
                oldest = max(oldest, (now - made).total_seconds())
        return oldest

    def _orphan_rooms(self) -> None:
        """Reservation pods of runs that are not live (a missed event, a restart) go."""
        op = self.operator
        for uid in op.capacity.orphans(set(op.live)):
            op.applier.release(roomplan.release(op.capacity.rooms(uid), "its run is not live"))

    def _balloons(self) -> Sequence[Mapping[str, Any]]:
        caches = self.operator.caches
        if caches is not None and caches.synced:
            return caches.balloons()
        return self.operator.kube.list_balloons()

    def _soon(self, what: str, act: Callable[[], None], run_uid: str = "") -> None:
        """Work of the round on the queue, under its run's key, or a key of its own for a
        sweep over many (without a queue: in place, a failure said and the round going on)."""
        if self.operator.enqueue is not None:
            self.operator.soon(run_uid or what, what, act)
        else:
            self._step(what, act)

    def _step(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T | None:
        """A step of the round's tail: a failure is said and counted, and the round goes on
        (the next round, or the object's own event, tries it again)."""
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            failure = errors.classify(exc)
            self.operator.metrics.work_retries.labels(reason=failure.reason).inc()
            (log.exception if failure.bug else log.warning)(
                "resync step failed", step=what, reason=failure.reason, error=str(exc))
            return None

    def _balloon(self, sts: Mapping[str, Any], live: Mapping[str, tekton.PipelineRun]
                 ) -> tuple[tekton.PipelineRun, Mapping[str, Any]] | None:
        """The balloon of a live run (for the check of its pod), or put right."""
        op = self.operator
        labels = sts["metadata"].get("labels") or {}
        uid = labels.get(names.LABEL_RUN_UID, "")
        run = live.get(uid)
        if run is None:
            # Not live as far as the events went: ask before deleting anything.
            name = labels.get(names.LABEL_RUN, "")
            fresh = op.kube.get_pipelinerun(sts["metadata"]["namespace"], name) if name else None
            owner = tekton.PipelineRun.from_body(fresh) if fresh else None
            if owner is None or owner.uid != uid:
                self._soon("balloon", functools.partial(op.applier.delete, sts, "orphan"), uid)
            elif owner.finished:
                self._soon("balloon", functools.partial(op.applier.delete, sts, "run finished"),
                           uid)
            elif fresh is not None:
                self.submit(uid, fresh, True)
            return None
        return None if run.pending else (run, sts)
