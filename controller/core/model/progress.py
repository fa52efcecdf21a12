"""Pure: what a run's pods say of its progress, from the pod watch's record of them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from controller.core.basics import quantity
from controller.core.model.pods import TERMINAL_PHASES, RunPod


def progress(pods: Sequence[RunPod]) -> tuple[frozenset[str], dict[str, int], bool]:
    """The run's pipeline tasks whose pods all succeeded, what its running pods hold, and
    whether one of its pods waits for a node."""
    ended: dict[str, bool] = {}
    for p in pods:
        if p.task:
            ended[p.task] = ended.get(p.task, True) and p.phase == "Succeeded"
    held: dict[str, int] = {}
    for p in pods:
        if p.node and p.phase not in TERMINAL_PHASES:
            for r, a in p.requests.items():
                held[r] = held.get(r, 0) + a
    pending = any(not p.node and p.phase not in TERMINAL_PHASES for p in pods)
    return frozenset(t for t, ok in ended.items() if ok), held, pending


def pods_to_come(child_references: object, pods: Sequence[RunPod]) -> bool:
    """TaskRuns Tekton made for the run (its status's childReferences, in the order made) after
    the last one whose pod the watch has shown have no pod yet: their layer is still starting
    (Tekton resolves each remote task again per TaskRun, a second apart). A podless TaskRun
    before one with a pod is not waited for: its pod may have been deleted once it ended."""
    made = [
        str(c.get("name")) for c in child_references
        if isinstance(c, Mapping) and c.get("kind") == "TaskRun" and c.get("name")
    ] if isinstance(child_references, list) else []
    shown = {p.task_run for p in pods if p.task_run}
    last = max((i for i, name in enumerate(made) if name in shown), default=-1)
    return any(name not in shown for name in made[last + 1:])


def between_layers(pods: Sequence[RunPod]) -> bool:
    """A pod of the run has ended and none runs or waits: Tekton is making the next layer's
    pods (or the run is ending)."""
    return bool(pods) and all(p.phase in TERMINAL_PHASES for p in pods)


def task_requests(pods: Iterable[RunPod]) -> dict[str, dict[str, int]]:
    """What one pod of each of the run's pipeline tasks asks (the most, per resource, of its
    pods: a matrix's or a retry's)."""
    by_task: dict[str, list[Mapping[str, int]]] = {}
    for p in pods:
        if p.task:
            by_task.setdefault(p.task, []).append(p.requests)
    return {task: quantity.maximum(asks) for task, asks in by_task.items()}
