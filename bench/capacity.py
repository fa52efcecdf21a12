"""`make bench-capacity`: do a run's widest layer start together on busy nodes? Four ways.

python -m bench.capacity [--nodes 8] [--node-cpu 8] [--background 0.6] [--runs 16]
                         [--fan-out 4] [--task-cpu 1] [--interval 4] [--build-seconds 15]
                         [--autoscaler]

One local control plane with the real Tekton controller and kube-scheduler. N kwok nodes are
kept busy by unrelated pods: each node's share of CPU taken is drawn (seeded) around the
background mean, so some nodes have room for a run's fan-out and others do not. Then, for each
mode in turn, R runs (fetch -> K builds asking C CPUs each, running S seconds -> publish, on
a volumeClaimTemplate claim bound to a zonal volume) are started one every I seconds:

- capacity: ours, with capacity-aware anchoring (the default);
- balloon-only: ours, the namespace's policy turning it off (anchored by the balloon alone);
- tekton-assistant: Tekton's own affinity assistant (`coschedule: workspaces`);
- none: no coscheduling.

Per mode: runs whose widest layer started together (every build bound within 5 s of the
first), run duration p50/p99 (creation to completion, as Tekton records them), pods that
waited for capacity (bound more than 5 s after they were made), runs with every pod on one
node, and the nodes an autoscaler added. With --autoscaler, Karpenter's kwok provider runs
beside the control plane and may add nodes of --node-cpu CPUs (a NodePool per mode, removed
with its nodes before the next mode); without it, no node is added.
JSON in build/capacity.json; PNG plots in build/capacity-*.png. Last line:
`capacity: widest layer started together in X/R runs (assistant Y/R, none Z/R)`.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

from kubernetes import client

from bench.scale import say
from bench.scale_report import _save
from controller.core.basics import names
from controller.core.basics.times import parse_time
from controller.settings import Settings
from e2e.harness import capacity, faults
from e2e.harness import tekton_runs as tr
from e2e.harness.cluster import LocalCluster, karpenter, name_of
from e2e.harness.cluster import tekton as tekton_cluster
from e2e.harness.coscheduler import Coscheduler, install_crds
from e2e.harness.figures import percentile

MODES = {"capacity": "disabled", "balloon-only": "disabled", "tekton-assistant": "workspaces",
         "none": "disabled"}
TOGETHER = 5.0  # seconds: a layer whose pods were all bound within this started together


@dataclass
class Mode:
    mode: str
    runs: int
    succeeded: int = 0
    together: int = 0
    one_node: int = 0
    waited_pods: int = 0
    pods: int = 0
    nodes_added: int = 0
    duration_p50: float = float("nan")
    duration_p99: float = float("nan")
    durations: list[float] = field(default_factory=list)
    spreads: list[float] = field(default_factory=list)
    waits: list[float] = field(default_factory=list)


def background(cluster: LocalCluster, nodes: list[str], node_cpu: float, mean: float,
               seed: int) -> dict[str, float]:
    """Unrelated pods: each node's busy share drawn around the mean, the same in every mode."""
    rng = random.Random(seed)
    ns = cluster.create_namespace("background")
    busy = {}
    for node in nodes:
        share = min(0.95, max(0.0, rng.uniform(mean - 0.3, mean + 0.3)))
        busy[node] = round(share * node_cpu, 1)
        if busy[node] > 0:
            capacity.filler(cluster, ns, node, f"{int(busy[node] * 1000)}m")
    return busy


def one_mode(cluster: LocalCluster, mode: str, args: argparse.Namespace) -> Mode:
    tekton_cluster.configure(cluster, {"coschedule": MODES[mode]})
    if not args.autoscaler:
        return runs_of_mode(cluster, mode, args)
    pool = f"bench-{mode}"
    karpenter.apply_node_pool(cluster, karpenter.node_pool(
        pool, {}, cpu_limit=int(args.node_cpu * args.runs), tainted=False))
    try:
        return runs_of_mode(cluster, mode, args)
    finally:
        karpenter.delete_node_pool(cluster, pool)
        cluster.wait_for(lambda: not karpenter.made_nodes(cluster, pool), timeout=300,
                         what=f"the nodes of NodePool {pool} removed")


def runs_of_mode(cluster: LocalCluster, mode: str, args: argparse.Namespace) -> Mode:
    ours = mode in ("capacity", "balloon-only")
    labels = {names.NAMESPACE_LABEL: "true"} if ours else {}
    ns = cluster.create_namespace(f"{mode[:12]}-{uuid.uuid4().hex[:4]}", labels=labels)
    result = Mode(mode, args.runs)
    builds = [f"build-{i}" for i in range(args.fan_out)]
    with cluster.api_client() as api, tr.PodRecorder(cluster, ns) as recorder:
        custom = client.CustomObjectsApi(api)
        if mode == "balloon-only":
            group = (names.POLICY_GROUP, names.POLICY_VERSION)
            custom.create_namespaced_custom_object(*group, ns, names.POLICY_PLURAL, {
                "apiVersion": "/".join(group), "kind": names.POLICY_KIND,
                "metadata": {"name": "off"}, "spec": {"capacity": {"anchor": False}}})
            time.sleep(2)  # the operator's policy watch
        nodes0 = {name_of(n) for n in client.CoreV1Api(api).list_node().items}
        made: list[dict[str, Any]] = []
        for i in range(args.runs):
            body = capacity.fan_out(f"{mode[:6]}-{i}-{uuid.uuid4().hex[:4]}", None,
                                    build_cpu=f"{int(args.task_cpu * 1000)}m", builds=builds,
                                    build_seconds=str(args.build_seconds))
            made.append(tr.create_run(custom, ns, body))
            time.sleep(args.interval)
        say(f"{mode}: {args.runs} runs started")
        done: dict[str, dict[str, Any]] = {}
        deadline = time.monotonic() + args.timeout
        while len(done) < args.runs and time.monotonic() < deadline:
            for run in cast(dict[str, Any], custom.list_namespaced_custom_object(
                    *tr.TEKTON, ns, "pipelineruns"))["items"]:
                if tr.outcome(run):
                    done.setdefault(run["metadata"]["name"], run)
            time.sleep(3)
        if len(done) < args.runs:  # what did not finish is cancelled, and counted as such
            for run in made:
                if run["metadata"]["name"] not in done:
                    custom.patch_namespaced_custom_object(
                        *tr.TEKTON, ns, "pipelineruns", run["metadata"]["name"],
                        {"spec": {"status": "Cancelled"}})
        result.nodes_added = len(
            {name_of(n) for n in client.CoreV1Api(api).list_node().items} - nodes0)
        for run in made:
            final = done.get(run["metadata"]["name"])
            ok = bool(final and tr.outcome(final) == ("True", "Succeeded"))
            result.succeeded += ok
            pods = recorder.pods(run["metadata"]["uid"])
            bound = [p.bound_at for p in pods if p.task in builds and p.bound_at]
            if len(bound) == len(builds):
                spread = max(bound) - min(bound)
                result.spreads.append(spread)
                result.together += spread <= TOGETHER
            result.one_node += ok and len({p.node for p in pods}) == 1
            for p in pods:
                result.pods += 1
                if p.bound_at:
                    result.waits.append(p.bound_at - p.first_seen)
                result.waited_pods += (p.bound_at or time.time()) - p.first_seen > TOGETHER
            status = (final or {}).get("status") or {}
            start, end = parse_time(status.get("startTime")), parse_time(
                status.get("completionTime"))
            if ok and start and end:
                result.durations.append((end - start).total_seconds())
    result.duration_p50 = percentile(result.durations, 50)
    result.duration_p99 = percentile(result.durations, 99)
    return result


def plot(results: list[Mode], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    charts: tuple[tuple[Callable[[Mode], list[float]], str, str], ...] = (
        (lambda r: r.spreads, "seconds between the first and last build bound", "spread"),
        (lambda r: r.durations, "run duration, seconds", "duration"),
    )
    for values, what, name in charts:
        fig, ax = plt.subplots(figsize=(8, 4))
        for r in results:
            ordered = sorted(values(r))
            if ordered:
                ax.plot(ordered, [(i + 1) / len(ordered) for i in range(len(ordered))],
                        label=r.mode)
        paths.append(_save(fig, ax, what, "share of runs", out / f"capacity-{name}.png"))
    return paths


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.capacity", description=__doc__)
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--node-cpu", type=float, default=8)
    parser.add_argument("--background", type=float, default=0.6)
    parser.add_argument("--runs", type=int, default=16)
    parser.add_argument("--fan-out", type=int, default=4)
    parser.add_argument("--task-cpu", type=float, default=1)
    parser.add_argument("--interval", type=float, default=4)
    parser.add_argument("--build-seconds", type=int, default=15)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    parser.add_argument("--autoscaler", action="store_true",
                        help="run Karpenter's kwok provider (e2e/build.sh karpenter)")
    parser.add_argument("--out", type=Path, default=Path("build"))
    args = parser.parse_args()
    results: list[Mode] = []
    with LocalCluster() as cluster:
        nodes = cluster.add_nodes(args.nodes, cpu=str(args.node_cpu), zones=("zone-a",))
        busy = background(cluster, nodes, args.node_cpu, args.background, args.seed)
        say("busy CPUs per node: " + ", ".join(f"{n} {c}" for n, c in busy.items()))
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda _: faults.add_pv(cluster, faults.ZONE, "zone-a"),
                          range(args.runs * len(args.modes) + 5)))
        cluster.start_tekton()
        if args.autoscaler:
            cluster.start_karpenter("zone-a", {f"bench-{args.node_cpu:g}cpu": int(args.node_cpu)})
        install_crds(cluster)
        capacity.reservation_priority_class(cluster, Settings().reservation_priority_class_name)
        operator = Coscheduler(cluster, env_overrides={
            "POD_NAMESPACE": "default", "COSCHEDULER_LOG_LEVEL": "INFO",
            "COSCHEDULER_CAPACITY_WAIT_SECONDS": "60"})
        operator.start()
        operator.register_webhook()
        cluster.wait_for(operator.leads, timeout=120, what="the operator leads")
        for mode in args.modes:
            results.append(one_mode(cluster, mode, args))
            r = results[-1]
            say(f"{mode}: together {r.together}/{r.runs}, succeeded {r.succeeded}")
        operator.stop()
    need = args.fan_out * args.task_cpu
    print(f"\n{args.runs} runs (fan-out {args.fan_out} x {args.task_cpu:g} CPU = {need:g} CPU, "
          f"one every {args.interval:g} s) on {args.nodes} nodes of {args.node_cpu:g} CPUs, "
          f"{args.background:.0%} busy on average\n")
    print(f"{'mode':17} {'together':>9} {'ok':>4} {'one node':>9} {'waited pods':>12} "
          f"{'duration p50/p99 s':>19} {'nodes added':>12}")
    for r in results:
        print(f"{r.mode:17} {r.together:>5}/{r.runs:<3} {r.succeeded:4} {r.one_node:9} "
              f"{r.waited_pods:>6}/{r.pods:<5} {r.duration_p50:9.1f}/{r.duration_p99:<9.1f} "
              f"{r.nodes_added:12}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "capacity.json").write_text(json.dumps(
        {"args": vars(args) | {"out": str(args.out)}, "busy": busy,
         "modes": [asdict(r) for r in results]}, indent=2))
    for path in plot(results, args.out):
        print(f"plot: {path}")
    by = {r.mode: r for r in results}

    def share(mode: str) -> str:
        return f"{by[mode].together}/{by[mode].runs}" if mode in by else "-"

    print(f"capacity: widest layer started together in {share('capacity')} runs "
          f"(assistant {share('tekton-assistant')}, none {share('none')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
