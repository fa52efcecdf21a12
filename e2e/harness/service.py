"""A Service in front of replicas running on the host, made as kube-proxy's iptables mode makes
one: in the kernel, with no process in the path of a connection.

The local control plane has no kube-proxy, and its API server calls webhooks by URL. To roll
replicas as a Deployment would, the webhook configuration points at 127.0.0.1:`port`, which no
process listens on: a nat OUTPUT rule sends each new connection to that port to a chain of the
harness's own, which DNATs it to one of the ready replicas, chosen at random (`-m statistic`,
as kube-proxy spreads a Service's endpoints), or, with none ready, to a closed port (refused,
as kube-proxy's REJECT). Readiness is polled every `period` seconds (the endpoints'
propagation delay); a replica dropped from the chain keeps the connections it has (conntrack),
as with iptables, and every byte and FIN travels between the API server and the replica
directly. A replica leaves the endpoints as a kubelet's readiness probe takes it out: after
`failures` probes in a row that fail or take longer than a second, not at its first slow
answer (two replicas both busy for a moment would otherwise leave the Service with none).

An earlier version was a proxy in the test process, forwarding bytes between two sockets. It
made the test flaky, not the product: when a retiring replica closed an idle kept-alive
connection, the proxy passed the FIN on to the API server only once its event loop ran
again, and a request the API server wrote on that connection meanwhile was swallowed: the API
server read EOF where iptables would have given it the FIN before it picked the connection.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from e2e.harness.cluster.processes import free_port


@dataclass(frozen=True)
class Backend:
    port: int
    health_port: int


def unavailable() -> str | None:
    """Why this host cannot make such a Service; None when it can."""
    if os.geteuid() != 0:
        return "a Service as kube-proxy makes one needs root (iptables)"
    for tool in ("iptables", "iptables-save", "iptables-restore"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (e2e/build.sh debian)"
    return None


class LocalService:
    """Three chains of the harness's own in the nat table: ENTRY (from OUTPUT, for the
    Service's port; its one rule counts connections, as the nat table sees only a connection's
    first packet), EP (rewritten whole as replicas become ready or not) and NONE (no replica
    ready: to a closed port; its rule counts the refused)."""

    def __init__(self, period: float = 1.0, failures: int = 2) -> None:
        self.port = free_port()
        self.period = period
        self.failures = failures
        prefix = f"TCS-E2E-SVC-{self.port}"
        self.entry, self.endpoints, self.none = prefix, f"{prefix}-EP", f"{prefix}-NONE"
        self.backends: list[Backend] = []
        self.ready: list[Backend] = []
        self._jump = ["-p", "tcp", "-d", "127.0.0.1", "--dport", str(self.port), "-j",
                      self.entry]
        self._failed: dict[Backend, int] = {}  # probes failed in a row
        self._final: tuple[int, int] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    @property
    def connections(self) -> int:
        """New connections to the Service (refused ones included)."""
        return self._final[0] if self._final else self._counter(self.entry)

    @property
    def refused(self) -> int:
        """New connections that found no ready replica."""
        return self._final[1] if self._final else self._counter(self.none)

    def start(self) -> None:
        closed = free_port()
        _restore([f":{self.entry} - [0:0]", f":{self.endpoints} - [0:0]",
                  f":{self.none} - [0:0]",
                  f"-A {self.entry} -j {self.endpoints}",
                  f"-A {self.endpoints} -j {self.none}",
                  f"-A {self.none} -p tcp -j DNAT --to-destination 127.0.0.1:{closed}"])
        _iptables("iptables", "-w", "-t", "nat", "-I", "OUTPUT", "1", *self._jump)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._final = (self.connections, self.refused)  # the counters go with the chains
        _iptables("iptables", "-w", "-t", "nat", "-D", "OUTPUT", *self._jump, check=False)
        for chain in (self.entry, self.endpoints, self.none):
            _iptables("iptables", "-w", "-t", "nat", "-F", chain, check=False)
        for chain in (self.entry, self.endpoints, self.none):
            _iptables("iptables", "-w", "-t", "nat", "-X", chain, check=False)

    def add(self, backend: Backend) -> None:
        self.backends = [*self.backends, backend]

    def remove(self, backend: Backend) -> None:
        self.backends = [b for b in self.backends if b != backend]

    def _poll(self) -> None:
        while not self._stop.is_set():
            backends = self.backends
            with ThreadPoolExecutor(max(1, len(backends))) as probes:
                answers = list(probes.map(_ready, backends))
            for backend, ok in zip(backends, answers, strict=True):
                # A failure threshold, as the kubelet's probes have; a new replica is out
                # until its first success.
                self._failed[backend] = 0 if ok else self._failed.get(
                    backend, self.failures) + 1
            ready = [b for b in backends if self._failed[b] < self.failures]
            if ready != self.ready:
                self._write(ready)
                self.ready = ready
            self._stop.wait(self.period)

    def _write(self, ready: list[Backend]) -> None:
        """EP rewritten at once (iptables-restore is atomic for a table): each ready replica
        with an equal chance, as kube-proxy writes a Service's endpoints."""
        rules = [f":{self.endpoints} - [0:0]"]
        for i, backend in enumerate(ready):
            left = len(ready) - i
            chance = (f"-m statistic --mode random --probability {1 / left:.5f} "
                      if left > 1 else "")
            rules.append(f"-A {self.endpoints} -p tcp {chance}-j DNAT --to-destination "
                         f"127.0.0.1:{backend.port}")
        if not ready:
            rules.append(f"-A {self.endpoints} -j {self.none}")
        _restore(rules)

    def _counter(self, chain: str) -> int:
        listed = _iptables("iptables", "-w", "-t", "nat", "-L", chain, "-v", "-x", "-n")
        rows = listed.splitlines()[2:]  # a heading, then the column names
        return int(rows[0].split()[0]) if rows else 0


def _iptables(*argv: str, stdin: str | None = None, check: bool = True) -> str:
    out = subprocess.run(list(argv), input=stdin, capture_output=True, text=True, timeout=30)
    if check and out.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {out.stderr.strip()}")
    return out.stdout


def _restore(rules: list[str]) -> None:
    """Rules of the nat table, in one transaction; chains declared here are emptied first."""
    _iptables("iptables-restore", "-w", "--noflush", stdin="\n".join(["*nat", *rules,
                                                                     "COMMIT", ""]))


def _ready(backend: Backend) -> bool:
    try:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{backend.health_port}/readyz", timeout=1
        ) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False
