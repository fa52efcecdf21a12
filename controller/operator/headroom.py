"""What a team namespace's ResourceQuotas and LimitRanges leave a run's reservation
(core/quota.py), read from the watch caches, and said on the run when it is less than the peak.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping

from controller.core import peak, quantity, quota, tekton
from controller.core.quantity import Amounts
from controller.kube.caches import Caches
from controller.kube.clusterview import Facts
from controller.operator.notify import Notifier, pipelinerun_ref
from controller.operator.podindex import PodIndex
from controller.settings import Settings

# The namespace's demand is summed over its live runs at most this often (a burst of runs
# would otherwise sum it once per run and event).
DEMAND_TTL = 1.0


class Headroom:
    def __init__(
        self,
        settings: Settings,
        caches: Caches | None,
        index: PodIndex,
        notifier: Notifier,
        estimate_of: Callable[[str], peak.Estimate | None],
        live: Callable[[], Iterable[tekton.PipelineRun]],
    ) -> None:
        self.caches = caches
        self.index = index
        self.notifier = notifier
        self.estimate_of = estimate_of
        self.live = live
        self.reservation = quota.Shape(priority_class=settings.reservation_priority_class_name)
        self._demand: dict[str, tuple[float, dict[str, Amounts]]] = {}  # ns -> (when, by run)
        self._lock = threading.Lock()

    def need(self, run_uid: str, found: peak.Estimate) -> Amounts:
        """What the run will still ask beyond what its running pods hold."""
        done, held, _ = self.index.progress(run_uid)
        return quantity.minus(found.remaining(done), held)

    def allowed(
        self, run: tekton.PipelineRun, facts: Facts, want: Mapping[str, int],
        need: Mapping[str, int], own: Mapping[str, int],
    ) -> Amounts | None:
        """The part of `want` the run's reservation may ask; None for no reservation at all.
        `need`: what the run will still ask; `own`: its reservation as it is now."""
        if self.caches is None:
            return dict(want)
        quotas = self.caches.quotas(run.namespace)
        limit_ranges = self.caches.listed("limitranges", run.namespace) or []
        if quotas is None:
            return None  # not known yet (the moment after this replica started to lead)
        if not quotas and not limit_ranges:
            return dict(want)
        demand = quantity.add(need, *(
            amounts for uid, amounts in self._others(run.namespace).items() if uid != run.uid))
        template = run.pod_template or facts.tekton_default_template
        runs = quota.Shape(priority_class=str(template.get("priorityClassName") or ""),
                           terminating=True)  # Tekton gives every TaskRun pod a deadline
        bounds = quota.allowance(quotas, limit_ranges, self.reservation, runs, own, demand)
        size = quota.sized(want, bounds, limit_ranges)
        notice = quota.limited(want, size, bounds)
        if notice is not None:
            self.notifier.tell(pipelinerun_ref(run.name, run.namespace, run.uid), notice, run.uid)
        return size

    def _others(self, namespace: str) -> dict[str, Amounts]:
        """What each live run of the namespace will still ask, summed at most every second."""
        now = time.monotonic()
        with self._lock:
            cached = self._demand.get(namespace)
            if cached is not None and now - cached[0] < DEMAND_TTL:
                return cached[1]
        by_run = {}
        for other in self.live():
            found = self.estimate_of(other.uid) if other.namespace == namespace else None
            if found is not None:
                by_run[other.uid] = self.need(other.uid, found)
        with self._lock:
            self._demand[namespace] = (now, by_run)
        return by_run
