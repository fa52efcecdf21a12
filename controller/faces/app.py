"""The server process: the admission webhook, probes and metrics, and the reconciler beside it.

The reconciler (faces/reconciler.py) runs as a child process, so that the webhook's answers
never wait behind the leader's work, and losing the Lease restarts the reconciler, never the
webhook. On SIGTERM the server drains: it reports not ready, tells the reconciler to stop (it
hands the Lease back), and keeps answering, with `Connection: close` so that clients reconnect
to another replica, until its Service's endpoints and the proxies have dropped it
(faces/drain.py), then stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys

import aiohttp
import structlog

from controller.core.basics.names import APP, LABEL_MANAGED_BY
from controller.faces import drain, probes, supervise, webhook
from controller.kube import webhook_tls
from controller.kube.client import Kube
from controller.kube.clusterview import ClusterView
from controller.kube.connection import load_client_config, named_flags
from controller.kube.leadership import default_namespace
from controller.metrics import Metrics
from controller.settings import ENV_PREFIX, Settings

log = structlog.get_logger(__name__)


def reconciler_env(metrics_port: int) -> dict[str, str]:
    """The child's environment: ours, with its metrics on loopback and no probes of its own."""
    env = dict(os.environ)
    env[f"{ENV_PREFIX}METRICS_HOST"] = "127.0.0.1"
    env[f"{ENV_PREFIX}METRICS_PORT"] = str(metrics_port)
    env[f"{ENV_PREFIX}HEALTH_PORT"] = "0"
    return env


def reconciler_argv() -> list[str]:
    """The reconciler's command: this program's, on the cluster this process was told of."""
    return [sys.executable, "-m", "controller", *named_flags(), "reconcile"]


async def keep_own_certificate(settings: Settings, kube: Kube, attempts: int = 15) -> None:
    """The certificate the server keeps in its Secret (kube/webhook_tls.py), written to its
    files before it serves. Tried for half a minute (an API server still coming up, a GitOps
    sync that applies the webhook configuration after the Deployment); then the error ends the
    process, and the kubelet's restarts and the pod's status say so."""
    assert settings.webhook_cert_file and settings.webhook_key_file  # Settings insists
    namespace = settings.leader_election_namespace or default_namespace()
    for attempt in range(1, attempts + 1):
        try:
            pair = await asyncio.to_thread(
                webhook_tls.ensure, kube, namespace, settings.webhook_tls_secret,
                settings.webhook_configuration, {LABEL_MANAGED_BY: APP})
            break
        except Exception as exc:  # the API, RBAC, a Secret not ours: all worth a retry
            if attempt == attempts:
                raise
            log.warning("webhook certificate not ready; trying again", error=str(exc),
                        attempt=attempt)
            await asyncio.sleep(2)
    webhook_tls.write(pair, settings.webhook_cert_file, settings.webhook_key_file)


async def run(settings: Settings) -> int:
    metrics = Metrics()
    kube = Kube(load_client_config(), timeout=settings.api_timeout, metrics=metrics)
    view = ClusterView(settings, kube)
    view.start()

    tls = None
    if settings.webhook_tls_secret and settings.webhook_port:
        await keep_own_certificate(settings, kube)
    if settings.webhook_cert_file and settings.webhook_key_file:
        tls = webhook.ReloadingTLS(settings.webhook_cert_file, settings.webhook_key_file)
    elif settings.webhook_port:
        log.warning(
            "no webhook certificate configured: the webhook serves plain HTTP, "
            "which the API server will not call; set COSCHEDULER_WEBHOOK_CERT_FILE/KEY_FILE"
        )

    draining = asyncio.Event()
    loop = asyncio.get_running_loop()
    calls = drain.Calls(loop.time)

    def ready() -> tuple[bool, str]:
        if draining.is_set():
            return False, "draining"
        return (True, "ready") if view.facts.synced else (False, "cluster view not synced yet")

    metrics.ready.set_function(lambda: float(ready()[0]))

    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    child_port = supervise.free_loopback_port()
    child = None
    if settings.reconcile:
        child = supervise.Child(
            reconciler_argv(),
            reconciler_env(child_port),
            metrics,
        )

    async def child_metrics() -> bytes:
        if child is None:
            return b""
        try:
            timeout = aiohttp.ClientTimeout(total=2)
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.get(f"http://127.0.0.1:{child_port}/metrics") as resp,
            ):
                return await resp.read()
        except (aiohttp.ClientError, TimeoutError):
            return b""  # between two lives of the reconciler: its figures come back with it

    async with contextlib.AsyncExitStack() as stack:
        if settings.webhook_port:
            await stack.enter_async_context(
                probes.serving(
                    webhook.make_app(lambda: view.facts, metrics, draining.is_set,
                                     settings.gate_until_anchored, calls.seen),
                    settings.webhook_host,
                    settings.webhook_port,
                    ssl_context=tls.context if tls else None,
                )
            )
        if settings.health_port:
            health = probes.health_app(ready)
            await stack.enter_async_context(
                probes.serving(health, settings.metrics_host, settings.health_port)
            )
        if settings.metrics_port:
            await stack.enter_async_context(
                probes.serving(
                    probes.metrics_app(metrics, child_metrics),
                    settings.metrics_host,
                    settings.metrics_port,
                )
            )
        log.info(
            "serving",
            webhook=f"{settings.webhook_host}:{settings.webhook_port}{webhook.PATH}",
            tls=bool(tls),
            health=settings.health_port,
            metrics=settings.metrics_port,
        )
        tasks = []
        if tls:
            tasks.append(asyncio.create_task(tls.watch(settings.webhook_cert_check_interval)))
        child_stop = asyncio.Event()
        if child is not None:
            tasks.append(asyncio.create_task(child.run(child_stop)))
        try:
            await stop.wait()
            draining.set()
            log.info("draining", at_least=settings.shutdown_drain_seconds,
                     at_most=settings.shutdown_drain_max_seconds)
            child_stop.set()
            await asyncio.gather(
                child.stop(timeout=10) if child is not None else asyncio.sleep(0),
                drain.drain(settings, kube, calls, loop.time),
            )
            return 0
        finally:
            for task in tasks:
                task.cancel()
            view.stop()
            log.info("stopped")
