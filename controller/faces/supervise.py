"""The reconciler as a child process of the server: started, restarted, stopped.

A child that exits (it lost the Lease, or crashed) is started again, after a pause that grows
while it keeps failing; the server and its webhook carry on meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import socket
import sys
from collections.abc import Mapping

import structlog

from controller.metrics import Metrics

log = structlog.get_logger(__name__)

PR_SET_PDEATHSIG = 1
# A child that ran this long without failing starts its next life with the shortest pause.
HEALTHY_RUN = 60.0


def free_loopback_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def die_with_parent() -> None:
    """Called in the child: the kernel kills it when the server process dies, so no reconciler
    outlives the replica it belongs to (on a host; in a pod, the container's end takes every
    process anyway). SIGKILL: a server that died without stopping its child died hard, and so
    does the child, as it would with its container."""
    if sys.platform != "linux":
        return
    parent = os.getppid()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the line above took effect
        os.kill(os.getpid(), signal.SIGKILL)


class Child:
    def __init__(self, argv: list[str], env: Mapping[str, str], metrics: Metrics) -> None:
        self.argv = argv
        self.env = dict(env)
        self.metrics = metrics
        self.process: asyncio.subprocess.Process | None = None

    async def run(self, stop: asyncio.Event) -> None:
        """Keeps the child running until `stop` is set; then stops it."""
        pause = 1.0
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            started = loop.time()
            # Its own process group: a signal to ours (a shell's Ctrl-C, a test harness) reaches
            # it once, from us, when we are ready to stop it.
            self.process = await asyncio.create_subprocess_exec(
                *self.argv, env=self.env, start_new_session=True
            )
            log.info("reconciler started", pid=self.process.pid)
            waiter = asyncio.create_task(self.process.wait())
            stopper = asyncio.create_task(stop.wait())
            await asyncio.wait([waiter, stopper], return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
            if stop.is_set():
                waiter.cancel()
                break
            code = self.process.returncode
            self.metrics.reconciler_restarts.labels(exit_code=str(code)).inc()
            pause = 1.0 if loop.time() - started > HEALTHY_RUN else min(pause * 2, 30.0)
            log.warning("reconciler exited; starting a new one", exit_code=code, pause=pause)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), pause)

    async def stop(self, timeout: float) -> None:
        """SIGTERM (it hands the Lease back), then SIGKILL if it does not end in time."""
        process = self.process
        if process is None or process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), timeout)
        except TimeoutError:
            log.warning("reconciler did not stop in time; killed", pid=process.pid)
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
