"""Pods that wait for a node: a Warning once they have waited past the grace period, and the
gauges an alert rule reads (core/placement/waiting.py decides; the PodIndex knows who waits)."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import replace
from datetime import UTC, datetime

from controller.core.basics.actions import Say
from controller.core.placement import waiting
from controller.metrics import Metrics
from controller.operator.executor import Executor
from controller.operator.notify import pipelinerun_ref
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
