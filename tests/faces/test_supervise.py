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
    assert metrics.registry.get_sample_value(
        "tekton_coscheduler_reconciler_restarts_total", {"exit_code": "3"}
    ) >= 1


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
