"""What the operator may do to the cluster, as data: every write it makes, and every Event it
says, is one of these, handed to the one executor (controller/operator/executor.py), which alone
talks to the API server's write methods and says how each went (operator/executor.Done).

Kept as data so that a decision can be read, compared and replayed without a cluster: a plan is
a sequence of actions, and the same plan applied twice asks the same of the API server.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from controller.core.basics.notices import Notice


@dataclass(frozen=True)
class Say:
    """An Event on `involved` (a PipelineRun's or a policy's reference), said once per `key`
    and reason while this process lives."""

    involved: Mapping[str, Any]
    notice: Notice
    key: Hashable


@dataclass(frozen=True)
class Unsay:
    """What was said for `key` and `reason` may be said again (the condition ended)."""

    key: Hashable
    reason: str


@dataclass(frozen=True)
class MakeBalloon:
    """The run's balloon StatefulSet; done: (the object, whether this call made it)."""

    manifest: Mapping[str, Any]


@dataclass(frozen=True)
class ReplanBalloon:
    """The balloon's pod template replaced (its anchor not chosen yet); `why`: for the log."""

    manifest: Mapping[str, Any]
    why: str = ""


@dataclass(frozen=True)
class DeleteBalloon:
    """Done: whether this call deleted it (False: it was gone); `run_uid`, `why`: whose it is
    and why it goes (what is forgotten of it, and the count's reason)."""

    namespace: str
    name: str
    uid: str | None
    run_uid: str = ""
    why: str = ""


@dataclass(frozen=True)
class AnnotateBalloon:
    namespace: str
    name: str
    annotations: Mapping[str, str]


@dataclass(frozen=True)
class MakePod:
    """A reservation pod."""

    manifest: Mapping[str, Any]


@dataclass(frozen=True)
class DeletePod:
    """A reservation pod, or a balloon pod moved off its node (`balloon`: its refusal, the pod
    gone or replaced already, is logged, not tried again); `grace` None: the pod's own; `why`:
    for the log."""

    namespace: str
    name: str
    uid: str
    grace: int | None
    why: str = ""
    balloon: bool = False


@dataclass(frozen=True)
class ReleaseGate:
    """A scheduling gate of ours taken off a pod of run `run_uid` (a placeholder of Tekton's
    assistant given its run's anchor's node in the same patch); done: whether this call took
    it off."""

    namespace: str
    name: str
    uid: str
    patch: Mapping[str, Any]
    run_uid: str = ""


@dataclass(frozen=True)
class Mark:
    """A merge patch of a PipelineRun or TaskRun (`plural`): the mark of an anchored run."""

    plural: str
    namespace: str
    name: str
    patch: Mapping[str, Any]


@dataclass(frozen=True)
class MakeBudget:
    """A namespace's PodDisruptionBudget; done: False when a budget not ours holds its name."""

    manifest: Mapping[str, Any]


@dataclass(frozen=True)
class DeleteBudget:
    namespace: str
    name: str
    uid: str


@dataclass(frozen=True)
class WritePolicyStatus:
    namespace: str
    name: str
    status: Mapping[str, Any]


@dataclass(frozen=True)
class MakeBinding:
    body: Mapping[str, Any]


@dataclass(frozen=True)
class ReplaceBinding:
    body: Mapping[str, Any]
    resource_version: str


@dataclass(frozen=True)
class DeleteBinding:
    name: str


@dataclass(frozen=True)
class Remember:
    """What the leader remembers of the run changes, at this point of a plan: these fields of
    its memory (core/placement/memory.RunMemory) set. No write to the cluster: the plan's
    applier does it, not the executor."""

    run_uid: str
    changes: Mapping[str, Any]


@dataclass(frozen=True)
class Count:
    """A metric counted, at this point of a plan (`metric`: the name of a counter of
    controller/metrics.Metrics; `labels`: its label values). No write to the cluster: the plan's
    applier does it, so that what a plan counts is read beside what it does. `by`: how much
    (bytes, for a counter of bytes)."""

    metric: str
    labels: tuple[tuple[str, str], ...] = ()
    by: float = 1


Action = (Say | Unsay | MakeBalloon | ReplanBalloon | DeleteBalloon | AnnotateBalloon | MakePod
          | DeletePod | ReleaseGate | Mark | MakeBudget | DeleteBudget | WritePolicyStatus
          | MakeBinding | ReplaceBinding | DeleteBinding)

# What a plan holds: the executor's actions, and between them the changes of memory and what
# is counted.
Planned = Action | Remember | Count
