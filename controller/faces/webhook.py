"""The admission endpoint: decode (admission.parse), decide (admission.decide), encode.

An aiohttp server of our own rather than kopf's: it answers from the first second, on every
replica, independently of kopf's discovery and of which replica leads, and its TLS files are
re-read when they change (cert-manager rotation) without a restart.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from pathlib import Path

import structlog
from aiohttp import web

from controller.core.admission import admission
from controller.metrics import Metrics

log = structlog.get_logger(__name__)

PATH = "/mutate-pods"
# The API server caps objects at 3 MiB (etcd's request limit); anything larger is not from it.
MAX_BODY = 4 * 1024 * 1024


def make_app(
    facts: Callable[[], admission.Facts],
    metrics: Metrics,
    draining: Callable[[], bool] = lambda: False,
    gate_first_pods: bool = False,
    on_call: Callable[[], None] = lambda: None,
) -> web.Application:
    """`gate_first_pods`: see admission.decide. `on_call`: told of each call (the drain waits
    for them to stop coming)."""
    async def mutate(request: web.Request) -> web.Response:
        on_call()
        started = time.perf_counter()
        try:
            response = _answer(await request.read(), facts(), metrics, gate_first_pods)
            if draining():
                # A kept-alive connection would keep bringing requests to a replica that is
                # about to stop; closing it after this answer sends the client elsewhere.
                response.force_close()
            return response
        finally:
            metrics.admission_seconds.observe(time.perf_counter() - started)

    app = web.Application(client_max_size=MAX_BODY)
    app.router.add_post(PATH, mutate)
    return app


def _answer(body: bytes, facts: admission.Facts, metrics: Metrics,
            gate_first_pods: bool = False) -> web.Response:
    try:
        uid, request = admission.parse(body)
    except admission.MalformedReview as exc:
        metrics.admissions.labels(outcome=admission.Outcome.MALFORMED).inc()
        log.warning("malformed admission request", error=str(exc), size=len(body))
        return web.json_response({"error": str(exc)}, status=400)
    try:
        decision = admission.decide(request, facts, gate_first_pods)
    except Exception:
        # A bug of ours must not block pod creation: allow, unpatched, and say so loudly.
        log.exception("admission decision failed; pod allowed unchanged", uid=uid)
        metrics.admissions.labels(outcome="error").inc()
        decision = admission.Decision(admission.Outcome.NOT_TASKRUN_POD)
    metrics.admissions.labels(outcome=decision.outcome).inc()
    if decision.outcome is admission.Outcome.PATCHED:
        run = decision.run
        log.info(
            "pod tied to its balloon",
            namespace=request.get("namespace"),
            pod=request.get("name"),
            run=run.name if run else None,
            gated=decision.gated,
        )
    elif decision.outcome is admission.Outcome.PLACEHOLDER:
        log.info("Tekton's placeholder held for its run's anchor",
                 namespace=request.get("namespace"), pod=request.get("name"),
                 run=decision.run.name if decision.run else None)
    elif decision.run is not None:
        log.debug(
            "pod left alone",
            outcome=str(decision.outcome),
            pod=request.get("name"),
            namespace=request.get("namespace"),
        )
    return web.json_response(admission.response(uid, decision))


class ReloadingTLS:
    """An SSLContext whose certificate is re-read when its files change."""

    def __init__(self, cert: Path, key: Path) -> None:
        self.cert, self.key = cert, key
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self._stamp = self._read()

    def _identity(self) -> tuple[tuple[int, int, int, int], ...]:
        # The inode too: a secret volume swaps in new files (through its ..data symlink) that may
        # carry the old mtime.
        return tuple(
            (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
            for st in (self.cert.stat(), self.key.stat())
        )

    def _read(self) -> tuple[tuple[int, int, int, int], ...]:
        stamp = self._identity()
        self.context.load_cert_chain(self.cert, self.key)
        return stamp

    def reload_if_changed(self) -> bool:
        try:
            if self._identity() == self._stamp:
                return False
            self._stamp = self._read()
        except (OSError, ssl.SSLError) as exc:
            # Half-written files during a rotation: keep serving the old pair, try again later.
            log.warning("webhook certificate not reloaded", error=str(exc))
            return False
        log.info("webhook certificate reloaded", cert=str(self.cert))
        return True

    async def watch(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            self.reload_if_changed()
