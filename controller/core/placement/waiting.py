"""Pure: pods that wait for a node, and when that is worth a person's attention.

A pod of an anchored run that the scheduler cannot place beside its balloon, or a balloon the
scheduler cannot place at all, waits. Much of that resolves itself (a claim Tekton creates a
moment after the balloon, a scheduler retry, a volume still binding), so nothing is said until
it has lasted a grace period; then a Warning with the scheduler's own words and what would free
the pod. A run that starts within the grace period gets no Warning.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from controller.core.basics.actions import Count, Planned, Say
from controller.core.basics.notices import Notice
from controller.core.placement.runplan import reference

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


# -- plans: what one look at a run's waiting pods, and one round's look at a balloon, do --------


@dataclass(frozen=True)
class WaitingView:
    """A run's waiting pods as the pod index shows them, read before anything is said."""

    run_uid: str
    namespace: str
    run_name: str
    pods: tuple[Waiting, ...]
    now: datetime
    pod_grace: float  # a task pod's (Settings.pod_stuck_after)
    balloon_grace: float  # the balloon's (Settings.balloon_stuck_after)
    bound_at: datetime | None = None  # when its balloon pod was bound (None: not yet, or none)
    holds: frozenset[str] = frozenset()  # what the run's running pods hold on its anchor
    tekton_makes: frozenset[str] = frozenset()  # the claims Tekton makes for the run


@dataclass(frozen=True)
class WaitingPlan:
    actions: tuple[Planned, ...] = ()  # each pod past its grace said (once per pod and reason)
    requeue_after: float | None = None  # seconds until the next grace ends: looked at again


def plan(view: WaitingView) -> WaitingPlan:
    """Each pod past its grace said, a balloon's counted as a balloon problem; the run looked
    at again half a second after the soonest grace still running ends."""
    ref = reference(view.run_name, view.namespace, view.run_uid)
    acts: list[Planned] = []
    soonest: float | None = None
    for pod in view.pods:
        grace = view.balloon_grace if pod.balloon else view.pod_grace
        if not (pod.balloon or pod.assistant):
            # A task pod waits for its anchor first, and what holds the anchor is said on its
            # own (BalloonUnschedulable, WaitingForRoom, ...): its own grace starts once the
            # balloon is bound (whose event looks at the run again).
            if view.bound_at is None:
                continue
            pod = replace(pod, since=max(pod.since, view.bound_at))
        if (wait := left(pod, view.now, grace)) > 0:
            soonest = wait if soonest is None else min(soonest, wait)
            continue
        said = notice(pod, view.now, grace, view.tekton_makes if pod.balloon else (),
                      () if pod.balloon else view.holds)
        if said is None:
            continue
        if pod.balloon:
            acts.append(Count("balloon_problems", (("reason", "unschedulable"),)))
        acts.append(Say(ref, said, (view.run_uid, pod.pod, said.reason)))
    return WaitingPlan(tuple(acts), None if soonest is None else soonest + 0.5)


class Ask(enum.Enum):
    FAILURES = "the StatefulSet controller's FailedCreate Events in the run's namespace"
    # The pod watch may lag, and the round's view of the run and StatefulSet predate the run's
    # end (its balloon deleted, the pod gone): asked of the API server before a Warning.
    CONFIRM = "the balloon's pods, its StatefulSet and the run, as the API server has them"


@dataclass(frozen=True)
class NoPodView:
    """A live run's balloon StatefulSet, as one resync round sees it."""

    run_uid: str
    namespace: str
    run_name: str
    age: float | None  # seconds since the StatefulSet was made (None: no time on it)
    has_pod: bool  # the pod index knows a pod of the balloon
    grace: float  # Settings.balloon_stuck_after
    idle: float  # seconds since the newest balloon pod seen was made (inf: none seen)
    failures: tuple[str, ...] | None = None  # what FailedCreate said of it (None: not read)
    confirmed: bool | None = None  # the API server agrees (None: not asked)


@dataclass(frozen=True)
class NoPodPlan:
    ask: Ask | None = None  # read this and plan again, before acting
    actions: tuple[Planned, ...] = ()


def no_pod_plan(view: NoPodView) -> NoPodPlan:
    """A balloon without a pod past its grace said on its run (core/placement/waiting.no_pod),
    once confirmed; what it reads is asked for only once it may be said."""
    if view.age is None or view.has_pod or view.age < view.grace:
        return NoPodPlan()
    if view.failures is None:
        return NoPodPlan(Ask.FAILURES)
    said = no_pod(view.age, view.grace, view.failures, view.idle)
    if said is None or view.confirmed is False:
        return NoPodPlan()
    if view.confirmed is None:
        return NoPodPlan(Ask.CONFIRM)
    ref = reference(view.run_name, view.namespace, view.run_uid)
    return NoPodPlan(actions=(Count("balloon_problems", (("reason", "not-placed"),)),
                              Say(ref, said, view.run_uid)))
