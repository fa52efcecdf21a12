"""The requests of the pod Tekton v1.15 builds for a TaskRun, as the scheduler counts them."""

from __future__ import annotations

from typing import Any

import pytest

from controller.core.basics import quantity
from controller.core.model.podrequests import Namespace, of_pod, pod_requests


def step(name: str, requests: dict[str, str] | None = None,
         limits: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    resources = {k: v for k, v in (("requests", requests), ("limits", limits)) if v}
    return {"name": name, "image": "busybox", "computeResources": resources, **extra}


def limit_range(name: str, **item: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"limits": [{"type": "Container", **item}]}}


def test_steps_without_requests_ask_nothing_but_a_pod() -> None:
    assert pod_requests({"steps": [step("a"), step("b")]}) == {"pods": 1000}


def test_steps_and_sidecars_add_up() -> None:
    spec = {"steps": [step("a", {"cpu": "1", "memory": "1Gi"}), step("b", {"cpu": "500m"})],
            "sidecars": [step("db", {"cpu": "250m", "nvidia.com/gpu": "1"})]}
    assert pod_requests(spec) == {"cpu": 1750, "memory": 2**30 * 1000,
                                  "nvidia.com/gpu": 1000, "pods": 1000}


def test_a_limit_without_a_request_is_the_request() -> None:
    spec = {"steps": [step("a", limits={"cpu": "2"}), step("b", {"cpu": "1"}, {"cpu": "4"})]}
    assert pod_requests(spec)["cpu"] == 3000


def test_the_step_template_fills_what_a_step_leaves_out() -> None:
    spec = {"stepTemplate": {"computeResources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
            "steps": [step("a", {"cpu": "2"}), step("b")]}
    got = pod_requests(spec)
    assert got["cpu"] == 3000 and got["memory"] == 2 * 2**30 * 1000


def test_step_specs_of_the_run_override_a_step_key_by_key() -> None:
    spec = {"steps": [step("a", {"cpu": "2", "memory": "1Gi"}), step("b", {"cpu": "1"})]}
    run = {"stepSpecs": [{"name": "a", "computeResources": {"requests": {"cpu": "100m"}}}],
           "sidecarSpecs": [{"name": "none", "computeResources": {"requests": {"cpu": "9"}}}]}
    got = pod_requests(spec, run)
    assert got["cpu"] == 1100 and got["memory"] == 2**30 * 1000


def test_task_level_requests_are_divided_among_the_steps() -> None:
    spec = {"steps": [step("a", {"cpu": "4"}), step("b"), step("c")]}
    got = pod_requests(spec, {"computeResources": {"requests": {"cpu": "1", "memory": "1G"}}})
    # 1 CPU / 3 = 333m each (Go truncates), 1G / 3 = 333333333 bytes each
    assert got["cpu"] == 999 and got["memory"] == 999_999_999 * 1000


def test_task_level_limits_alone_become_the_steps_requests() -> None:
    spec = {"steps": [step("a"), step("b")]}
    assert pod_requests(spec, {"computeResources": {"limits": {"cpu": "2"}}})["cpu"] == 2000
    # a step with its own requests, under task-level limits only: its requests are dropped and
    # the full task limit becomes its request (Tekton's average of no requests is none)
    spec = {"steps": [step("a", {"cpu": "100m"}), step("b")]}
    assert pod_requests(spec, {"computeResources": {"limits": {"cpu": "2"}}})["cpu"] == 3000


def test_a_limit_range_default_is_divided_among_steps_and_given_whole_to_sidecars() -> None:
    ns = Namespace(limit_ranges=(limit_range("lr", defaultRequest={"cpu": "600m"}),))
    spec = {"steps": [step("a"), step("b"), step("c", {"cpu": "1"})], "sidecars": [step("s")]}
    # steps a and b: 600m / 3 = 200m; c keeps its own; the sidecar gets the whole 600m
    assert pod_requests(spec, namespace=ns)["cpu"] == 2000


def test_an_init_container_with_the_full_default_can_be_the_largest() -> None:
    ns = Namespace(limit_ranges=(limit_range("lr", defaultRequest={"memory": "1Gi"}),))
    spec = {"steps": [step("a"), step("b"), step("c"), step("d")]}
    # each step 256Mi (1Gi / 4), 1Gi together; prepare alone asks the whole 1Gi too
    assert pod_requests(spec, namespace=ns)["memory"] == 2**30 * 1000
    spec = {"steps": [step("a", {"memory": "100Mi"})]}
    assert pod_requests(spec, namespace=ns)["memory"] == 2**30 * 1000


def test_a_limit_range_minimum_and_default_limit_count() -> None:
    ns = Namespace(limit_ranges=(limit_range("lr", min={"cpu": "300m"}, default={"cpu": "1"}),))
    spec = {"steps": [step("a"), step("b"), step("c"), step("d"), step("e")]}
    # defaultRequest comes from default (1): 200m each, raised to the 300m minimum
    assert pod_requests(spec, namespace=ns)["cpu"] == 1500


def test_several_limit_ranges_act_as_the_most_restrictive_one() -> None:
    ns = Namespace(limit_ranges=(
        limit_range("a", defaultRequest={"cpu": "800m"}, min={"cpu": "100m"}),
        limit_range("b", defaultRequest={"cpu": "400m"}, min={"cpu": "150m"}),
    ))
    spec = {"steps": [step("x"), step("y"), step("z"), step("w")]}
    got = pod_requests(spec, namespace=ns)
    # steps: 400m / 4 = 100m, raised to the larger minimum, 150m: 600m together; but the
    # prepare init container takes a whole default request from whichever LimitRange the API
    # server reads first, and that order is not fixed: the larger, 800m, is counted
    assert got["cpu"] == 800
    spec["sidecars"] = [step("s", {"cpu": "100m"})]
    assert pod_requests(spec, namespace=ns)["cpu"] == 800


def test_config_defaults_give_resources_to_containers_without_them() -> None:
    ns = Namespace(container_defaults={
        "prefix-sidecar": {"requests": {"cpu": "250m"}},
        "default": {"requests": {"cpu": "100m"}},
        "place-scripts": {"requests": {"cpu": "5"}},
    })
    spec = {"steps": [step("a", {"cpu": "1"}), step("b", script="echo")],
            "sidecars": [step("s")]}
    got = pod_requests(spec, namespace=ns)
    assert got["cpu"] == 5000  # the place-scripts init container is the largest
    del ns.container_defaults["place-scripts"]  # type: ignore[attr-defined]
    assert pod_requests(spec, namespace=ns)["cpu"] == 1350


def test_a_quantity_that_does_not_parse_is_an_error_not_a_zero() -> None:
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        pod_requests({"steps": [step("a", {"cpu": "lots"})]})


def test_a_pod_as_built_counts_as_the_scheduler_counts_it() -> None:
    pod = {"spec": {
        "initContainers": [
            {"name": "prepare", "resources": {"requests": {"cpu": "3"}}},
            {"name": "sidecar", "restartPolicy": "Always",
             "resources": {"requests": {"cpu": "500m"}}},
            {"name": "late", "resources": {"requests": {"cpu": "2"}}},
        ],
        "containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}, {"name": "b"}],
        "overhead": {"cpu": "100m"},
    }}
    # max(containers 1 + sidecar 0.5, prepare 3, sidecar 0.5 + late 2) + overhead
    assert of_pod(pod) == {"cpu": 3100, "pods": 1000}


@pytest.mark.parametrize(("text", "milli"), [
    ("1", 1000), ("100m", 100), ("0.5", 500), ("1Ki", 1024_000), ("1e3", 1_000_000),
    ("1E", 10**21), ("1n", 1), ("2.5Gi", int(2.5 * 2**30) * 1000), (3, 3000),
])
def test_quantities_parse_exactly_and_round_up(text: Any, milli: int) -> None:
    assert quantity.parse(text) == milli


def test_amounts_render_back_as_people_write_them() -> None:
    assert quantity.to_k8s({"cpu": 1500, "memory": 2**31 * 1000, "pods": 3000}) == {
        "cpu": "1500m", "memory": "2Gi"}
    assert quantity.describe({"pods": 3000, "cpu": 2000, "memory": 1500}) == (
        "cpu 2, memory 2, pods 3")
