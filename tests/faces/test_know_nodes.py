"""A new leader knows every node before its first decision: its first resync round decides the
runs it lists before kopf's node watch has listed a node (faces/kopf_handlers.know_nodes)."""

from __future__ import annotations

from typing import Any

from kubernetes.client.exceptions import ApiException

from controller.faces.kopf_handlers import know_nodes
from tests.operator.test_runs import make

NODE = {"metadata": {"name": "node-7", "labels": {"kubernetes.io/hostname": "node-7"}},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                   "images": [{"names": ["registry.example/maven:3.9"],
                               "sizeBytes": 900_000_000}]}}


class Nodes:
    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def list_nodes(self) -> list[dict[str, Any]]:
        if isinstance(self.answer, Exception):
            raise self.answer
        return list(self.answer)


def _images_known(operator: Any) -> float:
    return float(operator.metrics.registry.get_sample_value("tekton_coscheduler_warm_node_images"))


def test_the_nodes_and_their_images_are_known_before_the_first_decision() -> None:
    operator, _ = make()
    assert operator.anchors.nodes() == [] and _images_known(operator) == 0
    know_nodes(operator, Nodes([NODE]))  # type: ignore[arg-type]
    assert [n["metadata"]["name"] for n in operator.anchors.nodes()] == ["node-7"]
    assert _images_known(operator) == 1


def test_a_list_that_fails_is_left_to_the_node_watch() -> None:
    operator, _ = make()
    know_nodes(operator, Nodes(ApiException(status=503, reason="Service Unavailable")))  # type: ignore[arg-type]
    assert operator.anchors.nodes() == []
