"""Each run's peak, the adapter: core/capacity/peak.py over the watch caches and the pod index. Kept
for the run's life once complete (its pipeline and every task read), so that each later event of
the run reads it instead of estimating again; capacity (operator/capacity.py) and the
namespace's demand (operator/headroom.py) read it. A run behind Tekton's resolvers is estimated
from what Tekton resolved for it, and its anchor waits while Tekton resolves (below).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from controller.core.basics import quantity
from controller.core.basics.notices import Notice
from controller.core.basics.times import parse_time
from controller.core.capacity import peak, reservation
from controller.core.capacity.peak import Reader
from controller.core.model import podrequests, resolution, tekton
from controller.kube.caches import Caches
from controller.kube.clusterview import Facts
from controller.kube.podindex import PodIndex
from controller.operator.memory import Memories


class Estimates:
    def __init__(self, caches: Caches | None, index: PodIndex, resolving: Resolving,
                 memory: Memories) -> None:
        self.caches = caches
        self.index = index
        self.resolving = resolving
        self.memory = memory  # RunMemory.estimate: the run's peak, once complete

    def estimate(self, run: tekton.PipelineRun, facts: Facts, src: Sources
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


# -- what Tekton still resolves --------------------------------------------------------------
# Runs behind Tekton's resolvers, the adapter: their tasks' specs from the ResolutionRequests
# Tekton makes for them (core/model/resolution.py, read from the leader's watch cache), and their
# anchor held while Tekton resolves, so that the run's peak, not a guess, chooses the node.
#
# A held run is reconciled again when a ResolutionRequest it owns changes, when Tekton
# writes the run's status (its pipeline resolved, its TaskRuns made), and when its hold ends
# (its plan's requeue_after, core/placement/runplan.py; the plan remembers that it waits).


def task_reader(caches: Caches | None, namespace: str, src: Sources) -> Reader:
    """Reads a pipeline task's `taskRef`: a Task of the namespace from the cache, a remote one
    from what Tekton resolved for the run."""

    def local(ref: Mapping[str, Any]) -> Mapping[str, Any] | None:
        task = caches.get("tasks", namespace, str(ref.get("name"))) if caches else None
        return (task or {}).get("spec")

    return Resolving.reader(src, local)


class Resolving:
    def __init__(
        self,
        caches: Caches | None,
        live: Callable[[str], Mapping[str, Any] | None],
        reconcile: Callable[[Mapping[str, Any]], object],
        memory: Memories,
    ) -> None:
        self.live = live
        self.reconcile = reconcile
        self.memory = memory  # RunMemory.resolving: the run's anchor waits
        if caches is not None:
            caches.listen(RESOLUTION_REQUESTS, self.on_request)

    @staticmethod
    def reader(src: Sources, local: Reader) -> Reader:
        """Reads a remote `taskRef` from what Tekton resolved for the run, others by `local`."""

        def read(ref: Mapping[str, Any]) -> Mapping[str, Any] | None:
            if not resolution.remote(ref):
                return local(ref)
            return resolution.resolved_spec(ref, list(src.requests or ()))

        return read

    @staticmethod
    def _look(run: tekton.PipelineRun, src: Sources) -> tuple[bool, str | None]:
        """Whether what the run needs resolved is known (it has no remote parts, or the cache
        is synced), and what of it Tekton still resolves."""
        if not resolution.has_remote(run, src.pipeline):
            return True, None
        if src.requests is None:
            return False, None
        return True, resolution.pending(run, list(src.requests), src.pipeline)

    def settled(self, run: tekton.PipelineRun, src: Sources) -> bool:
        """Nothing of the run is left to resolve (or nothing ever was)."""
        known, why = self._look(run, src)
        return known and why is None

    def pending(self, run: tekton.PipelineRun, src: Sources) -> str | None:
        """What Tekton still resolves for the run, while its anchor may wait for it (read by
        the observation: that it waits is remembered by the run's plan)."""
        why = self._look(run, src)[1]
        left = resolution.hold_left(run.created, datetime.now(UTC))
        return why if why and (left is None or left > 0) else None

    def _look_again(self, uid: str) -> None:
        body = self.live(uid)
        if body is None:
            self.forget(uid)
        else:
            self.reconcile(body)

    def on_request(self, request: Mapping[str, Any]) -> None:
        """A ResolutionRequest changed: the held run that owns it looks again (one lookup an
        event, however many runs are held)."""
        owners = (request.get("metadata") or {}).get("ownerReferences") or []
        for uid in {str(o.get("uid")) for o in owners if isinstance(o, Mapping)}:
            if self.memory.get(uid).resolving:
                self._look_again(uid)

    def forget(self, run_uid: str) -> None:
        self.memory.reset(run_uid, "resolving")


# -- what a run's peak and resolution are read from ------------------------------------------------
# What a run's capacity and resolution are computed from, read once per event from the leader's
# caches and the pod index: its named Pipeline, its ResolutionRequests, its reservation pods.
#
# Capacity and resolution used to read these on their own, each when it was asked (a run's
# event read its Pipeline three times and its requests twice); now the observation reads them
# once (operator/observe.py) and hands them to both, and a reservation's tending does the same.

RESOLUTION_REQUESTS = "resolutionrequests"


@dataclass(frozen=True)
class Sources:
    # The spec of the Pipeline the run names in its namespace (None: inline, a resolver's, or
    # not known).
    pipeline: Mapping[str, Any] | None
    # The run's ResolutionRequests (None: their cache is not synced yet).
    requests: Sequence[resolution.Request] | None
    rooms: Sequence[Mapping[str, Any]]  # its reservation pods, the newest first
    tasks_synced: bool  # Tasks are known: an estimate from them is complete

    @property
    def room_node(self) -> str | None:
        """Where the run's newest reservation pod is bound, if it is."""
        node = (self.rooms[0].get("spec") or {}).get("nodeName") if self.rooms else None
        return str(node) if node else None


def age(obj: Mapping[str, Any], now: datetime) -> float:
    made = parse_time((obj.get("metadata") or {}).get("creationTimestamp"))
    return (now - made).total_seconds() if made else 0.0


def named_pipeline(caches: Caches | None, run: tekton.PipelineRun) -> Mapping[str, Any] | None:
    ref = run.spec.get("pipelineRef")
    if caches is None or not isinstance(ref, Mapping) or ref.get("resolver") or not ref.get(
            "name"):
        return None
    spec = (caches.get("pipelines", run.namespace, str(ref["name"])) or {}).get("spec")
    return spec if isinstance(spec, Mapping) else None


def rooms_of(index: PodIndex, run_uid: str, now: datetime) -> list[Mapping[str, Any]]:
    """The run's reservation pods as the pod watch shows them, the newest first."""
    return sorted(index.rooms(run_uid), key=lambda p: age(p, now))


def read_sources(caches: Caches | None, index: PodIndex, run: tekton.PipelineRun) -> Sources:
    now = datetime.now(UTC)
    listed = caches.owned_by(RESOLUTION_REQUESTS, run.uid) if caches is not None else None
    return Sources(
        pipeline=None if run.pipeline_spec else named_pipeline(caches, run),
        requests=None if listed is None else resolution.owned_by(listed, run.uid),
        rooms=rooms_of(index, run.uid, now),
        tasks_synced=caches is not None and caches.is_synced("tasks"),
    )
