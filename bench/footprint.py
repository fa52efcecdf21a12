"""What the operator costs while it waits: threads, open watches, memory and idle CPU.

Read from outside, as an administrator would: /proc for the operator's processes (the server
and its reconciler child) and the API server's own `apiserver_longrunning_requests` for the
watches, less those open before the operator started.
"""

from __future__ import annotations

import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from bench.pod_churn import cpu_seconds, tree, tree_rss_mib
from controller.core.basics import names
from e2e.harness.cluster import LocalCluster


@dataclass
class Footprint:
    threads: int
    watches: int  # open on the API server because of the operator
    rss_mib: float
    idle_cpu_percent: float  # of one core, over the window


def threads(pid: int) -> int:
    total = 0
    for each in tree(pid):
        try:
            total += len(os.listdir(f"/proc/{each}/task"))
        except OSError:
            continue
    return total


def open_watches(cluster: LocalCluster) -> int:
    """Every WATCH the API server holds open now, whoever asked."""
    with cluster.api_client() as api:
        text = api.call_api("GET", f"{api.configuration.host}/metrics").read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("apiserver_longrunning_requests{") and 'verb="WATCH"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


def measure(cluster: LocalCluster, pid: int, baseline_watches: int,
            window: float = 30.0) -> Footprint:
    """The operator at rest for `window` seconds."""
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    time.sleep(window)
    idle = (cpu_seconds(pid) - cpu0) / (time.monotonic() - t0) * 100
    return Footprint(threads(pid), open_watches(cluster) - baseline_watches,
                     tree_rss_mib(pid), round(idle, 2))


def enabled_namespaces(cluster: LocalCluster, count: int, prefix: str = "team") -> list[str]:
    """`count` namespaces that opted in, with nothing in them."""
    tag = uuid.uuid4().hex[:4]

    def make(i: int) -> str:
        return cluster.create_namespace(f"{prefix}-{tag}-{i}",
                                        labels={names.NAMESPACE_LABEL: "true"})

    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(make, range(count)))
