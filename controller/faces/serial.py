"""The leader's one work queue: many keys' work on a few threads, one key's at a time and in
order, the newest joining (or replacing) what waits and is not yet begun (what kopf's per-object
workers and batching gave), a failed one tried again with a backoff of its own (client-go's
rate-limited workqueue), and work put for later (controller-runtime's RequeueAfter).

A run's events, its pods', and every look at it come here under the run's key
(faces/streams.py merges them: each object's newest, in order): whatever a handler raises is
judged in one place (kube/errors.py). A transient failure puts the key's work back after its
backoff (milliseconds first, doubling while it keeps failing, never less than the API server's
Retry-After: core/replica/backoff.py), unless newer work of the key came meanwhile, which then
runs at once, the failed work merged into it; success forgets its failures. A permanent one is
said and dropped. No failure holds up another key, and none waits for an unrelated event to be
tried again. The handlers here are run again on any replay, so skipping an event that a newer
one of the same object superseded loses nothing: the newer carries the object as it is now.

Why this shape: the Serial threads already gave per-object order and coalescing, which is what
client-go's queue gives (its dirty and processing sets); what it lacked was the requeue after a
failure, which is added here rather than beside it, so that a retry can never run beside a newer
event of the same object.
"""

from __future__ import annotations

import collections
import heapq
import threading
import time
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

import structlog

from controller.core.replica import backoff
from controller.kube import errors
from controller.metrics import Metrics

log = structlog.get_logger(__name__)

Event = TypeVar("Event")


class Serial(Generic[Event]):
    def __init__(self, handle: Callable[[Event], None], workers: int, name: str,
                 metrics: Metrics | None = None,
                 classify: Callable[[BaseException], errors.Failure] = errors.classify,
                 clock: Callable[[], float] = time.monotonic,
                 merge: Callable[[Event, Event], Event] | None = None) -> None:
        self._handle = handle
        # How a key's newer event joins the one waiting (None: it replaces it). A key that
        # stands for more than one object (a run: its own events and its pods') merges, so
        # that no object's newest event is lost to another's.
        self._merge = merge
        self._workers = workers
        self._name = name
        self._classify = classify
        self._clock = clock
        self._ready: collections.deque[str] = collections.deque()  # may run now, not busy
        self._readied: set[str] = set()  # the same keys, to ask of in O(1)
        self._pending: dict[str, Event] = {}  # ready, or waiting out a backoff
        self._since: dict[str, float] = {}  # when each pending key began to wait
        self._due: dict[str, float] = {}  # keys waiting out a backoff -> when it ends
        self._later: list[tuple[float, str]] = []  # (due, key), a heap; stale ones skipped
        self._failures: dict[str, int] = {}  # failures in a row, by key
        # Work put for later (a wait that a plan asked for, as controller-runtime's
        # RequeueAfter): (due, order, key, event), a heap; put when due, as put() puts.
        self._deferred: list[tuple[float, int, str, Event]] = []
        self._deferrals = 0
        self._busy: set[str] = set()
        self._cond = threading.Condition()
        self._stopped = False
        metrics = metrics or Metrics()
        self._superseded = metrics.events_superseded
        self._retries = metrics.work_retries
        self._dropped = metrics.work_dropped
        metrics.events_waiting.set_function(self.backlog)  # read when scraped, not per event
        metrics.events_oldest_seconds.set_function(self.oldest)

    def start(self) -> None:
        for i in range(self._workers):
            threading.Thread(target=self._work, name=f"{self._name}-{i}", daemon=True).start()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def put(self, key: str, event: Event, replace: bool = True) -> None:
        """`event` for `key`; with `replace` False it is dropped if one of the key is already
        waiting (a resync's look at a run never replaces a watch event of it). With a merge,
        it joins the waiting one (the merge decides what replaces what)."""
        with self._cond:
            self._put(key, event, replace)
            self._cond.notify()

    def put_after(self, key: str, event: Event, seconds: float) -> None:
        """`event` for `key` in `seconds`: put then as `put` puts it (a newer event of the key
        does not wait for it, nor does it replace one)."""
        with self._cond:
            self._deferrals += 1
            heapq.heappush(self._deferred,
                           (self._clock() + seconds, self._deferrals, key, event))
            self._cond.notify()

    def _put(self, key: str, event: Event, replace: bool = True) -> None:
        """put(), the lock held."""
        if key in self._pending:
            if self._merge is not None:
                event = self._merge(self._pending[key], event)
            elif not replace:
                return
            self._superseded.inc()
        else:
            self._since[key] = self._clock()
        self._pending[key] = event
        if self._due.pop(key, None) is not None or (
                key not in self._busy and key not in self._readied):
            self._make_ready(key)  # a newer event does not wait out an older's backoff

    def backlog(self) -> int:
        """Objects with an event waiting (to run, or to be tried again)."""
        with self._cond:
            return len(self._pending)

    def oldest(self) -> float:
        """Seconds the longest-waiting event has waited (0: none waits)."""
        with self._cond:
            return self._clock() - min(self._since.values()) if self._since else 0.0

    def settled(self, keys: Iterable[str]) -> bool:
        """None of these keys has an event waiting or running."""
        with self._cond:
            return not any(k in self._pending or k in self._busy for k in keys)

    def _next(self) -> tuple[str, Event, int] | None:
        with self._cond:
            while True:
                now = self._clock()
                while self._later and self._later[0][0] <= now:
                    due, key = heapq.heappop(self._later)
                    if self._due.get(key) == due:
                        del self._due[key]
                        self._make_ready(key)
                while self._deferred and self._deferred[0][0] <= now:
                    _, _, key, deferred = heapq.heappop(self._deferred)
                    self._put(key, deferred, replace=False)
                if self._stopped:
                    return None
                if self._ready:
                    key = self._ready.popleft()
                    self._readied.discard(key)
                    self._busy.add(key)
                    self._since.pop(key, None)
                    return key, self._pending.pop(key), self._failures.get(key, 0)
                wakes = [h[0][0] for h in (self._later, self._deferred) if h]
                self._cond.wait(min(wakes) - now if wakes else None)

    def _done(self, key: str, event: Event, failure: errors.Failure | None) -> None:
        with self._cond:
            self._busy.discard(key)
            if failure is None or not failure.retry:
                self._failures.pop(key, None)
            elif key not in self._pending:  # nothing newer came: this one again, later
                failures = self._failures[key] = self._failures.get(key, 0) + 1
                due = self._clock() + backoff.delay(failures, failure.after)
                self._pending[key], self._since[key], self._due[key] = event, self._clock(), due
                heapq.heappush(self._later, (due, key))
            else:
                self._failures[key] = self._failures.get(key, 0) + 1
                if self._merge is not None:  # what failed joins what came meanwhile
                    self._pending[key] = self._merge(event, self._pending[key])
            if key in self._pending and key not in self._due:
                self._make_ready(key)  # came while this one was handled: its turn now
            self._cond.notify()

    def _make_ready(self, key: str) -> None:
        self._ready.append(key)
        self._readied.add(key)

    def _work(self) -> None:
        while (taken := self._next()) is not None:
            key, event, failed = taken
            failure = None
            errors.failed_before.set(failed)  # for errors.worth_saying, in this thread
            try:
                self._handle(event)
            except Exception as exc:  # one object's failure is judged here, never stops others
                failure = self._classify(exc)
                self._tell(key, exc, failure)
            finally:
                self._done(key, event, failure)

    def _tell(self, key: str, exc: Exception, failure: errors.Failure) -> None:
        (self._retries if failure.retry else self._dropped).labels(reason=failure.reason).inc()
        said = log.exception if failure.bug else log.warning
        said("event handler failed; " + ("tried again after a backoff" if failure.retry
                                         else "dropped: trying again cannot help"),
             stream=self._name, key=key, reason=failure.reason, error=str(exc))
