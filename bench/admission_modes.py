"""Benchmark: pod creation through each admission mode, side by side on one API server.

python -m bench.admission_modes [--pods 10000] [--concurrency 8] [--block 500]

One local control plane; three namespaces: one that did not opt in (no mutation at all), one
bound to the chart's MutatingAdmissionPolicy (policy mode), one served by our webhook (webhook
mode, the server on this host). TaskRun pods (nothing schedules them) are created in each, in
blocks that take turns, so that the machine's noise falls on all three alike. For each mode it
prints the client's time per creation (p50, p99), the throughput, its ratio to no mutation, and
the API server's own time per policy evaluation and per webhook call (from its metrics; the
mean, since their buckets are coarse). Results as JSON in build/.
Last line: `admission modes: policy p99 X ms (Y x none), webhook p99 Z ms (W x none)`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kubernetes import client

from controller.core.basics import names
from e2e.harness import parity
from e2e.harness.cluster import LocalCluster
from e2e.harness.cluster import tekton as tekton_cluster
from e2e.harness.coscheduler import install_crds
from tests import factories

WEBHOOK_LABEL = "bench.tekton-coscheduler.dev/webhook"


# What the API server spends on one evaluation: the policy's checks (labelled by policy), and
# calls to our webhook (labelled by its name); both count only where they apply.
EVALUATIONS = {
    "policy": "apiserver_mutating_admission_policy_check_duration_seconds",
    "webhook": "apiserver_admission_webhook_admission_duration_seconds",
}


def evaluation_seconds(cluster: LocalCluster) -> dict[str, tuple[float, float]]:
    """(sum, count) of the API server's time per policy evaluation and per webhook call."""
    with cluster.api_client() as api:
        text = api.call_api("GET", f"{api.configuration.host}/metrics").read().decode()
    out: dict[str, list[float]] = {}
    for line in text.splitlines():
        for mode, metric in EVALUATIONS.items():
            if mode == "webhook" and 'name="pods.tekton-coscheduler.dev"' not in line:
                continue
            for part, index in (("_sum", 0), ("_count", 1)):
                if line.startswith(metric + part):
                    out.setdefault(mode, [0.0, 0.0])[index] += float(line.rsplit(" ", 1)[1])
    return {k: (v[0], v[1]) for k, v in out.items()}


class Creator:
    def __init__(self, cluster: LocalCluster, concurrency: int) -> None:
        self.cluster, self.concurrency = cluster, concurrency
        self.local = threading.local()
        self.failures = 0

    def create(self, namespace: str, i: int) -> float:
        if not hasattr(self.local, "core"):
            self.local.core = client.CoreV1Api(self.cluster.api_client())
        pod = factories.taskrun_pod(run=f"b-{i % 50}", task=f"t{i}", namespace=namespace)
        pod["metadata"]["name"] = f"b-{i}"
        pod["spec"]["schedulerName"] = "bench-nobody"
        started = time.perf_counter()
        try:
            self.local.core.create_namespaced_pod(namespace, pod)
        except client.exceptions.ApiException:
            self.failures += 1
        return (time.perf_counter() - started) * 1000

    def block(self, namespace: str, start: int, count: int) -> tuple[list[float], float]:
        began = time.perf_counter()
        with ThreadPoolExecutor(self.concurrency) as pool:
            times = list(pool.map(lambda i: self.create(namespace, i), range(start, start + count)))
        return times, time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.admission_modes", description=__doc__)
    parser.add_argument("--pods", type=int, default=10_000, help="per mode")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--block", type=int, default=500)
    parser.add_argument("--out", type=Path, default=Path("build/admission_modes.json"))
    args = parser.parse_args()
    with LocalCluster() as cluster:
        cluster.add_nodes(1)
        tekton_cluster.install(cluster, None)
        install_crds(cluster)
        parity.install_policy(cluster)
        webhook = parity.webhook_replica(cluster, WEBHOOK_LABEL, "bench-webhook")
        suffix = uuid.uuid4().hex[:5]
        namespaces = {
            "none": cluster.create_namespace(f"none-{suffix}"),
            "policy": cluster.create_namespace(f"policy-{suffix}",
                                               labels={names.NAMESPACE_LABEL: "true"}),
            "webhook": cluster.create_namespace(f"webhook-{suffix}",
                                                labels={WEBHOOK_LABEL: "true"}),
        }
        creator = Creator(cluster, args.concurrency)
        for ns in namespaces.values():  # warm up each path; these are not counted
            creator.block(ns, 10_000_000, 50)
        before = evaluation_seconds(cluster)
        times: dict[str, list[float]] = {m: [] for m in namespaces}
        walls: dict[str, float] = dict.fromkeys(namespaces, 0.0)
        for start in range(0, args.pods, args.block):
            count = min(args.block, args.pods - start)
            for mode, ns in namespaces.items():
                block_times, wall = creator.block(ns, start, count)
                times[mode] += block_times
                walls[mode] += wall
            print(f"  {start + count}/{args.pods} pods per mode", flush=True)
        after = evaluation_seconds(cluster)
        webhook.stop()
    rows = {}
    for mode in namespaces:
        q = statistics.quantiles(times[mode], n=100)
        rows[mode] = {"pods": len(times[mode]), "p50_ms": q[49], "p99_ms": q[98],
                      "per_s": len(times[mode]) / walls[mode]}
        if mode in after:
            s0, c0 = before.get(mode, (0.0, 0.0))
            s1, c1 = after[mode]
            rows[mode]["apiserver_evaluation_mean_ms"] = (s1 - s0) / max(c1 - c0, 1) * 1000
            rows[mode]["apiserver_evaluations"] = c1 - c0
    base = rows["none"]
    print(f"{'mode':8} {'p50 ms':>8} {'p99 ms':>8} {'pods/s':>8} {'vs none':>8} {'eval ms':>8}")
    for mode, row in rows.items():
        row["throughput_vs_none"] = row["per_s"] / base["per_s"]
        row["p99_vs_none"] = row["p99_ms"] / base["p99_ms"]
        spent = row.get("apiserver_evaluation_mean_ms")
        shown = f"{spent:8.2f}" if isinstance(spent, float) else f"{'-':>8}"
        print(f"{mode:8} {row['p50_ms']:8.2f} {row['p99_ms']:8.2f} {row['per_s']:8.1f} "
              f"{row['throughput_vs_none']:8.2f} {shown}")
    print(f"failed creations: {creator.failures}; client timing includes the API server's "
          "validation and storage; eval ms is the API server's time a policy evaluation or a "
          "webhook call (a mutated pod is admitted twice: reinvocation)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"pods_per_mode": args.pods, "concurrency": args.concurrency,
                                    "failures": creator.failures, "modes": rows}, indent=2))
    print(f"admission modes: policy p99 {rows['policy']['p99_ms']:.1f} ms "
          f"({rows['policy']['p99_vs_none']:.2f} x none), webhook p99 "
          f"{rows['webhook']['p99_ms']:.1f} ms ({rows['webhook']['p99_vs_none']:.2f} x none); "
          f"throughput {rows['policy']['throughput_vs_none']:.2f} and "
          f"{rows['webhook']['throughput_vs_none']:.2f} x none")


if __name__ == "__main__":
    main()
