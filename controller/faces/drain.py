"""The server's drain after SIGTERM: it keeps answering admission calls until core/replica/drain.py
says it may stop, looking at its Service's EndpointSlices twice a second meanwhile."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

import structlog

from controller.core.replica import drain as rule
from controller.kube.client import ApiError, Kube
from controller.kube.leadership import default_namespace
from controller.settings import Settings

log = structlog.get_logger(__name__)

POLL = 0.5
MARGIN, QUIET = rule.PROXY_MARGIN, rule.QUIET
# One look at the EndpointSlices may not hold the drain up longer than this.
LOOK_TIMEOUT = 2.0


class Calls:
    """When the last admission call came (the loop's clock), and how many came while draining."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.last: float | None = None
        self.draining = False
        self.while_draining = 0

    def seen(self) -> None:
        self.last = self.clock()
        if self.draining:
            self.while_draining += 1


async def drain(settings: Settings, kube: Kube, calls: Calls,
                clock: Callable[[], float]) -> None:
    """Returns once this replica may stop answering."""
    started = clock()
    calls.draining = True
    floor = settings.shutdown_drain_seconds
    # With nothing to look at (a replica run by hand, without the chart's Service), the floor
    # alone, as a fixed drain: calls that reach it by address never stop coming.
    floor_alone = rule.Drain(started, floor, floor)
    service, pod = settings.webhook_service, os.environ.get("POD_NAME")
    plan = rule.Drain(started, floor, max(floor, settings.shutdown_drain_max_seconds),
                      MARGIN, QUIET) if service and pod else floor_alone
    namespace = default_namespace()
    unlisted_since: float | None = None if plan is not floor_alone else started
    while True:
        now = clock()
        if unlisted_since is None:
            assert service is not None and pod is not None
            try:
                slices = await asyncio.wait_for(asyncio.to_thread(
                    kube.list_endpoint_slices, namespace, service), LOOK_TIMEOUT)
            except ApiError as exc:
                if exc.status in (401, 403, 404):
                    # An older chart's RBAC, or no such Service: say so, and keep the floor.
                    log.warning("cannot read the webhook Service's endpoints; draining for the "
                                "shortest time", service=service, status=exc.status)
                    plan, unlisted_since = floor_alone, started
            except (TimeoutError, OSError):
                pass  # looked again at the next turn; the ceiling bounds the wait
            else:
                if not rule.listed(slices, pod):
                    unlisted_since = now
        stop, why = rule.done(plan, now, unlisted_since, calls.last)
        if stop:
            log.info("drained", seconds=round(now - started, 1), why=why,
                     calls_while_draining=calls.while_draining,
                     unlisted_after=None if unlisted_since is None
                     else round(unlisted_since - started, 1))
            return
        await asyncio.sleep(POLL)
