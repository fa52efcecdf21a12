"""Marks and gates: what the leader writes on a run's objects so that its pods stay beside its
anchor.

Marks (core/placement/mark.py) keep an anchored run anchored to its end. A run the operator
makes a balloon or a reservation for is marked once, as soon as Tekton has made its own first
writes to it (core/placement/mark.ready): its PipelineRun, and the TaskRuns Tekton made before
the mark whose pods the pod watch has shown (Tekton copies the mark to those it makes after).
Those are few: Tekton makes a run's first TaskRuns after the writes the mark waits for, so a
LIST of the run's TaskRuns at each mark patched 0.02 of them a run (bench). When a namespace is
switched off, its marked runs' TaskRuns are listed and looked at once more: one still without a
pod at the mark, one whose pod the watch had not shown yet, or one Tekton made from a copy of
the run read just before it. Until then the pods of such a TaskRun are tied by admission as the
namespace is enabled: they are served all the same.

Gates (core/placement/gate.py): the scheduling gate admission put on a run's pods is released
once the run's balloon pod is bound: on the balloon pod's binding, on a gated pod's event when
the anchor is already known (a pod made just before the run's mark reached its TaskRun, or
replayed by the pod watch after a restart), at every resync round for a release that failed,
for a run that ends, and for every gated pod when this process stops leading. So is the
placeholder of Tekton's assistant that admission held in an opted-in namespace, given its run's
anchor's node in the same patch (it mounts the run's claims: elsewhere it would take them); as
it is for a run that gets no balloon (operator/runs.py: opted out, not ours, ended).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

import structlog

from controller.core.basics import names
from controller.core.basics.actions import Mark, ReleaseGate
from controller.core.model import tekton
from controller.core.placement import gate, mark, runplan
from controller.core.placement.memory import Gated, Placeholder, RunMemory
from controller.kube.client import Kube
from controller.kube.clusterview import Facts
from controller.kube.nodeindex import NodeIndex
from controller.kube.podindex import PodIndex
from controller.operator.apply import Applier
from controller.operator.memory import Memories, Soon

log = structlog.get_logger(__name__)


class Marks:
    def __init__(
        self, kube: Kube, applier: Applier, installation: str,
        live: Callable[[], Iterable[tekton.PipelineRun]], index: PodIndex, memory: Memories,
        soon: Soon,
    ) -> None:
        self.kube = kube  # reads: a run's TaskRuns
        self.applier = applier
        self.installation = installation  # our namespace label, `label=value`
        self.live = live
        self.index = index
        self.memory = memory  # RunMemory.marked: marked by this process, before the watch shows it
        self.soon = soon  # work of a run on the queue, under its key (Operator.soon)
        # Set once the live runs are known (the first resync lists every run): until then,
        # which namespaces hold anchored runs is not known.
        self.seeded = False

    def serves(self, run: tekton.PipelineRun, facts: Facts) -> bool:
        """The run is ours: its namespace is enabled, or it was anchored before it was not."""
        return facts.namespace_enabled(run.namespace) or self.marked(run)

    def marked(self, run: tekton.PipelineRun) -> bool:
        return mark.by(run, self.installation) or self.memory.get(run.uid).marked

    def marking(self, run: tekton.PipelineRun, facts: Facts) -> runplan.Marking:
        """What the run's plan reads to mark it (core/placement/runplan.py): a run not marked
        yet is marked with its TaskRuns the pod watch has shown, once Tekton's first writes
        are done (they wake the run)."""
        return runplan.Marking(self.installation, facts.topology_key(run.namespace),
                               self.marked(run), tuple(self.index.task_runs(run.uid)))

    def _mark_task_runs(self, run: tekton.PipelineRun, topology_key: str,
                        names: Iterable[str]) -> None:
        patch = mark.patch(run.uid, topology_key, self.installation)
        self.applier.apply(run, [Mark("taskruns", run.namespace, name, patch) for name in names])

    def held(self) -> frozenset[str] | None:
        """The namespaces of the live runs this installation anchored; None until known."""
        if not self.seeded:
            return None
        return frozenset(run.namespace for run in self.live() if self.marked(run))

    def forget(self, run_uid: str) -> None:
        self.memory.reset(run_uid, "marked")

    def on_facts(self, old: Facts, new: Facts) -> None:
        """A namespace switched off: its marked runs' TaskRuns are looked at once more, each
        run's as work under its key (the view's watch thread never writes; a failure is the
        queue's to try again)."""
        gone = old.enabled_namespaces - new.enabled_namespaces
        if not (gone and old.synced):
            return
        for run in self.live():
            if run.namespace in gone and self.marked(run):
                key = mark.topology_key(run.annotations) or new.topology_key(run.namespace)
                self.soon(run.uid, "mark taskruns",
                          functools.partial(self._mark_listed, run, key), 0.0)

    def _mark_listed(self, run: tekton.PipelineRun, topology_key: str) -> None:
        listed = self.kube.list_task_runs(run.namespace, run.name)
        self._mark_task_runs(run, topology_key, mark.unmarked(listed, run.uid))


# -- gates --------------------------------------------------------------------------------------


class Gates:
    def __init__(self, applier: Applier, index: PodIndex, memory: Memories,
                 nodes: NodeIndex | None = None) -> None:
        self.applier = applier
        self.index = index
        # RunMemory.gated, .placeholders: the run's held pods not yet seen released
        self.memory = memory
        self.nodes = nodes  # the anchor's node's hostname label

    def on_placeholder(self, pod: Mapping[str, Any], run_uid: str, deleted: bool = False) -> bool:
        """A placeholder of the run: remembered while held, released at once beside a bound
        anchor. True: it waits, and the run's look decides for it (its balloon, or none)."""
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        pod_uid = str(meta.get("uid") or "")
        if deleted or not gate.held(spec, gate.PLACEHOLDER_GATE):
            self.memory.released(run_uid, pod_uid)
            return False
        pinned = gate.HOSTNAME in (spec.get("nodeSelector") or {})
        seen = Placeholder(pod_uid, str(meta.get("namespace") or ""),
                           str(meta.get("name") or ""), pinned)
        self.memory.update(run_uid, lambda m: replace(
            m, placeholders=_with(m.placeholders, seen)))
        if self.index.anchor(run_uid):
            self._release(run_uid)
            return False
        return True

    def on_task_pod(self, pod: Mapping[str, Any], deleted: bool = False) -> None:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        run = tekton.task_run_pod_run(meta.get("labels") or {})
        if run is None or not run.uid:
            return
        pod_uid = str(meta.get("uid") or "")
        if deleted or not gate.held(spec):
            self.memory.released(run.uid, pod_uid)
            return
        seen = Gated(pod_uid, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        self.memory.update(run.uid, lambda m: replace(m, gated=_with(m.gated, seen)))
        if self.index.anchor(run.uid):
            self._release(run.uid)

    def on_balloon_pod(self, pod: Mapping[str, Any], deleted: bool = False) -> None:
        meta = pod.get("metadata") or {}
        uid = str((meta.get("labels") or {}).get(names.LABEL_RUN_UID) or "")
        if not deleted and (pod.get("spec") or {}).get("nodeName") and uid:
            self._release(uid)

    def tend(self) -> None:
        """Releases what a failed call left held (called by the resync)."""
        for uid in self.memory.runs(_holds):
            if self.index.anchor(uid):
                self._release(uid)

    def release_all(self) -> None:
        """This process stops leading: nothing it gated may wait for it (a rollback to a
        release that does not know the gate would never release it). Also once the Lease is
        no longer ours (faces/reconciler.py writes it unfenced), and safe then: the gate only
        keeps a pod from racing its balloon for their claims; each pod keeps its required term
        beside the balloon, so released early it waits for the anchor's node as it would have,
        and the next leader would take the gate off the same pods."""
        for uid in self.memory.runs(_holds):
            try:
                self._release(uid)
            except Exception as exc:  # leadership ends: said, and the rest released
                log.warning("could not release a run's scheduling gates", run=uid,
                            error=repr(exc))

    def forget(self, run_uid: str) -> None:
        """The run ended, is deleted or gets no balloon: none of its pods waits for one."""
        self._release(run_uid)

    def _release(self, run_uid: str) -> None:
        """Every held pod of the run released (its placeholders beside its anchor, if bound)."""
        self.applier.release_gates(self.releases(run_uid))

    def releases(self, run_uid: str) -> list[ReleaseGate]:
        """What releasing the run's held pods is, as it stands (core/placement/gate.releases)."""
        return gate.releases(run_uid, **self.held(run_uid))

    def held(self, run_uid: str) -> dict[str, Any]:
        """The run's held pods, and its anchor's node's hostname ("" while it has none)."""
        node = self.index.anchor(run_uid) or ""
        host = (self.nodes.images().hostnames.get(node) if self.nodes else None) or node
        m = self.memory.get(run_uid)
        return {"gated": m.gated, "placeholders": m.placeholders, "host": host}


def _holds(m: RunMemory) -> object:
    return m.gated or m.placeholders


Held = TypeVar("Held", Gated, Placeholder)


def _with(gated: tuple[Held, ...], pod: Held) -> tuple[Held, ...]:
    """The gated pods with this one, in the order first seen gated (a pod seen again keeps its
    place, with its newest name)."""
    if any(g.uid == pod.uid for g in gated):
        return tuple(pod if g.uid == pod.uid else g for g in gated)
    return gated + (pod,)  # noqa: RUF005 (mypy: no spread of a constrained type variable)
