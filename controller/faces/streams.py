"""The leader's run and pod streams: our own intake, not kopf's, for the two kinds every
PipelineRun of the cluster multiplies (kube/intake.py glances at each event before decoding it);
kopf keeps the policies, the watch caches the nodes. Each handler hands its object to the
Operator and decides nothing, as the kopf handlers do.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from controller.core.basics import names
from controller.core.model import assistant, tekton
from controller.core.placement import mark
from controller.core.replica import glance
from controller.faces import placeholders
from controller.faces.serial import Serial
from controller.kube import errors
from controller.kube.client import Kube
from controller.kube.clusterview import Facts, switched_on
from controller.kube.fencing import NotLeading
from controller.kube.intake import Intake, Obj
from controller.kube.reflector import start_thread
from controller.metrics import Metrics
from controller.operator.runs import Operator

# Threads that run the handlers: kopf's pool here was min(32, cores + 4), six on two cores.
WORKERS = 6
Handler = Callable[[str, Mapping[str, Any]], None]
# One key's work: its calls in the order their slots first came, each slot (the run's own
# events, one of its pods', ...) holding its newest call, and whether that call replaces one
# waiting in its slot (a watch event does; a resync's look does not).
Call = tuple[Handler, str, Mapping[str, Any]]
Work = tuple[tuple[Hashable, Call, bool], ...]


def merge(waiting: Work, newer: Work) -> Work:
    """A key's newer work joined to what waits: one call per slot, the newest, except that a
    call that does not replace (a look) leaves the waiting one in its slot."""
    slots = {slot: (call, replaces) for slot, call, replaces in waiting}
    for slot, call, replaces in newer:
        if replaces or slot not in slots:
            slots[slot] = (call, replaces)
    return tuple((slot, call, replaces) for slot, (call, replaces) in slots.items())


def work(slot: Hashable, handler: Handler, kind: str, obj: Mapping[str, Any],
         replaces: bool = True) -> Work:
    return ((slot, (handler, kind, obj), replaces),)


def handle(work_: Work) -> None:
    """Each call of a key's work, in order. One that fails holds up none after it (a pod's
    deletion must not wait out the backoff of its run's failing event): each is made, and
    then the failure the queue may mend, if any, is raised for it to try the work again
    (every call may be replayed)."""
    failed: list[Exception] = []
    for _, (handler, kind, obj), _ in work_:
        try:
            handler(kind, obj)
        except NotLeading:
            raise  # this replica stops acting
        except Exception as exc:
            failed.append(exc)
    if failed:
        raise next((exc for exc in failed if errors.classify(exc).retry), failed[0])


# What the pod watches ask the API server for, one watch each: our balloon and reservation
# pods; the pods of runs we marked (core/placement/mark.py: Tekton copies the mark to them); the
# pods admission tied before their run was marked (its first ones); the placeholders of Tekton's
# assistant (one per run or claim; the glance drops those of namespaces not enabled). The four
# do not overlap, and the TaskRun pods of runs we do not serve are in none: they never reach the
# leader (bench-scale's "not ours": the events of those pods were most of what such a run cost).
# A pod of an enabled namespace that admission left alone (opted out, or made while no replica
# answered) carries no term of ours either way: the leader never acted on one.
POD_SELECTORS = {
    "pods": f"{names.LABEL_MANAGED_BY}={names.APP}",
    "pods-marked": names.LABEL_ANCHORED,
    "pods-tied": names.LABEL_TIED,
    "pods-placeholders": f"{tekton.LABEL_COMPONENT}={tekton.AFFINITY_ASSISTANT_COMPONENT}",
}


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _run_uid(labels: Mapping[str, Any]) -> str:
    """The uid of the run a pod belongs to: our pods name it, Tekton's TaskRun pods carry it."""
    ours = labels.get(names.LABEL_RUN_UID)
    if ours:
        return str(ours)
    run = tekton.task_run_pod_run(labels)
    return run.uid if run is not None else ""


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
        operator.enqueue = self.enqueue
        # One key per run: its own events, its pods' and the looks at it are handled one at a
        # time, in order, each object's newest (a pod not of a run known by uid: its own key).
        self.work: Serial[Work] = Serial(handle, workers, "handler", metrics, merge=merge)
        # Always decoded: runs and pods carrying our mark (a run anchored before its namespace
        # opted out), and our own pods.
        marked = (glance.marker(names.LABEL_ANCHORED),)
        pod_markers = (*marked, glance.marker(names.LABEL_MANAGED_BY, names.APP),
                       glance.marker(names.LABEL_TIED))
        ours = functools.partial(may_concern, operator)
        runs, pods = self._to(self.on_run, of_run=False), self._to(self.on_pod, of_run=True)
        self.intakes = [
            Intake("pipelineruns", kube.custom.list_cluster_custom_object,
                   (tekton.GROUP, tekton.VERSION, "pipelineruns"), runs,
                   ours, markers=marked, metrics=metrics, timeout=timeout),
            *(Intake(name, kube.core.list_pod_for_all_namespaces, (), pods,
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
            self.work.put(f"namespace/{namespace}", work(
                "list", self.on_switched_on, "SWITCHED_ON", {"metadata": {"name": namespace}}))

    def on_switched_on(self, _: str, namespace: Mapping[str, Any]) -> None:
        for body in self.kube.list_pipelineruns(namespace["metadata"]["name"]):
            uid = str((body.get("metadata") or {}).get("uid") or "")
            self.submit_run(uid, body, True)

    def submit_run(self, uid: str, body: Mapping[str, Any], listed: bool) -> None:
        """A look at a run (the resync's, or a nudge: Operator.nudge): on the queue under the
        run's key, behind (never instead of) an event of the run already waiting."""
        # The body itself, never a copy: a look at a live run checks it is still the one the
        # live runs hold (Operator.look), by identity.
        self.work.put(uid, work("run", self.on_resync, "LISTED" if listed else "RESYNC", body,
                                replaces=False))

    def enqueue(self, key: str, slot: Hashable, act: Callable[[], None], seconds: float) -> None:
        """Work of a run (Operator.soon) under its key: now, or in `seconds`; one already
        waiting in its slot is not replaced."""
        item = work(slot, lambda _kind, _obj: act(), "LOOK", {}, replaces=False)
        if seconds > 0:
            self.work.put_after(key, item, seconds)
        else:
            self.work.put(key, item)

    def _to(self, handler: Handler, of_run: bool) -> Callable[[str, Obj], None]:
        """Puts a watch event on the queue under its run's key (`of_run`: the object is a pod,
        keyed by the run its labels name), in the slot of the object itself."""
        def put(kind: str, obj: Obj) -> None:
            meta, labels = obj.get("metadata") or {}, _labels(obj)
            own = str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}")
            run = (_run_uid(labels) or self.operator.live.named(
                str(meta.get("namespace") or ""), assistant.placeholder_run(labels))
                   ) if of_run else ""
            self.work.put(run or own, work(("pod", own) if of_run else "run", handler, kind, obj))
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
        if run_name := assistant.placeholder_run(labels):
            self.on_placeholder(pod, run_name, deleted)
            return
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

    def on_placeholder(self, pod: Mapping[str, Any], run_name: str, deleted: bool) -> None:
        """A placeholder of Tekton's assistant (a namespace enabled: the glance dropped the
        others; the resync finds those: faces/placeholders.py)."""
        placeholders.seen(self.operator, self.kube, self.submit_run, pod, run_name, deleted)
