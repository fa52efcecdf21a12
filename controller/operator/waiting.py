"""What waits: pods that wait for a node (a Warning once they have waited past the grace period,
and the gauges an alert rule reads: core/placement/waiting.py decides, the PodIndex knows who
waits), and balloons whose StatefulSet made no pod (below)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from controller.core.basics.actions import Say
from controller.core.basics.times import parse_time
from controller.core.model import tekton
from controller.core.placement import waiting
from controller.kube.client import Kube
from controller.metrics import Metrics
from controller.operator.executor import Executor, pipelinerun_ref
from controller.operator.podindex import PodIndex
from controller.settings import Settings


class WaitingPods:
    def __init__(
        self,
        settings: Settings,
        index: PodIndex,
        metrics: Metrics,
        executor: Executor,
        tekton_makes: Callable[[str], Collection[str]] = lambda _: (),
    ) -> None:
        self.settings = settings
        self.index = index
        self.metrics = metrics
        self.executor = executor
        # run uid -> the claims Tekton makes for it: a balloon waiting for one waits for Tekton
        self.tekton_makes = tekton_makes
        self._reasons: set[str] = set()

    def check(self, now: datetime | None = None) -> None:
        """Every few seconds: say what has waited too long, and count who waits."""
        now = now or datetime.now(UTC)
        counts: dict[str, int] = {}
        longest = 0.0
        for run_uid, namespace, run_name, pod in self.index.waiting():
            grace = (
                self.settings.balloon_stuck_after if pod.balloon else self.settings.pod_stuck_after
            )
            counts[pod.reason] = counts.get(pod.reason, 0) + 1
            longest = max(longest, (now - pod.since).total_seconds())
            if not (pod.balloon or pod.assistant):
                # A task pod waits for its anchor first, and what holds the anchor is said on
                # its own (BalloonUnschedulable, WaitingForRoom, ...): its own grace starts
                # once the balloon is bound.
                anchor = self.index.balloon(run_uid)
                if anchor is None or anchor.bound_at is None:
                    continue
                pod = replace(pod, since=max(pod.since, anchor.bound_at))
            holds = () if pod.balloon else {r for r, a in self.index.progress(run_uid)[1].items()
                                            if a > 0}
            notice = waiting.notice(
                pod, now, grace, self.tekton_makes(run_uid) if pod.balloon else (), holds
            )
            if notice is not None:
                if pod.balloon:
                    self.metrics.balloon_problems.labels(reason="unschedulable").inc()
                self.executor.do(Say(
                    pipelinerun_ref(run_name, namespace, run_uid),
                    notice,
                    (run_uid, pod.pod, notice.reason),
                ))
        for reason in self._reasons | set(counts):
            self.metrics.waiting_pods.labels(reason=reason).set(counts.get(reason, 0))
        self._reasons |= set(counts)
        self.metrics.longest_wait.set(longest)


# -- balloons whose StatefulSet made no pod --------------------------------------------------------
# Balloons whose StatefulSet has made no pod after a while, said on their run by the resync,
# with the StatefulSet controller's words (core/placement/waiting.no_pod decides). A pod that exists
# but waits for a node is said by WaitingPods (BalloonUnschedulable), a balloon not made yet by what
# holds it.
#
# In a burst the StatefulSet controller takes its time (1,000 runs at once: 17 to 40 s a pod),
# and every balloon past the grace without a pod cost two LISTs a round: its pods, and its
# StatefulSet's Events. Now a round lists a namespace's FailedCreate Events once for all of its
# waiting balloons, and a balloon's pods, StatefulSet and run only before a Warning is said (the
# pod watch may lag behind the StatefulSet controller, the round's view behind the run's end: a
# Warning is never a false alarm).

FAILED_CREATE = "FailedCreate"


class Unplaced:
    def __init__(self, settings: Settings, kube: Kube, index: PodIndex, metrics: Metrics,
                 executor: Executor) -> None:
        self.settings = settings
        self.kube = kube
        self.index = index
        self.metrics = metrics
        self.executor = executor

    def check(self, balloons: Iterable[tuple[tekton.PipelineRun, Mapping[str, Any]]]) -> None:
        """Each live run's balloon StatefulSet, once a round."""
        now = datetime.now(UTC)
        grace = self.settings.balloon_stuck_after
        newest = self.index.newest_balloon_pod
        idle = (now - newest).total_seconds() if newest else float("inf")
        failures: dict[str, Mapping[str, list[str]]] = {}  # namespace -> StatefulSet uid -> ...
        for run, sts in balloons:
            meta = sts.get("metadata") or {}
            created = parse_time(meta.get("creationTimestamp"))
            if created is None or self.index.balloon(run.uid) is not None:
                continue
            age = (now - created).total_seconds()
            if age < grace:
                continue
            if run.namespace not in failures:
                failures[run.namespace] = self.kube.event_messages(
                    run.namespace, "StatefulSet", FAILED_CREATE)
            said = failures[run.namespace].get(str(meta.get("uid")), [])
            notice = waiting.no_pod(age, grace, said, idle)
            if notice is None or not self._confirmed(run, meta):
                continue
            self.metrics.balloon_problems.labels(reason="not-placed").inc()
            self.executor.do(Say(pipelinerun_ref(run.name, run.namespace, run.uid), notice,
                                 run.uid))

    def _confirmed(self, run: tekton.PipelineRun, meta: Mapping[str, Any]) -> bool:
        """Asked of the API server before a Warning: the pod watch may not have shown the pod
        yet, and the round's view of the run and its StatefulSet may be older than the run's
        end (its balloon deleted, the pod gone with it)."""
        if self.kube.list_balloon_pods(run.namespace, run.uid):
            return False
        sts = self.kube.get_statefulset(run.namespace, str(meta.get("name") or ""))
        if sts is None or sts["metadata"].get("uid") != meta.get("uid") or sts["metadata"].get(
                "deletionTimestamp"):
            return False
        now = self.kube.get_pipelinerun(run.namespace, run.name)
        return now is not None and not tekton.PipelineRun.from_body(now).finished
