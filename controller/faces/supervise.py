"""The reconciler as a child process of the server: started, restarted, stopped, and killed if
it outlives its Lease.

A child that exits (it lost the Lease, or crashed) is started again, after a pause that grows
while it keeps failing; the server and its webhook carry on meanwhile.

The child tells the server each deadline of its leadership (kube/fencing.py) over a pipe: its
writes stop at that moment by themselves, and the child exits within EXIT_BOUND of losing it
(faces/reconciler.py). Should it not (a thread that ignores its cancellation, a child paused
with the whole replica and woken long after), the server kills it once the deadline is
EXIT_BOUND behind: a reconciler that may still act never outlives its Lease by more.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Mapping

import structlog

from controller.kube.fencing import Leadership
from controller.metrics import Metrics

log = structlog.get_logger(__name__)

PR_SET_PDEATHSIG = 1
# A child that ran this long without failing starts its next life with the shortest pause.
HEALTHY_RUN = 60.0
# The pipe a child reports its leadership's deadlines on (a file descriptor it inherits).
LEADERSHIP_FD = "TEKTON_COSCHEDULER_LEADERSHIP_FD"
# How long after its deadline a child that held the Lease may live (faces/reconciler.py
# EXIT_BOUND, and a little for the report to arrive).
EXIT_BOUND = 12.0


def report_leadership(leadership: Leadership, metrics: Metrics) -> None:
    """In the child: each deadline of its leadership, to the server (if it asked for them); and
    the leader gauge of its own metrics, read from the same Leadership at each scrape."""
    metrics.leader.set_function(lambda: float(leadership.holder is not None))
    fd = os.environ.get(LEADERSHIP_FD)
    if not fd:
        return

    def tell(until: float) -> None:
        line = f"{until if until != float('-inf') else 0.0}\n".encode()
        with contextlib.suppress(OSError):
            os.write(int(fd), line)  # a line is far below PIPE_BUF: written whole

    leadership.listeners.append(tell)


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
    def __init__(self, argv: list[str], env: Mapping[str, str], metrics: Metrics,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.argv = argv
        self.env = dict(env)
        self.metrics = metrics
        self.process: asyncio.subprocess.Process | None = None
        self.clock = clock
        # The running child's last reported deadline (0: it holds no Lease; leadership
        # deadlines are of the system's monotonic clock, the same in both processes).
        self.until = 0.0
        # The server's leader gauge: its child's leadership, as the child last reported it.
        metrics.leader.set_function(lambda: float(self.clock() < self.until))

    async def run(self, stop: asyncio.Event) -> None:
        """Keeps the child running until `stop` is set; then stops it."""
        pause = 1.0
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            started = loop.time()
            reports, told = os.pipe()
            self.until = 0.0
            # Its own process group: a signal to ours (a shell's Ctrl-C, a test harness) reaches
            # it once, from us, when we are ready to stop it.
            try:
                self.process = await asyncio.create_subprocess_exec(
                    *self.argv, env={**self.env, LEADERSHIP_FD: str(told)},
                    start_new_session=True, pass_fds=(told,),
                )
            finally:
                os.close(told)
            log.info("reconciler started", pid=self.process.pid)
            waiter = asyncio.create_task(self.process.wait())
            stopper = asyncio.create_task(stop.wait())
            watchdog = asyncio.create_task(self._watch(reports, self.process))
            await asyncio.wait([waiter, stopper], return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
            watchdog.cancel()
            if stop.is_set():
                waiter.cancel()
                break
            code = self.process.returncode
            self.metrics.reconciler_restarts.labels(exit_code=str(code)).inc()
            pause = 1.0 if loop.time() - started > HEALTHY_RUN else min(pause * 2, 30.0)
            log.warning("reconciler exited; starting a new one", exit_code=code, pause=pause)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), pause)

    async def _watch(self, reports: int, process: asyncio.subprocess.Process) -> None:
        """Reads the child's deadlines; kills it once it has outlived one by EXIT_BOUND."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(reports, "rb", 0))
        try:
            while process.returncode is None:
                with contextlib.suppress(TimeoutError):
                    line = await asyncio.wait_for(reader.readline(), 1.0)
                    if not line:  # the child closed its end: it is ending
                        return
                    with contextlib.suppress(ValueError):
                        self.until = float(line)
                if self.outlived() and process.returncode is None:
                    log.error("reconciler outlived its Lease; killed", pid=process.pid,
                              seconds_past=round(self.clock() - self.until, 1))
                    self.metrics.reconciler_restarts.labels(exit_code="outlived").inc()
                    with contextlib.suppress(ProcessLookupError):
                        process.kill()
                    return
        finally:
            transport.close()

    def outlived(self) -> bool:
        """The child held the Lease, and its deadline is more than EXIT_BOUND behind."""
        return self.until > 0 and self.clock() > self.until + EXIT_BOUND

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
