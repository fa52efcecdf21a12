"""Where balloons went, the adapter: a balloon pod's or a task pod's event read into a view,
planned (core/placement/binding.py, pure: Anchored, AnchorMoved, the StatefulSet annotated,
PodMisplaced) and applied by the run's applier (operator/apply.py).

Fed by the pod watches through the PodIndex, on the work queue under the run's key: one event
of a run at a time. Building a view reads only (the pod index, the run's memory, the balloons
cache, and what the plan asks of the API server); what the run's memory keeps changes as the
plan's Remember steps.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import structlog

from controller.core.admission import affinity
from controller.core.basics import names
from controller.core.basics.actions import DeleteBudget, MakeBudget, Say
from controller.core.basics.notices import Notice
from controller.core.basics.times import parse_time
from controller.core.model import tekton
from controller.core.model.pods import HOSTNAME, scheduled_condition
from controller.core.placement import balloon, binding, budget
from controller.core.placement.binding import MOVE_GRACE, Ask, BindPlan, gone_because
from controller.core.placement.memory import BoundPod
from controller.core.placement.runplan import reference
from controller.kube.caches import Caches
from controller.kube.client import Kube, api_message
from controller.kube.clusterview import Facts
from controller.kube.podindex import PodIndex
from controller.metrics import Metrics
from controller.operator.apply import Applier
from controller.operator.executor import Executor
from controller.operator.headroom import Warming
from controller.operator.memory import Later, Memories

__all__ = ["MOVE_GRACE", "Budgets", "Placement", "gone_because"]
log = structlog.get_logger(__name__)


class Placement:
    def __init__(
        self,
        kube: Kube,
        metrics: Metrics,
        applier: Applier,
        index: PodIndex,
        memory: Memories,
        balloon_of: Callable[[str, str], Mapping[str, Any] | None] | None = None,
        warming: Warming | None = None,
        later: Later | None = None,
    ) -> None:
        self.kube = kube
        # A move not explained yet is looked at again after MOVE_GRACE (its plan's
        # requeue_after), as work put for later under the run's key (Operator.later); None: by
        # whoever calls flush_moves (unit tests).
        self.later = later
        self.warming = warming
        # The balloon StatefulSet by namespace and name: the operator's watch cache.
        self.balloon_of = balloon_of or kube.get_statefulset
        self.metrics = metrics
        self.applier = applier
        self.index = index
        # The run's memory (core/placement/memory.py): moving (node it left, why: said in
        # AnchorMoved once the new pod is bound), asked (its balloon pods were listed once),
        # annotated (the node its StatefulSet was annotated with by this process: the balloons
        # cache shows the annotation only once its watch brings it, and a pod event before that
        # must not take the run for anchored anew), unjudged (its pods bound while its new
        # balloon pod was not yet), unexplained (a move seen before the old pod's deletion
        # was), misplaced (its pods said misplaced).
        self.memory = memory

    def node_of(self, namespace: str, run_uid: str) -> str | None:
        """Where the run's balloon pod is bound, as the pod watch reported it; asked of the API
        server at most once per run, for a run whose balloon pod the watch has not reported (a
        run that waits for its anchor is checked every few seconds, and must not cost a LIST
        each time). For Operator.reconcile_run's Ask.BALLOON_NODE: the `asked` mark is set here,
        as part of the read (its plan, core/placement/runplan.py, has no Remember for it yet);
        a task pod's plan remembers it as a Remember step instead (_listed_node)."""
        node, listed = self._listed_node(namespace, run_uid)
        if listed:
            self.memory.set(run_uid, asked=True)
        return node

    def _listed_node(self, namespace: str, run_uid: str) -> tuple[str | None, bool]:
        """node_of's read alone; and whether it asked the API server (to be remembered)."""
        seen = self.index.balloon(run_uid)
        if seen is not None:
            return seen.node or None, False
        if self.memory.get(run_uid).asked:
            return None, False
        for pod in self.kube.list_balloon_pods(namespace, run_uid):
            if node := (pod.get("spec") or {}).get("nodeName"):
                return str(node), True
        return None, True

    def forget(self, run_uid: str) -> None:
        self.index.forget(run_uid)
        self.memory.reset(run_uid, *binding.FORGOTTEN)

    # -- balloon pods ---------------------------------------------------------------------------

    def on_balloon_pod(self, pod: Mapping[str, Any], deleted: bool = False) -> None:
        uid, left = self.index.balloon_event(pod, deleted)  # the watch's index files it first
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        ns = str(meta.get("namespace") or "")
        view = binding.BalloonView(
            uid, str(labels.get(names.LABEL_RUN) or ""), ns,
            str((pod.get("spec") or {}).get("nodeName") or ""), deleted,
            bool(meta.get("deletionTimestamp")), gone_because(pod), self.index.knows(uid), left,
            self.memory.get(uid), tuple(self.index.anchored_ever(uid)), time.monotonic(),
            parse_time(scheduled_condition(pod).get("lastTransitionTime")) or datetime.now(UTC))
        while (planned := binding.on_balloon(view)).ask is not None:
            view = replace(view, asked=view.asked | {planned.ask})
            if planned.ask is Ask.BALLOON:
                view = replace(view, statefulset=self.balloon_of(ns, balloon.balloon_name(uid)))
            elif planned.ask is Ask.STATEFULSET:
                view = replace(view, statefulset=self.kube.get_statefulset(
                    ns, balloon.balloon_name(uid)))
            elif planned.ask is Ask.WARM and self.warming is not None:
                annotations = ((view.statefulset or {}).get("metadata") or {}).get(
                    "annotations") or {}
                view = replace(view, warm=self.warming.read(ns, annotations, view.node))
        if planned.anchor_seconds is not None:
            self.metrics.run_to_anchor_seconds.observe(planned.anchor_seconds)
        self._apply(reference(view.run_name, ns, uid), planned)

    def flush_moves(self, grace: float = MOVE_GRACE, only: str | None = None) -> None:
        """Moves whose old pod's deletion was never seen (a watch that restarted), said after
        `grace` seconds with what is known (`only`: that run's)."""
        now = time.monotonic()
        for uid in [only] if only is not None else self.memory.runs(lambda m: m.unexplained):
            move = self.memory.get(uid).unexplained
            if move is not None:
                self._apply(move.run, binding.overdue(uid, self.memory.get(uid), now, grace))

    # -- task pods ------------------------------------------------------------------------------

    def on_task_pod(self, pod: Mapping[str, Any], deleted: bool = False) -> None:
        """Records the pod; says one of an anchored run bound where its run never was."""
        run_uid = self.index.task_pod_event(pod, deleted)  # the watch's index files it first
        if run_uid is None:
            return
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        namespace = str(meta.get("namespace") or "")
        run = tekton.task_run_pod_run(meta.get("labels") or {})
        ours = affinity.balloon_terms(spec)
        bound = BoundPod(str(meta.get("uid") or ""), str(meta.get("name") or ""), namespace,
                         run.name if run else "", str(spec.get("nodeName") or ""))
        asked: dict[Ask, Any] = {}
        while (planned := binding.on_task_pod(self._task_view(
                run_uid, bound, deleted, bool(ours) and ours[0].get("topologyKey") == HOSTNAME,
                asked))).ask is not None:
            if planned.ask is Ask.BALLOON_NODE:
                asked[Ask.BALLOON_NODE] = self._listed_node(namespace, run_uid)
            else:
                asked[Ask.BALLOON_PODS] = tuple(
                    (str((p.get("metadata") or {}).get("uid") or ""),
                     str((p.get("spec") or {}).get("nodeName") or ""),
                     bool((p.get("metadata") or {}).get("deletionTimestamp")))
                    for p in self.kube.list_balloon_pods(namespace, run_uid))
        self._apply(reference(bound.run_name, namespace, run_uid), planned)

    def _task_view(self, run_uid: str, pod: BoundPod, deleted: bool, ours: bool,
                   asked: Mapping[Ask, Any]) -> binding.TaskView:
        """Read anew after each answer: a balloon pod's event may have been filed meanwhile."""
        seen = self.index.balloon(run_uid)
        known, listed = asked.get(Ask.BALLOON_NODE, (None, False))
        return binding.TaskView(
            run_uid, pod, deleted, ours, self.memory.get(run_uid),
            tuple(self.index.anchored_ever(run_uid)),
            (seen.uid, seen.node) if seen is not None else None, known, listed,
            asked.get(Ask.BALLOON_PODS, ()), frozenset(asked))

    def _apply(self, ref: Mapping[str, Any], planned: BindPlan) -> None:
        if not planned.actions:
            return
        meta = ref["metadata"]
        self.applier.apply(tekton.PipelineRun.from_body(ref), planned.actions)
        if planned.requeue_after is not None and self.later is not None:
            uid = str(meta["uid"])
            self.later(uid, "move", lambda: self.flush_moves(0.0, only=uid),
                       planned.requeue_after)


# -- the namespace's PodDisruptionBudget -----------------------------------------------------------
# What keeps balloons in place through a drain: each namespace with balloons has one
# (core/placement/budget.py). Made with the namespace's first balloon (its run's plan: MakeBudget,
# judged by apply.py), made again by the resync if it went, deleted once the namespace is switched
# off and its last balloon is gone. A budget of another's holding its name is said on the
# namespace's runs.

class Budgets:
    def __init__(self, executor: Executor, caches: Caches | None, memory: Memories) -> None:
        self.executor = executor
        self.caches = caches
        self.memory = memory  # the namespaces whose budget is known made

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
                run = reference(str(labels.get(names.LABEL_RUN) or ""), namespace, uid)
                self.executor.do(Say(run, notice, uid))

    def tend(self, balloons: Sequence[Mapping[str, Any]], facts: Facts) -> None:
        """A resync round: budgets made where a balloon has none, deleted where no longer
        needed; nothing asked of the API server when all is well (the budgets' watch cache)."""
        cached = self.caches.budgets() if self.caches is not None else None
        if cached is None or not facts.synced:
            return
        have = {str(b["metadata"]["namespace"]): b for b in cached}
        self.memory.keep_budgets(have, only=True)
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
