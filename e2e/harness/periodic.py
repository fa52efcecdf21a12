"""A thread that does one thing every `period` seconds until stopped: the scenarios' samplers
and drivers (a Lease read, a run started, balloons counted), as a context manager."""

from __future__ import annotations

import threading
from typing import Self

from e2e.harness.cluster import ClusterHandle


class Periodic(threading.Thread):
    """`tick()` every `period` seconds from start() until stop() (or the `with` block's end).
    A tick that raises is the API server being the fault under test: the next tick tries
    again, and a sampler's gaps are its figures."""

    def __init__(self, period: float, name: str, cluster: ClusterHandle | None = None) -> None:
        super().__init__(daemon=True, name=name)
        self.period = period
        self.stopped = threading.Event()
        # A client of its own, closed once stopped, for the samplers that read the cluster.
        self.api = cluster.api_client() if cluster is not None else None

    def tick(self) -> None:
        raise NotImplementedError

    def run(self) -> None:
        while not self.stopped.wait(self.period):
            try:
                self.tick()
            except Exception:  # the next tick tries again
                continue

    def stop(self, timeout: float = 10) -> None:
        self.stopped.set()
        self.join(timeout)
        if self.api is not None:
            self.api.close()  # type: ignore[no-untyped-call]

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
