"""Health and metrics endpoints (their own ports, plain HTTP, never the webhook's), and the
one way every HTTP server of ours is started and stopped."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from controller.metrics import Metrics


@contextlib.asynccontextmanager
async def serving(
    app: web.Application, host: str, port: int, **kwargs: object
) -> AsyncIterator[None]:
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port, **kwargs).start()  # type: ignore[arg-type]
        yield
    finally:
        await runner.cleanup()


def health_app(ready: Callable[[], tuple[bool, str]]) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(_: web.Request) -> web.Response:
        ok, why = ready()
        return web.Response(text=why + "\n", status=200 if ok else 503)

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


def metrics_app(
    metrics: Metrics, more: Callable[[], Awaitable[bytes]] | None = None
) -> web.Application:
    """/metrics: this process's registry, then whatever `more` adds (the reconciler's)."""

    async def scrape(_: web.Request) -> web.Response:
        body = generate_latest(metrics.registry)
        if more is not None:
            body += await more()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/metrics", scrape)
    return app
