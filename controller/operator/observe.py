"""The snapshot: one observation per run event, everything a run's decision reads, read once
from the leader's caches and the pod index before anything is decided (core/placement/reconcile.
decide is then a pure function of it); and which runs the resync may leave alone because nothing
their decision read has changed (settled runs, below).

The claims come from the claims cache's owner index and by name, the claims other balloons
mount from the pod index's claim index, the run's Pipeline, ResolutionRequests and reservation
pods as its Sources (operator/estimates.py); capacity and resolution contribute what they make of
those Sources (whether a reservation should go first, what Tekton still resolves) instead of
reading the caches again on their own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from controller.core.basics import names
from controller.core.model import assistant, tekton
from controller.core.placement import reconcile
from controller.core.placement.memory import Kept, RunMemory
from controller.kube.caches import Caches
from controller.kube.client import Kube
from controller.kube.clusterview import Facts
from controller.kube.podindex import PodIndex
from controller.kube.store import namespace_of, owner_uids
from controller.operator.capacity import Capacity
from controller.operator.estimates import Sources, read_sources
from controller.operator.headroom import Warming
from controller.operator.memory import Memories


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
    ) -> tuple[reconcile.Observed, Sources]:
        """The observation, and the run's Sources it was made from (for the act that follows:
        its reservation is tended from the same reading)."""
        live = not (run.finished or run.pending or run.opted_out)
        needs_claims = live and serves
        per_run, pvcs = self.claim_naming(run, facts) if needs_claims else (False, [])
        named = {c.name for c in run.claims(per_run)} if needs_claims else set()
        claim_names = named | {str((p.get("metadata") or {}).get("name")) for p in pvcs}
        src = read_sources(self.caches, self.index, run)
        pod = self.index.balloon(run.uid) if existing is not None else None
        # Only while the anchor is still to be chosen: a bound balloon's node is decided.
        choosing = needs_claims and not (pod and pod.node)
        room, said = self.capacity.wants_room(run, facts, src) if needs_claims else (False, ())
        return reconcile.Observed(
            run=run,
            namespace_enabled=serves,
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
            claims_per_run=per_run,
            assistant_mode=assistant.mode(facts.feature_flags) if facts.assistant_on else None,
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

    def claim_naming(self, run: tekton.PipelineRun, facts: Facts
                     ) -> tuple[bool, Sequence[Mapping[str, Any]]]:
        """How Tekton named the run's templated claims (per run or not: core/model/assistant.
        claims_per_run), from the claims it made for the run: those the run owns, and those of
        either naming; and the claims read, but those of the naming not taken that the run does
        not own (a mode changed mid-run: the run keeps its own naming)."""
        both = {c.name for c in (*run.claims(False), *run.claims(True))}
        found = self._claims(run, both)
        made = {str((p.get("metadata") or {}).get("name")) for p in found}
        per_run = assistant.claims_per_run(run, made, facts.claims_per_run)
        other = set(run.claims_tekton_makes(not per_run)) - set(run.claims_tekton_makes(per_run))
        return per_run, [p for p in found if str((p.get("metadata") or {}).get("name")) not in
                         other or run.uid in owner_uids(p)]

    def _claims(self, run: tekton.PipelineRun, named: set[str]) -> Sequence[Mapping[str, Any]]:
        """The claims the run owns or names (the cache's indexes), or, before the cache is
        synced, the namespace's."""
        cached = self.caches.claims_of(run.namespace, run.uid, named
                                       ) if self.caches is not None else None
        return cached if cached is not None else self.kube.list_pvcs(run.namespace)


# -- settled runs ----------------------------------------------------------------------------------
# Runs the resync may leave alone: their last decision kept the balloon as it was, and nothing
# their decision reads has changed since.
#
# At 1,000 concurrent runs most of them wait (for their anchor, for Tekton) and send no event for
# minutes; the resync reconciled each of them every round, a whole observation and decision to
# learn again that the balloon stays (a fifth of the leader's CPU at 1,000 runs, and what made
# the CPU per run grow with the number of runs). A run is settled by a "keep" decision and
# unsettled by any change to what that decision read:
#
# - the cluster's facts (policies, enabled namespaces, Tekton's configuration): every run;
# - its balloon StatefulSet's spec, its claims' access modes and owners, its ResolutionRequests
#   (by owner), its reservation pods, its balloon pod made, bound or deleted: that run;
# - the namespace's ResourceQuotas, LimitRanges', Tasks' and Pipelines' specs, and claims no
#   PipelineRun owns: the namespace's runs.
#
# Only what the decision reads counts: a claim's binding and a StatefulSet's status are
# rewritten a few times for every run, and at 1,000 runs in one namespace a claim of a run not
# settled yet unsettled all of the namespace's.
#
# A settled run's own events wake it only when they change what its decision reads of the run
# (core/placement/reconcile.reads): Tekton rewrites a running run's status a few dozen times,
# and each was a whole reconcile.
#
# A run stays settled at most `rounds` rounds, the safety net for what no watch said (a watch
# that lost its place and listed again tells no listener what changed meanwhile).
#
# No lock here: what is settled, and when each run, namespace and the cluster's facts last
# changed, is memory (operator/memory.py: a run's in its RunMemory, a namespace's and the
# facts' as Memories.changed), each changed in one step under that module's one lock. A
# change is numbered (Memories.number) after the caches show it, and a decision takes a number
# before it reads anything: a keep is in force only while no change to what it read has a
# greater number. The round count is written by `next_round` alone, which only the resync calls,
# one round at a time (faces/reconciler.resync_forever awaits each); the workers only read it.

# What every decision reads, as a subject of Memories.change (no namespace is named so).
CLUSTER = "/cluster"


def _spec(obj: Mapping[str, Any]) -> object:
    return obj.get("spec")


def _claim_read(obj: Mapping[str, Any]) -> object:
    """What a run's decision reads of a claim (core/placement/reconcile.desired_claims): its access
    modes and owners, not its status or annotations, which the binding rewrites."""
    return ((obj.get("spec") or {}).get("accessModes"), tuple(owner_uids(obj)))


def _run_owners(obj: Mapping[str, Any]) -> list[str]:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return [str(r["uid"]) for r in refs
            if isinstance(r, Mapping) and r.get("kind") == "PipelineRun" and r.get("uid")]


class Settled:
    def __init__(self, rounds: int, index: PodIndex, memory: Memories) -> None:
        self.rounds = rounds
        self.index = index
        self.memory = memory
        self.round = 0  # resync rounds begun (next_round's alone)
        # A change to a run is remembered two rounds (decisions take less), then forgotten:
        # the number handed out at the last two rounds' ends (next_round's alone).
        self._pruned: list[int] = [0, 0]

    # -- what the operator says -----------------------------------------------------------

    def begin(self) -> int:
        """Taken before a decision reads anything: what `settle` compares changes with."""
        return self.memory.number()

    def settle(self, uid: str, namespace: str, begun: int, reads: object = None) -> None:
        """The run's decision kept its balloon as it is (on what it read after `begun`, and
        `reads` of the run: core/placement/reconcile.reads). A change to the run that came
        meanwhile leaves it unsettled; one to its namespace or the facts, at any time, too."""
        kept = Kept(self.round, reads, namespace, begun)
        if self._in_force(kept):
            self.memory.update(uid, lambda m: m if m.touched > begun else replace(m, kept=kept))

    def forget(self, uid: str) -> None:
        """Any other decision, or the run ended: reconciled by every round while it lives."""
        self.memory.reset(uid, "kept")

    def quiet(self, uid: str, reads: object) -> bool:
        """The run is settled and its event changed nothing its decision reads of it."""
        kept = self.memory.get(uid).kept
        return kept is not None and kept.reads == reads and self._in_force(kept)

    def skips(self, uid: str) -> bool:
        """Whether this round of the resync leaves the run alone."""
        kept = self.memory.get(uid).kept
        return (kept is not None and self.round - kept.round < self.rounds
                and self._in_force(kept))

    def next_round(self) -> None:
        self.round += 1
        oldest = self._pruned.pop(0)
        self._pruned.append(self.memory.number())

        def old(m: RunMemory) -> bool:
            return 0 < m.touched <= oldest

        for uid in self.memory.runs(old):
            self.memory.update(uid, lambda m: m.reset("touched") if old(m) else m)

    def _in_force(self, kept: Kept) -> bool:
        """No change to what every decision of its namespace reads, or every decision, came
        after its decision began (a change to the run itself takes its keep away: touch)."""
        return self.memory.changed(kept.namespace, CLUSTER) <= kept.begun

    # -- what changed ---------------------------------------------------------------------

    def touch(self, uids: Iterable[str]) -> None:
        number = self.memory.number()
        for uid in uids:
            self.memory.update(
                uid, lambda m: replace(m, touched=max(m.touched, number), kept=None))

    def touch_namespace(self, namespace: str) -> None:
        self.memory.change(namespace)

    def touch_labelled(self, obj: Mapping[str, Any]) -> None:
        """Our own objects (balloons, their pods, reservation pods) name their run."""
        uid = ((obj.get("metadata") or {}).get("labels") or {}).get(names.LABEL_RUN_UID)
        if uid:
            self.touch((str(uid),))

    def on_balloon_pod(self, pod: Mapping[str, Any], deleted: bool) -> None:
        """Called before the pod index learns of the event: the run is unsettled when its
        balloon pod is made, bound or deleted, not by its status's other updates (a run's
        balloon pod changes status a few times while it waits, and each was a reconcile)."""
        meta = pod.get("metadata") or {}
        uid = str((meta.get("labels") or {}).get(names.LABEL_RUN_UID) or "")
        known = self.index.balloon(uid)
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        if deleted or known is None or known.uid != meta.get("uid") or known.node != node:
            self.touch((uid,))

    def on_facts(self, old: Facts, new: Facts) -> None:
        # A policy's status (which we write) changes its object, not what a decision reads:
        # where a pipeline last ran is read only by a run's first decision.
        if replace(old, policy_objects=(), warm_status={}) != replace(new, policy_objects=(),
                                                                      warm_status={}):
            self.memory.change(CLUSTER)

    def listen_to(self, caches: Caches) -> None:
        caches.listen("balloons", self.touch_labelled, reads=_spec)
        caches.listen("claims", self._claim, reads=_claim_read)
        caches.listen("resolutionrequests", self._request)
        for kind in ("tasks", "pipelines", "limitranges"):
            caches.listen(kind, self._in_namespace, reads=_spec)
        caches.listen("resourcequotas", self._in_namespace)  # its status.used is read

    def _claim(self, obj: Mapping[str, Any]) -> None:
        """A claim Tekton made for a run is that run's; one a run names (or that nobody owns)
        may be named by any run of the namespace."""
        runs = _run_owners(obj)
        if runs:
            self.touch(runs)
        else:
            self.touch_namespace(namespace_of(obj))

    def _request(self, obj: Mapping[str, Any]) -> None:
        # A run's decision reads the requests it owns; a TaskRun's own are not read.
        self.touch(_run_owners(obj))

    def _in_namespace(self, obj: Mapping[str, Any]) -> None:
        self.touch_namespace(namespace_of(obj))
