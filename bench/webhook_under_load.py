"""Benchmark: the webhook's answer time while the leader works through thousands of runs.

python -m bench.webhook_under_load [--runs 2000] [--seconds 60] [--controller-path DIR]

A local control plane with Tekton's CRDs and R PipelineRuns in an opted-in namespace (pending,
so no balloons: the leader's work is the watch events and the resync of every run every few
seconds). The operator runs on the host as leader; a client sends admission reviews straight
to its webhook at a steady 20 a second and times each answer. It prints p50, p99 and the
slowest answer while the leader resyncs, and the same with no runs at all.

--controller-path runs the operator from another checkout (for example a git worktree of an
earlier commit), to compare before and after in one invocation of this script.
Last line: `webhook under load: R runs, p99 X ms (no runs: Y ms), slowest Z ms`.
"""

from __future__ import annotations

import argparse
import json
import ssl
import statistics
import threading
import time
import urllib.request
import uuid
from pathlib import Path

from kubernetes import client

from controller.core.basics import names
from controller.faces import webhook
from e2e.harness.cluster import LocalCluster
from e2e.harness.cluster import tekton as tekton_cluster
from e2e.harness.coscheduler import Coscheduler, install_crds
from tests import factories

RATE = 20.0


def pending_run(i: int) -> dict[str, object]:
    return {
        "apiVersion": "tekton.dev/v1",
        "kind": "PipelineRun",
        "metadata": {"name": f"load-{i}", "annotations": {"note": "x" * 200}},
        "spec": {
            "status": "PipelineRunPending",
            "pipelineRef": {"name": "never"},
            "workspaces": [{"name": "w", "volumeClaimTemplate": {"spec": {
                "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}],
        },
    }


def measure(operator: Coscheduler, namespace: str, seconds: float) -> list[float]:
    """Answer times in ms of reviews sent at RATE per second for `seconds`."""
    ctx = ssl.create_default_context()
    operator.ca.configure_trust(ctx)
    body = json.dumps(factories.admission_review(factories.taskrun_pod(namespace=namespace)))
    times: list[float] = []
    lock = threading.Lock()

    def one() -> None:
        req = urllib.request.Request(
            f"https://127.0.0.1:{operator.webhook_port}{webhook.PATH}",
            data=body.encode(),
            headers={"Content-Type": "application/json"},
        )
        started = time.perf_counter()
        with urllib.request.urlopen(req, context=ctx, timeout=30) as resp:
            resp.read()
        with lock:
            times.append((time.perf_counter() - started) * 1000)

    threads = []
    started = time.monotonic()
    i = 0
    while time.monotonic() - started < seconds:
        time.sleep(max(0.0, started + i / RATE - time.monotonic()))
        thread = threading.Thread(target=one)
        thread.start()
        threads.append(thread)
        i += 1
    for thread in threads:
        thread.join(60)
    return times


def summary(times: list[float]) -> dict[str, float]:
    q = statistics.quantiles(times, n=100)
    return {"n": len(times), "p50": q[49], "p99": q[98], "max": max(times)}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.webhook_under_load", description=__doc__)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--controller-path", type=Path)
    parser.add_argument("--out", type=Path, default=Path("build/webhook_under_load.json"))
    args = parser.parse_args()
    env = {"POD_NAMESPACE": "default", "COSCHEDULER_LOG_LEVEL": "INFO"}
    if args.controller_path:
        env["PYTHONPATH"] = str(args.controller_path.resolve())
    with LocalCluster() as cluster:
        cluster.add_nodes(2)
        tekton_cluster.install(cluster, None)
        install_crds(cluster)
        ns = cluster.create_namespace(f"load-{uuid.uuid4().hex[:6]}",
                                      labels={names.NAMESPACE_LABEL: "true"})
        operator = Coscheduler(cluster, env_overrides=env)
        operator.start()
        cluster.wait_for(lambda: operator.said("leading", 5000), timeout=60,
                         what="the operator leads")
        idle = summary(measure(operator, ns, 20))
        print(f"no runs: p50 {idle['p50']:.1f} ms, p99 {idle['p99']:.1f} ms, "
              f"slowest {idle['max']:.1f} ms ({idle['n']} answers)")
        started = time.monotonic()
        with cluster.api_client() as api:
            custom = client.CustomObjectsApi(api)
            for i in range(args.runs):
                custom.create_namespaced_custom_object("tekton.dev", "v1", ns, "pipelineruns",
                                                       pending_run(i))
        print(f"{args.runs} pending PipelineRuns created in {time.monotonic() - started:.0f} s")
        loaded = summary(measure(operator, ns, args.seconds))
        resyncs = operator.log(200000).count('"event":"resync done"')
        print(f"{args.runs} runs, leader resyncing every 5 s: p50 {loaded['p50']:.1f} ms, "
              f"p99 {loaded['p99']:.1f} ms, slowest {loaded['max']:.1f} ms "
              f"({loaded['n']} answers{f', {resyncs} resyncs logged' if resyncs else ''})")
        operator.stop()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"runs": args.runs, "idle": idle, "loaded": loaded,
                                    "controller_path": str(args.controller_path or "")},
                                   indent=2))
    print(f"webhook under load: {args.runs} runs, p99 {loaded['p99']:.1f} ms "
          f"(no runs: {idle['p99']:.1f} ms), slowest {loaded['max']:.1f} ms")


if __name__ == "__main__":
    main()
