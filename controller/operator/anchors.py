"""Runs held up, and what is said of them: anchors on nodes that go away, pods that wait for a
node, balloons with no pod.

A node event (the node index, kube/nodeindex.py) concerns the runs anchored there. Each is
looked at on the work queue under its key: its anchor as the indexes show it, planned by
core/placement/anchorplan.py (whether the node can still keep it and, if not, whether it moves:
its balloon pod is deleted and Placement says AnchorMoved once the new one is bound; or it
stays, said on the run and looked at again in a few seconds), with the few reads the plan asks
for, and applied by operator/apply.Applier. A move is confirmed with the run's pods as the API
server has them: a new leader's pod index may not show a task yet.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import structlog

from controller.core.basics import names
from controller.core.basics.times import parse_time
from controller.core.capacity import nodes
from controller.core.model import pods, tekton
from controller.core.placement import anchor, anchorplan, waiting
from controller.core.placement.anchorplan import AnchorView, Ask
from controller.core.placement.runplan import reference
from controller.kube.client import ApiError, Kube, api_message
from controller.kube.nodeindex import NodeIndex
from controller.kube.podindex import PodIndex
from controller.metrics import Metrics
from controller.operator.apply import Applier
from controller.operator.memory import Later, Memories, Soon, later
from controller.settings import Settings

log = structlog.get_logger(__name__)


class AnchorGuard:
    def __init__(
        self,
        kube: Kube,
        index: PodIndex,
        nodes: NodeIndex,
        metrics: Metrics,
        applier: Applier,
        memory: Memories,
        soon: Soon | None = None,
    ) -> None:
        self.kube = kube  # read only: claims, volumes, the run's pods
        self.index = index
        self.nodes = nodes  # as the node watch last showed them
        self.metrics = metrics
        self.applier = applier  # every write of a plan (operator/apply.py)
        # RunMemory.blocked_on: the node the run's anchor cannot leave yet.
        self.memory = memory
        # Puts a look at a run's anchor on the leader's work queue, under the run's key, now or
        # in some seconds (Operator.soon); None: looked at in place, and not again.
        self.soon = soon

    def on_node(self, name: str) -> None:
        """The node watch told of a change to the node (the node index holds it now): the
        anchors on it are looked at."""
        for run_uid in self.index.anchored_on(name):
            self._look(run_uid)

    def on_balloon_pod(self, pod: Mapping[str, Any], deleted: bool) -> None:
        """A balloon pod the watch shows bound to a node already known unavailable: its anchor
        is looked at now (after the index files it). A new leader knows the nodes before its
        pod watches replay the cluster, and a node that went NotReady before then says nothing
        more: no heartbeat reaches the guard (core/capacity/nodes.reads)."""
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        if deleted or not node or (pod.get("metadata") or {}).get("deletionTimestamp"):
            return  # a pod on its way out (a move begun) is not looked at again
        told, known = self.nodes.node(node)
        if not told:
            return
        tolerations = (pod.get("spec") or {}).get("tolerations") or ()
        if nodes.unavailable(known, tolerations) is not None:
            uid = str(((pod.get("metadata") or {}).get("labels") or {}).get(names.LABEL_RUN_UID)
                      or "")
            self._look(uid)

    def _look(self, run_uid: str) -> None:
        """The run's anchor looked at: on the queue, under the run's key (a node's event comes
        in the node watch's thread, which never writes), or in place without one."""
        if self.soon is None:
            self.look_at(run_uid)
        else:
            self.soon(run_uid, "anchor", lambda: self.look_at(run_uid), 0.0)

    def look_at(self, run_uid: str) -> None:
        """Read, plan (core/placement/anchorplan.py), apply; looked at again when it says."""
        view = self.view(run_uid)
        while (planned := anchorplan.plan(view)).ask is not None:
            try:
                view = self.read(view, planned.ask)
            except ApiError as exc:  # looked at again in RECHECK seconds
                log.warning("anchor not decided: a read failed", error=api_message(exc),
                            run=run_uid)
                view = replace(view, unread=True)
        pod = view.pod
        run = tekton.PipelineRun.from_body(reference(
            pod.run_name if pod else "", pod.namespace if pod else "", run_uid))
        self.applier.apply(run, planned.actions)
        self.metrics.anchor_blocked.set(len(self.memory.runs(lambda m: m.blocked_on)))
        if planned.requeue_after is not None and self.soon is not None:
            later(self.memory, self.soon, run_uid, "anchor", lambda: self.look_at(run_uid),
                  planned.requeue_after)

    def view(self, run_uid: str) -> AnchorView:
        """The run's anchor as the indexes and the memory have it (reads nothing more)."""
        pod = self.index.balloon(run_uid)
        told, node = self.nodes.node(pod.node) if pod is not None and pod.node else (False, None)
        return AnchorView(run_uid, pod, told, node, self.memory.get(run_uid).blocked_on,
                          tuple(self.index.run_pods(run_uid)))

    def read(self, view: AnchorView, ask: Ask) -> AnchorView:
        """What the plan asked for, read from the API server (it only reads)."""
        pod = view.pod
        assert pod is not None
        if ask is Ask.CLAIMS:
            return replace(view, claims={
                claim: self._mobility(pod.namespace, claim, pod.node) for claim in pod.claims})
        listed = self.kube.list_run_pods(pod.namespace, pod.run_name)
        runs = [tekton.task_run_pod_run((p.get("metadata") or {}).get("labels") or {})
                for p in listed]
        return replace(view, listed=tuple(
            pods.run_pod(p) for p, run in zip(listed, runs, strict=True)
            if run is not None and run.uid in ("", view.run_uid)))

    def _mobility(self, namespace: str, claim: str, node: str) -> anchor.Mobility:
        pvc = self.kube.get_pvc(namespace, claim)
        volume = ((pvc or {}).get("spec") or {}).get("volumeName")
        pv = self.kube.get_pv(str(volume)) if volume else None
        return anchor.claim_mobility(pvc, pv, node)


# -- pods that wait for a node ---------------------------------------------------------------------
# A Warning once past the grace period, and the gauges an alert rule reads: the PodIndex knows
# who waits, core/placement/waiting.plan decides, the Applier says it.

class WaitingPods:
    def __init__(self, settings: Settings, index: PodIndex, metrics: Metrics, applier: Applier,
                 tekton_makes: Callable[[str], Collection[str]] = lambda _: (),
                 later: Later | None = None) -> None:
        self.settings = settings
        self.index = index
        self.metrics = metrics
        self.applier = applier
        # run uid -> the claims Tekton makes for it: a balloon waiting for one waits for Tekton
        self.tekton_makes = tekton_makes
        # Looks at a run again when its next grace ends (Operator.later); None: whoever calls.
        self.later = later
        self._reasons: set[str] = set()

    def look(self, run_uid: str, now: datetime | None = None) -> None:
        """At each event of a run's pods: each pod that waited past its grace is said (once),
        and the run is looked at again when the next grace ends, as work put for later."""
        view = self.view(run_uid, now or datetime.now(UTC))
        if view is None:
            return
        planned = waiting.plan(view)
        if planned.actions:
            self.applier.apply(tekton.PipelineRun.from_body(
                reference(view.run_name, view.namespace, run_uid)), planned.actions)
        if planned.requeue_after is not None and self.later is not None:
            self.later(run_uid, "waiting", lambda: self.look(run_uid), planned.requeue_after)

    def view(self, run_uid: str, now: datetime) -> waiting.WaitingView | None:
        """What the run's waiting pods' plan reads (None: none waits), from the pod index and
        the live run; reads only."""
        found = self.index.waiting_of(run_uid)
        if not found:
            return None
        namespace, run_name = found[0][0], found[0][1]
        anchor = self.index.balloon(run_uid)
        # What only a task pod's notice reads, or only a balloon's, read only when one waits.
        tasks = any(not pod.balloon for _, _, pod in found)
        balloons = any(pod.balloon for _, _, pod in found)
        return waiting.WaitingView(
            run_uid, namespace, run_name, tuple(pod for _, _, pod in found), now,
            self.settings.pod_stuck_after, self.settings.balloon_stuck_after,
            anchor.bound_at if anchor is not None else None,
            frozenset(r for r, a in self.index.progress(run_uid)[1].items() if a > 0)
            if tasks else frozenset(),
            frozenset(self.tekton_makes(run_uid)) if balloons else frozenset())

    def count(self, now: datetime | None = None) -> None:
        """Every few seconds, the gauges an alert rule reads: who waits, and the longest wait."""
        now = now or datetime.now(UTC)
        counts: dict[str, int] = {}
        longest = 0.0
        for _, _, _, pod in self.index.waiting():
            counts[pod.reason] = counts.get(pod.reason, 0) + 1
            longest = max(longest, (now - pod.since).total_seconds())
        for reason in self._reasons | set(counts):
            self.metrics.waiting_pods.labels(reason=reason).set(counts.get(reason, 0))
        self._reasons |= set(counts)
        self.metrics.longest_wait.set(longest)


# -- balloons whose StatefulSet made no pod --------------------------------------------------------
# Said on their run by a sweep the resync puts on the queue, with the StatefulSet controller's
# words (core/placement/waiting.no_pod_plan decides, asking for what it reads). In a burst that
# controller takes its time (1,000 runs at once: 17 to 40 s a pod): a round lists a namespace's
# FailedCreate Events once for all its waiting balloons, and a balloon's pods, StatefulSet and
# run only before a Warning is said (the pod watch may lag behind, the round's view behind the
# run's end: never a false alarm).

FAILED_CREATE = "FailedCreate"


class Unplaced:
    def __init__(self, settings: Settings, kube: Kube, index: PodIndex, applier: Applier) -> None:
        self.settings = settings
        self.kube = kube
        self.index = index
        self.applier = applier

    def check(self, balloons: Iterable[tuple[tekton.PipelineRun, Mapping[str, Any]]]) -> None:
        """Each live run's balloon StatefulSet, once a round: its plan
        (core/placement/waiting.no_pod_plan), its reads as it asks, then applied."""
        now = datetime.now(UTC)
        newest = self.index.newest_balloon_pod
        idle = (now - newest).total_seconds() if newest else float("inf")
        failures: dict[str, Mapping[str, list[str]]] = {}  # namespace -> StatefulSet uid -> ...
        for run, sts in balloons:
            meta = sts.get("metadata") or {}
            created = parse_time(meta.get("creationTimestamp"))
            view = waiting.NoPodView(
                run.uid, run.namespace, run.name,
                (now - created).total_seconds() if created is not None else None,
                self.index.balloon(run.uid) is not None, self.settings.balloon_stuck_after, idle)
            while (planned := waiting.no_pod_plan(view)).ask is not None:
                if planned.ask is waiting.Ask.FAILURES:
                    if run.namespace not in failures:  # once a round for all its balloons
                        failures[run.namespace] = self.kube.event_messages(
                            run.namespace, "StatefulSet", FAILED_CREATE)
                    said = failures[run.namespace].get(str(meta.get("uid")), [])
                    view = replace(view, failures=tuple(said))
                else:
                    view = replace(view, confirmed=self._confirmed(run, meta))
            if planned.actions:
                self.applier.apply(run, planned.actions)

    def _confirmed(self, run: tekton.PipelineRun, meta: Mapping[str, Any]) -> bool:
        """Asked of the API server before a Warning: the pod watch may lag, and the round's view
        of the run and StatefulSet predate the run's end (its balloon deleted, the pod gone)."""
        if self.kube.list_balloon_pods(run.namespace, run.uid):
            return False
        sts = self.kube.get_statefulset(run.namespace, str(meta.get("name") or ""))
        if sts is None or sts["metadata"].get("uid") != meta.get("uid") or sts["metadata"].get(
                "deletionTimestamp"):
            return False
        now = self.kube.get_pipelinerun(run.namespace, run.name)
        return now is not None and not tekton.PipelineRun.from_body(now).finished
