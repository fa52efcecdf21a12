"""Pure: what a run's pods say of its progress, from the pod watch's record of them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from controller.core import quantity
from controller.core.anchor import TERMINAL_PHASES, RunPod


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


def task_requests(pods: Iterable[RunPod]) -> dict[str, dict[str, int]]:
    """What one pod of each of the run's pipeline tasks asks (the most, per resource, of its
    pods: a matrix's or a retry's)."""
    by_task: dict[str, list[Mapping[str, int]]] = {}
    for p in pods:
        if p.task:
            by_task.setdefault(p.task, []).append(p.requests)
    return {task: quantity.maximum(asks) for task, asks in by_task.items()}
