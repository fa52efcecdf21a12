"""Pure: pods that wait for a node, and when that is worth a person's attention.

A pod of an anchored run that the scheduler cannot place beside its balloon, or a balloon the
scheduler cannot place at all, waits. Much of that resolves itself (a claim Tekton creates a
moment after the balloon, a scheduler retry, a volume still binding), so nothing is said until
it has lasted a grace period; then a Warning with the scheduler's own words and what would free
the pod. A run that starts within the grace period gets no Warning.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

from controller.core.basics.notices import Notice

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


_CLAIM_NOT_FOUND = re.compile(r'persistentvolumeclaim "([^"]+)" not found')


def missing_claim(message: str) -> str:
    """The claim the scheduler could not find, as it names it; "" if it names none."""
    found = _CLAIM_NOT_FOUND.search(message)
    return found.group(1) if found else ""


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


# The resource each "Insufficient ..." reason waits for.
_RESOURCE = {"cpu": "cpu", "memory": "memory", "ephemeral-storage": "ephemeral-storage",
             "pods": "pods"}


def left(w: Waiting, now: datetime, grace: float) -> float:
    """Seconds before the pod has waited out its grace (0 or less: it has); the operator looks
    at its run again then, and `notice` says nothing before."""
    return grace - (now - w.since).total_seconds()


def notice(
    w: Waiting, now: datetime, grace: float, tekton_makes: Collection[str] = (),
    run_holds: Collection[str] = (),
) -> Notice | None:
    """The Warning to give once the pod has waited past the grace period; None before.

    `tekton_makes`: the claims Tekton makes for the run (its volumeClaimTemplate workspaces).
    A balloon waiting for one of them waits for Tekton, which makes them before any TaskRun:
    no pod of the run waits meanwhile, and nothing is said at any grace or load.
    `run_holds`: the resources the run's own running pods hold on its anchor. A pod waiting for
    one of them takes its turn after its siblings (a layer wider than the node), which ends by
    itself: nothing is said while they run."""
    if left(w, now, grace) > 0:
        return None
    waited = (now - w.since).total_seconds()
    if w.balloon and missing_claim(w.message) in tekton_makes:
        return None
    if not w.balloon and _RESOURCE.get(w.reason) in run_holds:
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


# The StatefulSet controller makes a balloon's pod within moments, even in a burst of runs: no
# pod this long after, and no failure said, is a controller that does not run.
CONTROLLER_GRACE = 60.0


def no_pod(age: float, grace: float, failures: Sequence[str],
           controller_idle: float = float("inf")) -> Notice | None:
    """A balloon StatefulSet without a pod `age` seconds after it was made: a Warning once the
    StatefulSet controller has said why it could not make one (`failures`: its FailedCreate
    Events, newest last; quota, LimitRange, admission), or once it has been silent for long:
    it has made this pod nor any other balloon's for a while (`controller_idle`: seconds since
    the newest balloon pod seen was made). A controller that keeps making the others' is
    working through a burst, at its own rate (1,000 runs at once: more than a minute)."""
    if age < grace:
        return None
    if failures:
        return Notice("BalloonNotPlaced", f"the balloon's pod could not be made ({failures[-1]}); "
                      "the run's pods wait for it")
    if age < max(grace, CONTROLLER_GRACE) or controller_idle < CONTROLLER_GRACE:
        return None
    return Notice("BalloonNotPlaced", f"the balloon's StatefulSet has made no pod in {int(age)}s "
                  "(is kube-controller-manager running?); the run's pods wait for it")
