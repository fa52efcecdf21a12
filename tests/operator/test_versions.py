from __future__ import annotations

from controller.kube.clusterview import Facts
from controller.metrics import Metrics
from controller.operator.executor import Versions


def series(metrics: Metrics) -> dict[tuple[str, str], float]:
    return {
        (s.labels["component"], s.labels["version"]): s.value
        for family in metrics.registry.collect()
        if family.name == "tekton_coscheduler_version_tested"
        for s in family.samples
    }


def test_the_api_server_s_release_is_said_with_whether_it_was_tested() -> None:
    metrics = Metrics()
    versions = Versions(metrics)
    assert versions.kubernetes("v1.36.3").tested
    assert series(metrics) == {("kubernetes", "v1.36.3"): 1.0}
    assert not Versions(metrics).kubernetes(None).tested


def test_tekton_s_release_is_said_once_synced_and_again_when_it_changes() -> None:
    metrics = Metrics()
    versions = Versions(metrics)
    unsynced = Facts(tekton_version="v1.12.0")
    versions.on_facts(Facts(), unsynced)
    assert series(metrics) == {}  # not until every watch has listed
    synced = Facts(synced=True, tekton_version="v1.12.0")
    versions.on_facts(unsynced, synced)
    versions.on_facts(synced, synced)
    assert series(metrics) == {("tekton", "v1.12.0"): 1.0}
    upgraded = Facts(synced=True, tekton_version="v1.16.0")
    versions.on_facts(synced, upgraded)
    assert series(metrics) == {("tekton", "v1.16.0"): 0.0}
