"""The live runs: runs of enabled namespaces that are not finished, by uid, as their last event
showed them, and when each was last reconciled to its end. What the resync goes over (finished
runs, and other namespaces', cost nothing), and what the parts that weigh other runs read (a
namespace's demand, the namespaces this installation anchored in).

Workers, the resync and watch threads read and write it at once: one lock, held for a dict's
step only, never across a call.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from controller.core.model import tekton


class LiveRuns:
    def __init__(self) -> None:
        self._bodies: dict[str, Mapping[str, Any]] = {}
        # Run uid -> when a reconcile of it last ran to its end (monotonic): a resync round
        # leaves alone the runs an event has reconciled since its previous round.
        self._reconciled: dict[str, float] = {}
        self._lock = threading.Lock()

    def __contains__(self, uid: object) -> bool:
        return uid in self._bodies

    def __iter__(self) -> Iterator[str]:
        with self._lock:
            return iter(list(self._bodies))

    def __len__(self) -> int:
        return len(self._bodies)

    def get(self, uid: str) -> Mapping[str, Any] | None:
        return self._bodies.get(uid)

    def claims_tekton_makes(self, uid: str) -> frozenset[str]:
        """The claims Tekton makes for the live run (a balloon waiting for one waits for it)."""
        body = self._bodies.get(uid)
        return tekton.PipelineRun.from_body(body).claims_tekton_makes() if body else frozenset()

    def runs(self) -> list[tekton.PipelineRun]:
        with self._lock:
            bodies = list(self._bodies.values())
        return [tekton.PipelineRun.from_body(b) for b in bodies]

    def by_uid(self) -> dict[str, tekton.PipelineRun]:
        return {run.uid: run for run in self.runs()}

    def holds(self, uid: str, body: Mapping[str, Any]) -> bool:
        """Whether this very body is the one held for the run (no newer event replaced it, and
        the run has not ended)."""
        return self._bodies.get(uid) is body

    def keep(self, uid: str, body: Mapping[str, Any]) -> None:
        with self._lock:
            self._bodies[uid] = body

    def refresh(self, uid: str, body: Mapping[str, Any]) -> bool:
        """The newer body kept for a run already live; False (nothing kept) for one that is
        not."""
        with self._lock:
            if uid not in self._bodies:
                return False
            self._bodies[uid] = body
            return True

    def drop(self, uid: str, only: Mapping[str, Any] | None = None) -> None:
        """The run is no longer live (`only`: if this body is still the one held)."""
        with self._lock:
            if only is None or self._bodies.get(uid) is only:
                self._bodies.pop(uid, None)
                self._reconciled.pop(uid, None)

    def reconciled(self, uid: str) -> bool:
        """A reconcile of the run ran to its end now; False for a run not live (not noted)."""
        with self._lock:
            if uid not in self._bodies:
                return False
            self._reconciled[uid] = time.monotonic()
            return True

    def not_reconciled_since(self, since: float, skips: Callable[[str], bool]
                             ) -> tuple[list[Mapping[str, Any]], int]:
        """The bodies of live runs not reconciled since `since` that `skips` does not leave
        alone, and how many live runs were left alone."""
        with self._lock:
            bodies = [b for uid, b in self._bodies.items()
                      if self._reconciled.get(uid, float("-inf")) < since and not skips(uid)]
            return bodies, len(self._bodies) - len(bodies)
