"""What a scrape of a replica shows beyond the operator's own figures: its build, whether it
leads, and each process's CPU, memory and garbage collector, the server's and the reconciler's
apart."""

from __future__ import annotations

import asyncio
import importlib.metadata
import platform
import sys
from collections import Counter

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from controller.faces import probes, supervise
from controller.kube.fencing import Leadership
from controller.metrics import Metrics

STANDARD = ("process_cpu_seconds_total", "process_resident_memory_bytes",
            "process_start_time_seconds", "process_open_fds", "python_info",
            "python_gc_collections_total", "python_gc_objects_collected_total")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def scraped(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Sample name -> its (labels, value) pairs, as Prometheus would read the exposition."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


def test_build_info_names_the_installed_version_and_python() -> None:
    samples = scraped(generate_latest(Metrics().registry).decode())
    [(labels, value)] = samples["tekton_coscheduler_build_info"]
    assert value == 1
    assert labels["version"] == importlib.metadata.version("tekton-coscheduler")
    assert labels["python_version"] == platform.python_version()
    assert labels["kopf_version"] == importlib.metadata.version("kopf")


def test_process_and_gc_metrics_are_on_our_registry() -> None:
    samples = scraped(generate_latest(Metrics().registry).decode())
    for name in STANDARD:
        assert name in samples, name
    [(_, rss)] = samples["process_resident_memory_bytes"]
    assert rss > 1_000_000  # a Python process weighs megabytes


def test_the_merged_scrape_keeps_each_process_apart_and_names_each_family_once() -> None:
    server, reconciler = Metrics(), Metrics()
    reconciler.leader.set(1)
    text = probes.merged(server.registry, generate_latest(reconciler.registry).decode()).decode()
    types = Counter(line.split()[2] for line in text.splitlines() if line.startswith("# TYPE"))
    assert [name for name, n in types.items() if n > 1] == []  # Prometheus refuses a repeat
    samples = scraped(text)
    for name in (*STANDARD, "tekton_coscheduler_build_info", "tekton_coscheduler_leader"):
        assert {labels["process"] for labels, _ in samples[name]} == {"server", "reconciler"}, name
    assert dict((labels["process"], value) for labels, value in
                samples["tekton_coscheduler_leader"]) == {"server": 0, "reconciler": 1}


def test_the_reconciler_leads_while_its_leadership_is_valid() -> None:
    clock, metrics = Clock(), Metrics()
    leadership = Leadership(clock=clock)
    supervise.report_leadership(leadership, metrics)

    def leader() -> float | None:
        return metrics.registry.get_sample_value("tekton_coscheduler_leader")

    assert leader() == 0
    leadership.grant("replica-a_1", until=110.0)
    assert leader() == 1
    clock.now = 110.5  # past the renew deadline, before the Lease loop noticed: not leading
    assert leader() == 0
    leadership.grant("replica-a_1", until=120.0)
    leadership.revoke()
    assert leader() == 0
    # without leader election, the reconciler leads from when it starts reconciling
    alone = Leadership(enabled=False, clock=clock)
    supervise.report_leadership(alone, metrics)
    alone.grant("replica-a_1", until=float("inf"))
    assert leader() == 1


async def test_the_server_leads_while_its_child_reports_a_deadline_ahead() -> None:
    """The server's gauge reads the deadlines its reconciler reports over the pipe; it is 0
    when the child reports none, holds none any more, or is gone."""
    script = (
        "import os, sys, time\n"
        f"fd = int(os.environ[{supervise.LEADERSHIP_FD!r}])\n"
        "os.write(fd, f'{time.monotonic() + 60}\\n'.encode())\n"
        "time.sleep(1.5)\n"
        "os.write(fd, b'0.0\\n')\n"  # revoked, as report_leadership says it
        "time.sleep(60)\n"
    )
    metrics = Metrics()
    child = supervise.Child([sys.executable, "-c", script], {}, metrics)
    seen = []
    stop = asyncio.Event()
    task = asyncio.create_task(child.run(stop))
    try:
        for _ in range(50):
            seen.append(metrics.registry.get_sample_value("tekton_coscheduler_leader"))
            if seen[-1] == 0 and 1 in seen:
                break
            await asyncio.sleep(0.1)
    finally:
        stop.set()
        await child.stop(timeout=1)
        await asyncio.wait_for(task, 5)
    assert seen[0] == 0 and 1 in seen and seen[-1] == 0, seen
