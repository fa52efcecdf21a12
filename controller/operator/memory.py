"""Every run's memory (core/placement/memory.py), kept here and nowhere else; and under a key
of their own (operator/settled.py's), what is remembered of a namespace and of the cluster.

A subject reads a run's memory with `get` and changes it with `update`, which replaces the
frozen value whole under this module's one lock: a test-and-set (is a worker tending this run?
is a look at it put for later?) is one step, and the subjects keep no lock of their own. The
lock is never held across a call to the API server. `number` hands out increasing numbers
under the same lock: what orders a change against a decision that read before it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from controller.core.placement.memory import EMPTY, RunMemory


class Memories:
    def __init__(self) -> None:
        self._runs: dict[str, RunMemory] = {}
        self._numbers = 0  # the last number handed out
        self._lock = threading.Lock()

    def number(self) -> int:
        """A number greater than every one handed out before."""
        with self._lock:
            self._numbers += 1
            return self._numbers

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

    def reset(self, run_uid: str, *names: str) -> RunMemory:
        """These fields of the run's memory forgotten; the memory before."""
        return self.update(run_uid, lambda m: m.reset(*names))

    def runs(self, having: Callable[[RunMemory], object]) -> list[str]:
        """The runs whose memory has it (`having` true of it). (A namespace's or the facts'
        memory sets `changed` alone: no `having` that reads another field gives its key.)"""
        with self._lock:
            return [uid for uid, m in self._runs.items() if having(m)]
