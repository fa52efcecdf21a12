"""Where balloons went: Anchored and AnchorMoved as they happen, misplaced pods.

Fed by the pod watches through the PodIndex. The operator's idea of a run's anchor follows its
balloon pod: when the pod is replaced (moved by us off an unavailable node, evicted, preempted,
or garbage-collected with its deleted node) and the new one is bound elsewhere, the anchor is
the new node, and pods bound beside the old one were not misplaced.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from controller.core.admission import affinity
from controller.core.basics import names
from controller.core.basics.actions import AnnotateBalloon, Say
from controller.core.basics.notices import Notice
from controller.core.basics.times import parse_time
from controller.core.model import tekton
from controller.core.model.pods import HOSTNAME, scheduled_condition
from controller.core.placement import anchor, balloon
from controller.core.placement.memory import BoundPod, Move, RunMemory
from controller.kube.client import Kube
from controller.kube.podindex import PodIndex
from controller.metrics import Metrics
from controller.operator.executor import Executor, pipelinerun_ref
from controller.operator.headroom import Warming
from controller.operator.memory import Later, Memories

# Seconds a move seen before the old balloon pod's deletion waits for it (which says why).
MOVE_GRACE = 10.0

# The DisruptionTarget condition's reasons (k8s.io/api/core/v1): how a balloon pod went.
GONE_BECAUSE = {
    "EvictionByEvictionAPI": "evicted",
    "PreemptionByScheduler": "preempted",
    "DeletionByTaintManager": "its node's NoExecute taint",
    "DeletionByPodGC": "its node was deleted",
    "TerminationByKubelet": "ended by its kubelet",
}


def gone_because(pod: Mapping[str, Any]) -> str:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "DisruptionTarget":
            return GONE_BECAUSE.get(str(cond.get("reason")), str(cond.get("reason")))
    return "its pod was deleted"


class Placement:
    def __init__(
        self,
        kube: Kube,
        metrics: Metrics,
        executor: Executor,
        index: PodIndex,
        memory: Memories,
        balloon_of: Callable[[str, str], Mapping[str, Any] | None] | None = None,
        warming: Warming | None = None,
        later: Later | None = None,
    ) -> None:
        self.kube = kube
        # A move not explained yet is said after MOVE_GRACE, as work put for later under the
        # run's key (Operator.later); None: by whoever calls flush_moves (unit tests).
        self.later = later
        self.warming = warming
        # The balloon StatefulSet by namespace and name: the operator's watch cache.
        self.balloon_of = balloon_of or kube.get_statefulset
        self.metrics = metrics
        self.executor = executor
        self.index = index
        # The run's memory (core/placement/memory.py): moving (node it left, why: said in
        # AnchorMoved once the new pod is bound), asked (its balloon pods were listed once),
        # annotated (the node this process annotated its StatefulSet with: the balloons cache
        # shows the annotation only once its watch brings it, and a pod event before that must
        # not take the run for anchored anew: a second Anchored count, policy write, patch),
        # unjudged (its pods bound while its new balloon pod was not yet: judged once it is),
        # unexplained (a move seen before the old pod's deletion was), misplaced (its pods said
        # misplaced).
        self.memory = memory

    def node_of(self, namespace: str, run_uid: str) -> str | None:
        """Where the run's balloon pod is bound, as the pod watch reported it. Asked of the API
        server at most once per run, for a run whose balloon pod the watch has not reported
        (the moments after a restart, or a pod not made yet): a run that waits for its anchor
        is checked every few seconds, and must not cost a LIST each time."""
        seen = self.index.balloon(run_uid)
        if seen is not None:
            return seen.node or None
        if self.memory.set(run_uid, asked=True).asked:
            return None
        for pod in self.kube.list_balloon_pods(namespace, run_uid):
            node = (pod.get("spec") or {}).get("nodeName")
            if node:
                return str(node)
        return None

    def forget(self, run_uid: str) -> None:
        self.index.forget(run_uid)
        self.memory.reset(run_uid, "moving", "asked", "annotated", "unjudged", "unexplained")

    def on_balloon_pod(self, pod: Mapping[str, Any], deleted: bool = False) -> None:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        uid, left = self.index.balloon_event(pod, deleted)
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        if deleted:
            # A run not held any more (its balloon deleted, the run forgotten) moves nowhere.
            if node and self.index.knows(uid):

                def explained(m: RunMemory) -> RunMemory:
                    if m.unexplained is not None and m.unexplained.left == node:
                        return replace(m, unexplained=None)
                    return m if m.moving is not None else replace(
                        m, moving=(node, gone_because(pod)))

                move = self.memory.update(uid, explained).unexplained
                if move is not None and move.left == node:
                    self._tell_moved(uid, move.run, node, move.to, gone_because(pod))
            return
        if not node or meta.get("deletionTimestamp"):
            # Waiting for a node (core/placement/waiting.py decides when that is worth saying), or
            # on its way out: the anchor is where its successor will be bound.
            return
        ns = str(meta.get("namespace") or "")
        ref = pipelinerun_ref(str(labels.get(names.LABEL_RUN) or ""), ns, uid)
        before = self.memory.update(uid, lambda m: replace(
            m, unjudged=(), moving=None if m.moving and m.moving[0] != node else m.moving))
        moving, unjudged = before.moving, list(before.unjudged)
        sts_name = balloon.balloon_name(uid)
        # The cache may not show yet a StatefulSet made a moment ago (a replica that has just
        # come to lead): taken for gone, the run would never be said Anchored. Asked then.
        sts = self.balloon_of(ns, sts_name) or self.kube.get_statefulset(ns, sts_name)
        annotations = (sts or {}).get("metadata", {}).get("annotations") or {}
        anchored = str(annotations.get(names.ANNOTATION_ANCHORED_NODE) or "")
        if self.memory.get(uid).annotated == node:
            anchored = node
        if sts is None or anchored == node:
            self._judge(uid, unjudged)
            return
        if moving is not None and moving[0] != node:
            self._tell_moved(uid, ref, moving[0], node, moving[1])
        elif anchored or (left and left != node):
            # kopf handles each pod's events in a worker of its own, so the old pod's deletion,
            # which says why it went, may come after its successor's binding: the move is said
            # then, or after a grace with what is known (flush_moves).
            self.memory.set(uid, unexplained=Move(anchored or str(left), node, ref,
                                                  time.monotonic()))
            if self.later is not None:
                self.later(uid, "move", lambda: self.flush_moves(0.0, only=uid), MOVE_GRACE)
        else:
            self._observe_time_to_anchor(annotations, pod)
            run_name = str(labels.get(names.LABEL_RUN) or "")
            warmth = (self.warming.anchored(ns, run_name, annotations, node)
                      if self.warming else "")
            self.executor.do(Say(ref, Notice(
                "Anchored", f"the run's pods go to node {node}" + (f": {warmth}" if warmth
                                                                   else ""),
                warning=False), (uid, node)))
        self.executor.do(AnnotateBalloon(ns, sts_name,
                                         {names.ANNOTATION_ANCHORED_NODE: node})).get()
        self.memory.set(uid, annotated=node)
        self._judge(uid, unjudged)

    def _tell_moved(self, uid: str, ref: dict[str, Any], left: str, node: str, why: str) -> None:
        self.metrics.anchor_moves.labels(reason=_label(why)).inc()
        self.executor.do(Say(ref, anchor.moved_notice(left, node, why), (uid, "moved", node)))

    def flush_moves(self, grace: float = MOVE_GRACE, only: str | None = None) -> None:
        """Moves whose old pod's deletion was never seen (a watch that restarted), said after
        `grace` seconds with what is known (`only`: that run's)."""
        now = time.monotonic()

        def due(m: RunMemory) -> bool:
            return m.unexplained is not None and now - m.unexplained.since >= grace

        for uid in [only] if only is not None else self.memory.runs(due):
            move = self.memory.update(uid, lambda m: replace(m, unexplained=None) if due(m)
                                      else m).unexplained
            if move is None or now - move.since < grace:  # said meanwhile by the deletion
                continue
            self._tell_moved(uid, move.run, move.left, move.to, "its pod was replaced")

    def _judge(self, run_uid: str, pods: list[BoundPod]) -> None:
        """Pods bound while the run's new balloon pod was not: misplaced unless beside an
        anchor of the run (the new one is in the index by now)."""
        anchors = self.index.anchored_ever(run_uid)
        for pod in pods:
            if pod.node not in anchors:
                self._misplace(pod, run_uid, anchors[-1])

    def _observe_time_to_anchor(
        self, annotations: Mapping[str, Any], pod: Mapping[str, Any]
    ) -> None:
        run_created = parse_time(annotations.get(names.ANNOTATION_RUN_CREATED))
        bound = parse_time(scheduled_condition(pod).get("lastTransitionTime")) or datetime.now(UTC)
        if run_created is not None:
            seconds = max(0.0, (bound - run_created).total_seconds())
            self.metrics.run_to_anchor_seconds.observe(seconds)

    def on_task_pod(self, pod: Mapping[str, Any], deleted: bool = False) -> None:
        """Records the pod; counts one of an anchored run bound where its run never was."""
        run_uid = self.index.task_pod_event(pod, deleted)
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        node = spec.get("nodeName")
        if deleted or run_uid is None or not node or meta.get("uid") in self.memory.get(
                run_uid).misplaced:
            return
        ours = affinity.balloon_terms(spec)
        if not ours or ours[0].get("topologyKey") != HOSTNAME:
            return
        anchors = self.index.anchored_ever(run_uid)
        if not anchors:
            known = self.node_of(str(meta.get("namespace") or ""), run_uid)
            anchors = [known] if known else []
        if not anchors or node in anchors:
            return
        # The pod watch delivers different pods' events in no fixed order: a task pod bound
        # beside a new balloon can come before the balloon's own event. Ask before saying.
        namespace = str(meta.get("namespace") or "")
        live = self.kube.list_balloon_pods(namespace, run_uid)
        if node in {str((p.get("spec") or {}).get("nodeName") or "") for p in live}:
            return
        run = tekton.task_run_pod_run(meta.get("labels") or {})
        bound = BoundPod(str(meta.get("uid") or ""), str(meta.get("name") or ""), namespace,
                         run.name if run else "", str(node))
        binding = [str((p.get("metadata") or {}).get("uid") or "") for p in live
                   if not (p.get("spec") or {}).get("nodeName")
                   and not (p.get("metadata") or {}).get("deletionTimestamp")]
        if binding:
            # The scheduler binds a pod beside the balloon it has assumed on a node before that
            # balloon's own binding is written: judge the pod once the balloon is bound.
            self.memory.update(run_uid, lambda m: replace(m, unjudged=(*m.unjudged, bound)))
            seen = self.index.balloon(run_uid)
            if seen is not None and seen.uid in binding and seen.node:  # its event came first
                late = self.memory.set(run_uid, unjudged=()).unjudged
                self._judge(run_uid, list(late))
            return
        self._misplace(bound, run_uid, anchors[-1])

    def _misplace(self, pod: BoundPod, run_uid: str, anchor_node: str) -> None:
        self.memory.update(run_uid, lambda m: replace(m, misplaced=m.misplaced | {pod.uid}))
        self.metrics.misplaced_pods.inc()
        self.executor.do(Say(
            pipelinerun_ref(pod.run_name, pod.namespace, run_uid),
            Notice("PodMisplaced",
                   f"pod {pod.name} runs on {pod.node}, its anchor on {anchor_node}"),
            pod.uid,
        ))


def _label(why: str) -> str:
    """A bounded metric label from a reason text."""
    for key in ("cordoned", "NotReady", "deleted", "tainted", "evicted", "preempted"):
        if key in why:
            return key
    return "replaced"
