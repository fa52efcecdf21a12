"""Fixtures for tests against a real control plane (see e2e/cluster and e2e/build.sh).

.venv/bin/pytest e2e -p no:cacheprovider [--backend local|existing|kind]
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from e2e.cluster import Backend, BinaryNotFound, ClusterHandle, have_binary, open_cluster

_CLUSTER_KEY = pytest.StashKey[ClusterHandle]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--backend",
        choices=[b.value for b in Backend],
        default=os.environ.get("E2E_BACKEND", Backend.LOCAL.value),
        help="what runs the e2e cluster: local processes (default), current kubeconfig, kind",
    )


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest) -> Iterator[ClusterHandle]:
    """The started cluster for the whole session; stopped (processes killed) at the end."""
    handle = open_cluster(request.config.getoption("--backend"))
    request.config.stash[_CLUSTER_KEY] = handle
    try:
        handle.start()
    except BinaryNotFound as e:
        handle.stop()
        pytest.skip(str(e))
    except BaseException:
        print(handle.log_tails())
        handle.stop()
        raise
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture(scope="session")
def tekton(cluster: ClusterHandle) -> ClusterHandle:
    """The cluster with Tekton Pipelines running (coschedule: disabled). Skips if not built."""
    if cluster.backend == Backend.LOCAL and not have_binary("tekton-controller"):
        pytest.skip("the Tekton controller is not built: e2e/build.sh tekton")
    cluster.start_tekton()
    return cluster


@pytest.fixture
def namespace(cluster: ClusterHandle) -> str:
    """A fresh namespace per test (left in place: the cluster is thrown away anyway)."""
    return cluster.create_namespace(f"e2e-{uuid.uuid4().hex[:8]}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    report = yield
    handle = item.config.stash.get(_CLUSTER_KEY, None)
    if report.failed and handle is not None:  # type: ignore[attr-defined]
        report.sections.append(("control plane logs", handle.log_tails(30)))  # type: ignore[attr-defined]
    return report
