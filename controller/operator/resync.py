"""The periodic repair: what events may have missed, put right. Its cost grows with the live
runs and the balloons, never with the cluster: it reads the operator's own indexes and caches,
and asks the API server only about what looks wrong.

The first round after this replica starts to lead lists every PipelineRun once (a page at a
time), to know the runs that existed before its watch did; later rounds go over the live runs
the events showed, except those an event has reconciled since the round before (a run that
lives half an hour was otherwise reconciled sixty times by the resync alone, and the CPU per
run grew with how long runs live: bench-scale at 1,000 runs, the resync was a third of it) and
those settled (operator/settled.py: their balloon stays, nothing they read has changed).

A balloon whose run is not among the live ones is either the balloon of a run that just
finished or was deleted, or of one the index has not seen: a GET of the run tells which, before
anything is deleted.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from controller.core import names, tekton
from controller.operator.runs import Operator

log = structlog.get_logger(__name__)


class Resync:
    def __init__(self, operator: Operator) -> None:
        self.operator = operator
        self.seeded = False
        self.last_round = float("-inf")  # when the previous round ended (monotonic)

    def __call__(self) -> None:
        op = self.operator
        # Balloons before runs: a balloon seen now belongs to a run made earlier.
        caches = op.caches
        balloons = caches.balloons() if caches is not None and caches.synced else (
            op.kube.list_balloons()
        )
        since = self.last_round
        # The live runs' bodies are a snapshot: one an event has replaced since (or whose run
        # ended) is left to that event, or a stale body would put an ended run back among the
        # live ones. The first round's, listed from the API server, are all decided.
        listed = not self.seeded
        if listed:
            bodies: Sequence[Mapping[str, Any]] = op.kube.list_pipelineruns()
            self.seeded = True
        else:
            with op._live_lock:
                bodies = [b for uid, b in op.live.items()
                          if op.reconciled.get(uid, float("-inf")) < since
                          and not op.settled.skips(uid)]
                op.metrics.resync_left_alone.set(len(op.live) - len(bodies))
        for body in bodies:
            if not (listed or op.still_current(body)):
                continue
            try:
                op.reconcile_run(body)
            except Exception:
                meta = body.get("metadata") or {}
                log.exception("reconcile failed",
                              object=f"PipelineRun/{meta.get('namespace')}/{meta.get('name')}")
        op.marks.seeded = True
        with op._live_lock:
            live = {uid: tekton.PipelineRun.from_body(b) for uid, b in op.live.items()}
        waiting = [placed for sts in balloons if (placed := self._balloon(sts, live))]
        op.unplaced.check(waiting)
        for uid in live:  # the reservations' waits run out between events
            op.capacity.tend(uid)
        op.placement.flush_moves()
        op.gates.tend()
        op.budgets.tend(balloons, op.view.facts)
        op.capacity.release_orphans(live)
        op.metrics.balloons_active.set(len(balloons))
        for obj in op.view.facts.policy_objects:
            op.policies.report(obj, cached=True)
        op.settled.next_round()
        op.metrics.resync_rounds.inc()
        self.last_round = time.monotonic()

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
                op.delete_balloon(sts, "orphan")
            elif owner.finished:
                op.delete_balloon(sts, "run finished")
            else:
                op.reconcile_run(fresh or {})
            return None
        return None if run.pending else (run, sts)
