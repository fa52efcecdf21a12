"""A few threads for many objects' events: one object's events one at a time, in order, the
newest replacing one not yet begun (what kopf's per-object workers and batching gave).

The handlers here are run again on any replay, so skipping an event that a newer one of the
same object superseded loses nothing: the newer carries the object as it is now.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

import structlog

from controller.metrics import Metrics

log = structlog.get_logger(__name__)

Event = TypeVar("Event")


class Serial(Generic[Event]):
    def __init__(self, handle: Callable[[Event], None], workers: int, name: str,
                 metrics: Metrics | None = None) -> None:
        self._handle = handle
        self._workers = workers
        self._name = name
        self._ready: collections.deque[str] = collections.deque()  # keys with an event, not busy
        self._pending: dict[str, Event] = {}
        self._busy: set[str] = set()
        self._cond = threading.Condition()
        self._stopped = False
        metrics = metrics or Metrics()
        self._superseded = metrics.events_superseded
        metrics.events_waiting.set_function(self.backlog)  # read when scraped, not per event

    def start(self) -> None:
        for i in range(self._workers):
            threading.Thread(target=self._work, name=f"{self._name}-{i}", daemon=True).start()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def put(self, key: str, event: Event) -> None:
        with self._cond:
            if key in self._pending:
                self._superseded.inc()
            elif key not in self._busy:
                self._ready.append(key)
            self._pending[key] = event
            self._cond.notify()

    def backlog(self) -> int:
        with self._cond:
            return len(self._pending)

    def _next(self) -> tuple[str, Event] | None:
        with self._cond:
            while not self._ready and not self._stopped:
                self._cond.wait()
            if self._stopped:
                return None
            key = self._ready.popleft()
            self._busy.add(key)
            return key, self._pending.pop(key)

    def _done(self, key: str) -> None:
        with self._cond:
            self._busy.discard(key)
            if key in self._pending:  # came while this one was handled: its turn now
                self._ready.append(key)
                self._cond.notify()

    def _work(self) -> None:
        while (taken := self._next()) is not None:
            key, event = taken
            try:
                self._handle(event)
            except Exception:  # one object's failure is said and does not stop the others
                log.exception("event handler failed", stream=self._name, key=key)
            finally:
                self._done(key)
