"""A new leader knows every node before its first decision: its first resync round decides the
runs it lists. The nodes come from the leader's watch cache, whose first list is told node by
node before the cache counts as synced (faces/reconciler.know_nodes); after it, the nodes'
changes are heard, their heartbeats are not."""

from __future__ import annotations

import copy
from typing import Any

import kubernetes

from controller.faces.reconciler import know_nodes
from controller.kube.caches import Caches
from controller.kube.client import Kube
from controller.metrics import Metrics
from controller.operator.runs import Operator
from controller.settings import Settings
from tests.kube.test_reflector import Response
from tests.operator.test_runs import MemoryKube, StaticView

NODE = {"metadata": {"name": "node-7", "resourceVersion": "1",
                     "labels": {"kubernetes.io/hostname": "node-7"}},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True",
                                   "lastHeartbeatTime": "2026-11-27T10:00:00Z"}],
                   "images": [{"names": ["registry.example/maven:3.9"],
                               "sizeBytes": 900_000_000}]}}


def leader(listed: list[dict[str, Any]], events: list[dict[str, Any]]
           ) -> tuple[Operator, Caches]:
    """An operator whose nodes' cache lists `listed`, then watches `events`, then stops."""
    caches = Caches(Kube(kubernetes.client.ApiClient()), timeout=1.0)
    operator = Operator(Settings(), MemoryKube(), StaticView(), Metrics(),  # type: ignore[arg-type]
                        caches)
    watch, watched = caches.watches["nodes"], [events]

    def list_fn(*args: Any, **kwargs: Any) -> Response:
        if not kwargs.get("watch"):
            return Response({"items": listed, "metadata": {"resourceVersion": "1"}})
        if not watched:
            watch.stop()
        return Response(lines=watched.pop() if watched else [])

    watch._list_fn = list_fn
    return operator, caches


def version(node: dict[str, Any], rv: str, **status: Any) -> dict[str, Any]:
    changed = copy.deepcopy(node)
    changed["metadata"]["resourceVersion"] = rv
    changed["status"].update(status)
    return changed


def _images_known(operator: Any) -> float:
    return float(operator.metrics.registry.get_sample_value("tekton_coscheduler_warm_node_images"))


def test_the_nodes_and_their_images_are_known_once_the_cache_has_listed_them() -> None:
    operator, caches = leader([NODE], [])
    assert not know_nodes(operator, 0.01)  # not listed yet: said, and decided without them
    caches.watches["nodes"].run()
    assert know_nodes(operator, 0.01)
    assert [n["metadata"]["name"] for n in operator.node_index.nodes()] == ["node-7"]
    assert _images_known(operator) == 1


def test_a_heartbeat_is_not_heard_a_change_and_a_deletion_are() -> None:
    heartbeat = version(NODE, "2", conditions=[{"type": "Ready", "status": "True",
                                                "lastHeartbeatTime": "2026-11-27T10:00:10Z"}])
    not_ready = version(NODE, "3", conditions=[{"type": "Ready", "status": "False"}])
    operator, caches = leader([NODE], [
        {"type": "MODIFIED", "object": heartbeat},
        {"type": "MODIFIED", "object": not_ready},
        {"type": "DELETED", "object": not_ready},
    ])
    heard: list[tuple[str, bool]] = []
    on_node = operator.on_node

    def record(node: Any, deleted: bool = False) -> None:
        heard.append((node["metadata"]["resourceVersion"], deleted))
        on_node(node, deleted)

    operator.on_node = record  # type: ignore[method-assign]
    caches.watches["nodes"].run()
    assert heard == [("1", False), ("3", False), ("3", True)]
    assert operator.node_index.nodes() == [] and _images_known(operator) == 0
