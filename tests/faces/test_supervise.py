"""The reconciler as a child process: restarted when it ends, stopped when the server stops."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from controller.faces import supervise
from controller.metrics import Metrics


async def test_a_child_that_exits_is_started_again_and_counted(tmp_path: Path) -> None:
    marks = tmp_path / "lives"
    script = f"open({str(marks)!r}, 'a').write('x'); raise SystemExit(3)"
    metrics = Metrics()
    child = supervise.Child([sys.executable, "-c", script], {}, metrics)
    stop = asyncio.Event()
    task = asyncio.create_task(child.run(stop))
    for _ in range(100):
        if marks.exists() and len(marks.read_text()) >= 2:
            break
        await asyncio.sleep(0.1)
    stop.set()
    await asyncio.wait_for(task, 5)
    assert len(marks.read_text()) >= 2
    assert (metrics.registry.get_sample_value(
        "tekton_coscheduler_reconciler_restarts_total", {"exit_code": "3"}
    ) or 0) >= 1


async def test_stop_asks_politely_then_kills(tmp_path: Path) -> None:
    polite = [sys.executable, "-c", "import time; time.sleep(60)"]
    stubborn = [
        sys.executable, "-c",
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('up', flush=True); time.sleep(60)",
    ]
    for argv, expected in ((polite, -15), (stubborn, -9)):
        child = supervise.Child(argv, {}, Metrics())
        stop = asyncio.Event()
        task = asyncio.create_task(child.run(stop))
        await asyncio.sleep(1.0)  # the interpreter is up and has set its signal handler
        stop.set()
        await child.stop(timeout=1)
        await asyncio.wait_for(task, 5)
        assert child.process is not None and child.process.returncode == expected


async def test_a_child_that_outlives_its_lease_is_killed_and_one_that_renews_is_not() -> None:
    """The child reports its leadership's deadlines (as faces/reconciler.py does through
    supervise.report_leadership); one whose last deadline is EXIT_BOUND behind is killed."""
    script = (
        "import os, sys, time\n"
        f"fd = int(os.environ[{supervise.LEADERSHIP_FD!r}])\n"
        "mode = sys.argv[1]\n"
        "for i in range(40):\n"
        "    # renewing: a deadline ahead each time; stuck: one deadline, then silence\n"
        "    if mode == 'renewing' or i == 0:\n"
        "        os.write(fd, f'{time.monotonic() + 0.5}\\n'.encode())\n"
        "    time.sleep(0.1)\n"
    )
    supervise_bound = supervise.EXIT_BOUND
    supervise.EXIT_BOUND = 0.5
    try:
        for mode, killed in (("stuck", True), ("renewing", False)):
            metrics = Metrics()
            child = supervise.Child([sys.executable, "-c", script, mode], {}, metrics)
            stop = asyncio.Event()
            task = asyncio.create_task(child.run(stop))
            for _ in range(60):
                await asyncio.sleep(0.1)
                if child.process is not None and child.process.returncode is not None:
                    break
            code = child.process.returncode if child.process else None
            stop.set()
            await child.stop(timeout=1)
            await asyncio.wait_for(task, 5)
            assert (code == -9) is killed, (mode, code)
            outlived = metrics.registry.get_sample_value(
                "tekton_coscheduler_reconciler_restarts_total", {"exit_code": "outlived"})
            assert bool(outlived) is killed
    finally:
        supervise.EXIT_BOUND = supervise_bound
