"""A run's plan applied: its own look's (core/placement/runplan.Plan), or the part an event of
its pods or nodes concerns (core/capacity/roomplan, core/placement/binding, anchorplan,
waiting). Its actions are handed to the executor one by one, in order; its memory (Remember)
and metrics (Count) change where the plan says; and each answer is judged for what follows: the
balloon counted, a failure that trying again cannot mend said on the run, a mark given up, a
refused reservation pod, a refused anchor move, the namespace's budget known made. What may
mend is raised and ends the plan there: the work queue tries the run again (faces/serial.py),
and it is planned anew. Gate releases outside a plan are judged the same way (release_gates).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import structlog

from controller.core.basics import names, quantity
from controller.core.basics.actions import (
    Count,
    DeleteBalloon,
    DeletePod,
    MakeBalloon,
    MakeBudget,
    MakePod,
    Mark,
    Planned,
    ReleaseGate,
    Remember,
    ReplanBalloon,
    Say,
    WritePolicyStatus,
)
from controller.core.basics.notices import Notice
from controller.core.capacity import reservation, roomplan, settle
from controller.core.capacity.settle import Acted
from controller.core.model import tekton
from controller.core.placement import binding
from controller.core.placement.runplan import reference
from controller.kube import errors
from controller.kube.client import ApiError, api_message
from controller.kube.podindex import PodIndex
from controller.metrics import Metrics
from controller.operator.executor import Done, Executor
from controller.operator.memory import Memories

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Applied:
    """How a plan went, besides what failed and was raised."""

    marked: bool = True  # False: a mark trying again cannot mend (its next event tries again)
    replan: bool = False  # the run is to be planned again at once (a reservation refused)


class Applier:
    def __init__(self, executor: Executor, metrics: Metrics, index: PodIndex, memory: Memories,
                 later: Callable[[str, float], None] = lambda _uid, _seconds: None) -> None:
        self.executor = executor
        self.metrics = metrics
        self.index = index  # a deleted balloon's run forgotten there
        self.memory = memory  # what a plan's Remember sets; a namespace's refused reservation
        # Tends the run's reservation again in some seconds (Operator.later).
        self.later = later

    def apply(self, run: tekton.PipelineRun, planned: Sequence[Planned],
              room: roomplan.RoomPlan | None = None) -> Applied:
        """The plan's actions done in order, each answer judged before the next; then, if
        they tended the run's reservation (`room`: its step), its waits put on the queue."""
        applied = self._apply(run, planned)
        if room is None:
            return applied
        step = room.step
        if step is not None and step.act is not reservation.Act.NONE:
            self.metrics.reservations.labels(action=str(step.act)).inc()
            log.info("reservation", run=f"{run.namespace}/{run.name}", act=str(step.act),
                     why=step.why, size=quantity.describe(step.size or {}))
        if room.requeue_after is not None:  # time alone may change its step then
            self.later(run.uid, room.requeue_after)
        acted = self.memory.get(run.uid).acted  # an act the watch is to show: looked at after
        if acted is not None and (left := acted.left(time.monotonic())) > 0:
            self.later(run.uid, left)
        return replace(applied, replan=applied.replan or room.replan)

    def _apply(self, run: tekton.PipelineRun, planned: Sequence[Planned]) -> Applied:
        ref = reference(run.name, run.namespace, run.uid)
        bound = log.bind(object=f"PipelineRun/{run.namespace}/{run.name}")
        unmarked, again = False, None
        for action in planned:
            if again is not None and not isinstance(action, ReleaseGate):
                raise again  # every held pod was tried first
            if unmarked and _of_mark(action):
                continue  # the mark is given up for this look; the rest is done
            if isinstance(action, Remember):
                self.memory.set(action.run_uid, **action.changes)
                continue
            if isinstance(action, Count):
                counter = getattr(self.metrics, action.metric)
                (counter.labels(**dict(action.labels)) if action.labels else counter).inc(action.by)
                continue
            done = self.executor.do(action)
            if isinstance(action, ReleaseGate):
                again = self._gate_released(action, done) or again
            elif isinstance(action, MakeBalloon | ReplanBalloon):
                self._balloon(ref, action, done, bound)
            elif isinstance(action, DeleteBalloon):
                self._deleted(action, done)
            elif isinstance(action, MakeBudget):
                self._budget_made(ref, run.namespace, done)
            elif isinstance(action, Mark):
                if done.api_error is not None and not errors.classify(done.api_error).retry:
                    bound.warning("could not mark the anchored run",
                                  error=f"{done.api_error.status} {api_message(done.api_error)}")
                    unmarked = True
                else:
                    done.get()  # tried again after a backoff (faces/serial.py)
            elif isinstance(action, DeletePod):
                (_anchor_moved if action.balloon else _room_deleted)(action, done)
            elif isinstance(action, WritePolicyStatus) and done.api_error is not None:
                bound.warning("pipeline's warm node not remembered", policy=action.name,
                              error=api_message(done.api_error))  # not worth a retry
            elif isinstance(action, MakePod) and done.api_error is not None:
                return Applied(not unmarked, self._refused(run, ref, action, done))
            else:
                done.get()  # no answer at all: tried again after a backoff (faces/serial.py)
        if again is not None:
            raise again
        return Applied(not unmarked)

    def release_gates(self, releases: Sequence[ReleaseGate]) -> None:
        """Held pods let go (core/placement/gate.releases), apart from a run's plan (a pod's
        event, the resync, leadership's end); a failure that may mend is raised once the others
        were tried (the work is tried again after a backoff)."""
        again: Exception | None = None
        for action in releases:
            again = self._gate_released(action, self.executor.do(action)) or again
        if again is not None:
            raise again

    def _gate_released(self, action: ReleaseGate, done: Done) -> Exception | None:
        """A held pod let go, or what failed: returned to raise (it may mend), or logged (it
        cannot: the pod keeps its term beside the anchor either way)."""
        if (exc := done.error) is None:
            if done.value:
                self.metrics.gates_released.inc()
            self.memory.released(action.run_uid, action.uid)
            return None
        if not isinstance(exc, ApiError) or (done.failure and done.failure.retry):
            return exc
        log.warning("could not release a pod's scheduling gate",
                    error=f"{exc.status} {api_message(exc)}",
                    object=f"Pod/{action.namespace}/{action.name}")
        return None

    def release(self, deletions: Sequence[DeletePod]) -> None:
        """A run's reservation pods deleted (core/capacity/roomplan.release), run or no run."""
        for action in deletions:
            _room_deleted(action, self.executor.do(action))

    def _balloon(self, ref: Mapping[str, Any], action: MakeBalloon | ReplanBalloon, done: Done,
                 bound: Any) -> None:
        made = isinstance(action, MakeBalloon)
        if done.ok:
            if isinstance(action, ReplanBalloon):
                bound.info("balloon template replaced", why=action.why)
            elif done.value[1]:  # this call made it
                self.metrics.balloons_created.inc()
                self.metrics.balloons_active.inc()
                bound.info("balloon created", balloon=action.manifest["metadata"]["name"])
            return
        exc = done.api_error
        if exc is not None and done.failure is not None and errors.worth_saying(done.failure):
            # What mends itself (throttled, a timeout, a restarted API server's first 403s) is
            # no Warning: tried again. What lasts is said, and still tried again.
            reason = "BalloonCreateFailed" if made else "BalloonUpdateFailed"
            self.metrics.balloon_problems.labels(reason=reason).inc()
            self.executor.do(Say(ref, Notice(
                reason,
                f"{'create' if made else 'update'} of the balloon failed: {exc.status} "
                f"{api_message(exc)}; the run's pods may wait for their anchor",
            ), ref["metadata"]["uid"]))
        done.get()  # a failure goes to the work queue, which tries the run again

    def delete(self, statefulset: Mapping[str, Any], why: str) -> None:
        """A balloon no run's plan keeps (the resync's: its run ended or is gone)."""
        meta = statefulset["metadata"]
        action = DeleteBalloon(meta["namespace"], meta["name"], meta.get("uid"),
                               str((meta.get("labels") or {}).get(names.LABEL_RUN_UID, "")), why)
        self._deleted(action, self.executor.do(action))

    def _deleted(self, action: DeleteBalloon, done: Done) -> None:
        done.get()
        if done.value:
            self.metrics.balloons_deleted.labels(reason=action.why).inc()
            self.metrics.balloons_active.dec()
            log.info("balloon deleted", balloon=action.name, namespace=action.namespace,
                     why=action.why)
        self.index.forget(action.run_uid)  # where its balloon pod went: forgotten
        self.memory.reset(action.run_uid, *binding.FORGOTTEN)

    def _refused(self, run: tekton.PipelineRun, ref: Mapping[str, Any], action: MakePod,
                 done: Done) -> bool:
        """A reservation pod the API server refused. What may mend is tried again after a
        backoff, not waited on; what lasts (no PriorityClass, admission) is said, and the
        namespace's runs do without one for a while (Capacity). True: the balloon is planned
        again at once, without it (not for a keeper: the balloon is bound already)."""
        exc = done.api_error
        assert exc is not None
        if done.failure is None or not errors.worth_saying(done.failure):
            self.memory.reset(run.uid, "acted")  # it was not made: not waited for either
            done.get()  # tried again after a backoff (faces/serial.py)
        self.memory.refuse(run.namespace)
        self.memory.set(run.uid, acted=Acted(time.monotonic(), hold=settle.SETTLE))
        self.executor.do(Say(ref, reservation.cannot_reserve(f"{exc.status} {api_message(exc)}"),
                             run.uid))
        role = (action.manifest["metadata"].get("annotations") or {}).get(
            reservation.ANNOTATION_ROLE)
        return role != reservation.KEEPER

    def _budget_made(self, ref: Mapping[str, Any], namespace: str, done: Done) -> None:
        """The namespace's budget for balloons asked for with a run's balloon (its plan's
        MakeBudget): without it a drain may evict the anchor. Said on the run when trying again
        cannot mend it (else the resync makes it), not fatal."""
        exc = done.api_error
        if exc is None:
            done.get()  # no answer at all (a broken connection): the work queue's to retry
            self.memory.keep_budgets((namespace,))
            return
        if done.failure is None or not errors.worth_saying(done.failure):
            # Throttled, a timeout, an API server's first moments: the resync makes it.
            log.info("the namespace's budget for balloons not made yet",
                     namespace=namespace, error=f"{exc.status} {api_message(exc)}")
            return
        self.executor.do(Say(ref, Notice(
            "BalloonUnprotected",
            f"the namespace's PodDisruptionBudget for balloons could not be made "
            f"({exc.status} {api_message(exc)}): a drain of its node may evict the anchor",
        ), ref["metadata"]["uid"]))


def _room_deleted(action: DeletePod, done: Done) -> None:
    log.info("reservation deleted", pod=action.name, why=action.why)
    done.get()  # tried again after a backoff (faces/serial.py)


def _anchor_moved(action: DeletePod, done: Done) -> None:
    """A balloon pod deleted to move its anchor (core/placement/anchorplan.py)."""
    log.info("moving an anchor", pod=f"{action.namespace}/{action.name}", why=action.why,
             force=action.grace == 0)
    if (refused := done.api_error) is not None:
        log.warning("anchor not moved", error=api_message(refused), pod=action.name)
    else:
        done.get()


def _of_mark(action: Planned) -> bool:
    return isinstance(action, Mark) or (
        isinstance(action, Remember) and "marked" in action.changes)
