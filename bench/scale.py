"""`make bench-scale`: R concurrent runs on N nodes, with F finished runs kept, three ways.

python -m bench.scale [--runs 1000] [--nodes 100] [--finished 5000]
                      [--modes tekton-coscheduler none tekton-assistant]

One local control plane (kwok nodes, the real Tekton controller). F finished PipelineRuns are
kept around (made cancelled, so that Tekton finishes them without pods). Then, for each mode in
turn, R fan-out/fan-in runs (fetch -> build-a|b|c -> publish on one volumeClaimTemplate claim,
zonal volumes) are created at once and run to their end: tekton-coscheduler (our
operator leading, its webhook registered), no coscheduling, and Tekton's own affinity assistant
(`coschedule: workspaces`). Per mode it prints: runs with every pod on one node (and, for ours,
on the balloon's node), misplaced pods, orphan balloons a minute after the end, time from
PipelineRun creation to balloon bound (ours) and to the first layer bound, p50 and p99, and
the ratios to no coscheduling. For ours also: the operator's CPU seconds per run and peak RSS
(server and reconciler), API requests per run by verb, reconcile lag (run created to balloon
pod made), and the webhook's p99. JSON in build/scale.json; PNG plots in build/scale-*.png.
Per mode also the runs with any Warning Event, by reason (a healthy run has none: a Warning
asks a person to act). Last line: `scale: R runs on N nodes: co-located X/R, misplaced M,
orphans O, runs with a Warning W, p99 anchor S s, operator RSS Y MiB, api requests per run Z`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client

from bench.pod_churn import cpu_seconds, tree_rss_mib
from controller.core import names
from e2e.harness import faults
from e2e.harness import tekton_runs as tr
from e2e.harness.cluster import LocalCluster
from e2e.harness.cluster import tekton as tekton_cluster
from e2e.harness.coscheduler import Coscheduler, install_crds

MODES = {"tekton-coscheduler": "disabled", "none": "disabled", "tekton-assistant": "workspaces"}
OURS = "tekton-coscheduler"
TASKS = [tr.FETCH, *tr.FAN_OUT, tr.PUBLISH]


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def pct(values: list[float], q: int) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100)[q - 1]


@dataclass
class ModeResult:
    mode: str
    runs: int
    succeeded: int = 0
    co_located: int = 0  # every task pod on one node (for ours: the balloon's)
    misplaced: int = 0  # task pods of ours bound away from their run's balloon
    orphans: int = 0  # balloons left a minute after the last run ended
    warned: int = 0  # runs with any Warning Event (healthy runs: none is a true alarm)
    warnings: dict[str, int] = field(default_factory=dict)  # reason -> runs it was said on
    anchor_p50: float = float("nan")
    anchor_p99: float = float("nan")
    first_layer_p50: float = float("nan")
    first_layer_p99: float = float("nan")
    wall_seconds: float = 0.0
    operator: dict[str, Any] = field(default_factory=dict)
    cores: dict[str, float] = field(default_factory=dict)  # component -> mean cores used
    series: list[tuple[float, int, int]] = field(default_factory=list)  # (t, live, balloons)
    anchors: list[float] = field(default_factory=list)
    first_layers: list[float] = field(default_factory=list)


def component_cpu(cluster: LocalCluster, operator: Operator | None) -> dict[str, float]:
    """CPU seconds so far of every process of the control plane, Tekton, kwok and ours: where
    two cores go when the machine saturates."""
    procs = {p.name: p.pid for p in cluster.processes if p.pid}
    if operator and operator.proc.process and operator.proc.process.pid:
        procs["tekton-coscheduler"] = operator.proc.process.pid
    return {name: cpu_seconds(pid) for name, pid in procs.items()}


class Operator:
    """Our operator, its counters read from /metrics."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.proc = Coscheduler(cluster, env_overrides={
            "POD_NAMESPACE": "default", "COSCHEDULER_LOG_LEVEL": "INFO",
            "COSCHEDULER_RESYNC_INTERVAL": "30", "COSCHEDULER_LEASE_DURATION": "15"})

    def metrics(self) -> dict[Series, float]:
        return {(x.name, tuple(sorted(x.labels.items()))): x.value for x in self.proc.samples()}


Series = tuple[str, tuple[tuple[str, str], ...]]  # a sample's name and its sorted labels


def requests_by_verb(before: dict[Series, float], after: dict[Series, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in after.items():
        name, labels = key[0], dict(key[1])
        if name == "tekton_coscheduler_api_requests_total":
            verb = "lease" if labels["resource"] == "leases" else labels["verb"]
            out[verb] = out.get(verb, 0.0) + value - before.get(key, 0.0)
    return out


def histogram_p99(before: dict[Series, float], after: dict[Series, float], name: str) -> float:
    """The 99th percentile's bucket bound over the run, from the server's histogram (the
    process that answers admission), all label sets summed."""
    by_bound: dict[float, float] = {}
    for key, value in after.items():
        labels = dict(key[1])
        if key[0] == name + "_bucket" and labels.get("process") != "reconciler":
            bound = float(labels["le"])
            by_bound[bound] = by_bound.get(bound, 0.0) + value - before.get(key, 0.0)
    buckets = sorted(by_bound.items())
    total = buckets[-1][1] if buckets else 0
    for bound, count in buckets:
        if total and count >= 0.99 * total:
            return bound
    return float("nan")


def finished_runs(cluster: LocalCluster, count: int) -> None:
    """Runs Tekton finishes without pods: created cancelled."""
    if not count:
        return
    ns = cluster.create_namespace(f"old-{uuid.uuid4().hex[:5]}",
                                  labels={names.NAMESPACE_LABEL: "true"})
    with cluster.api_client() as api:
        custom = client.CustomObjectsApi(api)

        def make(i: int) -> None:
            body = tr.pipelinerun(f"old-{i}", [tr.task("t", workspaces=())], {})
            body["spec"]["status"] = "Cancelled"
            tr.create_run(custom, ns, body)

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(make, range(count)))

        def all_done() -> bool:
            listed = custom.list_namespaced_custom_object(*tr.TEKTON, ns, "pipelineruns")
            return sum(1 for r in listed["items"] if tr.outcome(r)) >= count

        cluster.wait_for(all_done, timeout=60 + count / 5, what=f"{count} runs finished",
                         interval=5)


def one_mode(cluster: LocalCluster, mode: str, runs: int, operator: Operator | None,
             timeout: float, settle: float) -> ModeResult:
    tekton_cluster.configure(cluster, {"coschedule": MODES[mode]})
    labels = {names.NAMESPACE_LABEL: "true"} if mode == OURS else {}
    ns = cluster.create_namespace(f"{mode[:12]}-{uuid.uuid4().hex[:4]}", labels=labels)
    result = ModeResult(mode, runs)
    stats: dict[str, Any] = {}
    with cluster.api_client() as api, tr.PodRecorder(cluster, ns) as recorder:
        custom, apps = client.CustomObjectsApi(api), client.AppsV1Api(api)
        before = operator.metrics() if operator else {}
        pid = operator.proc.process.pid if operator and operator.proc.process else None
        cpu0 = cpu_seconds(pid) if pid else 0.0
        components0 = component_cpu(cluster, operator)
        peak = [tree_rss_mib(pid) if pid else 0.0]
        created: dict[str, tuple[str, float]] = {}  # run name -> (uid, client time)
        done: dict[str, dict[str, Any]] = {}
        stop = threading.Event()

        def sample() -> None:
            t0 = time.time()
            while not stop.is_set():
                live = len(created) - len(done)
                balloons = len(apps.list_namespaced_stateful_set(
                    ns, label_selector=names.BALLOON_SELECTOR).items) if mode == OURS else 0
                result.series.append((time.time() - t0, live, balloons))
                if pid:
                    peak[0] = max(peak[0], tree_rss_mib(pid))
                stop.wait(2)

        sampler = threading.Thread(target=sample, daemon=True)
        started = time.time()
        sampler.start()

        def make(i: int) -> None:
            body = tr.fan_out_fan_in(f"{mode[:6]}-{i}-{uuid.uuid4().hex[:4]}")
            made = tr.create_run(custom, ns, body)
            created[made["metadata"]["name"]] = (made["metadata"]["uid"], time.time())

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(make, range(runs)))
        say(f"{mode}: {runs} runs created in {time.time() - started:.0f} s")
        deadline = time.monotonic() + timeout
        while len(done) < runs and time.monotonic() < deadline:
            listed = custom.list_namespaced_custom_object(*tr.TEKTON, ns, "pipelineruns")
            for run in listed["items"]:
                if tr.outcome(run):
                    done.setdefault(run["metadata"]["name"], run)
            time.sleep(3)
        result.wall_seconds = time.time() - started
        say(f"{mode}: {len(done)}/{runs} runs finished in {result.wall_seconds:.0f} s")
        result.cores = {
            name: round((spent - components0.get(name, 0.0)) / result.wall_seconds, 3)
            for name, spent in component_cpu(cluster, operator).items()
        }
        stop.set()
        sampler.join(10)
        time.sleep(settle)
        if operator and pid:
            after = operator.metrics()
            stats = {
                "cpu_seconds_per_run": (cpu_seconds(pid) - cpu0) / runs,
                "peak_rss_mib": peak[0],
                "requests_per_run": {
                    k: round(v / runs, 2) for k, v in requests_by_verb(before, after).items()
                },
                "webhook_p99_ms": histogram_p99(
                    before, after, "tekton_coscheduler_admission_duration_seconds") * 1000,
            }
        result.orphans = len(apps.list_namespaced_stateful_set(
            ns, label_selector=names.BALLOON_SELECTOR).items)
        warned: dict[str, set[str]] = {}  # run name -> reasons
        for event in client.CoreV1Api(api).list_namespaced_event(ns).items:
            if event.type == "Warning" and event.involved_object.kind == "PipelineRun":
                warned.setdefault(event.involved_object.name, set()).add(event.reason)
        result.warned = len(warned)
        for reasons in warned.values():
            for reason in reasons:
                result.warnings[reason] = result.warnings.get(reason, 0) + 1
        lags = []
        for name, (uid, t_created) in created.items():
            run = done.get(name)
            result.succeeded += bool(run and tr.outcome(run) == ("True", "Succeeded"))
            pods = recorder.pods(uid)
            nodes_ = {p.node for p in pods if p.node}
            balloons = [b for b in recorder.balloons(uid) if b.node and b.bound_at]
            anchor = min(balloons, key=lambda b: b.bound_at or 0) if balloons else None
            if anchor is not None:
                result.anchors.append((anchor.bound_at or 0) - t_created)
                lags.append(anchor.first_seen - t_created)
                anchored = {b.node for b in balloons}
                result.misplaced += sum(1 for p in pods if p.node and p.node not in anchored)
            fetch = [p.bound_at for p in pods if p.task == tr.FETCH and p.bound_at]
            if fetch:
                result.first_layers.append(min(fetch) - t_created)
            if len(nodes_) == 1 and len(pods) >= len(TASKS) and (
                mode != OURS or (anchor is not None and nodes_ == {anchor.node})
            ):
                result.co_located += 1
        if lags:
            stats["reconcile_lag_p50_s"] = pct(lags, 50)
            stats["reconcile_lag_p99_s"] = pct(lags, 99)
    result.operator = stats
    result.anchor_p50, result.anchor_p99 = pct(result.anchors, 50), pct(result.anchors, 99)
    result.first_layer_p50 = pct(result.first_layers, 50)
    result.first_layer_p99 = pct(result.first_layers, 99)
    return result


def plot(results: list[ModeResult], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths: list[Path] = []
    fig, ax = plt.subplots(figsize=(8, 4))
    for r in results:
        if r.series:
            ax.plot([s[0] for s in r.series], [s[1] for s in r.series],
                    label=f"{r.mode}: live runs")
        if r.mode == OURS and r.series:
            ax.plot([s[0] for s in r.series], [s[2] for s in r.series], "--",
                    label=f"{r.mode}: balloons")
    paths.append(_save(fig, ax, "seconds since the runs were created", "count",
                       out / "scale-timeseries.png"))
    fig, ax = plt.subplots(figsize=(8, 4))
    for r in results:
        for values, what in ((r.first_layers, "first layer bound"), (r.anchors, "anchor bound")):
            if values:
                ordered = sorted(values)
                ax.plot(ordered, [(i + 1) / len(ordered) for i in range(len(ordered))],
                        label=f"{r.mode}: {what}")
    paths.append(_save(fig, ax, "seconds from PipelineRun creation", "share of runs",
                       out / "scale-latency.png"))
    return paths


def _save(fig: Any, ax: Any, xlabel: str, ylabel: str, path: Path) -> Path:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend()
    fig.savefig(path, dpi=100, bbox_inches="tight")
    return path


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--finished", type=int, default=5000)
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--settle", type=float, default=60)
    parser.add_argument("--out", type=Path, default=Path("build"))
    args = parser.parse_args()
    results: list[ModeResult] = []
    with LocalCluster() as cluster:
        say(f"{args.nodes} kwok nodes in two zones, a zonal volume for every run")
        cluster.add_nodes(args.nodes, pods=500, cpu="64", memory="256Gi", wait=False)
        # Zonal volumes, like cloud block storage: a run whose pods spread over two nodes would
        # meet Multi-Attach errors on real nodes (kwok does not enforce attachment), so the
        # count of runs on one node is what the modes are compared on.
        per_zone = args.runs * len(args.modes) // 2 + 10
        zones = ["zone-a", "zone-b"] * per_zone
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda zone: faults.add_pv(cluster, faults.ZONE, zone), zones))
        cluster.start_tekton()
        install_crds(cluster)
        say(f"{args.finished} finished runs kept")
        finished_runs(cluster, args.finished)
        operator = Operator(cluster)
        operator.proc.start()
        operator.proc.register_webhook()
        cluster.wait_for(operator.proc.leads, timeout=120, what="the operator leads")
        for mode in args.modes:
            results.append(one_mode(cluster, mode, args.runs,
                                    operator if mode == OURS else None,
                                    args.timeout, args.settle))
            say(f"{mode}: {results[-1].co_located}/{args.runs} co-located")
        operator.proc.stop()
    none = next((r for r in results if r.mode == "none"), None)
    print(f"\n{args.runs} runs on {args.nodes} nodes, {args.finished} finished runs kept\n")
    print(f"{'mode':20} {'ok':>6} {'one node':>9} {'misplaced':>9} {'orphans':>7} {'warned':>6} "
          f"{'anchor p50/p99 s':>17} {'first layer p50/p99 s':>22} {'vs none':>8} {'wall s':>7}")
    for r in results:
        ratio = (r.first_layer_p99 / none.first_layer_p99) if none and none.first_layer_p99 else 1
        print(f"{r.mode:20} {r.succeeded:6} {r.co_located:9} {r.misplaced:9} {r.orphans:7} "
              f"{r.warned:6} "
              f"{r.anchor_p50:8.1f}/{r.anchor_p99:<8.1f} {r.first_layer_p50:11.1f}/"
              f"{r.first_layer_p99:<10.1f} {ratio:8.2f} {r.wall_seconds:7.0f}")
    print(f"\nmean cores used while the runs ran (the machine has {os.cpu_count()}):")
    for r in results:
        busiest = sorted(r.cores.items(), key=lambda kv: -kv[1])
        print(f"  {r.mode:20} total {sum(r.cores.values()):.2f}: "
              + ", ".join(f"{name} {used:.2f}" for name, used in busiest))
    ours = next((r for r in results if r.mode == OURS), None)
    for r in results:
        if r.warnings:
            print(f"  {r.mode}: Warnings on runs: " + ", ".join(
                f"{reason} {count}" for reason, count in sorted(r.warnings.items())))
    if ours:
        for key, value in ours.operator.items():
            print(f"  operator {key}: {value}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scale.json").write_text(json.dumps(
        {"runs": args.runs, "nodes": args.nodes, "finished": args.finished,
         "modes": [asdict(r) for r in results]}, indent=2))
    for path in plot(results, args.out):
        print(f"plot: {path}")
    if ours:
        per_run = sum(v for k, v in ours.operator.get("requests_per_run", {}).items()
                      if k != "lease")
        print(f"scale: {args.runs} runs on {args.nodes} nodes: co-located "
              f"{ours.co_located}/{args.runs}, misplaced {ours.misplaced}, orphans {ours.orphans}, "
              f"runs with a Warning {ours.warned}, p99 anchor {ours.anchor_p99:.1f} s, "
              f"operator RSS {ours.operator.get('peak_rss_mib', float('nan')):.0f} MiB, "
              f"api requests per run "
              f"{per_run:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
