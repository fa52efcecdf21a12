"""Pure: what a pod says: where it is, why it is not there yet, and a run's pod as the pod
watch records it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from controller.core.basics.times import parse_time
from controller.core.model import podrequests, tekton

HOSTNAME = "kubernetes.io/hostname"
TERMINAL_PHASES = ("Succeeded", "Failed")


def unschedulable(pod: Mapping[str, Any], now: datetime) -> tuple[bool, str, datetime]:
    """Whether the scheduler found no node for the pod, what it said, and since when (`now`
    when its condition has no time)."""
    cond = scheduled_condition(pod)
    waiting = cond.get("status") == "False" and cond.get("reason") == "Unschedulable"
    since = parse_time(cond.get("lastTransitionTime")) or now
    return waiting, str(cond.get("message") or ""), since


def scheduled_condition(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    """The PodScheduled condition (the scheduler's own words on why a pod has no node)."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "PodScheduled":
            return cond
    return {}


@dataclass(frozen=True)
class RunPod:
    name: str
    node: str
    phase: str
    task: str = ""  # its pipeline task (tekton.dev/pipelineTask)
    requests: Mapping[str, int] = field(default_factory=dict)  # as the scheduler counts them
    task_run: str = ""  # its TaskRun (tekton.dev/taskRun)

    @property
    def holds_the_node(self) -> bool:
        """A pod that still runs (or is about to) where it is bound keeps its volume there."""
        return bool(self.node) and self.phase not in TERMINAL_PHASES


def run_pod(pod: Mapping[str, Any]) -> RunPod:
    """A TaskRun pod as the decision (and the pod index) reads it."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    try:
        requests = podrequests.of_pod(pod)
    except ValueError:  # the API server accepted it, so this cannot be; count nothing
        requests = {}
    return RunPod(
        str(meta.get("name") or ""),
        str(spec.get("nodeName") or ""),
        str((pod.get("status") or {}).get("phase") or "Pending"),
        str((meta.get("labels") or {}).get(tekton.LABEL_PIPELINE_TASK) or ""),
        requests,
        str((meta.get("labels") or {}).get(tekton.LABEL_TASK_RUN) or ""),
    )


@dataclass(frozen=True)
class BalloonPod:
    name: str
    namespace: str
    uid: str
    run_name: str
    node: str
    tolerations: tuple[Mapping[str, Any], ...]
    claims: tuple[str, ...]
    bound_at: datetime | None = None  # when the scheduler bound it (None: not yet)


def balloon_pod(pod: Mapping[str, Any], namespace: str, run_name: str,
                bound_before: datetime | None, now: datetime) -> BalloonPod:
    """A balloon pod as the pod index keeps it. `bound_before`: when this same pod was first
    seen bound, kept over later events; else its PodScheduled condition's time, else `now`."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    node = str(spec.get("nodeName") or "")
    bound_at = None
    if node:
        cond = scheduled_condition(pod)
        bound_at = bound_before or (
            parse_time(cond.get("lastTransitionTime")) if cond.get("status") == "True"
            else None) or now
    return BalloonPod(
        name=str(meta.get("name") or ""),
        namespace=namespace,
        uid=str(meta.get("uid") or ""),
        run_name=run_name,
        node=node,
        tolerations=tuple(t for t in spec.get("tolerations") or [] if isinstance(t, dict)),
        claims=tuple(
            v["persistentVolumeClaim"]["claimName"]
            for v in spec.get("volumes") or []
            if isinstance(v, dict) and isinstance(v.get("persistentVolumeClaim"), dict)
        ),
        bound_at=bound_at,
    )
