"""What the leader knows of the nodes, as its node watch last showed each, kept here and nowhere
else, under this module's one lock.

The node watch feeds it once per event (Operator.on_node); its readers keep no copy and no lock
of their own: AnchorGuard (operator/anchors.py: can an anchor's node still keep it), Headroom
(operator/headroom.py: room on the nodes), Warming (below: the images each node
holds, and hostnames). What the images come to is derived in core/placement/warm.py (`seen`),
as a frozen value replaced whole: a run's look at it reads one consistent index without the
lock. The lock is never held across a call to the API server.

Warm anchors, the adapter (Warming): the run's images from the specs the leader's caches hold
(read as capacity reads them), which nodes hold them (the index above), and the pipeline's last
node from its namespace's policy status, for core/placement/warm.py; once the run is anchored,
its node is remembered there for the pipeline's next run (core/placement/warmcache.py), and
counted.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import structlog

from controller.core.basics.actions import WritePolicyStatus
from controller.core.model.tekton import PipelineRun
from controller.core.placement import warm, warmcache
from controller.kube.caches import Caches
from controller.kube.client import api_message
from controller.kube.clusterview import ClusterView, Facts
from controller.metrics import Metrics
from controller.operator.estimates import task_reader
from controller.operator.executor import Executor
from controller.operator.sources import Sources

log = structlog.get_logger(__name__)


class NodeIndex:
    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        # Each node as the node watch last showed it; None: deleted since (a node told of and
        # gone is known unavailable, one never told of is not known at all).
        self._nodes: dict[str, Mapping[str, Any] | None] = {}
        self._images = warm.NodeImages()
        self._lock = threading.Lock()

    def on_node(self, node: Mapping[str, Any], deleted: bool = False) -> None:
        """The node as its watch shows it now (a heartbeat that changes none of its images
        leaves the image index as it was)."""
        name = str((node.get("metadata") or {}).get("name") or "")
        with self._lock:
            self._nodes[name] = None if deleted else node
            before = self._images
            self._images = warm.seen(before, name, None if deleted else node)
            if self._images.reported is not before.reported:
                self.metrics.warm_node_images.set(self._images.count)

    def node(self, name: str) -> tuple[bool, Mapping[str, Any] | None]:
        """Whether the node watch told of the node, and the node as it last showed it (None:
        deleted since, or never told of)."""
        with self._lock:
            return name in self._nodes, self._nodes.get(name)

    def nodes(self) -> list[Mapping[str, Any]]:
        """Every node as the node watch last showed it, the deleted ones left out."""
        with self._lock:
            return [n for n in self._nodes.values() if n is not None]

    def images(self) -> warm.NodeImages:
        """The images each node reports, their holders and the nodes' hostnames: one frozen
        value, read without the lock."""
        with self._lock:
            return self._images


# -- warm anchors -------------------------------------------------------------------------------


class Warming:
    def __init__(self, executor: Executor, caches: Caches | None, view: ClusterView,
                 metrics: Metrics, nodes: NodeIndex) -> None:
        self.executor = executor
        self.caches = caches
        self.view = view
        self.metrics = metrics
        self.nodes = nodes  # the images each node holds, and hostnames

    def warmth(self, run: PipelineRun, facts: Facts, src: Sources) -> warm.Warmth | None:
        """Where the run starts fastest, as far as its namespace's policy asks (None: it asks
        for nothing, or nothing is known)."""
        asked = facts.policy_for(run.namespace).policy.warm
        key = warmcache.pipeline_key(run, asked.pipeline_key) if asked.pipeline_cache else ""
        spec = run.substituted_pipeline_spec or run.pipeline_spec or src.pipeline
        images = (warm.run_images(spec, task_reader(self.caches, run.namespace, src))
                  if asked.images and spec else frozenset())
        if not images and not key:
            return None
        last = warmcache.remembered(facts.warm_status.get(run.namespace)).get(key, "")
        held = self.nodes.images()
        return warm.warmth(images, held.holders, key, last, held.hostnames)

    def anchored(self, namespace: str, run: str, annotations: Mapping[str, Any],
                 node: str) -> str:
        """The run's anchor was bound to `node` for the first time: counted, its pipeline's
        node remembered; what is warm there, for the Anchored Event."""
        note = warm.noted(annotations.get(warm.ANNOTATION))
        held = note.held(self.nodes.images().reported.get(node, {}), node)
        if note.total:
            self.metrics.warm_image_bytes.labels(on_anchor="held").inc(held)
            self.metrics.warm_image_bytes.labels(on_anchor="to_pull").inc(note.total - held)
        if note.cache_key:
            outcome = ("first" if not note.cache_node
                       else "hit" if note.cache_node == node else "miss")
            self.metrics.warm_cache_runs.labels(outcome=outcome).inc()
            self._remember(namespace, note.cache_key, node, run)
        return warm.said(note, node, held)

    def _remember(self, namespace: str, key: str, node: str, run: str) -> None:
        facts = self.view.facts
        _, _, name = facts.policy_for(namespace).policy.source.partition("/")
        if not name:  # the policy that asked was deleted since
            return
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        done = self.executor.do(WritePolicyStatus(namespace, name, warmcache.remember(
            facts.warm_status.get(namespace), key, node, run, now)))
        if (exc := done.api_error) is not None:
            log.warning("pipeline's warm node not remembered", namespace=namespace,
                        policy=name, error=api_message(exc))
        else:
            done.get()
