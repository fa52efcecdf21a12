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

log = structlog.get_logger(__name__)

Event = TypeVar("Event")


class Serial(Generic[Event]):
    def __init__(self, handle: Callable[[Event], None], workers: int, name: str) -> None:
        self._handle = handle
        self._workers = workers
        self._name = name
        self._ready: collections.deque[str] = collections.deque()  # keys with an event, not busy
        self._pending: dict[str, Event] = {}
        self._busy: set[str] = set()
        self._cond = threading.Condition()
        self._stopped = False
        self.handled = 0
        self.superseded = 0

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
                self.superseded += 1
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
            self.handled += 1
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
