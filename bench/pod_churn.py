"""Benchmark: what unrelated pods cost the leader.

python -m bench.pod_churn [--pods N] [--rounds R]

A local control plane, the operator running on the host as leader, and N plain pods (no Tekton
labels, in a namespace that did not opt in) created, run by kwok's fake kubelets and deleted,
R times. Prints the operator's CPU time and resident memory before and after, per pod and per
watch event the API server sent for those pods. A TaskRun-heavy cluster is not the question
here: those pods concern us. The question is the rest of a shared cluster.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
import uuid
from pathlib import Path

from kubernetes import client, watch

from bench.admission import rss_mib
from e2e.harness.cluster import LocalCluster, present
from e2e.harness.cluster import tekton as tekton_cluster
from e2e.harness.coscheduler import Coscheduler, install_crds

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def tree(pid: int) -> list[int]:
    """The process and its descendants (the server and its reconciler child)."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return [pid]
    return [pid, *(p for child in children for p in tree(int(child)))]


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of the process and its descendants, from /proc."""
    total = 0
    for each in tree(pid):
        try:
            fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / CLOCK_TICKS


def tree_rss_mib(pid: int) -> float:
    return sum(rss_mib(each) for each in tree(pid))


class EventCounter(threading.Thread):
    """Watches the namespace's pods as the operator's pod watch sees them, and counts."""

    def __init__(self, cluster: LocalCluster, namespace: str) -> None:
        super().__init__(daemon=True)
        self.cluster, self.namespace, self.events = cluster, namespace, 0
        self.stopped = threading.Event()

    def run(self) -> None:
        with self.cluster.api_client() as api:
            core = client.CoreV1Api(api)
            version = present(core.list_namespaced_pod(self.namespace).metadata).resource_version
            while not self.stopped.is_set():
                for event in watch.Watch().stream(  # type: ignore[no-untyped-call]
                    core.list_namespaced_pod,
                    self.namespace,
                    resource_version=version,
                    timeout_seconds=1,
                ):
                    self.events += 1
                    version = event["object"].metadata.resource_version


def churn(cluster: LocalCluster, namespace: str, pods: int) -> int:
    """Creates the pods, waits until all run, deletes them and waits until all are gone.
    Returns how many watch events those pods made."""
    counter = EventCounter(cluster, namespace)
    counter.start()
    time.sleep(1)
    with cluster.api_client() as api:
        core = client.CoreV1Api(api)
        for i in range(pods):
            core.create_namespaced_pod(
                namespace,
                {  # type: ignore[arg-type]
                    "metadata": {"name": f"plain-{i}", "labels": {"app": "unrelated"}},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                },
            )
        cluster.wait_for(
            lambda: (
                sum(present(p.status).phase == "Running"
                    for p in core.list_namespaced_pod(namespace).items) == pods
            ),
            timeout=300,
            what=f"{pods} pods running",
        )
        core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        cluster.wait_for(
            lambda: not core.list_namespaced_pod(namespace).items, timeout=300, what="pods gone"
        )
    time.sleep(2)
    counter.stopped.set()
    counter.join(10)
    return counter.events


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.pod_churn", description=__doc__)
    parser.add_argument("--pods", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with LocalCluster() as cluster:
        cluster.add_nodes(4, pods=1000)
        tekton_cluster.install(cluster, None)
        install_crds(cluster)
        operator = Coscheduler(cluster, env_overrides={"POD_NAMESPACE": "default"})
        operator.start()
        assert operator.process is not None and operator.process.pid is not None
        pid = operator.process.pid
        namespace = cluster.create_namespace(f"unrelated-{uuid.uuid4().hex[:6]}")
        time.sleep(5)  # past the start-up work
        idle_cpu, idle_rss = cpu_seconds(pid), tree_rss_mib(pid)
        time.sleep(10)
        idle_rate = (cpu_seconds(pid) - idle_cpu) / 10
        print(f"operator idle (server and reconciler): {idle_rate * 1000:.1f} ms CPU per s, "
              f"RSS {idle_rss:.1f} MiB")
        for r in range(args.rounds):
            before, started = cpu_seconds(pid), time.monotonic()
            events = churn(cluster, namespace, args.pods)
            elapsed = time.monotonic() - started
            spent = cpu_seconds(pid) - before
            idle = idle_rate * elapsed
            # Beyond idle; below the idle rate's own noise it reads as zero, not negative.
            extra = max(0.0, spent - idle)
            print(
                f"round {r + 1}: {args.pods} pods, {events} watch events in {elapsed:.1f} s; "
                f"operator CPU {spent * 1000:.0f} ms (idle alone {idle * 1000:.0f} ms), "
                f"beyond idle {extra * 1000 / args.pods:.2f} ms per pod, "
                f"{extra * 1000 / max(events, 1):.3f} ms per event; RSS {tree_rss_mib(pid):.1f} MiB"
            )
        operator.stop()


if __name__ == "__main__":
    main()
