"""The balloon StatefulSets, made, re-planned and deleted as a run's decision says
(operator/runs.py decides, this acts), counted, and a failure that trying again cannot mend said
on the run. What may mend is raised: the work queue tries the run again (faces/serial.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from controller.core.basics import names
from controller.core.basics.actions import DeleteBalloon, MakeBalloon, ReplanBalloon, Say
from controller.core.basics.notices import Notice
from controller.core.model import tekton
from controller.core.placement import reconcile
from controller.core.placement.reconcile import Verb
from controller.kube import errors
from controller.kube.client import api_message
from controller.metrics import Metrics
from controller.operator.budgets import Budgets
from controller.operator.executor import Done, Executor
from controller.operator.notify import pipelinerun_ref
from controller.operator.placement import Placement

log = structlog.get_logger(__name__)


class Balloons:
    def __init__(self, executor: Executor, metrics: Metrics, budgets: Budgets,
                 placement: Placement) -> None:
        self.executor = executor
        self.metrics = metrics
        self.budgets = budgets
        self.placement = placement

    def act(
        self,
        run: tekton.PipelineRun,
        decision: reconcile.Decision,
        existing: Mapping[str, Any] | None,
    ) -> None:
        ref = pipelinerun_ref(run.name, run.namespace, run.uid)
        bound = log.bind(object=f"PipelineRun/{run.namespace}/{run.name}", verb=str(decision.verb))
        for notice in decision.notices:
            self.executor.do(Say(ref, notice, run.uid))
        if decision.verb is Verb.CREATE:
            assert decision.manifest is not None
            done = self.executor.do(MakeBalloon(decision.manifest))
            if done.ok:
                _, created = done.value
                self.budgets.ensure(run)
                if created:
                    self.metrics.balloons_created.inc()
                    self.metrics.balloons_active.inc()
                    bound.info("balloon created", balloon=decision.manifest["metadata"]["name"])
        elif decision.verb is Verb.UPDATE:
            assert decision.manifest is not None
            done = self.executor.do(ReplanBalloon(decision.manifest))
            if done.ok:
                bound.info("balloon template replaced", why=decision.why)
        elif decision.verb is Verb.DELETE and existing is not None:
            done = self._delete(existing, decision.why)
        else:
            return
        exc = done.api_error
        if exc is not None and done.failure is not None and errors.worth_saying(done.failure):
            # What mends itself (throttled, a timeout, a restarted API server's first 403s) is
            # no Warning: tried again. What lasts is said, and still tried again.
            reason = (
                "BalloonCreateFailed" if decision.verb is Verb.CREATE else "BalloonUpdateFailed"
            )
            self.metrics.balloon_problems.labels(reason=reason).inc()
            self.executor.do(Say(
                ref,
                Notice(
                    reason,
                    f"{decision.verb} of the balloon failed: {exc.status} {api_message(exc)}; "
                    "the run's pods may wait for their anchor",
                ),
                run.uid,
            ))
        done.get()  # a failure goes to the work queue, which tries the run again

    def delete(self, statefulset: Mapping[str, Any], why: str) -> None:
        self._delete(statefulset, why).get()

    def _delete(self, statefulset: Mapping[str, Any], why: str) -> Done:
        meta = statefulset["metadata"]
        done = self.executor.do(DeleteBalloon(meta["namespace"], meta["name"], meta.get("uid")))
        if not done.ok:
            return done
        if done.value:
            self.metrics.balloons_deleted.labels(reason=why).inc()
            self.metrics.balloons_active.dec()
            log.info("balloon deleted", balloon=meta["name"], namespace=meta["namespace"], why=why)
        self.placement.forget((meta.get("labels") or {}).get(names.LABEL_RUN_UID, ""))
        return done
