"""Health and metrics endpoints (their own ports, plain HTTP, never the webhook's), and the
one way every HTTP server of ours is started and stopped."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

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


class _Families:
    """A collector of ready-made metric families (one scrape's merge)."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterable[Metric]:
        return self.families


def merged(own: CollectorRegistry, other: str) -> bytes:
    """This process's metrics and another's exposition (the reconciler's) as one exposition:
    each family once, its samples labelled process="server" or "reconciler". Two expositions
    side by side would name every family twice, which Prometheus refuses to scrape."""
    families: dict[str, Metric] = {}

    def add(family: Metric, process: str) -> None:
        merged_family = families.setdefault(
            family.name, Metric(family.name, family.documentation, family.type)
        )
        for sample in family.samples:
            merged_family.samples.append(
                sample._replace(labels={**sample.labels, "process": process})
            )

    for family in own.collect():
        add(family, "server")
    for family in text_string_to_metric_families(other):
        add(family, "reconciler")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(list(families.values())))
    return bytes(generate_latest(registry))


def metrics_app(
    metrics: Metrics, more: Callable[[], Awaitable[bytes]] | None = None
) -> web.Application:
    """/metrics: this process's registry, merged with what `more` gives (the reconciler's)."""

    async def scrape(_: web.Request) -> web.Response:
        other = (await more()).decode() if more is not None else ""
        body = merged(metrics.registry, other) if other else generate_latest(metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/metrics", scrape)
    return app
