"""`make test` builds the e2e parts in the background while the scenarios run: a scenario waits
for a part a running e2e/build.sh has still to build, and the scenarios come in the build's order."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.harness.cluster import building, versions

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TEKTON_COSCHEDULER_CACHE", str(tmp_path))
    monkeypatch.setattr(building, "POLL", 0.05)
    (tmp_path / "building").mkdir()
    return tmp_path


@pytest.fixture
def builder() -> Iterator[int]:
    """A live process standing for a build.sh (its pid names its plan)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc.pid
    proc.kill()
    proc.wait()


def test_a_part_a_live_build_plans_is_waited_for_until_its_line_goes(cache: Path,
                                                                     builder: int) -> None:
    plan = cache / "building" / str(builder)
    plan.write_text("etcd v3.6.8\nkarpenter v1.8.0\n")
    assert versions.builder_of("karpenter") == builder
    threading.Timer(0.3, lambda: plan.write_text("etcd v3.6.8\n")).start()
    said: list[str] = []
    waited = building.wait_for(["karpenter"], say=said.append)
    assert 0.25 < waited < 5
    assert said == [f"waiting for e2e/build.sh (pid {builder}) to build karpenter"]


def test_a_plan_left_by_a_dead_build_and_a_part_not_planned_are_not_waited_for(
        cache: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (cache / "building" / str(dead.pid)).write_text("karpenter v1.8.0\n")
    assert versions.builder_of("karpenter") is None
    assert building.wait_for(["karpenter", "certmanager"], timeout=5) < 1


def test_a_build_killed_but_not_reaped_yet_is_not_waited_for(cache: Path) -> None:
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    # Waited for without reaping (WNOWAIT): a zombie, whose pid still answers a signal.
    os.waitid(os.P_PID, zombie.pid, os.WEXITED | os.WNOWAIT)
    (cache / "building" / str(zombie.pid)).write_text("karpenter v1.8.0\n")
    try:
        assert versions.builder_of("karpenter") is None
    finally:
        zombie.wait()


def test_tekton_waits_for_its_own_line_not_the_older_one_the_upgrades_start_from(
        cache: Path, builder: int) -> None:
    pins = versions.read_versions()
    before = pins["TEKTON_UPGRADE_FROM"]
    (cache / "building" / str(builder)).write_text(f"tekton {before}\n")
    assert building.wait_for(["tekton"], timeout=5) < 1
    assert building.wait_for(["tekton-before"], timeout=0.3) >= 0.3


def test_a_binary_still_being_built_is_waited_for_not_skipped(cache: Path, builder: int) -> None:
    version = versions.read_versions()["ETCD_VERSION"]
    plan = cache / "building" / str(builder)
    plan.write_text(f"etcd {version}\n")
    made = cache / "bin" / f"etcd-{version}"

    def build() -> None:
        made.mkdir(parents=True)
        (made / "etcd").write_text("#!/bin/sh\n")
        (made / ".stamp").write_text(f"version={version}\n")
        plan.write_text("")

    threading.Timer(0.3, build).start()
    start = time.monotonic()
    assert versions.find_binary("etcd") == made / "etcd"
    assert time.monotonic() - start >= 0.25


def test_a_binary_no_build_plans_is_not_found_at_once(cache: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(cache))
    with pytest.raises(versions.BinaryNotFound, match="build it with"):
        versions.find_binary("etcd")


def test_build_sh_lists_what_it_builds_and_takes_its_list_away(cache: Path) -> None:
    """With every binary given ready-made, build.sh builds nothing, yet plans and unplans."""
    given = cache / "given"
    given.mkdir()
    for name in ("etcd", "kwok"):
        (given / name).write_text("#!/bin/sh\n")
    env = {**os.environ, "TEKTON_COSCHEDULER_BIN_DIR": str(given)}
    out = subprocess.run(["bash", str(REPO / "e2e" / "build.sh"), "etcd", "kwok"], env=env,
                         capture_output=True, text=True, timeout=60, check=True)
    assert "etcd: using binaries in TEKTON_COSCHEDULER_BIN_DIR" in out.stdout
    assert list((cache / "building").iterdir()) == []


def test_waiting_for_a_background_build_never_started_fails_saying_so(cache: Path) -> None:
    out = subprocess.run(["bash", str(REPO / "e2e" / "build.sh"), "--wait"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "the background build failed" in out.stderr


def test_the_scenarios_come_in_the_order_their_parts_are_built() -> None:
    """Hand-made runs before Tekton's scenarios, clusters of their own last; within each, the
    later a part is built, the later the scenarios needing it."""
    out = subprocess.run([sys.executable, "-m", "pytest", "e2e", "--collect-only", "-q",
                          "-p", "no:cacheprovider"], cwd=REPO, capture_output=True, text=True,
                         timeout=120, check=True)
    order = [line.split("::")[0].removeprefix("e2e/tests/") for line in out.stdout.splitlines()
             if "::" in line]
    last = {module: i for i, module in enumerate(order)}
    first = {module: i for i, module in reversed(list(enumerate(order)))}
    # No control plane needed: first, while build.sh still builds it (helm before kwok).
    assert last["test_chart_render.py"] < first["test_admission_parity.py"]
    assert last["test_lab_parts.py"] < first["test_admission_parity.py"]
    assert last["test_coscheduling.py"] < first["test_chart_tls.py"]  # cert-manager
    assert last["test_chart_tls.py"] < first["test_tekton_runs.py"]  # hand-made runs first
    assert last["test_tekton_runs.py"] < first["test_autoscaler.py"]  # Karpenter
    assert last["test_autoscaler.py"] < first["test_realnode.py"]  # a cluster of its own
    assert last["test_realnode.py"] < last["test_upgrade.py"]  # the older Tekton, built last
    # The real-node lab's scenarios one after another: it is started once for them all, and
    # stopped after the last (e2e/tests/conftest.py).
    lab = [i for i, module in enumerate(order)
           if module in ("test_realnode.py", "test_release_path.py")]
    assert lab == list(range(lab[0], lab[0] + len(lab))), order
    assert last["test_release_path.py"] < last["test_upgrade.py"]

