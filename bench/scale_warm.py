"""bench-scale's warm part: kwok nodes whose `status.images` differ, runs whose steps use one
builder image and belong to one of P pipelines, and what each mode made the nodes pull and
how often a pipeline's run went back to its last node.

K builder images (300 MB to 1 GB, under a registry no one resolves: every step has a script,
so Tekton never looks an image up) are reported by the nodes, HELD of them a node: node j the
(j mod K)-th, so that every image is somewhere when N >= K, and the others a seeded random
draw. kwok pulls nothing; a node holds an image because its status says so, which is all the
scheduler's ImageLocality and our preference read (kwok's heartbeats patch conditions and
leave `status.images` alone; each mode checks it at its end).

Run i of a mode spread over K namespaces goes to namespace i mod K and to pipeline
(i div K) mod P, labelled LABEL=p<n>; every step of its five tasks uses its pipeline's image.
In our mode each namespace has a CoschedulingPolicy asking for warm caches keyed by LABEL,
Ready before the first run. A pipeline is one per namespace, as our caches are.

Per mode:
- bytes to pull: each (node, image) once a mode, for every node one of a run's TaskRun pods
  was bound to that did not report the run's image when the mode began. A kubelet keeps what
  it pulled, so a node's second run of an image pulls nothing (kwok's nodes do not report it
  afterwards: neither the scheduler nor our operator learns of it, as they would on real
  nodes). Per run, not kept, is the same without that memory: each run pays its own pulls.
- cache hits: runs bound where the previous run of their pipeline was, of the runs that had
  one (a run's node and time: its anchor's bound, ours; its first pod's, the others). Runs
  placed with no regard for their pipeline nor its image: 1 in N. Every run is created at once:
  most anchors are chosen before any run of their pipeline is bound, so with no last node to
  prefer (the operator's `first`), and what goes back is then the images' doing.
- ours, the operator's own counters over the mode: bytes held and to pull at the anchor (per
  run, as the node reports now), and runs anchored where their pipeline last ran (hit),
  elsewhere (miss), or with no last node known when their anchor was chosen (first).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import random
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, cast

from kubernetes import client

from controller.core.basics import names
from e2e.harness import tekton_runs as tr
from e2e.harness.cluster.api import ClusterApi

REGISTRY = "registry.bench.test"
LABEL = "bench.tekton-coscheduler.dev/pipeline"
POLICY = "bench-warm"
HELD = 3  # images a node reports
MB = 10**6
SMALLEST, LARGEST = 300 * MB, 1000 * MB
Series = tuple[str, tuple[tuple[str, str], ...]]  # as bench.scale reads /metrics
Metrics = Mapping[Series, float]


@dataclass
class WarmFigures:
    """One mode's figures (bytes as the nodes report the images' sizes)."""

    nodes: int = 0
    nodes_kept: int = 0  # nodes reporting at the mode's end the images they were given
    bytes_to_pull: int = 0  # each (node, image) once a mode
    pulls: int = 0  # those (node, image) pairs
    bytes_to_pull_per_run: int = 0  # every run its own pulls: nothing kept between runs
    runs_placed: int = 0  # runs with a TaskRun pod bound
    runs_warm: int = 0  # ... every one of them on a node that reported the run's image
    cache_runs: int = 0  # runs whose pipeline had a run placed before them
    cache_hits: int = 0  # ... placed on that run's node
    operator: dict[str, float] = field(default_factory=dict)  # ours: its counters' increase


def sizes(count: int) -> dict[str, int]:
    """The builder images, evenly spread from SMALLEST to LARGEST."""
    step = (LARGEST - SMALLEST) / max(count - 1, 1)
    return {f"{REGISTRY}/builder-{i}:1": SMALLEST + round(i * step / MB) * MB
            for i in range(count)}


def status_images(images: Mapping[str, int]) -> list[dict[str, Any]]:
    """As the kubelet reports them, the largest first, each by a digest and its tag."""
    return [{"names": [f"{ref.split(':')[0]}@sha256:{hashlib.sha256(ref.encode()).hexdigest()}",
                       ref], "sizeBytes": size}
            for ref, size in sorted(images.items(), key=lambda kv: -kv[1])]


def reported(cluster: ClusterApi, images: Mapping[str, int]) -> dict[str, frozenset[str]]:
    """Which of `images` each node reports now."""
    with cluster.api_client() as api:
        listed = client.CoreV1Api(api).list_node().items
    return {str(n.metadata.name if n.metadata else ""): frozenset(
        name for image in ((n.status.images if n.status else None) or [])
        for name in image.names or [] if name in images) for n in listed}


class Warm:
    """The bench's images and pipelines, made once, then one Mode a mode."""

    def __init__(self, cluster: ClusterApi, nodes: list[str], images: int, pipelines: int,
                 seed: int) -> None:
        self.cluster = cluster
        self.sizes = sizes(images)
        self.pipelines = pipelines
        refs = list(self.sizes)
        rng = random.Random(seed)
        self.held = {node: frozenset([refs[j % len(refs)], *rng.sample(
            [r for r in refs if r != refs[j % len(refs)]], min(HELD, len(refs)) - 1)])
            for j, node in enumerate(nodes)}

    def hold(self) -> None:
        """Each node reports its images (a status patch, as e2e/harness/warm.hold)."""
        def patch(node: str) -> None:
            listed = status_images({ref: self.sizes[ref] for ref in self.held[node]})
            with self.cluster.api_client() as api:
                client.CoreV1Api(api).patch_node_status(node, {"status": {"images": listed}})

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(patch, self.held))

    def describe(self) -> str:
        holders = {ref: sum(ref in held for held in self.held.values()) for ref in self.sizes}
        return (f"{len(self.sizes)} builder images ({min(self.sizes.values()) / MB:.0f} to "
                f"{max(self.sizes.values()) / MB:.0f} MB), {min(HELD, len(self.sizes))} a node "
                f"(each on {min(holders.values())} to {max(holders.values())} of {len(self.held)} "
                f"nodes), {self.pipelines} pipelines a namespace (label {LABEL})")

    def mode(self, ours: bool, namespaces: list[str]) -> Mode:
        if ours:
            self._policies(namespaces)
        return Mode(self, namespaces, reported(self.cluster, self.sizes))

    def _policies(self, namespaces: list[str]) -> None:
        """Warm caches keyed by the bench's label, each Ready (read by the operator) before
        the runs start, so that no run is decided without it."""
        group = (names.POLICY_GROUP, names.POLICY_VERSION)
        with self.cluster.api_client() as api:
            custom = client.CustomObjectsApi(api)
            for ns in namespaces:
                custom.create_namespaced_custom_object(*group, ns, names.POLICY_PLURAL, {
                    "apiVersion": "/".join(group), "kind": names.POLICY_KIND,
                    "metadata": {"name": POLICY},
                    "spec": {"warm": {"pipelineCache": True, "pipelineKey": LABEL}}})

            def ready(ns: str) -> bool:
                got = cast(dict[str, Any], custom.get_namespaced_custom_object(
                    *group, ns, names.POLICY_PLURAL, POLICY))
                return any(c.get("type") == "Ready" and c.get("status") == "True"
                           for c in (got.get("status") or {}).get("conditions") or [])

            for ns in namespaces:
                self.cluster.wait_for(functools.partial(ready, ns), timeout=60,
                                      what=f"policy {ns}/{POLICY} Ready")


class Mode:
    """One mode's runs: dressed as made, then figured from the pods the recorder saw."""

    def __init__(self, warm: Warm, namespaces: list[str],
                 start: dict[str, frozenset[str]]) -> None:
        self.warm = warm
        self.namespaces = namespaces
        self.start = start  # node -> images reported as the mode began
        self.pipeline_of: dict[str, tuple[str, str, str]] = {}  # run -> (ns, pipeline, image)
        self._lock = threading.Lock()

    def dress(self, body: dict[str, Any], i: int) -> None:
        """Run i's pipeline label and its steps' image (its namespace: i mod K, as made)."""
        k = len(self.namespaces)
        pipeline = (i // k) % self.warm.pipelines
        image = list(self.warm.sizes)[pipeline % len(self.warm.sizes)]
        body["metadata"].setdefault("labels", {})[LABEL] = f"p{pipeline}"
        for task in body["spec"]["pipelineSpec"]["tasks"]:
            for step in task["taskSpec"]["steps"]:
                step["image"] = image
        with self._lock:
            self.pipeline_of[body["metadata"]["name"]] = (
                self.namespaces[i % k], f"p{pipeline}", image)

    def figures(self, created: Mapping[str, tuple[str, float]], recorder: tr.PodRecorder,
                before: Metrics, after: Metrics) -> WarmFigures:
        out = WarmFigures(nodes=len(self.start))
        end = reported(self.warm.cluster, self.warm.sizes)
        out.nodes_kept = sum(end.get(node) == held for node, held in self.warm.held.items())
        pulled: set[tuple[str, str]] = set()
        placed: dict[tuple[str, str], list[tuple[float, str]]] = {}  # pipeline -> (when, node)
        for name, (uid, _) in created.items():
            ns, pipeline, image = self.pipeline_of[name]
            pods = [p for p in recorder.pods(uid) if p.node and p.bound_at]
            if not pods:
                continue
            out.runs_placed += 1
            cold = {p.node for p in pods if p.node and image not in self.start.get(p.node, ())}
            out.runs_warm += not cold
            out.bytes_to_pull_per_run += len(cold) * self.warm.sizes[image]
            pulled |= {(node, image) for node in cold}
            # The run's node: its anchor's (ours), else its first pod's.
            bound = [b for b in recorder.balloons(uid) if b.node and b.bound_at] or pods
            first = min(bound, key=lambda p: p.bound_at or 0.0)
            placed.setdefault((ns, pipeline), []).append((first.bound_at or 0.0, first.node or ""))
        out.pulls = len(pulled)
        out.bytes_to_pull = sum(self.warm.sizes[image] for _, image in pulled)
        for runs in placed.values():
            runs.sort()
            out.cache_runs += len(runs) - 1
            out.cache_hits += sum(a[1] == b[1] for a, b in itertools.pairwise(runs))
        out.operator = {
            **{f"image_bytes_{k}": grew(before, after, "tekton_coscheduler_warm_image_bytes_total",
                                        "on_anchor", k) for k in ("held", "to_pull")},
            **{f"cache_{k}": grew(before, after, "tekton_coscheduler_warm_cache_runs_total",
                                  "outcome", k) for k in ("hit", "miss", "first")}}
        return out


def grew(before: Metrics, after: Metrics, name: str, label: str, value: str) -> float:
    """A counter's increase over the mode, every process's series with that label summed."""
    return sum(v - before.get(key, 0.0) for key, v in after.items()
               if key[0] == name and dict(key[1]).get(label) == value)


# -- the report -----------------------------------------------------------------------------


def gb(n: float) -> str:
    return f"{n / 10**9:.1f} GB"


def share(part: float, whole: float) -> float:
    return part / whole if whole else float("nan")


def lines(by_mode: Mapping[str, WarmFigures], nodes: int, ours: str) -> list[str]:
    """The report's warm block: one line a mode, the ratios, the operator's own counters."""
    out = ["", "warm anchors: bytes to pull each (node, image) once a mode (a node keeps what it "
           "pulled); cache hits: runs on their pipeline's previous run's node",
           f"{'mode':20} {'bytes to pull':>14} {'pulls':>6} {'per run, not kept':>18} "
           f"{'runs on their image':>20} {'cache hits':>16}"]
    for mode, w in by_mode.items():
        out.append(f"{mode:20} {gb(w.bytes_to_pull):>14} {w.pulls:6} "
                   f"{gb(w.bytes_to_pull_per_run):>18} {w.runs_warm:>9}/{w.runs_placed:<10} "
                   f"{w.cache_hits:>6}/{w.cache_runs:<4} {share(w.cache_hits, w.cache_runs):5.0%}")
    out.append(f"  runs placed with no regard for their pipeline nor its image: 1 in {nodes} "
               f"nodes, {1 / nodes:.0%} of cache hits (the scheduler weighs a pod's image: none's "
               "more)")
    mine, none, assistant = (by_mode.get(m) for m in (ours, "none", "tekton-assistant"))
    if mine:
        out.append(f"  bytes to pull, ours: {ratio(mine, none):.2f}x none's, "
                   f"{ratio(mine, assistant):.2f}x the assistant's")
        op = mine.operator
        asked = op.get("cache_hit", 0) + op.get("cache_miss", 0)
        out.append(
            f"  the operator's counters: image bytes held {gb(op.get('image_bytes_held', 0))}, "
            f"to pull {gb(op.get('image_bytes_to_pull', 0))} (each run its own); cache runs hit "
            f"{op.get('cache_hit', 0):.0f}, miss {op.get('cache_miss', 0):.0f}, first "
            f"{op.get('cache_first', 0):.0f} (no last node known when the anchor was chosen)"
            + (f": {share(op.get('cache_hit', 0), asked):.0%} of the runs that knew one went "
               "there" if asked else ""))
    for mode, w in by_mode.items():
        if w.nodes_kept != w.nodes:
            out.append(f"  {mode}: only {w.nodes_kept}/{w.nodes} nodes reported at its end the "
                       "images they were given (figures use what they reported at its start)")
    return out


def ratio(a: WarmFigures, b: WarmFigures | None) -> float:
    """a's bytes to pull over b's (nan without b; 0/0 is 1: both pulled nothing)."""
    if b is None:
        return float("nan")
    if not b.bytes_to_pull:
        return 1.0 if not a.bytes_to_pull else float("inf")
    return a.bytes_to_pull / b.bytes_to_pull


def summary(by_mode: Mapping[str, WarmFigures], ours: str) -> str:
    """The last line's tail ("" without warm figures)."""
    mine: WarmFigures | None = by_mode.get(ours)
    if mine is None:
        return ""
    return (f", bytes to pull vs none {ratio(mine, by_mode.get('none')):.2f}x, vs assistant "
            f"{ratio(mine, by_mode.get('tekton-assistant')):.2f}x, cache hits "
            f"{share(mine.cache_hits, mine.cache_runs):.0%}")
