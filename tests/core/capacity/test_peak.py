"""The run's peak: the heaviest set of tasks that can run at once, per resource."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.capacity import peak
from controller.core.capacity.peak import Node
from controller.core.model import podrequests


def brute_force(nodes: list[Node], resource: str) -> int:
    """Every subset of which no task comes before another: the definition, for small DAGs."""
    before = peak._closure(nodes)
    best = 0
    for size in range(1, len(nodes) + 1):
        for subset in itertools.combinations(nodes, size):
            names = {n.name for n in subset}
            if any(before[n.name] & names for n in subset):
                continue
            best = max(best, sum(n.weight.get(resource, 0) for n in subset))
    return best


@st.composite
def dags(draw: Any, max_tasks: int = 9) -> list[Node]:
    count = draw(st.integers(1, max_tasks))
    nodes = []
    for i in range(count):
        after = draw(st.sets(st.integers(0, i - 1), max_size=i)) if i else set()
        nodes.append(Node(
            f"t{i}",
            {"cpu": draw(st.integers(0, 4000)), "pods": 1000},
            draw(st.integers(1, 3)),
            frozenset(f"t{j}" for j in after),
        ))
    return nodes


@settings(max_examples=300, deadline=None)
@given(dags())
def test_the_peak_is_the_heaviest_set_of_tasks_that_can_run_at_once(nodes: list[Node]) -> None:
    got = peak.peak(nodes)
    for resource in ("cpu", "pods"):
        assert got.get(resource, 0) == brute_force(nodes, resource)


@settings(max_examples=200, deadline=None)
@given(dags(max_tasks=30))
def test_the_peak_is_at_least_any_task_and_at_most_all_of_them(nodes: list[Node]) -> None:
    got = peak.peak(nodes)
    for resource in ("cpu", "pods"):
        weights = [n.weight.get(resource, 0) for n in nodes]
        assert max(weights) <= got.get(resource, 0) <= sum(weights)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(1, 5000), min_size=1, max_size=6), min_size=1, max_size=6))
def test_a_layered_dag_peaks_at_its_heaviest_layer(layers: list[list[int]]) -> None:
    nodes: list[Node] = []
    previous: list[str] = []
    for depth, layer in enumerate(layers):
        names = [f"l{depth}-{i}" for i in range(len(layer))]
        nodes += [Node(n, {"cpu": cpu}, 1, frozenset(previous)) for n, cpu in zip(names, layer, strict=True)]
        previous = names
    assert peak.peak(nodes)["cpu"] == max(sum(layer) for layer in layers)


def test_finally_tasks_all_run_together_after_the_rest() -> None:
    main = [Node("a", {"cpu": 3000}), Node("b", {"cpu": 1000}, after=frozenset({"a"}))]
    final = [Node("f1", {"cpu": 2000}), Node("f2", {"cpu": 2000})]
    assert peak.peak(main, final)["cpu"] == 4000
    assert peak.peak(main, final[:1])["cpu"] == 3000


def step(cpu: str) -> dict[str, Any]:
    return {"name": "s", "image": "busybox", "computeResources": {"requests": {"cpu": cpu}}}


def test_a_fan_out_fan_in_pipeline_peaks_at_its_fan_out() -> None:
    build = {"steps": [step("1")]}
    spec = {
        "tasks": [
            {"name": "fetch", "taskSpec": {"steps": [step("500m")]}},
            *({"name": f"build-{x}", "runAfter": ["fetch"], "taskSpec": build} for x in "abc"),
            {"name": "publish", "runAfter": ["build-a", "build-b", "build-c"],
             "taskSpec": {"steps": [step("2")]}},
        ],
    }
    got = peak.estimate(spec, lambda _: None, {})
    assert got.peak == {"cpu": 3000, "pods": 3000}
    assert got.tasks["fetch"] == {"cpu": 500, "pods": 1000}


def test_a_result_reference_orders_tasks_as_run_after_does() -> None:
    spec = {"tasks": [
        {"name": "a", "taskSpec": {"steps": [step("1")]}},
        {"name": "b", "taskSpec": {"steps": [step("1")]},
         "params": [{"name": "x", "value": "$(tasks.a.results.digest)"}]},
        {"name": "c", "taskSpec": {"steps": [step("1")]},
         "when": [{"input": "$(tasks.a.results.ok)", "operator": "in", "values": ["y"]}]},
    ]}
    assert peak.estimate(spec, lambda _: None, {}).peak["cpu"] == 2000


def test_a_matrix_counts_every_combination_and_its_new_includes() -> None:
    task = {"name": "m", "matrix": {
        "params": [{"name": "os", "value": ["linux", "mac"]}, {"name": "go", "value": ["1", "2"]}],
        "include": [{"name": "extra", "params": [{"name": "os", "value": "windows"}]},
                    {"name": "flag", "params": [{"name": "os", "value": "linux"}]}],
    }}
    assert peak.fan_out(task) == (5, True)
    assert peak.fan_out({"name": "m", "matrix": {"include": [{"name": "a"}, {"name": "b"}]}}) == (
        2, True)
    assert peak.fan_out({"name": "m", "matrix": {"params": [
        {"name": "x", "value": "$(tasks.a.results.list[*])"}]}}) == (1, False)


def test_tasks_by_reference_are_read_and_unknown_ones_use_the_policy_estimate() -> None:
    tasks = {"build": {"steps": [step("2")]}}
    spec = {"tasks": [
        {"name": "one", "taskRef": {"name": "build"}},
        {"name": "two", "taskRef": {"name": "missing"}},
        {"name": "three", "taskRef": {"resolver": "git", "params": []}},
        {"name": "custom", "taskRef": {"apiVersion": "example.dev/v1", "kind": "Wait"}},
    ]}
    got = peak.estimate(spec, lambda ref: tasks.get(ref.get("name", "")), {},
                        unknown_task={"cpu": 1000})
    assert got.unknown == ("two", "three")
    assert got.tasks["custom"] == {}
    assert got.peak == {"cpu": 4000, "pods": 3000}


def test_task_run_specs_and_the_namespace_reach_each_task() -> None:
    spec = {"tasks": [{"name": "a", "taskSpec": {"steps": [{"name": "s", "image": "x"}]}}]}
    runs = {"a": {"computeResources": {"requests": {"cpu": "3"}}}}
    assert peak.estimate(spec, lambda _: None, runs).peak["cpu"] == 3000
    namespace = podrequests.Namespace(container_defaults={"default": {"requests": {"cpu": "7"}}})
    assert peak.estimate(spec, lambda _: None, {}, namespace).peak["cpu"] == 7000


def test_what_remains_of_the_peak_once_tasks_are_done() -> None:
    spec = {"tasks": [
        {"name": "fetch", "taskSpec": {"steps": [step("1")]}},
        *({"name": f"b{x}", "runAfter": ["fetch"], "taskSpec": {"steps": [step("2")]}}
          for x in "12"),
    ], "finally": [{"name": "report", "taskSpec": {"steps": [step("1")]}}]}
    got = peak.estimate(spec, lambda _: None, {})
    assert got.remaining(set())["cpu"] == 4000
    assert got.remaining({"fetch", "b1"})["cpu"] == 2000
    assert got.remaining({"fetch", "b1", "b2"})["cpu"] == 1000
    assert got.remaining({"fetch", "b1", "b2", "report"}) == {}


def test_an_unknown_task_counts_as_its_pod_asks_once_its_task_run_has_one() -> None:
    """A task behind a resolver is unknown until Tekton resolves it for its TaskRun, which
    then makes a pod from the resolved spec: that pod's requests stand for the task, and for
    every unknown task of the run with the same reference and the same taskRunSpecs."""
    git = {"resolver": "git", "params": [{"name": "pathInRepo", "value": "build.yaml"}]}
    spec = {"tasks": [
        {"name": "fetch", "taskSpec": {"steps": [step("1")]}},
        *({"name": f"b{x}", "runAfter": ["fetch"], "taskRef": git} for x in "123"),
        {"name": "lint", "runAfter": ["fetch"], "taskRef": {**git, "params": []}},
        {"name": "big", "runAfter": ["fetch"], "taskRef": git},
    ]}
    runs = {"big": {"computeResources": {"requests": {"cpu": "8"}}}}
    before = peak.estimate(spec, lambda _: None, runs, unknown_task={"cpu": 300})
    assert before.peak["cpu"] == 5 * 300
    seen = {"fetch": {"cpu": 1000, "pods": 1000}, "b1": {"cpu": 2000, "pods": 1000}}
    after = before.learned(seen)
    assert after.unknown == ("lint", "big")
    assert after.tasks["b3"] == {"cpu": 2000, "pods": 1000}
    assert after.peak["cpu"] == 3 * 2000 + 300 + 300
    assert after.learned(seen) is after  # nothing new: the same estimate
    assert before.learned({"b1": {"cpu": 2000, "pods": 1000}}).tasks["fetch"] == {
        "cpu": 1000, "pods": 1000}  # a task read from its spec keeps its estimate
