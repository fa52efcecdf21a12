"""Releases the scheduling gate admission put on a run's pods (core/placement/gate.py) once the
run's balloon pod is bound: on the balloon pod's binding, on a gated pod's event when the anchor is
already known (a pod made just before the run's mark reached its TaskRun, or replayed by the
pod watch after a restart), at every resync round for a release that failed, for a run that
ends, and for every gated pod when this process stops leading.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import structlog

from controller.core.basics import names
from controller.core.basics.actions import ReleaseGate
from controller.core.model import tekton
from controller.core.placement import gate
from controller.core.placement.memory import Gated
from controller.kube.client import ApiError, api_message
from controller.metrics import Metrics
from controller.operator.executor import Executor
from controller.operator.memory import Memories
from controller.operator.podindex import PodIndex

log = structlog.get_logger(__name__)


class Gates:
    def __init__(self, executor: Executor, index: PodIndex, metrics: Metrics,
                 memory: Memories) -> None:
        self.executor = executor
        self.index = index
        self.metrics = metrics
        self.memory = memory  # RunMemory.gated: the run's gated pods not yet seen released

    def on_task_pod(self, pod: Mapping[str, Any], deleted: bool = False) -> None:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        run = tekton.task_run_pod_run(meta.get("labels") or {})
        if run is None or not run.uid:
            return
        pod_uid = str(meta.get("uid") or "")
        if deleted or not gate.held(spec):
            self._seen_released(run.uid, pod_uid)
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
        for uid in self.memory.runs(lambda m: m.gated):
            if self.index.anchor(uid):
                self._release(uid)

    def release_all(self) -> None:
        """This process stops leading: nothing it gated may wait for it (a rollback to a
        release that does not know the gate would never release it). Also once the Lease is
        no longer ours (faces/reconciler.py writes it unfenced), and safe then: the gate only
        keeps a pod from racing its balloon for their claims; each pod keeps its required term
        beside the balloon, so released early it waits for the anchor's node as it would have,
        and the next leader would take the gate off the same pods."""
        for uid in self.memory.runs(lambda m: m.gated):
            try:
                self._release(uid)
            except Exception as exc:  # leadership ends: said, and the rest released
                log.warning("could not release a run's scheduling gates", run=uid,
                            error=repr(exc))

    def forget(self, run_uid: str) -> None:
        """The run ended or is deleted: its pods go with it, none waits for its anchor."""
        self._release(run_uid)

    def _release(self, run_uid: str) -> None:
        """Every gated pod of the run released; a failure that may mend is raised once the
        others were tried (the event is tried again after a backoff: faces/serial.py)."""
        again: Exception | None = None
        for pod_uid, namespace, name in self.memory.get(run_uid).gated:
            done = self.executor.do(ReleaseGate(namespace, name, pod_uid, gate.release()))
            if done.ok and done.value:
                self.metrics.gates_released.inc()
            elif (exc := done.error) is not None:
                if not isinstance(exc, ApiError) or (done.failure and done.failure.retry):
                    again = again or exc
                    continue
                log.warning("could not release a pod's scheduling gate",
                            error=f"{exc.status} {api_message(exc)}",
                            object=f"Pod/{namespace}/{name}")
                continue
            self._seen_released(run_uid, pod_uid)
        if again is not None:
            raise again

    def _seen_released(self, run_uid: str, pod_uid: str) -> None:
        self.memory.update(run_uid, lambda m: replace(
            m, gated=tuple(g for g in m.gated if g.uid != pod_uid)))


def _with(gated: tuple[Gated, ...], pod: Gated) -> tuple[Gated, ...]:
    """The gated pods with this one, in the order first seen gated (a pod seen again keeps its
    place, with its newest name)."""
    if any(g.uid == pod.uid for g in gated):
        return tuple(pod if g.uid == pod.uid else g for g in gated)
    return (*gated, pod)
