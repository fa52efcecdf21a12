"""What a run's reservation asks: its peak, as far as the namespace's ResourceQuotas and
LimitRanges leave room for it (core/capacity/quota.py) and the nodes the run may use can ever hold
it (core/capacity/nodefit.py), read from the watch caches. When it is less than the peak, what to
say on the run is returned with it: whoever acts on the run says it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from controller.core.basics import quantity
from controller.core.basics.notices import Notice
from controller.core.basics.quantity import Amounts
from controller.core.capacity import nodefit, peak, quota
from controller.core.model import tekton
from controller.core.model.tekton import PipelineRun
from controller.core.placement import binding, warm, warmcache
from controller.core.placement.memory import Fitted
from controller.kube.caches import Caches
from controller.kube.client import ApiError, Kube
from controller.kube.clusterview import ClusterView, Facts
from controller.kube.nodeindex import NodeIndex
from controller.kube.podindex import PodIndex
from controller.operator.estimates import Sources, task_reader
from controller.operator.memory import Memories
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
        estimate_of: Callable[[str], peak.Estimate | None],
        live: Callable[[], Iterable[tekton.PipelineRun]],
        memory: Memories,
        nodes: Callable[[], Iterable[Mapping[str, Any]]] = lambda: (),
        kube: Kube | None = None,
    ) -> None:
        self.settings = settings
        self.nodes = nodes
        self.kube = kube
        # RunMemory.fitted: the share the run's reservation asks for, where its peak is more
        # than any node can hold and no autoscaler can add one.
        self.memory = memory
        self.caches = caches
        self.index = index
        self.estimate_of = estimate_of
        self.live = live
        self.reservation = quota.Shape(priority_class=settings.reservation_priority_class_name)
        # Namespace -> (when, each live run's demand): one get or set at a time, no lock.
        self._demand: dict[str, tuple[float, dict[str, Amounts]]] = {}

    def asks(
        self, run: tekton.PipelineRun, facts: Facts, found: peak.Estimate, own: Amounts,
        spec: Mapping[str, Any] | None,
    ) -> tuple[Amounts, Amounts, tuple[Notice, ...]]:
        """What a scout and a keeper of the run ask: the rest of its peak, and of that what its
        running pods do not hold, each as far as its namespace's quotas and LimitRanges allow
        (nothing at all where not even a reservation pod fits) and, for the balloon's pod spec
        `spec`, as much as one node it may use can ever hold. With what to say on the run of
        why it asks less than its peak."""
        done, held, _ = self.index.progress(run.uid)
        full = found.remaining(done)
        need = quantity.minus(full, held)
        allowed, limited = self.allowed(run, facts, full, need, own)
        said: tuple[Notice, ...] = () if limited is None else (limited,)
        if allowed is None:
            return {}, {}, said
        if spec is not None:
            allowed, larger = self.fitted(run, allowed, spec)
            said += () if larger is None else (larger,)
        return allowed, {r: min(a, allowed.get(r, 0)) for r, a in need.items()}, said

    def fitted(self, run: tekton.PipelineRun, want: Amounts, spec: Mapping[str, Any]
               ) -> tuple[Amounts, Notice | None]:
        """The most of `want` one node the run may use can hold, where none can hold it all
        and no autoscaler can add one that would: the run is anchored at once where most of
        it fits (a wait for room that can never come is not worth it). With what to say on the
        run the first time it is found so."""
        fitted = self.memory.get(run.uid).fitted
        if fitted is not None:
            known = fitted.share
            return ({r: min(a, known.get(r, 0)) for r, a in want.items()} if known
                    else want), None
        share = nodefit.largest_share(want, self.nodes(), spec)
        if share is not None and nodefit.autoscaler_may_add(
            self._nodepools(), spec, want, self.settings.cluster_autoscaler
        ):
            share = None
        self.memory.set(run.uid, fitted=Fitted(share))
        if share is None:
            return want, None
        return share, Notice(
            "PeakLargerThanNodes",
            f"the run's peak ({quantity.describe(want)}) is more than any node it may use can "
            f"hold, and no autoscaler can add one that could; its reservation asks for "
            f"{quantity.describe(share)}, the most one of them holds, and its widest layer "
            "takes turns on the node it is anchored to", warning=False)

    def _nodepools(self) -> list[Mapping[str, Any]]:
        """Karpenter's NodePools, asked once per run larger than every node (rare)."""
        if self.kube is None or self.settings.cluster_autoscaler:
            return []
        try:
            return list(self.kube.list_nodepools())
        except ApiError:
            return []  # not readable: no autoscaler known

    def forget(self, run_uid: str) -> None:
        self.memory.reset(run_uid, "fitted")

    def need(self, run_uid: str, found: peak.Estimate) -> Amounts:
        """What the run will still ask beyond what its running pods hold."""
        done, held, _ = self.index.progress(run_uid)
        return quantity.minus(found.remaining(done), held)

    def allowed(
        self, run: tekton.PipelineRun, facts: Facts, want: Mapping[str, int],
        need: Mapping[str, int], own: Mapping[str, int],
    ) -> tuple[Amounts | None, Notice | None]:
        """The part of `want` the run's reservation may ask; None for no reservation at all.
        `need`: what the run will still ask; `own`: its reservation as it is now. With what to
        say on the run when its quotas limit it."""
        if self.caches is None:
            return dict(want), None
        quotas = self.caches.quotas(run.namespace)
        limit_ranges = self.caches.limit_ranges(run.namespace) or []
        if quotas is None:
            return None, None  # not known yet (the moment after this replica started to lead)
        if not quotas and not limit_ranges:
            return dict(want), None
        demand = quantity.add(need, *(
            amounts for uid, amounts in self._others(run.namespace).items() if uid != run.uid))
        template = run.pod_template or facts.tekton_default_template
        runs = quota.Shape(priority_class=str(template.get("priorityClassName") or ""),
                           terminating=True)  # Tekton gives every TaskRun pod a deadline
        bounds = quota.allowance(quotas, limit_ranges, self.reservation, runs, own, demand)
        size = quota.sized(want, bounds, limit_ranges)
        return size, quota.limited(want, size, bounds)

    def _others(self, namespace: str) -> dict[str, Amounts]:
        """What each live run of the namespace will still ask, summed at most every second."""
        now = time.monotonic()
        cached = self._demand.get(namespace)
        if cached is not None and now - cached[0] < DEMAND_TTL:
            return cached[1]
        by_run = {}
        for other in self.live():
            found = self.estimate_of(other.uid) if other.namespace == namespace else None
            if found is not None:
                by_run[other.uid] = self.need(other.uid, found)
        self._demand[namespace] = (now, by_run)
        return by_run


# -- warm anchors ----------------------------------------------------------------------------------
# Warm anchors, the adapter: the run's images from the specs the leader's caches hold (read as
# capacity reads them), which nodes hold them (the node index, kube/nodeindex.py), and the
# pipeline's last node from its namespace's policy status, for core/placement/warm.py; and what a
# run anchored reads of them (its balloon pod's plan, core/placement/binding.py, remembers its
# node there for the pipeline's next run, core/placement/warmcache.py, and counts it). Reads only.

class Warming:
    def __init__(self, caches: Caches | None, view: ClusterView, nodes: NodeIndex) -> None:
        self.caches = caches
        self.view = view
        self.nodes = nodes  # the images each node holds, and hostnames

    def warmth(self, run: PipelineRun, facts: Facts, src: Sources) -> warm.Warmth | None:
        """Where the run starts fastest, as far as its namespace's policy asks (None: it asks
        for nothing, or nothing is known)."""
        asked = facts.policy_for(run.namespace).policy.warm
        key = warmcache.pipeline_key(run, asked.pipeline_key) if asked.pipeline_cache else ""
        spec = run.substituted_pipeline_spec or run.pipeline_spec or src.pipeline
        images = (warm.run_images(spec, task_reader(self.caches, run.namespace, src))
                  if asked.images and spec else frozenset())
        if not images and not key:
            return None
        last = warmcache.remembered(facts.warm_status.get(run.namespace)).get(key, "")
        held = self.nodes.images()
        return warm.warmth(images, held.holders, key, last, held.hostnames)

    def read(self, namespace: str, annotations: Mapping[str, Any], node: str
             ) -> binding.WarmRead:
        """What a run anchored on `node` reads of warm anchors (core/placement/binding.py
        plans what is counted, remembered and said of it). Reads only."""
        note = warm.noted(annotations.get(warm.ANNOTATION))
        held = note.held(self.nodes.images().reported.get(node, {}), node)
        facts = self.view.facts
        _, _, name = facts.policy_for(namespace).policy.source.partition("/")
        return binding.WarmRead(held, name, facts.warm_status.get(namespace),
                                datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
