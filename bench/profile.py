"""Where the operator's CPU goes: py-spy samples its processes (the server and the reconciler
child that leads) while a benchmark runs; the top frames by own and by inclusive samples.

py-spy reads the processes from outside (ptrace: root, or CAP_SYS_PTRACE), so the operator
runs as it always does.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path


class Profile:
    """Samples pid and its children from start() to stop()."""

    def __init__(self, pid: int, out: Path, rate: int = 50) -> None:
        self.pid, self.out, self.rate = pid, out, rate
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self._proc = subprocess.Popen(
            [spy, "record", "--pid", str(self.pid), "--subprocesses", "--nonblocking",
             "--rate", str(self.rate), "--format", "raw", "--output", str(self.out)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.send_signal(2)  # py-spy writes its output on SIGINT
            self._proc.wait(60)


def top_frames(raw: Path, count: int = 12) -> tuple[int, list[tuple[str, float, float]]]:
    """(busy samples, [(frame, own share, inclusive share)]) from py-spy's collapsed stacks:
    samples waiting in the event loop's select or on a socket left out, and frames of the
    interpreter's plumbing (threads, the event loop, runpy) not ranked: what costs CPU, and in
    which code of ours, kopf's or a library's."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines() if raw.exists() else []:
        stack, _, n = line.rpartition(" ")
        frames = [f for f in stack.split(";") if f and not f.startswith("process ")]
        if not frames or not n.isdigit() or any(w in frames[-1] for w in WAITING):
            continue
        samples = int(n)
        total += samples
        own[_short(frames[-1])] += samples
        for frame in {_short(f) for f in frames if not any(p in f for p in PLUMBING)}:
            inclusive[frame] += samples
    top = [(frame, own[frame] / total, inclusive[frame] / total)
           for frame, _ in inclusive.most_common(count)] if total else []
    return total, top


def _short(frame: str) -> str:
    """'fn (pkg/module.py:123)' -> 'fn (pkg/module.py)'."""
    name, _, where = frame.partition(" (")
    return f"{name} ({where.split(':')[0]})" if where else name


WAITING = ("selectors.py", "SSLSocket.read", "recv_into", "readinto", "_worker (concurrent",
           "wait (threading.py")  # a thread waiting for work (a Condition) is not busy
PLUMBING = ("threading.py", "asyncio/", "concurrent/", "runpy", "__main__.py", "controller/cli.py")
