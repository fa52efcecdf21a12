"""The balloon StatefulSets, made, re-planned and deleted as a run's decision says
(operator/runs.py decides, this acts), counted, and a failure that trying again cannot mend said
on the run. What may mend is raised: the work queue tries the run again (faces/serial.py). With
a namespace's first balloon comes its PodDisruptionBudget (below).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from controller.core.basics import names
from controller.core.basics.actions import (
    DeleteBalloon,
    DeleteBudget,
    MakeBalloon,
    MakeBudget,
    ReplanBalloon,
    Say,
)
from controller.core.basics.notices import Notice
from controller.core.model import tekton
from controller.core.placement import budget, reconcile
from controller.core.placement.reconcile import Verb
from controller.kube import errors
from controller.kube.caches import Caches
from controller.kube.client import api_message
from controller.kube.clusterview import Facts
from controller.metrics import Metrics
from controller.operator.executor import Done, Executor, pipelinerun_ref
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


# -- the namespace's PodDisruptionBudget -----------------------------------------------------------
# The PodDisruptionBudget of each namespace with balloons (core/placement/budget.py): made with the
# namespace's first balloon, made again by the resync if it went, and deleted once the namespace
# is switched off and its last balloon is gone. A budget of another's holding its name is said on
# the namespace's runs.

log = structlog.get_logger(__name__)


class Budgets:
    def __init__(self, executor: Executor, caches: Caches | None) -> None:
        self.executor = executor
        self.caches = caches
        # Namespaces whose budget this process made or saw. A lookup, an add or the whole set
        # replaced, each one step: no lock (two workers that both find a namespace's budget
        # missing both ask for it, and the second is told it exists, as after a restart).
        self._made: set[str] = set()

    def ensure(self, run: tekton.PipelineRun) -> None:
        """The balloon of this run was just made: its namespace's budget covers it. One call a
        namespace while this process leads; without it a drain may evict the anchor: said on
        the run when trying again cannot mend it (else the resync makes it), not fatal."""
        if run.namespace in self._made:
            return
        done = self.executor.do(MakeBudget(budget.of_namespace(run.namespace)))
        exc = done.api_error
        if exc is None:
            done.get()  # no answer at all (a broken connection): the work queue's to retry
            self._made.add(run.namespace)
            return
        if done.failure is None or not errors.worth_saying(done.failure):
            # Throttled, a timeout, an API server's first moments: the resync makes it.
            log.info("the namespace's budget for balloons not made yet",
                     namespace=run.namespace, error=f"{exc.status} {api_message(exc)}")
            return
        self.executor.do(Say(
            pipelinerun_ref(run.name, run.namespace, run.uid),
            Notice(
                "BalloonUnprotected",
                f"the namespace's PodDisruptionBudget for balloons could not be made "
                f"({exc.status} {api_message(exc)}): a drain of its node may evict the "
                "anchor",
            ),
            run.uid,
        ))

    def _name_taken(self, namespace: str, balloons: Sequence[Mapping[str, Any]]) -> None:
        """A budget of that name exists, but not ours (the cache, by our labels, has none):
        somebody else's holds the name, and nothing of ours covers the balloons. Said on each
        of the namespace's runs with a balloon, and tried again each round."""
        notice = Notice(
            "BalloonUnprotected",
            f"a PodDisruptionBudget named {budget.NAME} that tekton-coscheduler did not make "
            "(it lacks our labels) holds the name of the namespace's budget for balloons: ours "
            "cannot be made, and a drain of a node may evict the anchor unless that budget "
            "covers the balloons (rename or delete it)",
        )
        for sts in balloons:
            meta = sts.get("metadata") or {}
            labels = meta.get("labels") or {}
            if meta.get("namespace") == namespace and labels.get(names.LABEL_RUN_UID):
                uid = str(labels[names.LABEL_RUN_UID])
                run = pipelinerun_ref(str(labels.get(names.LABEL_RUN) or ""), namespace, uid)
                self.executor.do(Say(run, notice, uid))

    def tend(self, balloons: Sequence[Mapping[str, Any]], facts: Facts) -> None:
        """A resync round: budgets made where a balloon has none, deleted where no longer
        needed; nothing asked of the API server when all is well (the budgets' watch cache)."""
        cached = self.caches.budgets() if self.caches is not None else None
        if cached is None or not facts.synced:
            return
        have = {str(b["metadata"]["namespace"]): b for b in cached}
        self._made = set(have)
        wanted = budget.plan((str(s["metadata"]["namespace"]) for s in balloons), have,
                             facts.enabled_namespaces)
        for namespace in wanted.create:
            done = self.executor.do(MakeBudget(budget.of_namespace(namespace)))
            if (exc := done.api_error) is not None:
                log.warning("could not make the namespace's budget for balloons",
                            namespace=namespace, error=f"{exc.status} {api_message(exc)}")
            elif not done.get():
                self._name_taken(namespace, balloons)
        for namespace in wanted.delete:
            meta = have[namespace]["metadata"]
            done = self.executor.do(DeleteBudget(namespace, str(meta["name"]),
                                                 str(meta.get("uid") or "")))
            if (exc := done.api_error) is not None:
                log.warning("could not delete the namespace's budget for balloons",
                            namespace=namespace, error=f"{exc.status} {api_message(exc)}")
            else:
                done.get()
                log.info("budget deleted: namespace switched off, no balloon left",
                         namespace=namespace)
