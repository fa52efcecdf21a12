"""What the leader remembers of a run between two looks at it, as one frozen value.

Each field belongs to one subject of the operator (its comment names it) and is changed only
there; operator/memory.py keeps one such value per run and replaces it whole, under one lock, so
a subject's test-and-set is one step and no subject keeps a lock of its own. A run whose memory
is back to `EMPTY` is not kept at all: the memory grows with the runs that are acted on, not
with the runs there are.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, NamedTuple

from controller.core.basics.quantity import Amounts
from controller.core.capacity.peak import Estimate
from controller.core.capacity.settle import Acted


class Move(NamedTuple):
    """A move of the anchor seen before the old balloon pod's deletion, which says why."""

    left: str
    to: str
    run: dict[str, Any]  # the PipelineRun's reference, for the Event
    since: float  # time.monotonic()


@dataclass(frozen=True)
class BoundPod:
    uid: str
    name: str
    namespace: str
    run_name: str
    node: str


class Fitted(NamedTuple):
    """What a run's reservation asks where its peak is more than any node it may use can hold
    and no autoscaler can add one (None: what its quota allows)."""

    share: Amounts | None


class Gated(NamedTuple):
    """A pod admission gated, not yet seen released."""

    uid: str
    namespace: str
    name: str


class Placeholder(NamedTuple):
    """A placeholder of Tekton's assistant admission held (core/placement/gate.PLACEHOLDER_GATE),
    not yet seen released; `pinned`: its own nodeSelector names a host already."""

    uid: str
    namespace: str
    name: str
    pinned: bool = False


class Kept(NamedTuple):
    """A "keep" of the run's balloon that the resync may leave alone (operator/observe.py)."""

    round: int  # the resync round it was settled in
    reads: object  # what its decision read of the run (core/placement/reconcile.reads)
    namespace: str
    begun: int  # the number its decision took before it read anything


# Seconds a wait's work may come after its end rather than be put on the queue a second time.
LATE = 1.0


@dataclass(frozen=True)
class RunMemory:
    # LiveRuns (operator/memory.py): the run's newest body while it is live (None: it is not),
    # and when a reconcile of it last ran to its end (time.monotonic()).
    body: Mapping[str, Any] | None = None
    reconciled: float | None = None
    # Resolving (operator/estimates.py): the run's anchor waits for what Tekton resolves.
    resolving: bool = False
    # Marks (operator/marking.py): marked by this process, before the watch shows the mark.
    marked: bool = False
    # Gates (operator/marking.py): its gated pods, in the order they were seen gated.
    gated: tuple[Gated, ...] = ()
    # ... and its placeholders held, in the order they were seen held.
    placeholders: tuple[Placeholder, ...] = ()
    # Estimates (operator/estimates.py): its peak, once complete.
    estimate: Estimate | None = None
    # Headroom (operator/headroom.py): its reservation's share of a node, once found.
    fitted: Fitted | None = None
    # AnchorGuard (operator/anchors.py, planned by core/placement/anchorplan.py): the node its
    # anchor cannot leave yet.
    blocked_on: str = ""
    # Capacity (operator/capacity.py): the last act on its reservation (one worker at a time
    # acts on a run: faces/serial.py).
    acted: Acted | None = None
    # Placement (operator/placement.py): the move it is making (node left, why; set by the
    # anchor's plan when the operator moves it), whether its balloon pods were listed once, the
    # node this process annotated its StatefulSet with, its pods bound before its new balloon
    # pod was, a move seen before the old pod's deletion, and its pods said misplaced (kept
    # after the run is forgotten: said once).
    moving: tuple[str, str] | None = None
    asked: bool = False
    annotated: str = ""
    unjudged: tuple[BoundPod, ...] = ()
    unexplained: Move | None = None
    misplaced: frozenset[str] = field(default_factory=frozenset)
    # Settled (operator/observe.py): its "keep" the resync may leave alone, and the number of
    # the last change to what its decision reads of the run.
    kept: Kept | None = None
    touched: int = 0
    # Operator.later: the work put for later under the run's key, by slot, and when each is due
    # (time.monotonic()): a wait of any subject is a requeue, never a timer of its own.
    due: tuple[tuple[str, float], ...] = ()

    def put_later(self, slot: str, now: float, at: float) -> RunMemory:
        """With work in `slot` due `at`; unchanged when one is due already between now and
        then, or at most LATE after it (that one asks again if it must: once however often
        asked meanwhile, and the same wait asked again a moment later is not put twice)."""
        pending = dict(self.due).get(slot)
        if pending is not None and now < pending <= at + LATE:
            return self
        return replace(self, due=(*((s, t) for s, t in self.due if s != slot), (slot, at)))

    def done_later(self, slot: str, at: float) -> RunMemory:
        """The work in `slot` that was due `at` has come (a newer one stays)."""
        return replace(self, due=tuple((s, t) for s, t in self.due if (s, t) != (slot, at)))

    def reset(self, *names: str) -> RunMemory:
        """The memory with these fields back to what a run nothing is known of has."""
        unknown = set(names) - {f.name for f in fields(self)}
        if unknown:
            raise KeyError(f"no such field of a run's memory: {sorted(unknown)}")
        return replace(self, **{n: getattr(EMPTY, n) for n in names})


EMPTY = RunMemory()
