"""bench-scale's results: one mode's figures, the table, the JSON, the plots and the last line."""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench import scale_warm
from bench.footprint import Footprint

OURS = "tekton-coscheduler"


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
    examples: dict[str, str] = field(default_factory=dict)  # reason -> one of its messages
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
    warm: scale_warm.WarmFigures | None = None  # bytes to pull, cache hits (bench.scale_warm)


def report(args: argparse.Namespace, results: list[ModeResult],
           footprint: Footprint | None) -> None:
    none = next((r for r in results if r.mode == "none"), None)
    print(f"\n{args.runs} runs on {args.nodes} nodes in {args.namespaces} namespaces, "
          f"{args.enabled} more enabled namespaces without runs, {args.finished} finished "
          f"runs kept, admission by {args.admission}\n")
    print(f"{'mode':20} {'ok':>6} {'one node':>9} {'misplaced':>9} {'orphans':>7} {'warned':>6} "
          f"{'anchor p50/p99 s':>17} {'first layer p50/p99 s':>22} {'vs none':>8} {'wall s':>7} "
          f"{'our cpu ms/run':>15} {'beyond idle':>11}")
    for r in results:
        print(f"{r.mode:20} {r.succeeded:6} {r.co_located:9} {r.misplaced:9} {r.orphans:7} "
              f"{r.warned:6} "
              f"{r.anchor_p50:8.1f}/{r.anchor_p99:<8.1f} {r.first_layer_p50:11.1f}/"
              f"{r.first_layer_p99:<10.1f} {ratio(r, none):8.2f} {r.wall_seconds:7.0f} "
              f"{cpu_ms(r):15.1f} {cpu_ms(r, beyond_idle=True):11.1f}")
    warm = {r.mode: r.warm for r in results if r.warm}
    if warm:
        print("\n".join(scale_warm.lines(warm, args.nodes, OURS)))
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
            for reason, message in sorted(r.examples.items()):
                print(f"    e.g. {reason}: {message}")
    if ours:
        for key, value in ours.operator.items():
            if key != "profile":
                print(f"  operator {key}: {value}")
    for r in results:
        if "profile" in r.operator:
            samples, top = r.operator["profile"]
            print(f"\n  {r.mode}: the operator's top frames ({samples} samples; own, inclusive)")
            for frame, own, inclusive in top:
                print(f"    {own:6.1%} {inclusive:6.1%}  {frame}")
    if footprint:
        print(f"  operator at rest: {footprint}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scale.json").write_text(json.dumps(
        {"runs": args.runs, "nodes": args.nodes, "finished": args.finished,
         "admission": args.admission,
         "namespaces": args.namespaces, "enabled": args.enabled,
         "images": args.images, "pipelines": args.pipelines,
         "footprint": asdict(footprint) if footprint else None,
         "modes": [asdict(r) for r in results]}, indent=2))
    try:
        paths = plot(results, args.out)
    except ImportError:  # the bench extra, which `make bench-scale` installs
        paths = []
        print("plots: none, matplotlib is not installed (pip install -e '.[bench]')")
    for path in paths:
        print(f"plot: {path}")
    print(summary(args, ours, none, footprint) + scale_warm.summary(warm, OURS))


def cpu_ms(r: ModeResult, beyond_idle: bool = False) -> float:
    """The operator's CPU per run of this mode (runs it does not serve, for the others); with
    `beyond_idle`, less what it spends at rest over the same time."""
    key = "cpu_seconds_per_run_beyond_idle" if beyond_idle else "cpu_seconds_per_run"
    return float(r.operator.get(key, float("nan"))) * 1000


def ratio(r: ModeResult, none: ModeResult | None) -> float:
    """Against none's, in the same invocation; nan without it (a ratio to nothing is no 1.00x)."""
    return r.first_layer_p99 / none.first_layer_p99 if none and none.first_layer_p99 else float(
        "nan")


def summary(args: argparse.Namespace, ours: ModeResult | None, none: ModeResult | None,
            footprint: Footprint | None) -> str:
    nan = float("nan")
    per_run = sum(v for k, v in (ours.operator if ours else {}).get(
        "requests_per_run", {}).items() if k != "lease")
    fp = footprint or Footprint(0, 0, nan, nan)
    return (
        f"scale: {args.runs} runs on {args.nodes} nodes in {args.namespaces} namespaces "
        f"({args.namespaces * bool(ours) + args.enabled} enabled): co-located "
        f"{ours.co_located if ours else 0}/{args.runs}, "
        f"cpu per run {cpu_ms(ours) if ours else nan:.0f} ms, threads {fp.threads}, "
        f"watches {fp.watches}, RSS {fp.rss_mib:.0f} MiB, idle cpu {fp.idle_cpu_percent:.2f}%, "
        f"cpu per run not ours {cpu_ms(none) if none else nan:.1f} ms, "
        f"first pod bound p99 vs none {ratio(ours, none) if ours else nan:.2f}x, "
        f"runs with a Warning {ours.warned if ours else 0}, "
        f"misplaced {ours.misplaced if ours else 0}, orphans {ours.orphans if ours else 0}, "
        f"api requests per run {per_run:.1f}, beyond idle: cpu per run "
        f"{cpu_ms(ours, True) if ours else nan:.1f} ms, not ours "
        f"{cpu_ms(none, True) if none else nan:.1f} ms")


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
