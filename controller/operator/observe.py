"""One observation per run event: everything a run's decision reads, read once from the
leader's caches and the pod index before anything is decided (core/placement/reconcile.decide is
then a pure function of it).

The claims come from the claims cache's owner index and by name, the claims other balloons
mount from the pod index's claim index, the run's Pipeline, ResolutionRequests and reservation
pods as its Sources (operator/sources.py); capacity and resolution contribute what they make of
those Sources (whether a reservation should go first, what Tekton still resolves) instead of
reading the caches again on their own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from controller.core.model import tekton
from controller.core.placement import reconcile
from controller.kube.caches import Caches
from controller.kube.client import Kube
from controller.kube.clusterview import Facts
from controller.operator import sources
from controller.operator.capacity import Capacity
from controller.operator.nodes import Warming
from controller.operator.podindex import PodIndex


class Observer:
    def __init__(self, kube: Kube, caches: Caches | None, index: PodIndex,
                 capacity: Capacity, warming: Warming | None = None,
                 lasting: Callable[[str], bool] = lambda _: True) -> None:
        self.kube = kube
        self.caches = caches
        self.index = index
        self.capacity = capacity
        self.warming = warming
        # Whether a run's balloon stays (its run is live, or the live runs are not all known
        # yet): a claim is shared only with those. The balloon of a run that ended or was
        # deleted goes soon, and a term towards it would leave the new balloon with no pod to
        # join (seen: a StatefulSet controller whose watches were coming back after an API
        # server restart made a deleted run's balloon pod again, for a few seconds).
        self.lasting = lasting

    def observe(
        self, run: tekton.PipelineRun, facts: Facts, existing: Mapping[str, Any] | None,
        serves: bool,
    ) -> tuple[reconcile.Observed, sources.Sources]:
        """The observation, and the run's Sources it was made from (for the act that follows:
        its reservation is tended from the same reading)."""
        live = not (run.finished or run.pending or run.opted_out)
        needs_claims = live and serves and not facts.assistant_blocks
        named = {c.name for c in run.claims()} if needs_claims else set()
        pvcs = self._claims(run, named) if needs_claims else []
        claim_names = named | {str((p.get("metadata") or {}).get("name")) for p in pvcs}
        src = sources.read(self.caches, self.index, run)
        pod = self.index.balloon(run.uid) if existing is not None else None
        # Only while the anchor is still to be chosen: a bound balloon's node is decided.
        choosing = needs_claims and not (pod and pod.node)
        room, said = self.capacity.wants_room(run, facts, src) if needs_claims else (False, ())
        return reconcile.Observed(
            run=run,
            namespace_enabled=serves,
            assistant_blocks=facts.assistant_blocks,
            policy=facts.policy_for(run.namespace).policy,
            tekton_default_template=facts.tekton_default_template,
            pvcs=pvcs,
            balloon=existing,
            balloon_pod_node=(pod.node or None) if pod else None,
            others={uid: claims for uid, claims in self.index.mounted_claims(
                run.namespace, run.uid, claim_names).items() if self.lasting(uid)},
            room=room,
            room_node=src.room_node,
            resolving=(self.capacity.waits_for_resolution(run, facts, src)
                       if needs_claims and existing is None else None),
            warmth=(self.warming.warmth(run, facts, src)
                    if choosing and self.warming is not None else None),
            notices=said,
        ), src

    def fresh(self, run: tekton.PipelineRun) -> Mapping[str, Any] | None:
        """The body we decided on may be old: a resync's snapshot. Making a balloon for a run
        that has since ended would leave one that no event deletes soon, so the API server is
        asked once more before a balloon is made or re-planned from one (a watch event's body
        is not: a newer event of the run is decided after it, faces/serial.py). The same body
        when the run is still live, else the API server's (None: gone)."""
        fresh = self.kube.get_pipelinerun(run.namespace, run.name)
        if fresh is None:
            return None
        now = tekton.PipelineRun.from_body(fresh)
        live = now.uid == run.uid and not (now.finished or now.pending or now.opted_out)
        return run.raw if live else fresh

    def _claims(self, run: tekton.PipelineRun, named: set[str]) -> Sequence[Mapping[str, Any]]:
        """The claims the run owns or names (the cache's indexes), or, before the cache is
        synced, the namespace's."""
        cached = self.caches.claims_of(run.namespace, run.uid, named
                                       ) if self.caches is not None else None
        return cached if cached is not None else self.kube.list_pvcs(run.namespace)
