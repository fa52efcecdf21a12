from __future__ import annotations

from pathlib import Path

import pytest

from controller.core.model import versions
from e2e.harness.cluster.versions import read_versions

VERSIONS_ENV = Path(__file__).resolve().parents[3] / "e2e" / "versions.env"


@pytest.mark.parametrize("text, expected", [
    ("v1.36.3", (1, 36)),
    ("1.35", (1, 35)),
    ("v1.36.3-gke.1200", (1, 36)),
    ("v1.37.2+k3s1", (1, 37)),
    (" v1.9.6 ", (1, 9)),
    ("devel", None),
    ("", None),
    (None, None),
])
def test_a_release_is_read_from_what_clusters_report(
    text: str | None, expected: tuple[int, int] | None
) -> None:
    assert versions.release(text) == expected


def test_the_tested_releases_are_those_the_e2e_matrix_runs() -> None:
    pins = read_versions(VERSIONS_ENV)
    assert {versions.release(v) for v in pins["MATRIX_KUBERNETES"].split()} == set(
        versions.TESTED_KUBERNETES)
    assert {versions.release(v) for v in pins["MATRIX_TEKTON_PIPELINE"].split()} == set(
        versions.TESTED_TEKTON)


def test_the_chart_refuses_below_the_floor_it_states() -> None:
    chart = (VERSIONS_ENV.parents[1] / "charts" / "tekton-coscheduler" / "Chart.yaml").read_text()
    major, minor = versions.KUBERNETES_FLOOR
    assert f'kubeVersion: ">={major}.{minor}.0-0"' in chart


@pytest.mark.parametrize("text", ["v1.35.4", "v1.36.3-eks-1", "v1.37.2"])
def test_a_tested_kubernetes_is_said_as_tested(text: str) -> None:
    verdict = versions.kubernetes(text)
    assert verdict.tested and verdict.version == text and "tested" in verdict.message


@pytest.mark.parametrize("text, says", [
    ("v1.34.2", "older than the tested releases"),
    ("v1.38.0", "newer than the tested releases"),
    ("v1.29.9", "older than 1.30, the oldest this release supports"),
    ("weird", "version unknown (weird)"),
    (None, "version unknown (not reported)"),
])
def test_an_untested_kubernetes_is_said_plainly(text: str | None, says: str) -> None:
    verdict = versions.kubernetes(text)
    assert not verdict.tested
    assert says in verdict.message and "1.35, 1.36, 1.37" in verdict.message


@pytest.mark.parametrize("text, tested, says", [
    ("v1.9.6", True, "tested"),
    ("v1.12.0", True, "tested"),
    ("v1.15.3", True, "tested"),
    ("v1.13.0", False, "between the tested LTS lines"),
    ("v0.59.0", False, "older than the tested LTS lines"),
    ("v1.16.0", False, "newer than the tested LTS lines"),
    ("", False, "version unknown (no pipelines-info)"),
])
def test_tekton_is_judged_by_its_lts_line(text: str, tested: bool, says: str) -> None:
    verdict = versions.tekton(text)
    assert verdict.tested is tested
    assert says in verdict.message and "v1.9, v1.12, v1.15" in verdict.message
