"""Where a run starts fastest, on two real nodes, in one invocation: ours with warm anchors, ours
without, Tekton's affinity assistant, and no coscheduling.

python -m e2e.tools.compare_warm [--megabytes 300] [--runs 20] [--repeat 1] [--modes ...]
                                 [--registry-mbit 100]
                                 (root; `make compare-warm` builds what it needs first)

One lab (e2e/harness/real.py): a control plane, two real nodes (kubelet, containerd, runc) that
pull from the lab's registry with a pull secret, the chart's operator from our image, Tekton.

1. One run, a large step image present on one node only. A step image of `--megabytes` MB of
   its own (random bytes: no compression shrinks a pull) is pulled onto one node, and removed
   from the other. A run whose first task's step uses it (a second task after it, one
   volumeClaimTemplate workspace on node-local volumes either node has) is made in each mode;
   measured: PipelineRun creation to its first step running (the step's startedAt), and the
   bytes the kubelets pulled for it (their Pulled Events). While these runs run, the registry
   answers at `--registry-mbit` megabits a second (tc on this host; 0: as fast as the host
   copies), as a registry beyond the cluster does: unshaped, a 300 MB pull from the lab's own
   registry takes about a second, which hides what a pull costs. After each run the image is
   removed again from the node that did not hold it. The holding node is each node in turn; the
   figures are averaged over both.
2. Twenty runs of one Pipeline whose task keeps a cache on its node (a hostPath directory per
   node, as a Maven or Go cache is kept), one after another, in each mode: a run finds its
   cache warm when its node's cache holds what the pipeline's previous run left (an
   incremental cache: what an older run left is stale). A warm run works 1 s, a cold one 8 s.
   Measured: runs anchored where the pipeline's previous run was (the cache hits), runs that
   found their cache warm, and the runs' median duration.

Modes: `warm` (ours; the namespace's policy asks for warm caches in part 2), `cold` (ours, the
policy turning warm images off), `assistant` (Tekton's `coschedule: workspaces`, our operator
standing aside: the namespace not opted in), `none` (neither). Ratios to none and to the
assistant are what to read: absolute times here depend on the machine. JSON in
build/compare-warm.json, a plot in build/compare-warm.png. Last line: `compare-warm: first step
running warm X s, none Y s, assistant Z s (W x none, V x assistant); bytes pulled warm B, none
C, assistant D; cache hits warm H/R, none ..., assistant ...; median run warm M s, ...`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client

from controller.core.basics import names
from e2e.harness import real as real_
from e2e.harness import tekton_runs as tr
from e2e.harness import warmlab
from e2e.harness.cluster import realhost
from e2e.harness.cluster import tekton as tekton_cluster
from e2e.harness.coscheduler import REPO
from e2e.harness.real import Real
from e2e.harness.runs import Runs
from e2e.harness.scenario import Scenario
from e2e.harness.tekton_runs import PodRecorder

MODES = ("warm", "cold", "assistant", "none")
OURS = {"warm", "cold"}
OUT = REPO / "build"


@dataclass
class Start:
    mode: str
    holder: str  # the node that held the large image
    node: str | None  # where the run's first pod ran (None: the recorder never saw it bound)
    seconds: float  # creation to the first step running
    pulled: int  # bytes the kubelets pulled for the run
    said: str = ""  # ours: the Anchored Event, what the operator knew of the images then


@dataclass
class Series:
    mode: str
    nodes: list[str | None] = field(default_factory=list)
    warm: list[bool] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    @property
    def hits(self) -> int:
        """Runs on the node where the pipeline's previous run was."""
        return sum(1 for a, b in zip(self.nodes, self.nodes[1:], strict=False) if a == b)


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def mode_namespace(real: Real, mode: str, cache: bool = False) -> str:
    """A team's namespace for one mode: opted in for ours, with the policy the mode asks for."""
    labels = {names.NAMESPACE_LABEL: "true"} if mode in OURS else {}
    ns = real_.namespace(real, f"{mode}-{uuid.uuid4().hex[:5]}", labels)
    warm = {"images": mode == "warm", "pipelineCache": cache and mode == "warm"}
    if mode in OURS:
        Scenario(real.cluster, ns).policy("warm", {"warm": warm}, wait=True)
    tekton_cluster.configure(real.cluster, {"coschedule": "workspaces" if mode == "assistant"
                                            else "disabled"})
    return ns


def first_start(real: Real, mode: str, image: str, holder: str) -> Start:
    ns = mode_namespace(real, mode)
    warmlab.volumes(real)
    before = len(real.nodes.pulled())
    with PodRecorder(real.cluster, ns) as recorder:
        s = Runs(real.cluster, ns, recorder)
        run = s.start(warmlab.large_first(tr.unique(mode), image))
        done = s.done(run, timeout=600)
        assert tr.outcome(done) == ("True", "Succeeded"), (mode, tr.outcome(done))
        pods = s.recorder.pods(run["metadata"]["uid"])
        said = s.said(run, "Anchored").message if mode in OURS else ""
    first = next(p for p in pods if p.task == tr.FETCH)
    pulled = [p for p in real.nodes.pulled()[before:] if p.image == image]
    seconds = warmlab.first_step_seconds(real, ns, run["metadata"]["name"])
    delete_namespace(real, ns)  # its pods' containers go: the image can be removed again
    return Start(mode, holder, first.node, seconds, sum(p.bytes for p in pulled), said)


def shaped(real: Real, mbit: int) -> contextlib.AbstractContextManager[None]:
    if not mbit:
        return contextlib.nullcontext()
    return realhost.shaped(realhost.API_ADDRESS, real.registry.port, mbit)


def delete_namespace(real: Real, ns: str) -> None:
    with real.cluster.api_client() as api:
        core = client.CoreV1Api(api)
        core.delete_namespace(ns)
        real.cluster.wait_for(lambda: not core.list_namespaced_pod(ns).items, timeout=180,
                              what=f"the pods of {ns} gone")


def cached_series(real: Real, mode: str, runs: int) -> Series:
    ns = mode_namespace(real, mode, cache=True)
    cache = real.cluster.run_dir / "caches" / ns  # per node below it: the nodes share a host
    warmlab.cached_pipeline(real.cluster, ns, cache)
    series = Series(mode)
    with PodRecorder(real.cluster, ns) as recorder:
        s = Runs(real.cluster, ns, recorder)
        for i in range(runs):
            warmlab.volumes(real)
            run = s.start(warmlab.cached_run(i))
            done = s.done(run, timeout=300)
            assert tr.outcome(done) == ("True", "Succeeded"), (mode, i, tr.outcome(done))
            pods = s.recorder.pods(run["metadata"]["uid"])
            series.nodes.append(next(p.node for p in pods if p.task == warmlab.CACHED_TASK))
            series.warm.append(warmlab.found_warm(real, ns, done))
            series.seconds.append(warmlab.duration(done))
            say(f"{mode} cache run {i}: {series.nodes[-1]}, "
                f"{'warm' if series.warm[-1] else 'cold'}, {series.seconds[-1]:.0f} s")
    return series


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.tools.compare_warm", description=__doc__)
    parser.add_argument("--megabytes", type=int, default=300)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--registry-mbit", type=int, default=100,
                        help="the registry's bandwidth during the single runs (0: unshaped)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="single runs per mode and holding node (where a mode blind to "
                             "images finds the image by chance, more show what it costs)")
    args = parser.parse_args()
    parts = real_.parts(REPO)
    with real_.real_cluster(parts, nodes=2) as real:
        real_.install(real, "policy")
        image, size = real_.large_image(real, args.megabytes)
        say(f"large image {image}: {size / 1e6:.0f} MB in the registry")
        warmlab.warm_up(real)
        starts: list[Start] = []
        for holder in real.nodes.nodes * args.repeat:
            for mode in args.modes:
                warmlab.held_by(real, image, holder)
                with shaped(real, args.registry_mbit):
                    starts.append(first_start(real, mode, image, holder.name))
                say(f"{mode}, image on {holder.name}: {starts[-1]}")
        series = [cached_series(real, mode, args.runs) for mode in args.modes
                  if args.runs > 0]
    report = summarize(starts, series)
    OUT.mkdir(exist_ok=True)
    (OUT / "compare-warm.json").write_text(json.dumps(
        {"args": vars(args), "starts": [asdict(x) for x in starts],
         "series": [asdict(x) | {"hits": x.hits} for x in series], "report": report}, indent=2))
    plot(starts, series, OUT / "compare-warm.png")
    print(report["summary"])
    return 0


def summarize(starts: list[Start], series: list[Series]) -> dict[str, Any]:
    """Per mode: the mean over the holding nodes of the time to the first step and the bytes
    pulled; the cache hits and warm runs; the median duration; ratios to none and the
    assistant; the summary line."""
    modes = list(dict.fromkeys([x.mode for x in starts] + [x.mode for x in series]))
    out: dict[str, Any] = {}
    for mode in modes:
        mine = [x for x in starts if x.mode == mode]
        cached = next((x for x in series if x.mode == mode), None)
        out[mode] = {
            "first_step_s": statistics.mean(x.seconds for x in mine) if mine else float("nan"),
            "pulled_bytes": statistics.mean(x.pulled for x in mine) if mine else float("nan"),
            "hits": cached.hits if cached else 0,
            "asked": len(cached.nodes) - 1 if cached else 0,
            "warm_runs": sum(cached.warm) if cached else 0,
            "median_run_s": median(cached.seconds) if cached else float("nan"),
        }
    for mode, figures in out.items():
        for other in ("none", "assistant"):
            if other in out and other != mode:
                figures[f"first_step_vs_{other}"] = (figures["first_step_s"]
                                                     / out[other]["first_step_s"])
    line = ["compare-warm:"]
    for mode, f in out.items():
        line.append(f"{mode} first step {f['first_step_s']:.1f} s, pulled "
                    f"{f['pulled_bytes'] / 1e6:.0f} MB, cache hits {f['hits']}/{f['asked']}, "
                    f"warm {f['warm_runs']}, median run {f['median_run_s']:.1f} s;")
    if "warm" in out:
        w = out["warm"]
        line.append(f"warm vs none {w.get('first_step_vs_none', float('nan')):.2f} x, vs "
                    f"assistant {w.get('first_step_vs_assistant', float('nan')):.2f} x")
    out["summary"] = " ".join(line)
    return out


def plot(starts: list[Start], series: list[Series], path: Path) -> None:
    """Time to the first step and the median run, by mode (matplotlib, from the bench extra)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    modes = list(dict.fromkeys(x.mode for x in starts))
    fig, axes = plt.subplots(1, 2 if series else 1, figsize=(10 if series else 5, 4),
                             squeeze=False)
    left = axes[0][0]
    left.bar(modes, [statistics.mean(x.seconds for x in starts if x.mode == m) for m in modes])
    left.set_ylabel("PipelineRun created to first step running (s)")
    if series:  # none with --runs 0
        right = axes[0][1]
        right.bar([x.mode for x in series], [median(x.seconds) for x in series])
        right.set_ylabel("median run, node-local cache (s)")
    fig.tight_layout()
    fig.savefig(path)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


if __name__ == "__main__":
    sys.exit(main())
