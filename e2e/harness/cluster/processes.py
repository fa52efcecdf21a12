"""Child processes of the local control plane: each in its own process group, logging to a file."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

_LIVE: weakref.WeakSet[ManagedProcess] = weakref.WeakSet()
RESTART_DELAY = 1.0  # seconds before a component that exited unasked is started again


@atexit.register
def _stop_leftovers() -> None:
    for proc in list(_LIVE):
        proc.stop(grace=3)


def _die_with_parent() -> None:
    # The children lead their own sessions, so a crashed or SIGKILLed Python would otherwise
    # leave a control plane behind. SIGKILL, not SIGTERM: all get it at once, and an apiserver
    # whose etcd is already gone hangs in its graceful shutdown.
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tail(path: Path, lines: int = 40) -> str:
    if not path.exists():
        return f"(no log at {path})"
    with path.open("rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - 256 * 1024))
        text = f.read().decode("utf-8", errors="replace")
    return "\n".join(text.splitlines()[-lines:])


@dataclass(eq=False)  # identity semantics: kept in a WeakSet
class ManagedProcess:
    """One started component. stop() signals only the process group this object created."""

    name: str
    argv: Sequence[str]
    log_path: Path
    env: Mapping[str, str] | None = None
    cwd: Path | None = None
    # Started again when it exits unasked, as the kubelet restarts a static pod: the scheduler
    # exits by design when its cache no longer matches the API server ("Scheduler cache is
    # corrupted", after API server restarts in the chaos scenario of two cold CI runs), and a
    # cluster brings it back within seconds. Left without one, every later scenario failed.
    restart_on_exit: bool = False
    restarts: int = field(default=0, init=False)
    _popen: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    # Held while _popen changes hands: a stop() between the supervisor's look and its start()
    # would otherwise leave a restarted process that nothing stops.
    _lock: threading.RLock = field(default_factory=threading.RLock, init=False, repr=False)

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"$ {' '.join(self.argv)}\n".encode())
            log.flush()
            # start_new_session: the child leads its own process group, so stop() can signal
            # it and anything it spawned without touching other processes.
            # PDEATHSIG fires when the forking *thread* ends, so only the main thread asks.
            main = threading.current_thread() is threading.main_thread()
            self._popen = subprocess.Popen(
                list(self.argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=dict(self.env) if self.env is not None else None,
                cwd=self.cwd,
                start_new_session=True,
                preexec_fn=_die_with_parent if main and sys.platform == "linux" else None,
            )
        _LIVE.add(self)
        if self.restart_on_exit:
            threading.Thread(target=self._supervise, args=(self._popen,), daemon=True,
                             name=f"supervise-{self.name}").start()

    def _supervise(self, popen: subprocess.Popen[bytes]) -> None:
        code = popen.wait()
        time.sleep(RESTART_DELAY)
        with self._lock:
            if self._popen is not popen:  # stopped, killed or started again on purpose
                return
            self.restarts += 1
            with self.log_path.open("ab") as log:
                log.write(f"# exited with {code} unasked: started again ({self.restarts})\n"
                          .encode())
            self.start()

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen else None

    def running(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    def exit_code(self) -> int | None:
        return self._popen.poll() if self._popen else None

    def stop(self, grace: float = 10.0) -> None:
        with self._lock:
            popen, self._popen = self._popen, None
        _LIVE.discard(self)
        if popen is None:
            return
        pgid = popen.pid  # == the group id: start_new_session made the child its leader
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        try:
            popen.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
            popen.wait(timeout=10)
        # Children that outlived the leader still carry its group id.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)

    def kill(self) -> None:
        """SIGKILL to the whole group at once: nothing in it gets to clean up, as when a node
        dies (stop() sends SIGTERM first, which children may act on)."""
        with self._lock:
            popen, self._popen = self._popen, None
        _LIVE.discard(self)
        if popen is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(popen.pid, signal.SIGKILL)
        popen.wait(timeout=10)

    def children(self) -> list[int]:
        """Pids of the processes this one started (Linux /proc)."""
        if self._popen is None:
            return []
        path = Path(f"/proc/{self._popen.pid}/task/{self._popen.pid}/children")
        try:
            return [int(pid) for pid in path.read_text().split()]
        except OSError:
            return []

    def tail(self, lines: int = 40) -> str:
        return tail(self.log_path, lines)


def wait_until(
    check: Callable[[], bool],
    *,
    timeout: float,
    what: str,
    process: ManagedProcess | None = None,
    interval: float = 0.25,
) -> None:
    """Polls check() until true; fails early, with the log tail, if `process` died meanwhile."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        if process is not None and not process.running():
            raise RuntimeError(
                f"{process.name} exited (code {process.exit_code()}) while waiting for {what}; "
                f"last lines of {process.log_path}:\n{process.tail()}"
            )
        try:
            if check():
                return
        except Exception as e:  # the thing waited on is not up yet
            last_error = e
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_error!r})" if last_error else ""
            logs = f"\nlast lines of {process.log_path}:\n{process.tail()}" if process else ""
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}{detail}{logs}")
        time.sleep(interval)


def http_ok(url: str, context: ssl.SSLContext | None = None, expect: bytes | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5, context=context) as resp:
            body: bytes = resp.read()
            return resp.status == 200 and (expect is None or expect in body)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False
