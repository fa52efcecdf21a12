"""Runs the resync may leave alone: their last decision kept the balloon as it was, and nothing
their decision reads has changed since.

At 1,000 concurrent runs most of them wait (for their anchor, for Tekton) and send no event for
minutes; the resync reconciled each of them every round, a whole observation and decision to
learn again that the balloon stays (a fifth of the leader's CPU at 1,000 runs, and what made
the CPU per run grow with the number of runs). A run is settled by a "keep" decision and
unsettled by any change to what that decision read:

- the cluster's facts (policies, enabled namespaces, Tekton's configuration): every run;
- its balloon StatefulSet's spec, its claims' access modes and owners, its ResolutionRequests
  (by owner), its reservation pods, its balloon pod made, bound or deleted: that run;
- the namespace's ResourceQuotas, LimitRanges', Tasks' and Pipelines' specs, and claims no
  PipelineRun owns: the namespace's runs.

Only what the decision reads counts: a claim's binding and a StatefulSet's status are
rewritten a few times for every run, and at 1,000 runs in one namespace a claim of a run not
settled yet unsettled all of the namespace's.

A settled run's own events wake it only when they change what its decision reads of the run
(core/placement/reconcile.reads): Tekton rewrites a running run's status a few dozen times, and each
was a whole reconcile.

A run stays settled at most `rounds` rounds, the safety net for what no watch said (a watch
that lost its place and listed again tells no listener what changed meanwhile).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, NamedTuple

from controller.core.basics import names
from controller.kube.caches import Caches
from controller.kube.clusterview import Facts
from controller.kube.store import namespace_of, owner_uids
from controller.operator.podindex import PodIndex


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


class _Kept(NamedTuple):
    round: int  # the round it was settled in
    reads: object  # what its decision read of the run
    namespace: str


class Settled:
    def __init__(self, rounds: int, index: PodIndex) -> None:
        self.rounds = rounds
        self.index = index
        self.round = 0  # resync rounds begun
        self._kept: dict[str, _Kept] = {}  # settled run uid -> when, on what, where
        # A touch that comes while a run is being decided must not be lost by the "keep" that
        # follows: each touch is numbered, and a decision settles only if none came after the
        # number it took before its observation (kept two rounds: decisions take less).
        self._seq = 0
        self._touched: dict[str, int] = {}  # run uid or namespace ("ns:" prefix) -> its last
        self._all_touched = 0
        self._pruned: list[int] = [0, 0]  # the sequence number at the last two rounds' ends
        self._by_namespace: dict[str, set[str]] = {}  # namespace -> its settled runs
        self._lock = threading.Lock()

    # -- what the operator says -----------------------------------------------------------

    def begin(self) -> int:
        """Taken before a decision's observation: what `settle` compares touches with."""
        with self._lock:
            return self._seq

    def settle(self, uid: str, namespace: str, begun: int, reads: object = None) -> None:
        """The run's decision kept its balloon as it is (on what it read after `begun`, and
        `reads` of the run: core/placement/reconcile.reads)."""
        with self._lock:
            last = max(self._touched.get(uid, 0), self._touched.get("ns:" + namespace, 0),
                       self._all_touched)
            if last > begun:
                return
            self._kept[uid] = _Kept(self.round, reads, namespace)
            self._by_namespace.setdefault(namespace, set()).add(uid)

    def forget(self, uid: str) -> None:
        """Any other decision, or the run ended: reconciled by every round while it lives."""
        with self._lock:
            self._drop(uid)

    def quiet(self, uid: str, reads: object) -> bool:
        """The run is settled and its event changed nothing its decision reads of it."""
        with self._lock:
            kept = self._kept.get(uid)
            return kept is not None and kept.reads == reads

    def skips(self, uid: str) -> bool:
        """Whether this round of the resync leaves the run alone."""
        with self._lock:
            kept = self._kept.get(uid)
            return kept is not None and self.round - kept.round < self.rounds

    def next_round(self) -> None:
        with self._lock:
            self.round += 1
            oldest = self._pruned.pop(0)
            self._pruned.append(self._seq)
            self._touched = {k: n for k, n in self._touched.items() if n > oldest}

    # -- what changed ---------------------------------------------------------------------

    def touch(self, uids: Iterable[str]) -> None:
        with self._lock:
            self._seq += 1
            for uid in uids:
                self._touched[uid] = self._seq
                self._drop(uid)

    def touch_namespace(self, namespace: str) -> None:
        with self._lock:
            self._seq += 1
            self._touched["ns:" + namespace] = self._seq
            for uid in list(self._by_namespace.get(namespace, ())):
                self._drop(uid)

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
            with self._lock:
                self._seq += 1
                self._all_touched = self._seq
                self._kept.clear()
                self._by_namespace.clear()

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

    def _drop(self, uid: str) -> None:
        kept = self._kept.pop(uid, None)
        if kept is not None:
            runs = self._by_namespace.get(kept.namespace)
            if runs is not None:
                runs.discard(uid)
                if not runs:
                    del self._by_namespace[kept.namespace]
