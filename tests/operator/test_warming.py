"""Warm anchors, the adapter: the run's images against what the node index holds, and an
anchored run counted and remembered for its pipeline's next run."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from controller.core.basics import names
from controller.core.model.tekton import PipelineRun
from controller.core.placement import binding, warm
from controller.core.policy import policy
from controller.kube.client import ApiError
from controller.kube.clusterview import Facts
from controller.kube.nodeindex import NodeIndex
from controller.kube.podindex import PodIndex
from controller.metrics import Metrics
from controller.operator.apply import Applier
from controller.operator.estimates import Sources
from controller.operator.executor import Executor
from controller.operator.headroom import Warming
from controller.operator.memory import Memories
from controller.settings import Settings
from tests import factories
from tests.operator import test_placement as placement_tests

MAVEN = "docker.io/library/maven:3"
GB = 10**9


@dataclass
class Kube:
    patched: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)

    def patch_policy_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        self.patched.append((namespace, name, status))


@dataclass
class View:
    facts: Facts


def facts(warm_policy: policy.Warm, status: dict[str, Any] | None = None) -> Facts:
    base = Settings().default_policy()
    applied = replace(base, warm=warm_policy, source="CoschedulingPolicy/warm")
    return Facts(synced=True, defaults=policy.PolicyResolution(base),
                 policies={"team-a": policy.PolicyResolution(applied)},
                 warm_status={"team-a": status or {}})


def node(name: str, *images: tuple[str, int]) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": f"host-{name}"}},
            "status": {"images": [{"names": [ref], "sizeBytes": size} for ref, size in images]}}


def inline_run() -> PipelineRun:
    body = factories.pipelinerun()
    body["spec"] = {"pipelineSpec": {"tasks": [{"name": "build", "taskSpec": {
        "steps": [{"name": "s", "image": "maven:3"}]}}]}}
    return PipelineRun.from_body(body)


SOURCES = Sources(pipeline=None, requests=None, rooms=(), tasks_synced=True)


def test_the_index_follows_what_nodes_report_and_forgets_deleted_nodes() -> None:
    warming = Warming(None, View(facts(policy.Warm())), NodeIndex(Metrics()))  # type: ignore[arg-type]
    warming.nodes.on_node(node("a", (MAVEN, GB)))
    warming.nodes.on_node(node("b", (MAVEN, GB)))
    found = warming.warmth(inline_run(), facts(policy.Warm()), SOURCES)
    assert found is not None and found.held == {"a": GB, "b": GB}
    assert found.terms()[0]["preference"]["matchExpressions"][0]["values"] == [
        "host-a", "host-b"]  # by the hostname label each node reports
    warming.nodes.on_node(node("a"))  # pruned by the kubelet's image GC
    warming.nodes.on_node(node("b"), deleted=True)
    found = warming.warmth(inline_run(), facts(policy.Warm()), SOURCES)
    assert found is not None and found.held == {} and found.images == {MAVEN}


def test_a_policy_that_asks_for_nothing_gets_no_preference() -> None:
    warming = Warming(None, View(facts(policy.Warm())), NodeIndex(Metrics()))  # type: ignore[arg-type]
    warming.nodes.on_node(node("a", (MAVEN, GB)))
    assert warming.warmth(inline_run(), facts(policy.Warm(images=False)), SOURCES) is None


def anchored(warming: Warming, kube: Any, metrics: Metrics, run: PipelineRun,
             annotations: dict[str, str], node: str) -> str:
    """A run's anchor bound to `node` for the first time: the warm part of its balloon pod's
    plan (core/placement/binding.py) applied; what is warm there, for the Anchored Event."""
    steps, said = binding.warm_anchored("team-a", run.name, annotations, node,
                                        warming.read("team-a", annotations, node))
    Applier(Executor(kube, None), metrics, PodIndex(), Memories()).apply(run, steps)  # type: ignore[arg-type]
    return said


def test_an_anchored_run_is_counted_and_its_pipeline_s_node_remembered() -> None:
    kube, metrics = Kube(), Metrics()
    asked = policy.Warm(pipeline_cache=True)
    remembered = {"warmNodes": {"inline:x": {"node": "a", "time": "2026-11-26T10:00:00Z"}}}
    warming = Warming(None, View(facts(asked, remembered)), NodeIndex(metrics))  # type: ignore[arg-type]
    warming.nodes.on_node(node("a", (MAVEN, GB)))
    run = inline_run()
    found = warming.warmth(run, facts(asked, remembered), SOURCES)
    assert found is not None and found.cache_key.startswith("inline:")
    annotations = {warm.ANNOTATION: replace(found, cache_node="a").annotation()}
    said = anchored(warming, kube, metrics, run, annotations, "a")
    assert said == ("1.0 GB of the run's 1.0 GB of images already there; its pipeline's caches "
                    "are warm there (its last run ran there)")
    assert kube.patched[0][:2] == ("team-a", "warm")
    assert kube.patched[0][2]["warmNodes"][found.cache_key]["node"] == "a"
    anchored(warming, kube, metrics, run, annotations, "b")
    samples = {(s.name, tuple(s.labels.values())): s.value
               for m in metrics.registry.collect() for s in m.samples}
    assert samples[("tekton_coscheduler_warm_cache_runs_total", ("hit",))] == 1
    assert samples[("tekton_coscheduler_warm_cache_runs_total", ("miss",))] == 1
    assert samples[("tekton_coscheduler_warm_image_bytes_total", ("held",))] == GB
    assert samples[("tekton_coscheduler_warm_image_bytes_total", ("to_pull",))] == GB


class PlacementKube(placement_tests.Kube):
    def __init__(self, refuse: bool = False) -> None:
        super().__init__()
        self.refuse = refuse
        self.patched: list[tuple[str, str, dict[str, Any]]] = []

    def patch_policy_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        if self.refuse:
            raise ApiError(status=403, reason="Forbidden")
        self.patched.append((namespace, name, status))


@pytest.mark.parametrize("refused", [False, True])
def test_a_run_anchored_remembers_its_pipeline_s_node_through_its_plan_and_says_what_is_warm(
    refused: bool,
) -> None:
    """The policy status is written as a step of the balloon pod's plan, before the Anchored
    Event; a write refused is logged, and the run is said Anchored and annotated all the same."""
    kube, metrics = PlacementKube(refused), Metrics()
    warming = Warming(None, View(facts(policy.Warm(pipeline_cache=True))), NodeIndex(metrics))  # type: ignore[arg-type]
    warming.nodes.on_node(node("a", (MAVEN, GB)))
    noted = warm.Warmth(frozenset({MAVEN}), sizes={MAVEN: GB}, cache_key="inline:x")
    kube.annotations = {warm.ANNOTATION: noted.annotation()}
    notifier = placement_tests.Notifier()
    placement = placement_tests.placement_of(kube, notifier, warming=warming)
    placement.on_balloon_pod(placement_tests.balloon_pod("b1", "a"))
    assert notifier.said == [("Anchored", "the run's pods go to node a: 1.0 GB of the run's "
                              "1.0 GB of images already there; its pipeline's first run here: "
                              "its caches start cold")]
    assert kube.annotations[names.ANNOTATION_ANCHORED_NODE] == "a"
    if not refused:
        [(namespace, name, status)] = kube.patched
        assert (namespace, name, status["warmNodes"]["inline:x"]["node"]) == ("team-a", "warm", "a")
