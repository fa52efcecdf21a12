"""The leader's run and pod streams: our own intake, not kopf's, for the two kinds every
PipelineRun of the cluster multiplies (kube/intake.py glances at each event before decoding it);
kopf keeps the policies, the watch caches the nodes. Each handler hands its object to the
Operator and decides nothing, as the kopf handlers do.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from controller.core.basics import names
from controller.core.model import tekton
from controller.core.placement import mark
from controller.core.replica import glance
from controller.faces.serial import Serial
from controller.kube.client import Kube
from controller.kube.clusterview import Facts, switched_on
from controller.kube.intake import Intake, Obj
from controller.kube.reflector import start_thread
from controller.metrics import Metrics
from controller.operator.runs import Operator

# Threads that run the handlers: kopf's pool here was min(32, cores + 4), six on two cores.
WORKERS = 6
Handler = Callable[[str, Mapping[str, Any]], None]


# What the pod watches ask the API server for, one watch each: our balloon and reservation
# pods; the pods of runs we marked (core/placement/mark.py: Tekton copies the mark to them); the
# pods admission tied before their run was marked (its first ones). The three never overlap, and the
# pods of runs we do not serve are in none: they never reach the leader (bench-scale's "not
# ours": the events of those pods were most of what such a run cost). A pod of an enabled
# namespace that admission left alone (opted out, or made while no replica answered) carries
# no term of ours either way: the leader never acted on one.
POD_SELECTORS = {
    "pods": f"{names.LABEL_MANAGED_BY}={names.APP}",
    "pods-marked": names.LABEL_ANCHORED,
    "pods-tied": names.LABEL_TIED,
}


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return (obj.get("metadata") or {}).get("labels") or {}


def concerns(op: Operator, namespace: str, run_uid: str, labels: Mapping[str, Any]) -> bool:
    """Whether an event of this run, or of one of its pods, can matter here: its namespace
    is enabled (or not known yet), it carries our mark, or something of it is held here.
    The rest of the cluster's runs are dropped before a thread is given to them."""
    facts = op.view.facts
    return (not facts.synced or facts.namespace_enabled(namespace)
            or mark.of(labels, run_uid) or run_uid in op.live or op.index.knows(run_uid))


def may_concern(op: Operator, seen: glance.Glance) -> bool:
    """`concerns`, conservatively, from a glance at an event not yet decoded."""
    facts = op.view.facts
    return not facts.synced or glance.may_concern(
        seen, facts.namespace_enabled, lambda uid: uid in op.live or op.index.knows(uid))


class Streams:
    def __init__(self, operator: Operator, kube: Kube, timeout: float,
                 metrics: Metrics | None = None, workers: int = WORKERS) -> None:
        self.operator = operator
        self.kube = kube
        operator.submit = self.submit_run
        self.work: Serial[tuple[Handler, str, Mapping[str, Any]]] = Serial(
            lambda e: e[0](e[1], e[2]), workers, "handler", metrics)
        # Always decoded: runs and pods carrying our mark (a run anchored before its namespace
        # opted out), and our own pods.
        marked = (glance.marker(names.LABEL_ANCHORED),)
        pod_markers = (*marked, glance.marker(names.LABEL_MANAGED_BY, names.APP),
                       glance.marker(names.LABEL_TIED))
        ours = functools.partial(may_concern, operator)
        self.intakes = [
            Intake("pipelineruns", kube.custom.list_cluster_custom_object,
                   (tekton.GROUP, tekton.VERSION, "pipelineruns"), self._to(self.on_run),
                   ours, markers=marked, metrics=metrics, timeout=timeout),
            *(Intake(name, kube.core.list_pod_for_all_namespaces, (), self._to(self.on_pod),
                     ours, markers=pod_markers, metrics=metrics,
                     timeout=timeout, label_selector=selector)
              for name, selector in POD_SELECTORS.items()),
        ]

    def on_facts(self, old: Facts, new: Facts) -> None:
        """A namespace switched on while this replica leads: its runs are listed once and each
        looked at, on the queue (a failed list is retried there). The run watch drops the
        events of namespaces not enabled before decoding them, and the view learns of a label
        on a watch of its own: a run whose event came before the view knew its namespace (made
        just after the label, or before it) would otherwise wait for its next event, and a
        pending or hand-made run may have none: it would wait silently."""
        for namespace in switched_on(old, new):
            self.work.put(f"namespace/{namespace}", (self.on_switched_on, "SWITCHED_ON",
                                                     {"metadata": {"name": namespace}}))

    def on_switched_on(self, _: str, namespace: Mapping[str, Any]) -> None:
        for body in self.kube.list_pipelineruns(namespace["metadata"]["name"]):
            uid = str((body.get("metadata") or {}).get("uid") or "")
            self.submit_run(uid, body, True)

    def submit_run(self, uid: str, body: Mapping[str, Any], listed: bool) -> None:
        """A look at a run (the resync's, or a nudge: Operator.nudge): on the queue under the
        run's key, behind (never instead of) an event of the run already waiting."""
        # The body itself, never a copy: a look at a live run checks it is still the one the
        # live runs hold (Operator.look), by identity.
        self.work.put(uid, (self.on_resync, "LISTED" if listed else "RESYNC", body),
                      replace=False)

    def _to(self, handler: Handler) -> Callable[[str, Obj], None]:
        def put(kind: str, obj: Obj) -> None:
            meta = obj.get("metadata") or {}
            key = str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}")
            self.work.put(key, (handler, kind, obj))
        return put

    def start(self) -> None:
        self.work.start()
        for intake in self.intakes:
            start_thread(intake.run, f"intake-{intake.name}")

    def stop(self) -> None:
        for intake in self.intakes:
            intake.stop()
        self.work.stop()

    # -- handlers ---------------------------------------------------------------------------

    def on_resync(self, kind: str, body: Mapping[str, Any]) -> None:
        self.operator.look(body, listed=kind == "LISTED")

    def on_run(self, kind: str, body: Mapping[str, Any]) -> None:
        meta = body.get("metadata") or {}
        op = self.operator
        if not concerns(op, str(meta.get("namespace") or ""), str(meta.get("uid") or ""),
                           _labels(body)):
            return
        if kind == "DELETED":
            op.forget_run(body)
        else:
            op.run_event(body)

    def on_pod(self, kind: str, pod: Mapping[str, Any]) -> None:
        labels, op, deleted = _labels(pod), self.operator, kind == "DELETED"
        if labels.get(names.LABEL_MANAGED_BY) == names.APP:
            component = labels.get(names.LABEL_COMPONENT)
            if component == names.COMPONENT_BALLOON:
                op.settled.on_balloon_pod(pod, deleted)  # before the index learns of it
                op.placement.on_balloon_pod(pod, deleted=deleted)  # the index files it
                op.anchors.on_balloon_pod(pod, deleted=deleted)
                op.gates.on_balloon_pod(pod, deleted=deleted)
                op.on_run_pod(pod)
            elif component == names.COMPONENT_RESERVATION:
                op.settled.touch_labelled(pod)
                op.on_room_pod(pod, deleted=deleted)
            return
        run = tekton.task_run_pod_run(labels)
        namespace = str((pod.get("metadata") or {}).get("namespace") or "")
        if run is not None and concerns(op, namespace, run.uid, labels):
            op.placement.on_task_pod(pod, deleted=deleted)
            op.gates.on_task_pod(pod, deleted=deleted)
            op.on_run_pod(pod)
