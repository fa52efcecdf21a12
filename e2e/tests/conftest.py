"""Fixtures for tests against a real control plane (see e2e/harness/cluster and e2e/build.sh).

.venv/bin/pytest e2e -p no:cacheprovider [--backend local|existing|kind]
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator, Mapping

import pytest

from controller.core.basics import names
from e2e.harness import faults, release, skips
from e2e.harness import real as real_
from e2e.harness.cluster import (
    Backend,
    BinaryNotFound,
    ClusterHandle,
    building,
    open_cluster,
    realhost,
)
from e2e.harness.cluster import tekton as tekton_cluster
from e2e.harness.coscheduler import REPO, Coscheduler
from e2e.harness.faults import Pool
from e2e.harness.real import Real
from e2e.harness.runs import Runs
from e2e.harness.scenario import Scenario
from e2e.harness.tekton_runs import PodRecorder

_CLUSTER_KEY = pytest.StashKey[ClusterHandle]()
_WAITED = pytest.StashKey[float]()
_REAL_LAB = pytest.StashKey[contextlib.ExitStack]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--backend",
        choices=[b.value for b in Backend],
        default=os.environ.get("E2E_BACKEND", Backend.LOCAL.value),
        help="what runs the e2e cluster: local processes (default), current kubeconfig, kind",
    )
    skips.add_option(parser)  # --skips-allowed (e2e/harness/skips.py)


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
    try:
        cluster.start_tekton()
    except BinaryNotFound as e:
        pytest.skip(str(e))
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


# -- tekton-coscheduler on the cluster ------------------------------------------------------


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that need no control plane (helm at most) first: they run while build.sh is still
    building it. Then tests with hand-made runs: once the real Tekton controller runs, it would
    act on them (and fail them, since their Pipelines do not exist). Scenarios on clusters of
    their own last. Within each of these, those needing a part built later come later (`make
    test` builds the parts in the background as the scenarios run,
    e2e/harness/cluster/building.py)."""
    def order(item: pytest.Item) -> tuple[int, int]:
        fixtures = getattr(item, "fixturenames", ())
        parts = _parts(item)
        if "cluster" not in fixtures and parts <= {"helm"}:
            return -1, 0
        group = 2 if "cluster" not in fixtures else int("tekton" in fixtures)
        return group, building.rank(parts)

    items.sort(key=order)


def _parts(item: pytest.Item) -> set[str]:
    """What a scenario needs built: the control plane's parts, Tekton if it runs Tekton, and
    what its `parts` marker names (e2e/harness/cluster/building.py LATE)."""
    parts = set(building.BASE) if item.get_closest_marker("e2e") else set()
    if "tekton" in getattr(item, "fixturenames", ()):
        parts.add("tekton")
    for marker in item.iter_markers("parts"):
        parts.update(marker.args)
    return parts


@pytest.hookimpl(tryfirst=True, wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    """A part still being built is waited for here, before the scenario's own timeout starts."""
    reporter = item.config.pluginmanager.get_plugin("terminalreporter")

    def say(line: str) -> None:
        if reporter:
            reporter.write_line(f"{item.nodeid}: {line}")

    waited = building.wait_for(_parts(item), say=say)
    item.config.stash[_WAITED] = item.config.stash.get(_WAITED, 0.0) + waited
    return (yield)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter,
                            config: pytest.Config) -> None:
    waited = config.stash.get(_WAITED, 0.0)
    if waited >= 1:
        terminalreporter.write_line(
            f"scenarios waited {waited:.0f} s in all for parts e2e/build.sh was still building")
    skips.report(terminalreporter, config)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    skips.finish(session, exitstatus)


@pytest.fixture(scope="session")
def nodes(cluster: ClusterHandle) -> list[str]:
    """Four fake nodes for the coscheduling scenarios, in two zones."""
    return cluster.add_nodes(4, prefix="co")


@pytest.fixture(scope="session")
def coscheduler(cluster: ClusterHandle, nodes: list[str]) -> Iterator[Coscheduler]:
    """tekton-coscheduler installed by its Helm chart (CRDs, RBAC, webhook configuration) and
    running on the host with the chart's ServiceAccount identity."""
    if cluster.backend == Backend.KIND:
        # kind's API server lives in a container: it cannot call a webhook on this host's
        # loopback. On kind the chart runs in the cluster instead: e2e/tests/test_kind_install.py.
        pytest.skip("operator scenarios run on the local or an existing on-host control plane")
    tekton_cluster.install(cluster, None)  # Tekton's CRDs and ConfigMaps (coschedule: disabled)
    operator = release.deploy(cluster, code=release.code_under_test())
    try:
        yield operator
    finally:
        operator.stop()


@pytest.fixture
def enabled(cluster: ClusterHandle, coscheduler: Coscheduler) -> Iterator[Scenario]:
    """A fresh namespace that opted in, with the operator running."""
    ns = cluster.create_namespace(
        f"on-{uuid.uuid4().hex[:6]}", labels={names.NAMESPACE_LABEL: "true"}
    )
    scenario = Scenario(cluster, ns)
    yield scenario
    scenario.close()


# -- real PipelineRuns ------------------------------------------------------------------------


@pytest.fixture
def runs(
    cluster: ClusterHandle, tekton: ClusterHandle, coscheduler: Coscheduler, nodes: list[str]
) -> Iterator[Runs]:
    yield from _runs(cluster, {names.NAMESPACE_LABEL: "true"})


@pytest.fixture
def unlabelled(
    cluster: ClusterHandle, tekton: ClusterHandle, coscheduler: Coscheduler, nodes: list[str]
) -> Iterator[Runs]:
    yield from _runs(cluster, {})


def _runs(cluster: ClusterHandle, labels: Mapping[str, str]) -> Iterator[Runs]:
    ns = cluster.create_namespace(f"tk-{uuid.uuid4().hex[:6]}", labels=labels)
    with PodRecorder(cluster, ns) as recorder:
        scenario = Runs(cluster, ns, recorder)
        yield scenario
        scenario.close()


@pytest.fixture
def pool(
    cluster: ClusterHandle, tekton: ClusterHandle, coscheduler: Coscheduler
) -> Iterator[Pool]:
    """Two kwok nodes of one zone for one scenario (e2e/harness/faults.py), removed afterwards
    with the volumes they did not use: later tests must not land on them."""
    made = faults.make_pool(cluster)
    yield made
    faults.remove_pool(cluster, made)


# -- the real-node lab ------------------------------------------------------------------------


@pytest.fixture(scope="session")
def real(request: pytest.FixtureRequest) -> Iterator[Real]:
    """The real-node lab (e2e/harness/real.py), started once for every scenario that runs on it
    (test_realnode.py, test_release_path.py): starting one takes minutes. Stopped as soon as
    the last of them is done (pytest_runtest_teardown below), not at the session's end: its
    nodes would go on taking CPU from the scenarios after it."""
    why = realhost.can_run_containers()
    if why:
        pytest.skip(why)
    stack = contextlib.ExitStack()
    request.config.stash[_REAL_LAB] = stack
    with stack:
        try:
            made = stack.enter_context(real_.lab(REPO, nodes=2))
        except (FileNotFoundError, BinaryNotFound) as exc:
            pytest.skip(str(exc))
        image = made.image
        print(f"image {image.name}: {image.size_bytes / 2**20:.0f} MiB, "
              f"built in {image.seconds:.0f} s")
        yield made


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    """The real-node lab stops after the last scenario of the session that uses it, once that
    scenario's own fixtures are torn down (a scenario's namespace and runs live in it)."""
    result = yield
    stack = item.config.stash.get(_REAL_LAB, None)
    if stack is not None and "real" in getattr(item, "fixturenames", ()):
        later = item.session.items[item.session.items.index(item) + 1:]
        if not any("real" in getattr(i, "fixturenames", ()) for i in later):
            stack.close()
    return result


# -- Tekton's affinity assistant ---------------------------------------------------------------

@pytest.fixture
def assistant_mode(cluster: ClusterHandle, coscheduler: Coscheduler,
                   request: pytest.FixtureRequest) -> Iterator[str | None]:
    """Tekton's assistant in the scenario's mode (a `coschedule` value, or SHIPPED_MODE: Tekton's
    feature flags untouched), and the suite's default again after it, each once Tekton's
    controller and the operator act on it; None: the suite's default throughout."""
    mode = request.param
    if mode is None:
        yield None
        return
    switch_assistant(cluster, coscheduler, str(mode))
    try:
        yield str(mode)
    finally:
        switch_assistant(cluster, coscheduler, None)


def switch_assistant(cluster: ClusterHandle, coscheduler: Coscheduler, mode: str | None) -> None:
    """mode: a `coschedule` value, SHIPPED_MODE, or None (the suite's default)."""
    flags = (tekton_cluster.SHIPPED if mode == tekton_cluster.SHIPPED_MODE
             else {"coschedule": mode} if mode else None)
    tekton_cluster.configure(cluster, flags)
    now = tekton_cluster.suite_mode(flags)
    cluster.wait_for(
        lambda: coscheduler.metric("tekton_coscheduler_tekton_affinity_assistant_mode",
                                   mode=now) == 1,
        timeout=30, what=f"the operator sees coschedule: {now}")
