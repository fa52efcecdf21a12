"""The reconciler process: leader election, then, while leading, the run and pod streams
(faces/streams.py), the watch caches (nodes among them), kopf's watch of policies, and the resync.

It runs apart from the admission server (faces/app.py starts it as a child process), so that
nothing it does (a resync over thousands of runs, a replay of every run, a lost Lease) can
hold up an admission answer: the GIL is per process. It serves its own metrics on loopback; the
server process re-exports them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
from collections.abc import Coroutine, Iterable
from typing import Any, cast

import kopf
import structlog

from controller.core.basics import names
from controller.faces import kopf_handlers, probes, supervise
from controller.faces.resync import Resync
from controller.faces.streams import Streams
from controller.kube.admission_policies import AdmissionPolicies
from controller.kube.caches import Caches
from controller.kube.client import Kube
from controller.kube.clusterview import ClusterView
from controller.kube.connection import load_client_config
from controller.kube.fencing import Leadership
from controller.kube.inspection import Inspection
from controller.kube.leadership import LeaderElector, default_namespace, identity
from controller.metrics import Metrics
from controller.operator.executor import Executor, Versions
from controller.operator.policies import PolicyBindings
from controller.operator.runs import Operator
from controller.settings import Settings

log = structlog.get_logger(__name__)

# Exit code when the Lease was lost: the server process starts a fresh reconciler, which
# becomes a candidate again. A fresh start is the safe way back; the webhook never notices.
LOST_LEADERSHIP = 3
KOPF_FAILED = 4  # kopf ended on an error of its own
# Seconds between looks at waiting pods and blocked anchors: with the grace periods (15-20 s)
# a run that waits is told within 30 s.
WATCH_INTERVAL = 5.0
# A reconciler that lost the Lease is gone within this many seconds, its threads included
# (a thread blocked in a call to the API server is not waited for); the supervisor kills one
# that is not (faces/supervise.py), from the deadline this process reports to it.
EXIT_BOUND = 10.0


class EventsOnly(kopf.AnnotationsDiffBaseStorage):
    """kopf deep-copies the whole object of every watch event (twice) to diff it for on.create
    and on.update handlers, before any handler filter runs: most of what a run of a namespace
    that did not opt in cost the leader (py-spy in bench-scale). Only @kopf.on.event is used
    here, which is given no diff, so nothing is copied (tests keep the registry so)."""

    def build(self, *, body: kopf.Body,
              extra_fields: Iterable[Any] | None = None) -> kopf.BodyEssence:
        return cast(kopf.BodyEssence, {})


def kopf_settings(settings: Settings) -> kopf.OperatorSettings:
    s = kopf.OperatorSettings()
    # kopf keeps no state on the objects it watches (only @kopf.on.event is used), but should
    # any handler ever need it, it must be under our own domain, never kopf's defaults.
    s.persistence.finalizer = f"{names.DOMAIN}/finalizer"
    s.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=names.DOMAIN)
    s.persistence.diffbase_storage = EventsOnly(
        prefix=names.DOMAIN, key="last-handled-configuration"
    )
    s.posting.reporting_component = names.APP
    s.posting.event_name_prefix = f"{names.APP}-"
    s.posting.level = logging.WARNING
    s.networking.request_timeout = settings.api_timeout
    s.watching.client_timeout = 300
    s.watching.server_timeout = 270
    return s


async def synced(view: ClusterView) -> None:
    while not view.facts.synced:
        await asyncio.sleep(0.2)


async def resync_forever(
    operator: Operator, interval: float, streams: Streams, bindings: PolicyBindings | None = None
) -> None:
    resync = Resync(operator, streams.submit_run, streams.work.settled)
    while True:
        if bindings is not None:  # first on the queue: a missing binding leaves pods unpinned
            bindings.sync(operator.view.facts)  # only puts its key on the queue
        try:
            await asyncio.to_thread(resync)
        except Exception:
            log.exception("resync failed")
        await asyncio.sleep(interval)


async def count_waiting_forever(operator: Operator, interval: float) -> None:
    """The gauges of the pods that wait for a node. (Nothing is written here: a pod waiting
    past its grace is said, and an anchor that could not move looked at again, as work its run
    put for later on the work queue: Operator.later.)"""
    while True:
        try:
            await asyncio.to_thread(operator.waiting.count)
        except Exception:
            log.exception("waiting pods not counted")
        await asyncio.sleep(interval)


async def first_of(wanted: Coroutine[Any, Any, None], other: Coroutine[Any, Any, Any]) -> bool:
    """Runs both; True if `wanted` finished first. The other is cancelled."""
    tasks = [asyncio.create_task(wanted), asyncio.create_task(other)]
    done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    return tasks[0] in done


def know_nodes(operator: Operator, timeout: float) -> bool:
    """Every node known before a new leader decides anything: its first resync round decides
    the runs it lists, and with no node known its first runs were anchored blind to their
    images and to the nodes' room (seen in e2e: a run made while no replica led, anchored away
    from its image). The nodes' cache tells each node of its first list before it counts as
    synced. A list that does not come within the bound is said, and left to the watch."""
    if operator.caches is None or operator.caches.wait_synced("nodes", timeout):
        return True
    log.warning("the nodes are not listed yet; deciding without them, the watch will tell",
                waited=timeout)
    return False


async def reconcile_while_leading(
    settings: Settings,
    kube: Kube,
    operator: Operator,
    view: ClusterView,
    stop: asyncio.Event,
    bindings: PolicyBindings | None = None,
) -> int:
    """Waits for leadership, then runs kopf and the resync until told to stop or the lead is
    lost. Returns the exit code: LOST_LEADERSHIP when the Lease was lost."""
    # Only a replica that knows the cluster may lead: which namespaces it serves, above all.
    if not await first_of(synced(view), stop.wait()):
        return 0
    elector = None
    if settings.leader_election:
        elector = LeaderElector(
            kube,
            settings.leader_election_namespace or default_namespace(),
            settings.lease_name,
            identity(),
            settings.lease_duration,
            leadership=kube.leadership,
        )
        if not await first_of(elector.acquire(), stop.wait()):
            return 0  # told to stop while still a candidate
    elif kube.leadership is not None:
        # No election: this process alone reconciles, from now on (what the leader gauges say).
        kube.leadership.grant(identity(), float("inf"))
    if operator.caches is not None:
        # The leader's watch caches: balloons, and claims of enabled namespaces (only the
        # leader reads them, so a standby keeps no copy).
        operator.caches.start()
        operator.caches.follow_namespaces(view.facts, view.facts)
    await asyncio.to_thread(know_nodes, operator, settings.api_timeout)
    streams = Streams(operator, kube, settings.api_timeout, operator.metrics)
    if bindings is not None:
        # From now on every change of the view puts the bindings' key on the work queue (which
        # exists now: none is kept in a watch's thread); the first resync round puts it first.
        bindings.active = True
    view.subscribe(streams.on_facts)  # before the first resync round's list: nothing between
    streams.start()
    resync = asyncio.create_task(resync_forever(operator, settings.resync_interval, streams,
                                                bindings))
    watchdog = asyncio.create_task(count_waiting_forever(operator, WATCH_INTERVAL))
    kopf_task = asyncio.create_task(
        kopf.operator(
            clusterwide=True,
            standalone=True,
            # Ours, not kopf's guess: it asks getpass for the user's name, which the image's
            # uid 65532 has none of (every reconciler in a container ended there at once).
            # (kopf's Identity is a NewType of str it does not export.)
            identity=cast(Any, elector.me if elector is not None else identity()),
            settings=kopf_settings(settings),
            memo=kopf.Memo(operator=operator),
            registry=kopf_handlers.registry,
            stop_flag=stop,
        )
    )
    watched = [kopf_task]
    if elector is not None:
        watched.append(asyncio.create_task(elector.hold()))
    done, _ = await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
    lost = kopf_task not in done
    if lost:
        exit_within(EXIT_BOUND)
    stop.set()
    for task in watched[1:]:
        task.cancel()
    resync.cancel()
    watchdog.cancel()
    streams.stop()
    await asyncio.to_thread(release_gates, operator, kube)
    [ended] = await asyncio.gather(kopf_task, return_exceptions=True)
    if elector is not None and not lost:
        await asyncio.to_thread(elector.release)
    if isinstance(ended, BaseException) and not isinstance(ended, asyncio.CancelledError):
        # kopf ended on an error of its own: said, and the reconciler starts again (was: a
        # silent exit 0, as if told to stop)
        log.error("kopf stopped on an error", error=repr(ended), exc_info=ended)
        return KOPF_FAILED
    return LOST_LEADERSHIP if lost else 0


def release_gates(operator: Operator, kube: Kube) -> None:
    """Leading ends: the scheduling gates this replica put on pods go, even once the Lease is
    no longer ours (operator/marking.py: why that write is safe from any replica)."""
    if kube.leadership is None:
        operator.gates.release_all()
        return
    with kube.leadership.unfenced():
        operator.gates.release_all()


def exit_within(seconds: float) -> None:
    """The process ends within `seconds` whatever its threads do: a cancelled to_thread task's
    thread goes on, and asyncio.run would wait for it at exit."""
    timer = threading.Timer(seconds, os._exit, (LOST_LEADERSHIP,))
    timer.daemon = True
    timer.start()


def server_version(kube: Kube) -> str | None:
    try:
        return Inspection(kube).server_version()
    except Exception as exc:  # said as "unknown"; the watches will report the API's state
        log.warning("could not read the API server's version", error=str(exc))
        return None


async def run(settings: Settings) -> int:
    metrics = Metrics()
    leadership = Leadership(enabled=settings.leader_election)
    supervise.report_leadership(leadership, metrics)
    kube = Kube(load_client_config(), timeout=settings.api_timeout, metrics=metrics,
                leadership=leadership)
    view = ClusterView(settings, kube)
    versions = Versions(metrics)
    versions.kubernetes(server_version(kube))
    view.subscribe(versions.on_facts)
    caches = Caches(kube, settings.api_timeout)
    view.subscribe(caches.follow_namespaces)
    operator = Operator(settings, kube, view, metrics, caches)
    bindings = None
    if settings.admission_mode == "policy":
        policies = AdmissionPolicies(kube, settings.admission_policy_version)
        bindings = PolicyBindings(
            settings,
            policies,
            metrics,
            settings.leader_election_namespace or default_namespace(),
            executor=Executor(kube, operator.notifier, policies),
            held=operator.marks.held,
            soon=operator.soon,
            facts=lambda: view.facts,
        )
        view.subscribe(bindings.on_facts)
    view.start()

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with contextlib.AsyncExitStack() as stack:
        if settings.metrics_port:
            await stack.enter_async_context(
                probes.serving(
                    probes.metrics_app(metrics), settings.metrics_host, settings.metrics_port
                )
            )
        try:
            return await reconcile_while_leading(settings, kube, operator, view, stop, bindings)
        finally:
            view.stop()
            caches.stop()
