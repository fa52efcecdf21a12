"""Marks anchored runs, so that they stay anchored to their end (core/placement/mark.py).

A run the operator makes a balloon or a reservation for is marked once, as soon as Tekton has
made its own first writes to it (core/placement/mark.ready): its PipelineRun, and the TaskRuns
Tekton made before the mark whose pods the pod watch has shown (Tekton copies the mark to those it
makes after). Those are few: Tekton makes a run's first TaskRuns after the writes the mark
waits for, so a LIST of the run's TaskRuns at each mark patched 0.02 of them a run (bench).
When a namespace is switched off, its marked runs' TaskRuns are listed and looked at once more:
one still without a pod at the mark, one whose pod the watch had not shown yet, or one Tekton
made from a copy of the run read just before it. Until then the pods of such a TaskRun are
tied by admission as the namespace is enabled: they are served all the same.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import structlog

from controller.core.basics.actions import Mark
from controller.core.model import tekton
from controller.core.placement import mark
from controller.kube import errors
from controller.kube.client import ApiError, Kube, api_message
from controller.kube.clusterview import Facts
from controller.operator.executor import Executor
from controller.operator.memory import Memories
from controller.operator.podindex import PodIndex

log = structlog.get_logger(__name__)


class Marks:
    def __init__(
        self, kube: Kube, executor: Executor, installation: str,
        live: Callable[[], Iterable[tekton.PipelineRun]], index: PodIndex, memory: Memories,
    ) -> None:
        self.kube = kube  # reads: a run's TaskRuns
        self.executor = executor
        self.installation = installation  # our namespace label, `label=value`
        self.live = live
        self.index = index
        self.memory = memory  # RunMemory.marked: marked by this process, before the watch shows it
        # Set once the live runs are known (the first resync lists every run): until then,
        # which namespaces hold anchored runs is not known.
        self.seeded = False

    def serves(self, run: tekton.PipelineRun, facts: Facts) -> bool:
        """The run is ours: its namespace is enabled, or it was anchored before it was not."""
        return facts.namespace_enabled(run.namespace) or self.marked(run)

    def marked(self, run: tekton.PipelineRun) -> bool:
        return mark.by(run, self.installation) or self.memory.get(run.uid).marked

    def ensure(self, run: tekton.PipelineRun, topology_key: str) -> bool:
        """Marks the run and its TaskRuns, once. A failure that may mend is raised (the work
        queue tries again); one that cannot is logged (False): the run stays anchored while its
        namespace is enabled, and its next event tries again."""
        if self.marked(run) or not mark.ready(run):
            return True  # marked, or Tekton's first writes still to come: they wake the run
        try:
            self.executor.do(Mark("pipelineruns", run.namespace, run.name,
                                  mark.patch(run.uid, topology_key, self.installation))).get()
            self._mark_task_runs(run, topology_key, self.index.task_runs(run.uid))
        except ApiError as exc:
            if errors.classify(exc).retry:
                raise  # the run's event is tried again after a backoff (faces/serial.py)
            log.warning("could not mark the anchored run", error=f"{exc.status} {api_message(exc)}",
                        object=f"PipelineRun/{run.namespace}/{run.name}")
            return False
        self.memory.set(run.uid, marked=True)
        return True

    def _mark_task_runs(self, run: tekton.PipelineRun, topology_key: str,
                        names: Iterable[str]) -> None:
        for name in names:
            self.executor.do(Mark("taskruns", run.namespace, name,
                                  mark.patch(run.uid, topology_key, self.installation))).get()

    def held(self) -> frozenset[str] | None:
        """The namespaces of the live runs this installation anchored; None until known."""
        if not self.seeded:
            return None
        return frozenset(run.namespace for run in self.live() if self.marked(run))

    def forget(self, run_uid: str) -> None:
        self.memory.reset(run_uid, "marked")

    def on_facts(self, old: Facts, new: Facts) -> None:
        """A namespace switched off: its marked runs' TaskRuns are looked at once more."""
        gone = old.enabled_namespaces - new.enabled_namespaces
        if not (gone and old.synced):
            return
        for run in self.live():
            if run.namespace in gone and self.marked(run):
                key = mark.topology_key(run.annotations) or new.topology_key(run.namespace)
                try:
                    listed = self.kube.list_task_runs(run.namespace, run.name)
                    self._mark_task_runs(run, key, mark.unmarked(listed, run.uid))
                except ApiError as exc:
                    log.warning("could not mark the anchored run's TaskRuns",
                                error=f"{exc.status} {api_message(exc)}",
                                object=f"PipelineRun/{run.namespace}/{run.name}")
