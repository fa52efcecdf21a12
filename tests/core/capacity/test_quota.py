"""What a reservation may take of a team namespace's quotas: never what the namespace's runs
will still need, and only where a quota counts it."""

from __future__ import annotations

from typing import Any

import pytest

from controller.core.basics.quantity import PODS
from controller.core.capacity import quota

RESERVATION = quota.Shape(priority_class="tcs-reservation")
RUNS = quota.Shape(terminating=True)
CPU3 = {"cpu": 3000, PODS: 3000}


def resource_quota(hard: dict[str, str], used: dict[str, str] | None, name: str = "team",
                   **spec: Any) -> dict[str, Any]:
    status = {"hard": hard, "used": used} if used is not None else {}
    return {"metadata": {"name": name}, "spec": {"hard": hard, **spec}, "status": status}


def limit_range(**item: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": "limits"}, "spec": {"limits": [{"type": "Container", **item}]}}


@pytest.mark.parametrize(("name", "resource"), [
    ("requests.cpu", "cpu"), ("cpu", "cpu"), ("limits.memory", "memory"), ("pods", PODS),
    ("count/pods", PODS), ("requests.nvidia.com/gpu", "nvidia.com/gpu"),
    ("requests.storage", None), ("persistentvolumeclaims", None), ("count/secrets", None),
])
def test_a_quota_s_resource_names_the_pod_resource_it_counts(name: str, resource: str | None) -> None:
    assert quota.resource_of(name) == resource


def test_the_reservation_holds_only_what_the_quota_leaves_beyond_the_runs_next_pods() -> None:
    """The issue's namespace: 3500m of requests.cpu, the balloon's 10m used, a run whose
    widest layer asks 3 CPUs: reserving the peak would leave its first pod no quota."""
    q = resource_quota({"requests.cpu": "3500m"}, {"requests.cpu": "10m"})
    bounds = quota.allowance([q], [], RESERVATION, RUNS, own={}, demand=CPU3)
    assert bounds.most == {"cpu": 490}
    assert quota.sized(CPU3, bounds, []) == {"cpu": 490}
    # its own reservation is in `used` already: the same answer once it exists
    q = resource_quota({"requests.cpu": "3500m"}, {"requests.cpu": "500m"})
    assert quota.allowance([q], [], RESERVATION, RUNS, {"cpu": 490}, CPU3).most == {"cpu": 490}


def test_a_quota_the_runs_already_fill_leaves_the_reservation_nothing_and_that_is_said() -> None:
    q = resource_quota({"requests.cpu": "3", "pods": "10"}, {"requests.cpu": "2", "pods": "2"})
    bounds = quota.allowance([q], [], RESERVATION, RUNS, {}, CPU3)
    assert bounds.most["cpu"] == 0
    size = quota.sized(CPU3, bounds, [])
    assert size == {}
    said = quota.limited(CPU3, size, bounds)
    assert said is not None and not said.warning and said.reason == "RoomLimited"
    assert "ResourceQuota team" in said.message and "nothing" in said.message


def test_no_pod_slot_left_means_no_reservation_pod() -> None:
    q = resource_quota({"pods": "4"}, {"pods": "1"})
    bounds = quota.allowance([q], [], RESERVATION, RUNS, {}, CPU3)
    assert quota.sized(CPU3, bounds, []) is None


def test_quotas_count_only_the_pods_their_scopes_select() -> None:
    """A reservation runs at the chart's PriorityClass with no deadline; Tekton's pods always
    have one (Terminating)."""
    hard, used = {"requests.cpu": "4"}, {"requests.cpu": "1"}
    other_class = resource_quota(hard, used, scopeSelector={"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]})
    terminating = resource_quota(hard, used, scopes=["Terminating"])
    not_terminating = resource_quota(hard, used, scopes=["NotTerminating"])
    ours = resource_quota(hard, used, scopeSelector={"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "In", "values": ["tcs-reservation"]}]})
    assert quota.allowance([other_class], [], RESERVATION, RUNS, {}, CPU3).most == {}
    assert quota.allowance([terminating], [], RESERVATION, RUNS, {}, CPU3).most == {}
    # counts the reservation but not the runs: no demand to leave room for
    assert quota.allowance([not_terminating], [], RESERVATION, RUNS, {}, CPU3).most == {"cpu": 3000}
    assert quota.allowance([ours], [], RESERVATION, RUNS, {}, CPU3).most == {"cpu": 3000}


def test_a_quota_not_counted_yet_holds_nothing() -> None:
    q = resource_quota({"requests.cpu": "100"}, None)
    assert quota.allowance([q], [], RESERVATION, RUNS, {}, CPU3).most == {"cpu": 0}


def test_a_limit_range_caps_the_reservation_and_its_defaults_count() -> None:
    """Its maximum caps each resource; a default request it would give for what the
    reservation does not ask must fit the quota; a minimum raises a small ask."""
    capped = quota.allowance([], [limit_range(max={"cpu": "2"})], RESERVATION, RUNS, {}, CPU3)
    assert quota.sized(CPU3, capped, [limit_range(max={"cpu": "2"})]) == {"cpu": 2000}
    defaults = limit_range(defaultRequest={"memory": "256Mi"})
    full = resource_quota({"requests.memory": "1Gi"}, {"requests.memory": "1Gi"})
    bounds = quota.allowance([full], [defaults], RESERVATION, RUNS, {}, CPU3)
    assert quota.sized(CPU3, bounds, [defaults]) is None
    least = limit_range(min={"cpu": "500m"})
    assert quota.sized({"cpu": 100}, quota.Allowance(), [least]) == {"cpu": 500}


def test_the_whole_peak_reserved_says_nothing() -> None:
    assert quota.limited(CPU3, {"cpu": 3000}, quota.Allowance()) is None
