"""Runs behind Tekton's resolvers, the adapter: their tasks' specs from the ResolutionRequests
Tekton makes for them (core/resolution.py, read from the leader's watch cache), and their
anchor held while Tekton resolves, so that the run's peak, not a guess, chooses the node.

A held run is reconciled again when a ResolutionRequest it owns changes, when Tekton
writes the run's status (its pipeline resolved, its TaskRuns made), and by the resync.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from controller.core import resolution, tekton
from controller.core.peak import Reader
from controller.core.times import parse_time
from controller.kube.caches import Caches

KIND = "resolutionrequests"
# Seconds from a run's creation after which its anchor no longer waits for resolution (and the
# tasks still unresolved count as the policy's unknownTask). Tekton fails a request after a
# minute (config-defaults default-maximum-resolution-timeout), and makes no TaskRun before
# every task is resolved, so a longer hold would not have kept any pod waiting either.
HOLD = 120.0


class Resolving:
    def __init__(
        self,
        caches: Caches | None,
        live: Callable[[str], Mapping[str, Any] | None],
        reconcile: Callable[[Mapping[str, Any]], object],
        named_pipeline: Callable[[tekton.PipelineRun], Mapping[str, Any] | None],
    ) -> None:
        self.caches = caches
        self.live = live
        self.reconcile = reconcile
        self.named_pipeline = named_pipeline
        self._held: set[str] = set()  # uids of runs whose anchor waits
        self._lock = threading.Lock()
        if caches is not None:
            caches.listen(KIND, self.on_request)

    def requests(self, run: tekton.PipelineRun) -> list[resolution.Request] | None:
        """The run's ResolutionRequests; None while the namespace's cache is not synced."""
        listed = self.caches.owned_by(KIND, run.uid) if self.caches is not None else None
        return None if listed is None else resolution.owned_by(listed, run.uid)

    def reader(self, run: tekton.PipelineRun, local: Reader) -> Reader:
        """Reads a remote `taskRef` from what Tekton resolved for the run, others by `local`."""
        requests: list[resolution.Request] | None = None

        def read(ref: Mapping[str, Any]) -> Mapping[str, Any] | None:
            nonlocal requests
            if not resolution.remote(ref):
                return local(ref)
            if requests is None:
                requests = self.requests(run) or []
            return resolution.resolved_spec(ref, requests)

        return read

    def _look(self, run: tekton.PipelineRun) -> tuple[bool, str | None]:
        """Whether what the run needs resolved is known (it has no remote parts, or the cache
        is synced), and what of it Tekton still resolves."""
        named = None if run.pipeline_spec else self.named_pipeline(run)
        if not resolution.has_remote(run, named):
            return True, None
        requests = self.requests(run)
        if requests is None:
            return False, None
        return True, resolution.pending(run, requests, named)

    def settled(self, run: tekton.PipelineRun) -> bool:
        """Nothing of the run is left to resolve (or nothing ever was)."""
        known, why = self._look(run)
        return known and why is None

    def pending(self, run: tekton.PipelineRun) -> str | None:
        """What Tekton still resolves for the run, while its anchor may wait for it."""
        why = self._look(run)[1]
        made = parse_time(run.created)
        young = made is None or (datetime.now(UTC) - made).total_seconds() < HOLD
        with self._lock:
            if why and young:
                self._held.add(run.uid)
                return why
            self._held.discard(run.uid)
        return None

    def on_request(self, request: Mapping[str, Any]) -> None:
        """A ResolutionRequest changed: the held run that owns it looks again (one lookup an
        event, however many runs are held)."""
        owners = (request.get("metadata") or {}).get("ownerReferences") or []
        for uid in {str(o.get("uid")) for o in owners if isinstance(o, Mapping)}:
            with self._lock:
                if uid not in self._held:
                    continue
            body = self.live(uid)
            if body is None:
                self.forget(uid)
            else:
                self.reconcile(body)

    def forget(self, run_uid: str) -> None:
        with self._lock:
            self._held.discard(run_uid)
