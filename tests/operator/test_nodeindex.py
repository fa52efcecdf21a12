"""The node index (kube/nodeindex.py): one place for what the node watch last showed of each
node, read by anchors, headroom and warm anchors; its image index derived by
core/placement/warm.seen."""

from __future__ import annotations

import copy
from typing import Any

from controller.kube.nodeindex import NodeIndex
from controller.metrics import Metrics

MAVEN = "docker.io/library/maven:3"
GO = "docker.io/library/golang:1.23"
GB = 10**9


def node(name: str, *images: tuple[str, int], hostname: str | None = None) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": hostname} if hostname else {}
    return {"metadata": {"name": name, "labels": labels},
            "status": {"conditions": [{"type": "Ready", "status": "True",
                                       "lastHeartbeatTime": "2026-11-28T10:00:00Z"}],
                       "images": [{"names": [ref], "sizeBytes": size} for ref, size in images]}}


def images_known(metrics: Metrics) -> float | None:
    return metrics.registry.get_sample_value("tekton_coscheduler_warm_node_images")


def test_a_node_s_images_replaced_leave_the_old_ones_held_by_it_no_more() -> None:
    metrics = Metrics()
    index = NodeIndex(metrics)
    index.on_node(node("a", (MAVEN, GB)))
    index.on_node(node("b", (MAVEN, 2 * GB)))
    index.on_node(node("a", (GO, 3 * GB)))  # maven pruned by image GC, golang pulled
    held = index.images()
    assert held.holders == {MAVEN: {"b": 2 * GB}, GO: {"a": 3 * GB}}
    assert held.reported == {"a": {GO: 3 * GB}, "b": {MAVEN: 2 * GB}}
    assert images_known(metrics) == 2
    index.on_node(node("b"))  # b reports no image now: the image is held by none
    assert index.images().holders == {GO: {"a": 3 * GB}}
    assert index.images().reported == {"a": {GO: 3 * GB}}
    assert images_known(metrics) == 1


def test_a_deleted_node_is_known_gone_and_holds_nothing() -> None:
    metrics = Metrics()
    index = NodeIndex(metrics)
    index.on_node(node("a", (MAVEN, GB), hostname="host-a"))
    index.on_node(node("b", (MAVEN, GB), hostname="host-b"))
    index.on_node(node("a", (MAVEN, GB), hostname="host-a"), deleted=True)
    assert [n["metadata"]["name"] for n in index.nodes()] == ["b"]
    assert index.node("a") == (True, None)  # told of and gone: not the same as never told
    assert index.node("c") == (False, None)
    held = index.images()
    assert held.holders == {MAVEN: {"b": GB}} and held.reported == {"b": {MAVEN: GB}}
    assert held.hostnames == {"b": "host-b"}
    assert images_known(metrics) == 1


def test_a_heartbeat_that_changes_no_image_leaves_the_image_index_as_it_was() -> None:
    metrics = Metrics()
    index = NodeIndex(metrics)
    first = node("a", (MAVEN, GB), hostname="host-a")
    index.on_node(first)
    before = index.images()
    beat = copy.deepcopy(first)
    beat["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-11-28T10:00:10Z"
    metrics.warm_node_images.set(-1)  # set again only when the images change
    index.on_node(beat)
    assert index.images() is before
    assert index.node("a") == (True, beat)  # the node itself is as the watch showed it last
    assert images_known(metrics) == -1


def test_hostnames_follow_each_node_s_label() -> None:
    index = NodeIndex(Metrics())
    index.on_node(node("a", (MAVEN, GB), hostname="host-a"))
    index.on_node(node("b", hostname="host-b"))  # no image: its hostname is known all the same
    assert index.images().hostnames == {"a": "host-a", "b": "host-b"}
    index.on_node(node("a", (MAVEN, GB), hostname="renamed-a"))  # images alike, label not
    assert index.images().hostnames == {"a": "renamed-a", "b": "host-b"}
    assert index.images().holders == {MAVEN: {"a": GB}}
    index.on_node(node("b"))  # the label taken off
    assert index.images().hostnames == {"a": "renamed-a"}


def test_a_value_read_is_never_changed_by_later_events() -> None:
    """A run's look reads the index without the lock: what it holds stays as it read it."""
    index = NodeIndex(Metrics())
    index.on_node(node("a", (MAVEN, GB), hostname="host-a"))
    read = index.images()
    index.on_node(node("b", (MAVEN, GB), hostname="host-b"))
    index.on_node(node("a", (GO, GB), hostname="host-a"), deleted=True)
    assert read.holders == {MAVEN: {"a": GB}} and read.hostnames == {"a": "host-a"}
    assert read.reported == {"a": {MAVEN: GB}}
