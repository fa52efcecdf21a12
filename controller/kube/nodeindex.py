"""What the leader knows of the nodes, as its node watch last showed each, kept here and nowhere
else, under this module's one lock: an index over a watch, as client-go's indexers are.

The node watch feeds it once per event (Operator.on_node); its readers keep no copy and no lock
of their own: the anchors (operator/anchors.py: can an anchor's node still keep it), the
headroom (operator/headroom.py: room on the nodes) and warm anchors (the images each node holds,
and hostnames). What the images come to is derived in core/placement/warm.py (`seen`), as a
frozen value replaced whole: a run's look at it reads one consistent index without the lock.
The lock is never held across a call to the API server.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from controller.core.placement import warm
from controller.metrics import Metrics


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
