"""The local control plane's components: the scheduler and the controller-manager are started
again when they exit unasked, as the kubelet restarts a static pod; never after a stop."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from e2e.harness.cluster import processes
from e2e.harness.cluster.processes import ManagedProcess, wait_until


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(processes, "RESTART_DELAY", 0.05)


def test_a_component_that_exits_unasked_is_started_again_and_said_in_its_log(
        tmp_path: Path) -> None:
    proc = ManagedProcess("exits", ["sh", "-c", "sleep 0.2; exit 3"], tmp_path / "exits.log",
                          restart_on_exit=True)
    proc.start()
    try:
        wait_until(lambda: proc.restarts >= 2, timeout=10, what="two restarts")
    finally:
        proc.stop(grace=1)
    assert "# exited with 3 unasked: started again (1)" in proc.log_path.read_text()
    stopped_at = proc.restarts
    time.sleep(0.6)
    assert proc.restarts == stopped_at and not proc.running()


def test_a_stop_or_a_restart_asked_for_is_not_followed_by_another_start(tmp_path: Path) -> None:
    proc = ManagedProcess("sleeps", ["sleep", "30"], tmp_path / "sleeps.log",
                          restart_on_exit=True)
    proc.start()
    proc.stop(grace=1)
    proc.start()  # as LocalCluster.restart does
    first = proc.pid
    time.sleep(0.3)
    assert proc.restarts == 0 and proc.pid == first and proc.running()
    proc.kill()
    time.sleep(0.3)
    assert proc.restarts == 0 and not proc.running()


def test_a_component_not_supervised_stays_down(tmp_path: Path) -> None:
    proc = ManagedProcess("once", ["sh", "-c", "exit 1"], tmp_path / "once.log")
    proc.start()
    wait_until(lambda: not proc.running(), timeout=10, what="its exit")
    time.sleep(0.3)
    assert proc.restarts == 0 and proc.exit_code() == 1
