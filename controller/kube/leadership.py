"""Leader election on a coordination.k8s.io Lease: one replica reconciles, all serve the webhook.

The same protocol as client-go's leaderelection: the holder renews the Lease every few seconds;
a candidate takes it over once it has not been renewed for its duration. Writes carry the
Lease's resourceVersion, so two candidates can never both win one round.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog

from controller.core.basics.times import micro_time
from controller.core.replica.lease import Observed, claimed, may_take, observe
from controller.kube import errors
from controller.kube.client import Kube
from controller.kube.fencing import Leadership

log = structlog.get_logger(__name__)

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def default_namespace() -> str:
    """The pod's own namespace in a cluster, else 'default' (a process on a workstation)."""
    env = os.environ.get("POD_NAMESPACE")
    if env:
        return env
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or "default"
    except OSError:
        return "default"


def identity() -> str:
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


@dataclass
class LeaderElector:
    kube: Kube
    namespace: str
    name: str
    me: str
    duration: int = 15
    # This process's monotonic clock: expiry is judged by it alone (core/replica/lease.py).
    clock: Callable[[], float] = time.monotonic
    # What every write of this process checks (kube/fencing.py): granted at each renewal.
    leadership: Leadership | None = None
    _observed: Observed | None = field(default=None, init=False, repr=False)
    _written: Mapping[str, Any] | None = field(default=None, init=False, repr=False)

    @property
    def retry(self) -> float:
        return max(1.0, self.duration / 5)

    @property
    def renew_deadline(self) -> float:
        """A holder that has not renewed for this long stops leading: shorter than the Lease,
        so that it has stopped before any candidate may take over (client-go's RenewDeadline)."""
        return self.duration * 2 / 3

    def try_hold(self) -> bool:
        """One round: True if we hold the Lease afterwards. Blocking. A holder renews the Lease
        as it last wrote it, one request a round (client-go's fast path): the resourceVersion
        it names fails the write if anyone else wrote since, and only then is it read."""
        now, wall = self.clock(), datetime.now(UTC)
        if self._written is not None:
            mine = {**self._written, "spec": claimed(self._written.get("spec") or {}, self.me,
                                                     self.duration, wall)}
            written = self.kube.replace_lease(mine)
            if written is not None:
                return self._wrote(written, now)
            self._written = None  # someone else wrote it: read it, as a candidate does
        lease = self.kube.get_lease(self.namespace, self.name)
        if lease is None:
            fresh = claimed({}, self.me, self.duration, wall)
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": fresh,
            }
            return self._wrote(body if self.kube.create_lease(body) else None, now)
        spec = lease.get("spec") or {}
        self._observed = observe(self._observed, spec, now)
        if not may_take(spec, self.me, self._observed, now):
            return False
        lease["spec"] = claimed(spec, self.me, self.duration, wall)
        return self._wrote(self.kube.replace_lease(lease), now)

    def _wrote(self, written: Mapping[str, Any] | None, now: float) -> bool:
        if written is None:
            return False
        # A created Lease's resourceVersion is not known (POST's answer is dropped): its first
        # renewal reads it.
        self._written = dict(written) if (written.get("metadata") or {}).get(
            "resourceVersion") else None
        self._observed = observe(None, written.get("spec") or {}, now)
        if self.leadership is not None:
            # From when this round began: the Lease was renewed no later than that.
            self.leadership.grant(self.me, now + self.renew_deadline)
        return True

    async def acquire(self) -> None:
        log.info("waiting for leadership", lease=f"{self.namespace}/{self.name}", identity=self.me)
        while not await self._round():
            await asyncio.sleep(self.retry)
        log.info("leading", lease=f"{self.namespace}/{self.name}", identity=self.me)

    async def hold(self) -> None:
        """Renews until no renewal has succeeded for renew_deadline; then returns. A round that
        hangs (a slow API server) counts as failed when the deadline comes: the wait is bounded
        by it, not by the API client's timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.renew_deadline
        while True:
            await asyncio.sleep(self.retry)
            try:
                renewed = await asyncio.wait_for(
                    self._round(), timeout=max(0.1, deadline - loop.time())
                )
            except TimeoutError:
                renewed = False
            if renewed:
                deadline = loop.time() + self.renew_deadline
            elif loop.time() >= deadline:
                if self.leadership is not None:
                    self.leadership.revoke()
                log.error("leadership lost", lease=f"{self.namespace}/{self.name}")
                return

    async def _round(self) -> bool:
        """One round off the event loop; any failure is a round that did not renew (a refused
        connection too: urllib3's errors are no OSError, and ended the Lease loop at once, so a
        leader let its Lease go at the API server's first blip instead of its renew deadline)."""
        try:
            return await asyncio.to_thread(self.try_hold)
        except Exception as exc:
            failure = errors.classify(exc)
            (log.exception if failure.bug else log.warning)(
                "lease round failed", reason=failure.reason, error=repr(exc))
            return False

    def release(self) -> None:
        """Hand the Lease back at shutdown, so that another replica leads at once."""
        self._written = None
        if self.leadership is not None:
            self.leadership.revoke()  # nothing of ours writes after this
        try:
            lease = self.kube.get_lease(self.namespace, self.name)
            if lease and (lease.get("spec") or {}).get("holderIdentity") == self.me:
                # As client-go does: no holder, and a lease of one second from now.
                now = micro_time(datetime.now(UTC))
                lease["spec"].update(
                    holderIdentity=None, leaseDurationSeconds=1, acquireTime=now, renewTime=now
                )
                self.kube.replace_lease(lease)
                log.info("leadership released", lease=f"{self.namespace}/{self.name}")
        except Exception as exc:  # the API server may be what stops us: the Lease runs out
            log.warning("could not release the lease", error=repr(exc))
