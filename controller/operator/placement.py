"""Where balloons went: Anchored and BalloonUnschedulable as they happen, misplaced pods.

Fed by the pod watches; keeps the node of each run's balloon pod in memory, asking the API
server when it does not know (after a restart, before the balloon's pod event arrived).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from controller.core import affinity, balloon, names, tekton
from controller.core.pods import HOSTNAME, scheduled_condition
from controller.core.reconcile import Notice
from controller.core.times import parse_time
from controller.kube.client import Kube
from controller.metrics import Metrics
from controller.operator.notify import Notifier, pipelinerun_ref


class Placement:
    def __init__(self, kube: Kube, metrics: Metrics, notifier: Notifier) -> None:
        self.kube = kube
        self.metrics = metrics
        self.notifier = notifier
        self._anchors: dict[str, str] = {}  # run uid -> node of its balloon pod
        self._misplaced: set[str] = set()
        self._lock = threading.Lock()

    def node_of(self, namespace: str, run_uid: str) -> str | None:
        with self._lock:
            known = self._anchors.get(run_uid)
        if known:
            return known
        for pod in self.kube.list_balloon_pods(namespace, run_uid):
            node = (pod.get("spec") or {}).get("nodeName")
            if node:
                return str(node)
        return None

    def forget(self, run_uid: str) -> None:
        with self._lock:
            self._anchors.pop(run_uid, None)

    def on_balloon_pod(self, pod: Mapping[str, Any], deleted: bool = False) -> None:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        uid = labels.get(names.LABEL_RUN_UID, "")
        node = (pod.get("spec") or {}).get("nodeName")
        ns = meta.get("namespace", "")
        run_name = labels.get(names.LABEL_RUN, "")
        if deleted:
            with self._lock:
                if self._anchors.get(uid) == node:
                    self._anchors.pop(uid, None)
            return
        ref = pipelinerun_ref(run_name, ns, uid)
        if not node:
            cond = scheduled_condition(pod)
            if cond.get("reason") == "Unschedulable":
                self.metrics.balloon_problems.labels(reason="unschedulable").inc()
                self.notifier.tell(
                    ref,
                    Notice(
                        "BalloonUnschedulable",
                        f"no node fits the run's anchor: {cond.get('message', '')}",
                    ),
                    uid,
                )
            return
        with self._lock:
            self._anchors[uid] = node
        sts_name = balloon.balloon_name(uid)
        sts = self.kube.get_statefulset(ns, sts_name)
        if (
            sts is None
            or (sts["metadata"].get("annotations") or {}).get(names.ANNOTATION_ANCHORED_NODE)
            == node
        ):
            return
        run_created = parse_time(
            (sts["metadata"].get("annotations") or {}).get(names.ANNOTATION_RUN_CREATED)
        )
        bound_at = parse_time(scheduled_condition(pod).get("lastTransitionTime")) or datetime.now(
            UTC
        )
        if run_created is not None:
            self.metrics.run_to_anchor_seconds.observe(
                max(0.0, (bound_at - run_created).total_seconds())
            )
        self.notifier.tell(
            ref, Notice("Anchored", f"the run's pods go to node {node}", warning=False), (uid, node)
        )
        self.kube.annotate_statefulset(ns, sts_name, {names.ANNOTATION_ANCHORED_NODE: node})

    def on_task_pod(self, pod: Mapping[str, Any]) -> None:
        """Count a pod of an anchored run that was bound elsewhere than its balloon."""
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        node = spec.get("nodeName")
        run = tekton.task_run_pod_run(meta.get("labels") or {})
        if not node or run is None or meta.get("uid") in self._misplaced:
            return
        ours = affinity.balloon_terms(spec)
        if not ours or ours[0].get("topologyKey") != HOSTNAME or not run.uid:
            return
        anchor = self.node_of(meta.get("namespace", ""), run.uid)
        if anchor is None or anchor == node:
            return
        self._misplaced.add(meta.get("uid", ""))
        self.metrics.misplaced_pods.inc()
        self.notifier.tell(
            pipelinerun_ref(run.name, meta.get("namespace", ""), run.uid),
            Notice(
                "PodMisplaced", f"pod {meta.get('name')} runs on {node}, its anchor on {anchor}"
            ),
            meta.get("uid"),
        )
