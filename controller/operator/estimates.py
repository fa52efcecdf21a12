"""Each run's peak, the adapter: core/capacity/peak.py over the watch caches and the pod index. Kept
for the run's life once complete (its pipeline and every task read), so that each later event of
the run reads it instead of estimating again; capacity (operator/capacity.py) and the
namespace's demand (operator/headroom.py) read it.
"""

from __future__ import annotations

from dataclasses import replace

from controller.core.basics import quantity
from controller.core.basics.notices import Notice
from controller.core.capacity import peak, reservation
from controller.core.model import podrequests, tekton
from controller.kube.caches import Caches
from controller.kube.clusterview import Facts
from controller.operator import sources
from controller.operator.memory import Memories
from controller.operator.podindex import PodIndex
from controller.operator.resolving import Resolving, task_reader


class Estimates:
    def __init__(self, caches: Caches | None, index: PodIndex, resolving: Resolving,
                 memory: Memories) -> None:
        self.caches = caches
        self.index = index
        self.resolving = resolving
        self.memory = memory  # RunMemory.estimate: the run's peak, once complete

    def estimate(self, run: tekton.PipelineRun, facts: Facts, src: sources.Sources
                 ) -> tuple[peak.Estimate | None, Notice | None]:
        """The run's peak, once its pipeline is known (inline, resolved by Tekton into its
        status, or a Pipeline of its namespace by name); kept for the run's life. And what to
        say on the run when its pipeline cannot be estimated: returned, for whoever acts on the
        run to say (an estimate is read by the observation, which never writes)."""
        known = self.memory.get(run.uid).estimate
        if known is not None:
            return self._learn(run.uid, known), None
        spec = run.substituted_pipeline_spec or src.pipeline
        if not spec or self.caches is None:
            return None, None
        ns = run.namespace
        namespace = podrequests.Namespace(
            limit_ranges=tuple(self.caches.limit_ranges(ns) or ()),
            container_defaults=dict(facts.tekton_container_defaults),
        )
        capacity = facts.policy_for(ns).policy.capacity
        try:
            found = peak.estimate(
                spec, task_reader(self.caches, ns, src), run.task_run_specs, namespace,
                quantity.amounts(capacity.unknown_task),
            )
        except ValueError as exc:
            return None, reservation.not_estimated(str(exc))
        if src.tasks_synced and self.resolving.settled(run, src):  # complete: keep it
            self.memory.set(run.uid, estimate=found)
        return self._learn(run.uid, found), None

    def known(self, run_uid: str) -> peak.Estimate | None:
        """The run's peak if it is kept (complete), without estimating."""
        return self.memory.get(run_uid).estimate

    def _learn(self, run_uid: str, found: peak.Estimate) -> peak.Estimate:
        """Tasks unknown before they ran (resolvers) count as their pods ask, once the pod
        watch has shown one: the keeper then holds room for their siblings."""
        if not found.unknown:
            return found
        better = found.learned(self.index.task_requests(run_uid))
        if better is not found:
            self.memory.update(run_uid, lambda m: m if m.estimate is None
                               else replace(m, estimate=better))
        return better

    def forget(self, run_uid: str) -> None:
        self.resolving.forget(run_uid)
        self.memory.reset(run_uid, "estimate")
