"""Every run's memory (core/placement/memory.py), kept here and nowhere else; and when what a
namespace's decisions, or all decisions, read last changed (operator/observe.py's Settled).
The live runs (`LiveRuns`) are those whose memory holds a body.

A subject reads a run's memory with `get` and changes it with `update`, which replaces the
frozen value whole under this module's one lock: a test-and-set (was the run marked already?
is a look at it put for later?) is one step, and the subjects keep no lock of their own. The
lock is never held across a call to the API server. `number` hands out increasing numbers
under the same lock: what orders a change against a decision that read before it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import replace
from typing import Any

from controller.core.model import tekton
from controller.core.placement.memory import EMPTY, RunMemory


class Memories:
    def __init__(self) -> None:
        self._runs: dict[str, RunMemory] = {}
        self._numbers = 0  # the last number handed out
        # What every decision of a namespace, or every decision, reads (operator/observe.py
        # Settled: a namespace's name, or CLUSTER) -> the number of its last change.
        self._changes: dict[str, int] = {}
        # Namespace -> when a reservation pod could not be made there (time.monotonic(); no
        # PriorityClass, admission): its runs do without one for a while (operator/capacity.py).
        self._refused: dict[str, float] = {}
        # Namespaces whose PodDisruptionBudget for balloons this process made or saw: a run's
        # plan asks for it no more (operator/placement.py Budgets, apply.py).
        self._budgets: frozenset[str] = frozenset()
        self._lock = threading.Lock()

    def number(self) -> int:
        """A number greater than every one handed out before."""
        with self._lock:
            self._numbers += 1
            return self._numbers

    def change(self, subject: str) -> None:
        """What `subject`'s decisions read changed now: numbered after every number before."""
        with self._lock:
            self._numbers += 1
            self._changes[subject] = self._numbers

    def changed(self, *subjects: str) -> int:
        """The number of the last change to any of these (0: none)."""
        with self._lock:
            return max((self._changes.get(s, 0) for s in subjects), default=0)

    def refuse(self, namespace: str) -> None:
        with self._lock:
            self._refused[namespace] = time.monotonic()

    def refused(self, namespace: str) -> float | None:
        """When a reservation pod was last refused in the namespace (None: never)."""
        with self._lock:
            return self._refused.get(namespace)

    def budget_kept(self, namespace: str) -> bool:
        return namespace in self._budgets

    def keep_budgets(self, namespaces: Iterable[str], only: bool = False) -> None:
        """These namespaces' budgets are known made (`only`: and no other's)."""
        with self._lock:
            self._budgets = frozenset(namespaces) | (frozenset() if only else self._budgets)

    def get(self, run_uid: str) -> RunMemory:
        with self._lock:
            return self._runs.get(run_uid, EMPTY)

    def update(self, run_uid: str, change: Callable[[RunMemory], RunMemory]) -> RunMemory:
        """The run's memory replaced by `change` of it, in one step; the memory before."""
        with self._lock:
            before = self._runs.get(run_uid, EMPTY)
            after = change(before)
            if after == EMPTY:
                self._runs.pop(run_uid, None)
            elif after is not before:
                self._runs[run_uid] = after
            return before

    def set(self, run_uid: str, **changes: Any) -> RunMemory:
        """These fields of the run's memory set; the memory before."""
        return self.update(run_uid, lambda m: replace(m, **changes))

    def released(self, run_uid: str, pod_uid: str) -> None:
        """A held pod of the run seen let go (RunMemory.gated, .placeholders)."""
        self.update(run_uid, lambda m: replace(
            m, gated=tuple(g for g in m.gated if g.uid != pod_uid),
            placeholders=tuple(p for p in m.placeholders if p.uid != pod_uid)))

    def reset(self, run_uid: str, *names: str) -> RunMemory:
        """These fields of the run's memory forgotten; the memory before."""
        return self.update(run_uid, lambda m: m.reset(*names))

    def runs(self, having: Callable[[RunMemory], object]) -> list[str]:
        """The runs whose memory has it (`having` true of it)."""
        return [uid for uid, _ in self.items(having)]

    def items(self, having: Callable[[RunMemory], object]) -> list[tuple[str, RunMemory]]:
        """(run uid, memory) of the runs whose memory has it, as they are now."""
        with self._lock:
            return [(uid, m) for uid, m in self._runs.items() if having(m)]


# Puts work of a run on the work queue under the run's key, now or in some seconds (Operator.soon).
Soon = Callable[[str, Hashable, Callable[[], None], float], None]
# Puts a wait of a run on that queue (Operator.later): run uid, slot, work, seconds.
Later = Callable[[str, str, Callable[[], None], float], None]


def later(memory: Memories, soon: Soon, run_uid: str, slot: str, act: Callable[[], None],
          seconds: float) -> None:
    """A wait: the run's work in `slot` put `seconds` later on the queue, under its key, once
    however often asked meanwhile (RunMemory.due: the earliest kept, and it asks again if it
    must). Every wait of the operator is one; none keeps a timer of its own."""
    now = time.monotonic()
    at = now + seconds
    before = memory.update(run_uid, lambda m: m.put_later(slot, now, at))
    if before.put_later(slot, now, at) is before:
        return

    def due() -> None:  # not when a sooner one replaced it, or the run was forgotten
        if (slot, at) in memory.update(run_uid, lambda m: m.done_later(slot, at)).due:
            act()

    soon(run_uid, ("later", slot), due, seconds)


def _live(m: RunMemory) -> bool:
    return m.body is not None


class LiveRuns:
    """The live runs: runs of enabled namespaces that are not finished, by uid, as their last
    event showed them (RunMemory.body), and when each was last reconciled to its end
    (RunMemory.reconciled). What the resync goes over (finished runs, and other namespaces',
    cost nothing), and what the parts that weigh other runs read (a namespace's demand, the
    namespaces this installation anchored in). Workers, the resync and watch threads use it at
    once: each call is one step of the memories."""

    def __init__(self, memory: Memories,
                 per_run: Callable[[tekton.PipelineRun], bool] = lambda _: False) -> None:
        self.memory = memory
        # Whether Tekton's assistant named the run's templated claims per run (as it made them:
        # operator/observe.Observer.claim_naming)
        self.per_run = per_run

    def __contains__(self, uid: object) -> bool:
        return isinstance(uid, str) and _live(self.memory.get(uid))

    def __iter__(self) -> Iterator[str]:
        return iter(self.memory.runs(_live))

    def __len__(self) -> int:
        return len(self.memory.runs(_live))

    def get(self, uid: str) -> Mapping[str, Any] | None:
        return self.memory.get(uid).body

    def claims_tekton_makes(self, uid: str) -> frozenset[str]:
        """The claims Tekton makes for the live run (a balloon waiting for one waits for it)."""
        body = self.get(uid)
        if not body:
            return frozenset()
        run = tekton.PipelineRun.from_body(body)
        return run.claims_tekton_makes(self.per_run(run))

    def named(self, namespace: str, name: str) -> str:
        """The uid of the live run of that name ("": none); what a placeholder of Tekton's
        assistant names of its run (a look at every live run: placeholders are few)."""
        if not name:
            return ""
        for uid, m in self.memory.items(_live):
            meta = (m.body or {}).get("metadata") or {}
            if meta.get("name") == name and meta.get("namespace") == namespace:
                return uid
        return ""

    def runs(self) -> list[tekton.PipelineRun]:
        return [tekton.PipelineRun.from_body(m.body) for _, m in self.memory.items(_live)
                if m.body is not None]

    def by_uid(self) -> dict[str, tekton.PipelineRun]:
        return {run.uid: run for run in self.runs()}

    def holds(self, uid: str, body: Mapping[str, Any]) -> bool:
        """Whether this very body is the one held for the run (no newer event replaced it, and
        the run has not ended)."""
        return self.get(uid) is body

    def keep(self, uid: str, body: Mapping[str, Any]) -> None:
        self.memory.set(uid, body=body)

    def refresh(self, uid: str, body: Mapping[str, Any]) -> bool:
        """The newer body kept for a run already live; False (nothing kept) for one that is
        not."""
        return _live(self.memory.update(
            uid, lambda m: replace(m, body=body) if _live(m) else m))

    def drop(self, uid: str, only: Mapping[str, Any] | None = None) -> None:
        """The run is no longer live (`only`: if this body is still the one held); what it had
        put for later is moot."""
        self.memory.update(uid, lambda m: m.reset("body", "reconciled", "due")
                           if only is None or m.body is only else m)

    def reconciled(self, uid: str) -> bool:
        """A reconcile of the run ran to its end now; False for a run not live (not noted)."""
        now = time.monotonic()
        return _live(self.memory.update(
            uid, lambda m: replace(m, reconciled=now) if _live(m) else m))

    def not_reconciled_since(self, since: float, skips: Callable[[str], bool]
                             ) -> tuple[list[Mapping[str, Any]], int]:
        """The bodies of live runs not reconciled since `since` that `skips` does not leave
        alone, and how many live runs were left alone."""
        live = self.memory.items(_live)
        bodies = [m.body for uid, m in live if m.body is not None
                  and (m.reconciled if m.reconciled is not None else float("-inf")) < since
                  and not skips(uid)]
        return bodies, len(live) - len(bodies)
