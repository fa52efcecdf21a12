"""Pure: where a run starts fastest. The bytes of the run's images each node already holds, and
the node where the run's pipeline last ran (core/placement/warmcache.py), as the anchor's
preferences.

The anchor decides the node of every pod of the run, so it must weigh what the scheduler
weighs for a pod it places alone: its ImageLocality score, from `node.status.images`. A balloon
of pause alone throws that away. Here the run's step and sidecar images (read from the specs
the operator has: inline, a Task by name, or what Tekton resolved) are looked up in each node's
`status.images`, and the nodes that hold the most bytes of them become *preferred* node
affinity terms of the balloon (and of its reservation scout, which copies them). A preference
only scores: a node the scheduler filters out (no room for the scout's peak, the wrong zone for
a claim, a taint the run does not tolerate) is never chosen for it.

The kubelet reports at most `nodeStatusMaxImages` images (50 by default), the largest first.
So a node may hold a small image it does not report: the preference may miss it. The images
that cost a pull are the large ones, which are the ones reported; a node that reports none of
the run's images is treated as holding none, as the scheduler's own ImageLocality does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from controller.core.capacity import peak

# Weights of the preferred terms (1-100 each; the scheduler sums the weights a node matches,
# normalises the sum over the nodes, and weighs NodeAffinity twice, above the resource scores).
CACHE_WEIGHT = 100  # a pipeline's warm cache is worth minutes
IMAGES_WEIGHT = 50  # all of the run's image bytes; fewer bytes, a smaller share of it
LEVELS = 10  # image weights are rounded to tenths: at most this many terms
MAX_NODES = 100  # nodes named in the image terms, those that hold the most first
# Below this, pulling the run's images costs a second or two: not worth moving the anchor.
WORTH_BYTES = 32 * 2**20
ANNOTATION = "tekton-coscheduler.dev/warm"
HOSTNAME = "kubernetes.io/hostname"


def normalize(ref: str) -> str:
    """An image reference as the kubelet reports it in `status.images` (containerd's fully
    qualified names): `busybox` is `docker.io/library/busybox:latest`."""
    name, at, digest = ref.strip().partition("@")
    first, slash, rest = name.partition("/")
    if not slash or not ("." in first or ":" in first or first == "localhost"):
        domain, path = "docker.io", name
    else:
        domain, path = first, rest
    if domain == "index.docker.io":
        domain = "docker.io"
    if domain == "docker.io" and "/" not in path:
        path = f"library/{path}"
    if not at and ":" not in path.rsplit("/", 1)[-1]:
        path += ":latest"
    return f"{domain}/{path}{at}{digest}"


def _images_of_task(spec: Mapping[str, Any]) -> set[str]:
    template = spec.get("stepTemplate") if isinstance(spec.get("stepTemplate"), Mapping) else {}
    default = str((template or {}).get("image") or "")
    found = set()
    for key in ("steps", "sidecars"):
        for container in spec.get(key) or []:
            if isinstance(container, Mapping) and not container.get("ref"):
                found.add(str(container.get("image") or (default if key == "steps" else "")))
    # A parameter's value is known only once Tekton substitutes it: not counted.
    return {normalize(i) for i in found if i and "$(" not in i}


def run_images(pipeline_spec: Mapping[str, Any], read_task: peak.Reader) -> frozenset[str]:
    """The images the run's steps and sidecars will pull (Tekton's own images, on every node
    that ran a TaskRun, are not counted)."""
    images: set[str] = set()
    for section in ("tasks", "finally"):
        for task in pipeline_spec.get(section) or []:
            if isinstance(task, Mapping):
                spec, makes_pod = peak.task_spec_of(task, read_task)
                if makes_pod and spec is not None:
                    images |= _images_of_task(spec)
    return frozenset(images)


def node_images(node: Mapping[str, Any]) -> dict[str, int]:
    """The images a node reports holding: each name it goes by (tags and digests) -> bytes."""
    held: dict[str, int] = {}
    for image in (node.get("status") or {}).get("images") or []:
        if not isinstance(image, Mapping):
            continue
        size = image.get("sizeBytes")
        for name in image.get("names") or []:
            if isinstance(name, str) and isinstance(size, int) and size > 0:
                held[normalize(name)] = size
    return held


@dataclass(frozen=True)
class Warmth:
    """What makes a node start this run fast, as known when its anchor is chosen."""

    images: frozenset[str] = frozenset()
    sizes: Mapping[str, int] = field(default_factory=dict)  # as some node reports them
    held: Mapping[str, int] = field(default_factory=dict)  # node -> bytes of the run's images
    cache_key: str = ""  # the run's pipeline, when its policy asks for warm caches
    cache_node: str = ""  # where that pipeline's last run was anchored ("" first run)
    # Each named node's kubernetes.io/hostname label, as it reports it ("": none)
    hostnames: Mapping[str, str] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """The bytes of the run's images whose size some node reports."""
        return sum(self.sizes.values())

    @property
    def unsized(self) -> int:
        """The run's images no node reports (their size is not known)."""
        return len(self.images) - len(self.sizes)

    def terms(self) -> list[dict[str, Any]]:
        """The anchor's preferred node-affinity terms. Nodes are named by their
        `kubernetes.io/hostname` label as each reports it, so that those holding alike share
        one term; a node without it by its name, in a term of its own (the API server takes
        one value only for a `metadata.name` field selector)."""
        labels = self.hostnames
        terms = []
        if self.cache_node:
            terms.extend(_terms(CACHE_WEIGHT, [self.cache_node], labels))
        if self.total >= WORTH_BYTES:
            levels: dict[int, list[str]] = {}
            ranked = sorted(self.held.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_NODES]
            for node, held in ranked:
                level = -(-held * LEVELS // self.total)  # rounded up: a few bytes still count
                levels.setdefault(level, []).append(node)
            for level, nodes in sorted(levels.items(), reverse=True):
                terms.extend(_terms(max(1, IMAGES_WEIGHT * level // LEVELS), nodes, labels))
        return terms

    def annotation(self) -> str:
        """What the Anchored Event, the metrics and `explain` say of it, kept on the balloon:
        the run's images and their known sizes, the few nodes that held the most, and the
        pipeline's last node."""
        best = sorted(self.held.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
        return json.dumps({"sizes": {i: self.sizes.get(i, 0) for i in sorted(self.images)},
                           "nodes": dict(best), "cacheKey": self.cache_key,
                           "cacheNode": self.cache_node}, separators=(",", ":"), sort_keys=True)


@dataclass(frozen=True)
class Noted:
    """A balloon's annotation read back (Warmth.annotation)."""

    sizes: Mapping[str, int] = field(default_factory=dict)  # 0: no node reported its size
    nodes: Mapping[str, int] = field(default_factory=dict)
    cache_key: str = ""
    cache_node: str = ""

    @property
    def total(self) -> int:
        return sum(self.sizes.values())

    def held(self, reported: Mapping[str, int] | None, name: str) -> int:
        """The bytes of the run's images on a node: as it reports them now (node_images), else
        as noted."""
        if reported is None:
            return int(self.nodes.get(name) or 0)
        return sum(reported[i] for i in self.sizes if i in reported)


def noted(annotation: str | None) -> Noted:
    try:
        data = json.loads(annotation or "")
    except ValueError:
        return Noted()
    if not isinstance(data, dict):
        return Noted()

    def ints(value: Any) -> dict[str, int]:
        items = value.items() if isinstance(value, dict) else ()
        return {str(k): v for k, v in items if isinstance(v, int)}

    return Noted(ints(data.get("sizes")), ints(data.get("nodes")),
                 str(data.get("cacheKey") or ""), str(data.get("cacheNode") or ""))


def _terms(weight: int, nodes: Sequence[str], hostnames: Mapping[str, str]
           ) -> list[dict[str, Any]]:
    labelled = sorted({hostnames[n] for n in nodes if hostnames.get(n)})
    terms = [{"weight": weight, "preference": {"matchExpressions": [
        {"key": HOSTNAME, "operator": "In", "values": labelled}]}}] if labelled else []
    return terms + [{"weight": weight, "preference": {"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": [n]}]}}
        for n in sorted(n for n in nodes if not hostnames.get(n))]


Holders = Mapping[str, Mapping[str, int]]  # image -> node -> bytes, as the nodes report them


@dataclass(frozen=True)
class NodeImages:
    """What warm anchors read of the nodes, as the node watch last showed each: replaced whole
    (`seen`), never changed in place, so that a reader holds one consistent value unlocked."""

    reported: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # node_images
    holders: Holders = field(default_factory=dict)  # the same, inverted: image -> node -> bytes
    hostnames: Mapping[str, str] = field(default_factory=dict)  # node -> its HOSTNAME label

    @property
    def count(self) -> int:
        """The images the nodes report, once per node that reports each."""
        return sum(len(r) for r in self.reported.values())


def seen(index: NodeImages, name: str, node: Mapping[str, Any] | None) -> NodeImages:
    """The index once the node watch shows the node `name` as `node` (None: deleted): `index`
    itself when neither its images nor its hostname changed (a heartbeat); else only what the
    node changed is copied, so that a node's event costs its images, not the cluster's."""
    reported = node_images(node) if node is not None else {}
    labels = ((node or {}).get("metadata") or {}).get("labels") or {}
    hostname, hostnames = str(labels.get(HOSTNAME) or ""), index.hostnames
    if hostname != hostnames.get(name, ""):
        hostnames = {n: h for n, h in hostnames.items() if n != name}
        if hostname:
            hostnames[name] = hostname
    before = index.reported.get(name, {})
    if reported == before:
        return index if hostnames is index.hostnames else replace(index, hostnames=hostnames)
    holders = dict(index.holders)
    for image in before.keys() - reported.keys():
        if left := {n: s for n, s in holders[image].items() if n != name}:
            holders[image] = left
        else:
            del holders[image]
    for image, size_ in reported.items():  # a node already there keeps its place
        holders[image] = {**holders.get(image, {}), name: size_}
    nodes = {n: r for n, r in index.reported.items() if n != name}
    if reported:
        nodes[name] = reported
    return NodeImages(nodes, holders, hostnames)


def warmth(images: frozenset[str], holders: Holders, cache_key: str = "",
           cache_node: str = "", hostnames: Mapping[str, str] | None = None) -> Warmth:
    """The run's images against what the nodes report (`holders`: an index of node_images,
    kept as node events come, so that a run's look costs its images, not the cluster's)."""
    sizes: dict[str, int] = {}
    held: dict[str, int] = {}
    for image in images:
        for node, size_ in (holders.get(image) or {}).items():
            sizes[image] = size_
            held[node] = held.get(node, 0) + size_
    named = {n: (hostnames or {}).get(n, "") for n in [*held, cache_node] if n}
    return Warmth(images, sizes, held, cache_key, cache_node, named)


def said(note: Noted, node: str, held: int) -> str:
    """What is warm for the run on the node its anchor went to (`held`: bytes of its images
    there), for the Anchored Event and `explain`; "" when nothing is to be said."""
    parts = []
    if note.total:
        if held:
            parts.append(f"{size(held)} of the run's {size(note.total)} of images already there")
        else:
            top = max(note.nodes.items(), key=lambda kv: kv[1], default=None)
            where = f" (most on {top[0]}: {size(top[1])})" if top else ""
            parts.append(f"none of the run's {size(note.total)} of images reported there{where}")
    if note.cache_key:
        if not note.cache_node:
            parts.append("its pipeline's first run here: its caches start cold")
        elif note.cache_node == node:
            parts.append("its pipeline's caches are warm there (its last run ran there)")
        else:
            parts.append(f"its pipeline's last run was on {note.cache_node}, which could not "
                         "take it: its caches start cold")
    return "; ".join(parts)


def size(n: int) -> str:
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"
