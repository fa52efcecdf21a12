"""What a run's capacity and resolution are computed from, read once per event from the leader's
caches and the pod index: its named Pipeline, its ResolutionRequests, its reservation pods.

Capacity and resolution used to read these on their own, each when it was asked (a run's
event read its Pipeline three times and its requests twice); now the observation reads them
once (operator/observe.py) and hands them to both, and a reservation's tending does the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from controller.core.basics.times import parse_time
from controller.core.model import resolution, tekton
from controller.kube.caches import Caches
from controller.operator.podindex import PodIndex

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


def rooms(index: PodIndex, run_uid: str, now: datetime) -> list[Mapping[str, Any]]:
    """The run's reservation pods as the pod watch shows them, the newest first."""
    return sorted(index.rooms(run_uid), key=lambda p: age(p, now))


def read(caches: Caches | None, index: PodIndex, run: tekton.PipelineRun) -> Sources:
    now = datetime.now(UTC)
    listed = caches.owned_by(RESOLUTION_REQUESTS, run.uid) if caches is not None else None
    return Sources(
        pipeline=None if run.pipeline_spec else named_pipeline(caches, run),
        requests=None if listed is None else resolution.owned_by(listed, run.uid),
        rooms=rooms(index, run.uid, now),
        tasks_synced=caches is not None and caches.is_synced("tasks"),
    )
