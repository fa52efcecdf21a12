"""Pure: pods that wait for a node, and when that is worth a person's attention.

A pod of an anchored run that the scheduler cannot place beside its balloon, or a balloon the
scheduler cannot place at all, waits. Much of that resolves itself (a claim Tekton creates a
moment after the balloon, a scheduler retry, a volume still binding), so nothing is said until
it has lasted a grace period; then a Warning with the scheduler's own words and what would free
the pod. A run that starts within the grace period gets no Warning.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from controller.core.notices import Notice

# The scheduler's words (k8s.io/kubernetes pkg/scheduler/framework/plugins) -> a reason label.
_REASONS = (
    (re.compile(r"Insufficient cpu"), "cpu"),
    (re.compile(r"Insufficient memory"), "memory"),
    (re.compile(r"Insufficient ephemeral-storage"), "ephemeral-storage"),
    (re.compile(r"Insufficient [a-z0-9.-]+/"), "extended-resource"),
    (re.compile(r"Too many pods"), "pods"),
    (re.compile(r"untolerated taint"), "taint"),
    (re.compile(r"didn't match Pod's node affinity/selector"), "node-selector"),
    (re.compile(r"didn't match pod affinity rules"), "anchor"),
    (
        re.compile(r"didn't match pod anti-affinity rules|existing pods anti-affinity"),
        "anti-affinity",
    ),
    (re.compile(r"persistentvolumeclaim .* not found|unbound immediate PersistentVolumeClaims"),
     "claim"),
    (re.compile(r"volume node affinity conflict|node\(s\) had volume node affinity conflict"),
     "volume-topology"),
    (re.compile(r"node\(s\) were unschedulable"), "cordoned"),
)

_FREES = {
    "cpu": "CPU freed on that node (its other pods ending) or a smaller request",
    "memory": "memory freed on that node (its other pods ending) or a smaller request",
    "pods": "a pod slot freed on that node",
    "taint": "the taint removed from that node, or the pod tolerating it",
    "node-selector": "the pod's node selector or affinity matching that node",
    "anti-affinity": "the pod's anti-affinity allowing the node its run shares",
    "cordoned": "the node uncordoned (the anchor moves off a cordoned node once it may)",
}


def reason_of(message: str) -> str:
    for pattern, reason in _REASONS:
        if pattern.search(message):
            return reason
    return "other"


@dataclass(frozen=True)
class Waiting:
    pod: str
    since: datetime
    message: str  # the scheduler's, from the PodScheduled condition
    balloon: bool = False
    anchor: str = ""  # the anchor's node, for a task pod
    # A pod of an anchored run that Tekton pinned to its own affinity assistant instead (made
    # while coschedule was 'workspaces'): the assistant it requires.
    assistant: str = ""

    @property
    def reason(self) -> str:
        return reason_of(self.message)


def notice(w: Waiting, now: datetime, grace: float) -> Notice | None:
    """The Warning to give once the pod has waited past the grace period; None before."""
    waited = (now - w.since).total_seconds()
    if waited < grace:
        return None
    if w.balloon:
        return Notice(
            "BalloonUnschedulable",
            f"no node fits the run's anchor (waiting {int(waited)}s): {w.message}",
        )
    if w.assistant:
        # Tekton pins a run's new pods to its assistant while coschedule is 'workspaces', but
        # makes assistants only for runs that start then: a run already running has none.
        return Notice(
            "PodWaitsForTektonAssistant",
            f"pod {w.pod} requires Tekton's affinity assistant {w.assistant} beside it "
            f"(waiting {int(waited)}s): {w.message}. Tekton added that requirement while its "
            f"assistant was on (coschedule: workspaces); for a run that started before, Tekton "
            f"makes no assistant and the pod cannot start: cancel the run and start it again",
        )
    where = f"node {w.anchor}" if w.anchor else "its anchor's node"
    frees = _FREES.get(w.reason, "what the scheduler names above")
    return Notice(
        "PodCannotFollowAnchor",
        f"pod {w.pod} cannot be placed beside its anchor on {where} (waiting {int(waited)}s): "
        f"{w.message}. It starts once there is {frees}"
        if w.reason in ("cpu", "memory", "pods")
        else f"pod {w.pod} cannot be placed beside its anchor on {where} "
        f"(waiting {int(waited)}s): {w.message}. It starts with {frees}",
    )
