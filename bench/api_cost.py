"""Benchmark: what the operator asks of the API server, per run and per idle minute.

python -m bench.api_cost [--runs 30] [--finished 100] [--idle 60]

A local control plane with the real Tekton controller. First F one-task runs are run to the
end and kept (finished runs a real cluster keeps around). Then, with the operator leading, R
fan-out/fan-in runs with a volumeClaimTemplate claim, all at once, to their end. The operator's
own request counter (tekton_coscheduler_api_requests_total, by verb and resource) is read from
its /metrics before and after: requests per run by verb, and then what it sends in --idle
seconds with nothing running (the cost of the finished runs and of the cluster's size).
Last line:
`api cost: R runs (F finished kept): X requests per run (Y reads, Z writes), idle W per minute`.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from collections import Counter
from pathlib import Path

from kubernetes import client

from controller.core.basics import names
from e2e.harness import tekton_runs as tr
from e2e.harness.cluster import LocalCluster
from e2e.harness.coscheduler import Coscheduler, install_crds

READS = ("get", "list", "watch")


def requests(operator: Coscheduler) -> Counter[tuple[str, str]]:
    out: Counter[tuple[str, str]] = Counter()
    for sample in operator.samples():
        if sample.name == "tekton_coscheduler_api_requests_total":
            out[(sample.labels["verb"], sample.labels["resource"])] += int(sample.value)
    return out


def run_all(cluster: LocalCluster, ns: str, bodies: list[dict[str, object]],
            timeout: float) -> None:
    with cluster.api_client() as api:
        custom = client.CustomObjectsApi(api)
        made = [tr.create_run(custom, ns, b) for b in bodies]
        deadline = time.monotonic() + timeout
        for run in made:
            tr.wait_finished(cluster, custom, ns, run["metadata"]["name"],
                             max(10.0, deadline - time.monotonic()))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.api_cost", description=__doc__)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--finished", type=int, default=100)
    parser.add_argument("--idle", type=float, default=60)
    parser.add_argument("--controller-path", type=Path)
    parser.add_argument("--out", type=Path, default=Path("build/api_cost.json"))
    args = parser.parse_args()
    env = {"POD_NAMESPACE": "default", "COSCHEDULER_LOG_LEVEL": "INFO",
           "COSCHEDULER_RESYNC_INTERVAL": "30"}
    if args.controller_path:
        env["PYTHONPATH"] = str(args.controller_path.resolve())
    with LocalCluster() as cluster:
        nodes = cluster.add_nodes(8, pods=250)
        for node in nodes:
            for _ in range(args.runs // len(nodes) + 2):
                cluster.add_local_pv(f"pv-{uuid.uuid4().hex[:10]}", node)
        cluster.start_tekton()
        install_crds(cluster)
        ns = cluster.create_namespace(f"cost-{uuid.uuid4().hex[:5]}",
                                      labels={names.NAMESPACE_LABEL: "true"})
        old = cluster.create_namespace(f"old-{uuid.uuid4().hex[:5]}",
                                       labels={names.NAMESPACE_LABEL: "true"})
        started = time.monotonic()
        run_all(cluster, old, [
            tr.pipelinerun(tr.unique("old"), [tr.task("t", workspaces=())], {})
            for _ in range(args.finished)], timeout=60 + args.finished * 2)
        print(f"{args.finished} finished runs kept, made in {time.monotonic() - started:.0f} s")
        operator = Coscheduler(cluster, env_overrides=env)
        operator.start()
        operator.register_webhook()
        cluster.wait_for(operator.leads, timeout=60, what="the operator leads")
        time.sleep(5)
        before = requests(operator)
        started = time.monotonic()
        run_all(cluster, ns, [tr.fan_out_fan_in(tr.unique("cost")) for _ in range(args.runs)],
                timeout=120 + args.runs * 5)
        time.sleep(5)
        during = requests(operator) - before
        print(f"{args.runs} runs in {time.monotonic() - started:.0f} s")
        idle_start = requests(operator)
        time.sleep(args.idle)
        idle = requests(operator) - idle_start
        operator.stop()
    per_run = {f"{v} {r}": round(n / args.runs, 2) for (v, r), n in sorted(during.items())}
    reads = sum(n for (v, _), n in during.items() if v in READS) / args.runs
    writes = sum(n for (v, _), n in during.items() if v not in READS) / args.runs
    idle_per_minute = sum(idle.values()) * 60 / args.idle
    print("requests per run, by verb and resource:")
    for key, value in per_run.items():
        print(f"  {key:45} {value:8.2f}")
    print(f"idle ({args.idle:.0f} s, nothing running, {args.finished} finished runs kept):")
    for (verb, resource), n in sorted(idle.items()):
        print(f"  {verb} {resource:40} {n}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "runs": args.runs, "finished": args.finished, "per_run": per_run,
        "reads_per_run": reads, "writes_per_run": writes,
        "idle_per_minute": idle_per_minute,
        "idle": {f"{v} {r}": n for (v, r), n in idle.items()},
    }, indent=2))
    print(f"api cost: {args.runs} runs ({args.finished} finished kept): "
          f"{reads + writes:.1f} requests per run ({reads:.1f} reads, {writes:.1f} writes), "
          f"idle {idle_per_minute:.0f} per minute")


if __name__ == "__main__":
    main()
