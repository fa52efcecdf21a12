"""Wiring: settings in, the running process out (webhook, probes, metrics, operator)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import kopf
import structlog
from aiohttp import web

from controller import handlers, names, probes, webhook
from controller.clusterview import ClusterView
from controller.kube import Kube, load_client_config
from controller.metrics import Metrics
from controller.operator import Operator
from controller.settings import Settings

log = structlog.get_logger(__name__)


def kopf_settings(settings: Settings) -> kopf.OperatorSettings:
    s = kopf.OperatorSettings()
    # kopf keeps no state on Tekton's objects (only @kopf.on.event is used), but should any
    # handler ever need it, it must be under our own domain, never kopf's defaults.
    s.persistence.finalizer = f"{names.DOMAIN}/finalizer"
    s.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=names.DOMAIN)
    s.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=names.DOMAIN, key="last-handled-configuration"
    )
    s.posting.reporting_component = names.APP
    s.posting.event_name_prefix = f"{names.APP}-"
    s.posting.level = logging.WARNING
    s.networking.request_timeout = settings.api_timeout
    s.watching.client_timeout = 300
    s.watching.server_timeout = 270
    return s


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


async def resync_forever(operator: Operator, view: ClusterView, interval: float) -> None:
    while not view.facts.synced:
        await asyncio.sleep(0.2)
    while True:
        try:
            await asyncio.to_thread(operator.resync)
        except Exception:
            log.exception("resync failed")
        await asyncio.sleep(interval)


async def run(settings: Settings) -> None:
    kube = Kube(load_client_config(), timeout=settings.api_timeout)
    metrics = Metrics()
    view = ClusterView(settings, kube)
    operator = Operator(settings, kube, view, metrics)
    view.start()

    tls = None
    if settings.webhook_cert_file and settings.webhook_key_file:
        tls = webhook.ReloadingTLS(settings.webhook_cert_file, settings.webhook_key_file)
    else:
        log.warning(
            "no webhook certificate configured: the webhook serves plain HTTP, "
            "which the API server will not call; set COSCHEDULER_WEBHOOK_CERT_FILE/KEY_FILE"
        )

    def ready() -> tuple[bool, str]:
        return (True, "ready") if view.facts.synced else (False, "cluster view not synced yet")

    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(
            serving(
                webhook.make_app(lambda: view.facts, metrics),
                settings.webhook_host,
                settings.webhook_port,
                ssl_context=tls.context if tls else None,
            )
        )
        if settings.health_port:
            await stack.enter_async_context(
                serving(probes.health_app(ready), settings.metrics_host, settings.health_port)
            )
        if settings.metrics_port:
            await stack.enter_async_context(
                serving(probes.metrics_app(metrics), settings.metrics_host, settings.metrics_port)
            )
        log.info(
            "serving",
            webhook=f"{settings.webhook_host}:{settings.webhook_port}{webhook.PATH}",
            tls=bool(tls),
            health=settings.health_port,
            metrics=settings.metrics_port,
        )
        background = [asyncio.create_task(resync_forever(operator, view, settings.resync_interval))]
        if tls:
            background.append(asyncio.create_task(tls.watch(settings.webhook_cert_check_interval)))
        try:
            await kopf.operator(
                clusterwide=True,
                standalone=True,
                settings=kopf_settings(settings),
                memo=kopf.Memo(operator=operator),
                registry=handlers.registry,
            )
        finally:
            for task in background:
                task.cancel()
            view.stop()
