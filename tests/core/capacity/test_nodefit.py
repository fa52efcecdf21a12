"""What the nodes a run may use can ever hold, and whether an autoscaler could add a bigger
one: a wait for room that can never come is not worth it."""

from __future__ import annotations

from typing import Any

from controller.core.capacity import nodefit

PEAK = {"cpu": 8000, "memory": 8 * 2**30 * 1000, "pods": 8000}
POOL = {"nodeSelector": {"pool": "small"}}


def node(name: str, cpu: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": spec,
        "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }


def test_a_peak_larger_than_every_node_the_run_may_use_asks_for_the_most_one_holds() -> None:
    nodes = [node("s1", "2", {"pool": "small"}), node("s2", "3", {"pool": "small"}),
             node("big", "16", {"pool": "big"})]
    assert nodefit.largest_share(PEAK, nodes, POOL) == {"cpu": 3000, "memory": PEAK["memory"]}
    assert nodefit.largest_share(PEAK, nodes, {}) is None  # the big node holds it all
    balloon = {**POOL, "containers": [{"name": "pause", "resources": {"requests": {"cpu": "10m"}}}]}
    assert nodefit.largest_share(PEAK, nodes, balloon)["cpu"] == 2990  # type: ignore[index]


def test_nodes_the_run_may_not_use_do_not_count() -> None:
    cordoned = node("s3", "4", {"pool": "small"}, unschedulable=True)
    tainted = node("s4", "4", {"pool": "small"},
                   taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}])
    by_affinity = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "pool", "operator": "In", "values": ["small"]}]}]}}}}
    nodes = [node("s1", "2", {"pool": "small"}), cordoned, tainted]
    assert nodefit.largest_share(PEAK, nodes, POOL) == {"cpu": 2000, "memory": PEAK["memory"]}
    assert nodefit.largest_share(PEAK, nodes, by_affinity)["cpu"] == 2000  # type: ignore[index]
    tolerant = {**POOL, "tolerations": [{"key": "gpu", "operator": "Exists"}]}
    assert nodefit.largest_share(PEAK, nodes, tolerant)["cpu"] == 4000  # type: ignore[index]
    assert nodefit.largest_share(PEAK, [], POOL) is None  # nothing known: no cap


def nodepool(labels: dict[str, str], limits: dict[str, str] | None = None,
             **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "np"},
            "spec": {"template": {"metadata": {"labels": labels}, "spec": spec},
                     **({"limits": limits} if limits else {})},
            "status": {"resources": {"cpu": "4"}}}


def test_a_karpenter_nodepool_that_may_make_a_node_the_run_may_use_is_waited_for() -> None:
    small = nodepool({"pool": "small"})
    other = nodepool({"pool": "big"})
    by_requirement = nodepool({}, requirements=[
        {"key": "pool", "operator": "In", "values": ["small", "medium"]}])
    at_its_limit = nodepool({"pool": "small"}, limits={"cpu": "10"})
    tainted = nodepool({"pool": "small"}, taints=[{"key": "x", "effect": "NoSchedule"}])
    assert nodefit.autoscaler_may_add([small], POOL, PEAK, cluster_autoscaler=False)
    assert nodefit.autoscaler_may_add([by_requirement], POOL, PEAK, cluster_autoscaler=False)
    for cannot in (other, at_its_limit, tainted):
        assert not nodefit.autoscaler_may_add([cannot], POOL, PEAK, cluster_autoscaler=False)
    assert nodefit.autoscaler_may_add([], POOL, PEAK, cluster_autoscaler=True)
