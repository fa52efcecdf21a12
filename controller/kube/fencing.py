"""No write leaves a replica that may no longer hold the Lease.

The Lease loop (kube/leadership.py) grants this process's Leadership each time it takes or
renews the Lease: valid until that round began plus the renew deadline (client-go's
RenewDeadline, shorter than the Lease's duration, after which alone a candidate may take it
over). Every write the process sends is checked at the one place every request passes
(kube/connection.py) and refused with NotLeading once that moment has passed, by this process's
monotonic clock: a replica paused (SIGSTOP, a frozen VM) or cut off from the API server wakes
to a token already expired, before its Lease loop has run a round or learned who leads now.
The Lease's own writes are not fenced: they are how leadership is won back, and carry the
Lease's resourceVersion, so a stale one fails by itself.

What may still write without the token is named where it is done (`unfenced`): handing the
scheduling gates back when leadership ends (operator/marking.py says why that is safe).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

UNFENCED = frozenset({"leases"})  # resources whose writes need no token


class NotLeading(Exception):
    """A write refused: this process does not hold the Lease (any more)."""


class Leadership:
    def __init__(self, enabled: bool = True, clock: Callable[[], float] = time.monotonic) -> None:
        self.enabled = enabled  # False: no leader election, every write goes (one replica)
        self._clock = clock
        self._holder: str | None = None
        self._until = float("-inf")
        self._lock = threading.Lock()
        self._local = threading.local()
        # Told each new deadline (-inf: revoked), in the granting thread: the supervisor's
        # watchdog (faces/supervise.py) kills a process that outlives it.
        self.listeners: list[Callable[[float], None]] = []

    def grant(self, holder: str, until: float) -> None:
        """This process holds the Lease as `holder` until `until` (its monotonic clock)."""
        with self._lock:
            self._holder, self._until = holder, until
        self._tell(until)

    def revoke(self) -> None:
        with self._lock:
            self._holder, self._until = None, float("-inf")
        self._tell(float("-inf"))

    def _tell(self, until: float) -> None:
        for listener in self.listeners:
            listener(until)

    @property
    def until(self) -> float:
        with self._lock:
            return self._until

    @property
    def holder(self) -> str | None:
        """Whom this process writes as now (None: it holds no valid Lease)."""
        with self._lock:
            return self._holder if self._clock() < self._until else None

    def check(self, resource: str) -> None:
        """Raises NotLeading for a write of `resource` that must not leave this process now."""
        if not self.enabled or resource in UNFENCED or self.exempt:
            return
        if self.holder is None:
            raise NotLeading(f"write of {resource} refused: this replica does not hold the Lease")

    @property
    def exempt(self) -> bool:
        """This thread writes without the token now (within `unfenced`)."""
        return bool(getattr(self._local, "unfenced", False))

    @contextlib.contextmanager
    def unfenced(self) -> Iterator[None]:
        """Writes of this thread within the block go without the token."""
        self._local.unfenced = True
        try:
            yield
        finally:
            self._local.unfenced = False
