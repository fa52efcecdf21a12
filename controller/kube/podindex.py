"""What the leader's pod watch has told it, by run: balloon pods and TaskRun pods.

A cache the pod events fill (no API calls): where each run's balloon is, the nodes it has been
anchored on, the run's pods with their nodes and phases, and the pods waiting for a node.
Every other part of the operator reads from here rather than asking the API server.

Kept by run, and filed by claim, by node and by waiter, so that no read visits every run. A run
is held from its first pod event to `forget` (its balloon deleted); the events of pods going
(deleting, deleted) of a run not held are not recorded: they came after it was forgotten (its
balloon pod's deletion, a pruner deleting the run) and would hold it again, for good. At a
restart that leaves out pods already on their way out, and nothing else.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from controller.core.admission import affinity
from controller.core.basics import names
from controller.core.basics.times import parse_time
from controller.core.model import assistant, pods, tekton
from controller.core.model import progress as run_progress
from controller.core.model.pods import BalloonPod, RunPod
from controller.core.placement.waiting import Waiting


@dataclass
class RunState:
    namespace: str = ""
    name: str = ""
    balloon: BalloonPod | None = None
    # Every node a balloon pod of the run was bound to: a pod bound to any of them was placed
    # beside its anchor of the time, never "misplaced".
    anchors: list[str] = field(default_factory=list)
    pods: dict[str, RunPod] = field(default_factory=dict)  # pod uid -> pod
    waiting: dict[str, Waiting] = field(default_factory=dict)  # pod uid -> since when
    rooms: dict[str, Mapping[str, Any]] = field(default_factory=dict)  # reservation pods by uid


class PodIndex:
    def __init__(self) -> None:
        self._runs: dict[str, RunState] = {}
        # (namespace, claim) -> runs whose live balloon mounts it: what a run's decision reads
        # of the others, whatever the number of runs
        self._mounting: dict[tuple[str, str], set[str]] = {}
        self._anchored: dict[str, set[str]] = {}  # node -> runs whose balloon pod is bound there
        self._waiters: set[str] = set()  # runs with a pod that waits for a node
        # When the newest balloon pod seen was made: the StatefulSet controller is at work
        self.newest_balloon_pod: datetime | None = None
        self._lock = threading.Lock()

    def _run(self, uid: str, meta: Mapping[str, Any], deleted: bool) -> RunState | None:
        """The run's state; None for a pod going of a run not held (see the module's note)."""
        if deleted or meta.get("deletionTimestamp"):
            return self._runs.get(uid)
        return self._runs.setdefault(uid, RunState())

    def _set_balloon(self, uid: str, state: RunState, balloon: BalloonPod | None) -> None:
        old = state.balloon
        for claim in old.claims if old else ():
            _unfile(self._mounting, (state.namespace, claim), uid)
        if old and old.node:
            _unfile(self._anchored, old.node, uid)
        state.balloon = balloon
        for claim in balloon.claims if balloon else ():
            self._mounting.setdefault((state.namespace, claim), set()).add(uid)
        if balloon and balloon.node:
            self._anchored.setdefault(balloon.node, set()).add(uid)

    def _wait(self, uid: str, state: RunState, pod_uid: str, waiting: Waiting | None) -> None:
        """Files the pod as waiting for a node (a Waiting), or as not waiting (None)."""
        if waiting is None:
            state.waiting.pop(pod_uid, None)
        else:
            state.waiting[pod_uid] = waiting
        if state.waiting:
            self._waiters.add(uid)
        else:
            self._waiters.discard(uid)

    def _note(self, uid: str, state: RunState, pod: Mapping[str, Any], **kind: Any) -> None:
        """Files the pod as waiting if the scheduler found no node for it (since it first
        said so), else as not waiting. `kind`: what it waits as (core/placement/waiting.py)."""
        meta = pod.get("metadata") or {}
        pod_uid = str(meta.get("uid") or "")
        waiting, message, since = pods.unschedulable(pod, datetime.now(UTC))
        old = state.waiting.get(pod_uid)
        self._wait(uid, state, pod_uid, Waiting(
            str(meta.get("name") or ""), old.since if old else since, message, **kind,
        ) if waiting and not (pod.get("spec") or {}).get("nodeName") else None)

    # -- fed by the pod watch ------------------------------------------------------------------

    def balloon_event(self, pod: Mapping[str, Any], deleted: bool) -> tuple[str, str | None]:
        """Records a balloon pod event; returns (run uid, node it was bound to before, if it
        was bound elsewhere or is gone)."""
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        labels = meta.get("labels") or {}
        uid = str(labels.get(names.LABEL_RUN_UID) or "")
        node = str(spec.get("nodeName") or "")
        with self._lock:
            made = parse_time(meta.get("creationTimestamp"))
            if made and (self.newest_balloon_pod is None or made > self.newest_balloon_pod):
                self.newest_balloon_pod = made
            state = self._run(uid, meta, deleted)
            if state is None:
                return uid, None
            state.namespace = str(meta.get("namespace") or state.namespace)
            state.name = str(labels.get(names.LABEL_RUN) or state.name)
            previous = state.balloon.node if state.balloon else None
            pod_uid = str(meta.get("uid") or "")
            if deleted:
                if state.balloon and state.balloon.uid == pod_uid:
                    self._set_balloon(uid, state, None)
                self._wait(uid, state, pod_uid, None)
                return uid, previous
            same = state.balloon if state.balloon and state.balloon.uid == pod_uid else None
            self._set_balloon(uid, state, pods.balloon_pod(
                pod, state.namespace, state.name, same.bound_at if same else None,
                datetime.now(UTC)))
            if node and node not in state.anchors:
                state.anchors.append(node)
            self._note(uid, state, pod, balloon=True)
            return uid, previous if previous and previous != node else None

    def task_pod_event(self, pod: Mapping[str, Any], deleted: bool) -> str | None:
        """Records a TaskRun pod event; returns its run's uid (None: not a pod of ours)."""
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        run = tekton.task_run_pod_run(meta.get("labels") or {})
        if run is None or not run.uid:
            return None
        if not affinity.balloon_terms(spec):
            self._pinned_elsewhere(run.uid, pod, deleted)
            return None
        pod_uid = str(meta.get("uid") or "")
        with self._lock:
            state = self._run(run.uid, meta, deleted)
            if state is None:
                return run.uid
            state.namespace = str(meta.get("namespace") or state.namespace)
            state.name = state.name or run.name
            if deleted:
                state.pods.pop(pod_uid, None)
                self._wait(run.uid, state, pod_uid, None)
                return run.uid
            state.pods[pod_uid] = pods.run_pod(pod)
            self._note(run.uid, state, pod, anchor=state.balloon.node if state.balloon else "")
            return run.uid

    def _pinned_elsewhere(self, run_uid: str, pod: Mapping[str, Any], deleted: bool) -> None:
        """A pod of a run we anchor that Tekton pinned to its own assistant (admission stood
        aside while it was on): not the run's pod for us, but a waiter to be said."""
        beside = assistant.assistant_required(pod.get("spec") or {})
        with self._lock:
            state = self._runs.get(run_uid)
            if state is None or not beside:
                return
            if deleted:
                self._wait(run_uid, state, str((pod.get("metadata") or {}).get("uid") or ""), None)
            else:
                self._note(run_uid, state, pod, assistant=beside)

    def room_event(self, pod: Mapping[str, Any], deleted: bool) -> str:
        """Records a reservation pod event; returns its run's uid."""
        meta = pod.get("metadata") or {}
        uid = str((meta.get("labels") or {}).get(names.LABEL_RUN_UID) or "")
        pod_uid = str(meta.get("uid") or "")
        with self._lock:
            state = self._run(uid, meta, deleted)
            if state is None:
                return uid
            state.namespace = str(meta.get("namespace") or state.namespace)
            if deleted or meta.get("deletionTimestamp"):
                state.rooms.pop(pod_uid, None)
            else:
                state.rooms[pod_uid] = pod
        return uid

    def rooms(self, run_uid: str) -> list[Mapping[str, Any]]:
        with self._lock:
            state = self._runs.get(run_uid)
            return list(state.rooms.values()) if state else []

    def progress(self, run_uid: str) -> tuple[frozenset[str], dict[str, int], bool]:
        """core/model/progress.py: tasks done, what the running pods hold, whether a pod waits."""
        return run_progress.progress(self.run_pods(run_uid))

    def task_runs(self, run_uid: str) -> list[str]:
        """The TaskRuns the run's pods the watch has shown belong to."""
        return sorted({pod.task_run for pod in self.run_pods(run_uid) if pod.task_run})

    def task_requests(self, run_uid: str) -> dict[str, dict[str, int]]:
        return run_progress.task_requests(self.run_pods(run_uid))

    def forget(self, run_uid: str) -> None:
        with self._lock:
            state = self._runs.pop(run_uid, None)
            if state is not None:
                self._set_balloon(run_uid, state, None)
            self._waiters.discard(run_uid)

    # -- read by the rest of the operator ------------------------------------------------------

    def anchor(self, run_uid: str) -> str | None:
        with self._lock:
            state = self._runs.get(run_uid)
            return state.balloon.node or None if state and state.balloon else None

    def anchored_ever(self, run_uid: str) -> list[str]:
        with self._lock:
            state = self._runs.get(run_uid)
            return list(state.anchors) if state else []

    def balloon(self, run_uid: str) -> BalloonPod | None:
        with self._lock:
            state = self._runs.get(run_uid)
            return state.balloon if state else None

    def balloon_waiting(self, run_uid: str) -> Waiting | None:
        """The run's balloon pod, if it waits for a node, with the scheduler's words."""
        with self._lock:
            state = self._runs.get(run_uid)
            found = [w for w in state.waiting.values() if w.balloon] if state else []
            return found[0] if found else None

    def run_pods(self, run_uid: str) -> list[RunPod]:
        with self._lock:
            state = self._runs.get(run_uid)
            return list(state.pods.values()) if state else []

    def mounted_claims(self, namespace: str, besides: str,
                       claims: Iterable[str]) -> dict[str, tuple[str, ...]]:
        """The claims mounted by the live balloon pods of the namespace that mount any of
        `claims`, by run, but `besides`."""
        with self._lock:
            users = {u for c in claims for u in self._mounting.get((namespace, c), ())}
            return {uid: balloon.claims for uid in users - {besides}
                    if (balloon := self._runs[uid].balloon) is not None}

    def anchored_on(self, node: str) -> list[str]:
        """Runs whose balloon pod is bound to the node."""
        with self._lock:
            return list(self._anchored.get(node, ()))

    def knows(self, run_uid: str) -> bool:
        return run_uid in self._runs

    def runs(self) -> dict[str, tuple[str, str]]:
        """Run uid -> (namespace, name), of every run the index knows."""
        with self._lock:
            return {uid: (s.namespace, s.name) for uid, s in self._runs.items()}

    def waiting_of(self, run_uid: str) -> list[tuple[str, str, Waiting]]:
        """(namespace, run name, waiting pod) for each pod of the run that waits for a node."""
        with self._lock:
            state = self._runs.get(run_uid)
            return [(state.namespace, state.name, w) for w in state.waiting.values()
                    ] if state is not None else []

    def waiting(self) -> list[tuple[str, str, str, Waiting]]:
        """(run uid, namespace, run name, waiting pod) for every pod that waits for a node."""
        with self._lock:
            states = [(uid, self._runs[uid]) for uid in self._waiters]
            return [(uid, s.namespace, s.name, w) for uid, s in states for w in s.waiting.values()]


def _unfile(files: dict[Any, set[str]], key: Any, uid: str) -> None:
    users = files.get(key, set())
    users.discard(uid)
    if not users:
        files.pop(key, None)
