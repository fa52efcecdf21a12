"""The balloon StatefulSets, made, re-planned and deleted as a run's decision says
(operator/runs.py decides, this acts), counted, and a failure that trying again cannot mend said
on the run. What may mend is raised: the work queue tries the run again (faces/serial.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from controller.core.basics import names
from controller.core.basics.notices import Notice
from controller.core.model import tekton
from controller.core.placement import reconcile
from controller.core.placement.reconcile import Verb
from controller.kube import errors
from controller.kube.client import ApiError, Kube, api_message
from controller.metrics import Metrics
from controller.operator.budgets import Budgets
from controller.operator.notify import Notifier, pipelinerun_ref
from controller.operator.placement import Placement

log = structlog.get_logger(__name__)


class Balloons:
    def __init__(self, kube: Kube, metrics: Metrics, notifier: Notifier, budgets: Budgets,
                 placement: Placement) -> None:
        self.kube = kube
        self.metrics = metrics
        self.notifier = notifier
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
            self.notifier.tell(ref, notice, run.uid)
        try:
            if decision.verb is Verb.CREATE:
                assert decision.manifest is not None
                _, created = self.kube.create_statefulset(decision.manifest)
                self.budgets.ensure(run)
                if created:
                    self.metrics.balloons_created.inc()
                    self.metrics.balloons_active.inc()
                    bound.info("balloon created", balloon=decision.manifest["metadata"]["name"])
            elif decision.verb is Verb.UPDATE:
                assert decision.manifest is not None
                self.kube.replace_balloon_template(decision.manifest)
                bound.info("balloon template replaced", why=decision.why)
            elif decision.verb is Verb.DELETE and existing is not None:
                self.delete(existing, decision.why)
        except Exception as exc:
            # What mends itself (throttled, a timeout, a restarted API server's first 403s) is
            # no Warning: raised, tried again. What lasts is said, and still tried again.
            if not isinstance(exc, ApiError) or not errors.worth_saying(errors.classify(exc)):
                raise
            reason = (
                "BalloonCreateFailed" if decision.verb is Verb.CREATE else "BalloonUpdateFailed"
            )
            self.metrics.balloon_problems.labels(reason=reason).inc()
            self.notifier.tell(
                ref,
                Notice(
                    reason,
                    f"{decision.verb} of the balloon failed: {exc.status} {api_message(exc)}; "
                    "the run's pods may wait for their anchor",
                ),
                run.uid,
            )
            raise

    def delete(self, statefulset: Mapping[str, Any], why: str) -> None:
        meta = statefulset["metadata"]
        if self.kube.delete_statefulset(meta["namespace"], meta["name"], uid=meta.get("uid")):
            self.metrics.balloons_deleted.labels(reason=why).inc()
            self.metrics.balloons_active.dec()
            log.info("balloon deleted", balloon=meta["name"], namespace=meta["namespace"], why=why)
        self.placement.forget((meta.get("labels") or {}).get(names.LABEL_RUN_UID, ""))
