"""Chaos while runs run, and what no run may suffer from it.

While PipelineRuns run, `Chaos` kills the leading replica every `leader_every` seconds (SIGKILL
to the whole replica, then a new one starts, as a Deployment re-creates a lost pod), restarts the
kube-apiserver once and the kube-controller-manager once, and cordons a node that anchors runs,
then uncordons it. `Census` samples the balloons meanwhile. `outcome()` then counts what must be
zero: misplaced pods, runs failed or stuck, orphan and duplicate balloons, two leaders acting at
once, and says the longest time without a leader.

The replicas (e2e/harness/fleet.py) are the operator as the chart installs it (its admission
mode: policy where the API server serves it, so no process of ours is in the pod-creation path;
the API server restart is that mode's admission fault) plus standbys with the same settings.
Used by `make bench-chaos` (bench/chaos.py) and its short version in CI (e2e/tests/test_chaos.py).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, cast

from kubernetes import client

from controller.core.basics import names
from e2e.harness import faults, leaders
from e2e.harness import tekton_runs as tr
from e2e.harness.cluster import LocalCluster, present
from e2e.harness.fleet import Fleet
from e2e.harness.periodic import Periodic
from e2e.harness.tekton_runs import PodRecorder


@dataclass(frozen=True)
class Plan:
    """When each fault comes, in seconds from the start of the chaos."""

    seconds: float
    leader_every: float = 20.0
    apiserver_at: float | None = None
    controller_manager_at: float | None = None
    cordon_at: float | None = None
    uncordon_at: float | None = None

    @classmethod
    def over(cls, seconds: float, leader_every: float = 20.0) -> Plan:
        """Every fault once within `seconds`, spread so that each meets runs in flight."""
        return cls(seconds, leader_every, apiserver_at=0.35 * seconds,
                   controller_manager_at=0.6 * seconds, cordon_at=0.2 * seconds,
                   uncordon_at=0.75 * seconds)


@dataclass(eq=False)  # a Thread: hashed by identity
class Chaos(threading.Thread):
    cluster: LocalCluster
    fleet: Fleet
    plan: Plan
    namespace: str  # the runs'; the node anchoring most of them is the one cordoned
    events: list[tuple[float, str]] = field(default_factory=list)  # (time, what)
    api_down: list[tuple[float, float]] = field(default_factory=list)
    error: BaseException | None = None
    started: float = 0.0
    ended: float = 0.0
    node: str | None = None

    def __post_init__(self) -> None:
        super().__init__(daemon=True, name="chaos")

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # reported by outcome(): a chaos that stopped is no pass
            self.error = exc

    def _run(self) -> None:
        t0 = self.started = time.time()
        once = {
            "restart kube-apiserver": self.plan.apiserver_at,
            "restart kube-controller-manager": self.plan.controller_manager_at,
            "cordon": self.plan.cordon_at,
            "uncordon": self.plan.uncordon_at,
        }
        next_kill = self.plan.leader_every
        while (now := time.time() - t0) < self.plan.seconds:
            for what, at in list(once.items()):
                if at is not None and now >= at:
                    del once[what]
                    self._do(what)
            if now >= next_kill:
                killed = self.fleet.kill_leader()
                self.events.append((time.time(), f"killed leader {killed}" if killed
                                    else "no leader to kill"))
                next_kill += self.plan.leader_every
            time.sleep(0.5)
        self.ended = time.time()

    def _do(self, what: str) -> None:
        started = time.time()
        if what.startswith("restart "):
            component = what.removeprefix("restart ")
            self.cluster.restart(component)
            if component == "kube-apiserver":
                self.api_down.append((started, time.time()))
        else:
            self.node = self.node or self.busiest_anchor()
            faults.cordon(self.cluster, self.node, on=what == "cordon")
            what = f"{what} {self.node}"
        self.events.append((started, f"{what} ({time.time() - started:.1f} s)"))

    def busiest_anchor(self) -> str:
        with self.cluster.api_client() as api:
            pods = client.CoreV1Api(api).list_namespaced_pod(
                self.namespace, label_selector=names.BALLOON_SELECTOR).items
        counts = Counter(node for p in pods if (node := present(p.spec).node_name))
        return counts.most_common(1)[0][0]


class Census(Periodic):
    """Samples the namespace's balloon StatefulSets every `period` seconds: live runs with more
    than one at once are duplicates."""

    def __init__(self, cluster: LocalCluster, namespace: str, period: float = 2.0) -> None:
        super().__init__(period, "census", cluster)
        self.namespace = namespace
        self.duplicated: set[str] = set()  # run uids
        self.series: list[tuple[float, int]] = []  # (time, balloons)
        self.apps = client.AppsV1Api(self.api)

    def tick(self) -> None:
        items = self.apps.list_namespaced_stateful_set(
            self.namespace, label_selector=names.BALLOON_SELECTOR).items
        per_run = Counter((present(s.metadata).labels or {}).get(names.LABEL_RUN_UID)
                          for s in items if not present(s.metadata).deletion_timestamp)
        self.duplicated |= {uid for uid, n in per_run.items() if uid and n > 1}
        self.series.append((time.time(), len(items)))


@dataclass
class Outcome:
    runs: int
    succeeded: int = 0
    failed: list[str] = field(default_factory=list)  # "name: reason"
    # Failed by Tekton itself: a TaskRun it failed because the API server was down when it
    # built the pod (no request of it reached admission). Reported, not counted against us.
    failed_by_outage: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)
    misplaced: int = 0
    orphans: int = 0
    duplicates: int = 0
    overlapping_leaders: list[tuple[str, str]] = field(default_factory=list)
    unheld_writes: int = 0
    writes: int = 0
    leader_changes: int = 0
    max_leaderless: float = 0.0  # seconds, not counting the API server's own restart
    chaos_error: str = ""

    def zero(self) -> bool:
        return not (self.failed or self.stuck or self.misplaced or self.orphans
                    or self.duplicates or self.overlapping_leaders or self.unheld_writes
                    or self.chaos_error)


def outcome(
    cluster: LocalCluster, namespace: str, chaos: Chaos, census: Census,
    recorder: PodRecorder, created: dict[str, str], finished: dict[str, dict[str, Any]],
) -> Outcome:
    """What the runs (name -> uid) suffered, once they finished or the wait gave up."""
    result = Outcome(len(created), duplicates=len(census.duplicated),
                     chaos_error=repr(chaos.error) if chaos.error else "")
    for name, uid in created.items():
        run = finished.get(name)
        state = tr.outcome(run) if run else None
        if state == ("True", "Succeeded"):
            result.succeeded += 1
        elif state is None:
            result.stuck.append(name)
        else:
            why = _failed_tasks(cluster, namespace, uid)
            by_outage = failed_by_outage(why, cluster.server)
            (result.failed_by_outage if by_outage else result.failed).append(
                f"{name}: {'; '.join(why) or state[1]}")
        anchors = {b.node for b in recorder.balloons(uid) if b.node}
        result.misplaced += sum(1 for p in recorder.pods(uid) if p.node and p.node not in anchors)
    with cluster.api_client() as api:
        result.orphans = len(client.AppsV1Api(api).list_namespaced_stateful_set(
            namespace, label_selector=names.BALLOON_SELECTOR).items)
    logs = chaos.fleet.logs()
    lines = [x for log_lines, _ in logs for x in log_lines]
    result.overlapping_leaders = leaders.overlapping_leaders(lines)
    result.unheld_writes = leaders.unheld_writes(lines)
    result.writes = sum(1 for x in lines if x.event == leaders.WRITE)
    result.leader_changes = sum(1 for x in lines if x.event == leaders.LEADING)
    if chaos.started and chaos.ended:
        result.max_leaderless = leaders.longest_gap(
            leaders.leading_spans(logs), chaos.started, chaos.ended, excused=chaos.api_down)
    return result


def failed_by_outage(said: list[str], server: str) -> bool:
    """Did Tekton fail every one of these TaskRuns because it could not reach the API server
    (`server`) itself? Its words name the address it dialled."""
    refused = f"dial tcp {server.removeprefix('https://')}: connect: connection refused"
    return bool(said) and all(refused in each for each in said)


def _failed_tasks(cluster: LocalCluster, namespace: str, uid: str) -> list[str]:
    """What Tekton said of each failed TaskRun of a run."""
    with cluster.api_client() as api:
        runs = tr.task_runs(client.CustomObjectsApi(api), namespace, uid)
    return [f"{t['metadata']['name']}: {tr.succeeded_condition(t).get('message', '')}"
            for t in runs if (tr.outcome(t) or ("",))[0] == "False"]


def _create(custom: client.CustomObjectsApi, namespace: str, body: dict[str, Any]) -> str:
    """Creates a run, retrying while the API server restarts; returns its uid."""
    deadline = time.monotonic() + 120
    while True:
        try:
            return str(tr.create_run(custom, namespace, body)["metadata"]["uid"])
        except client.ApiException as exc:
            if exc.status == 409:  # made by an attempt whose answer was lost
                return str(tr.get_run(custom, namespace, body["metadata"]["name"])
                           ["metadata"]["uid"])
            if time.monotonic() > deadline:
                raise
        except Exception:  # connection refused: the API server is restarting
            if time.monotonic() > deadline:
                raise
        time.sleep(1)


def drive(
    cluster: LocalCluster, fleet: Fleet, namespace: str, bodies: list[dict[str, Any]],
    plan: Plan, timeout: float, settle: float = 60.0,
) -> tuple[Outcome, Chaos, Census]:
    """Creates the runs spread over the first 80 % of the chaos, waits for their end (or
    `timeout` after the chaos), lets the operator tidy up for up to `settle` seconds, and says
    what the runs suffered."""
    with PodRecorder(cluster, namespace) as recorder, cluster.api_client() as api:
        custom = client.CustomObjectsApi(api)
        census, chaos = Census(cluster, namespace), Chaos(cluster, fleet, plan, namespace)
        census.start()
        chaos.start()
        created: dict[str, str] = {}
        spacing, t0 = plan.seconds * 0.8 / max(1, len(bodies)), time.monotonic()
        for i, body in enumerate(bodies):
            time.sleep(max(0.0, t0 + i * spacing - time.monotonic()))
            created[body["metadata"]["name"]] = _create(custom, namespace, body)
        chaos.join()
        finished: dict[str, dict[str, Any]] = {}
        deadline = time.monotonic() + timeout
        while len(finished) < len(created) and time.monotonic() < deadline:
            try:
                listed = cast(dict[str, Any], custom.list_namespaced_custom_object(
                    *tr.TEKTON, namespace, "pipelineruns"))
            except Exception:
                listed = {"items": []}
            finished.update({r["metadata"]["name"]: r for r in listed["items"] if tr.outcome(r)})
            time.sleep(3)
        census.stop()
        apps, deadline = client.AppsV1Api(api), time.monotonic() + settle
        while time.monotonic() < deadline and apps.list_namespaced_stateful_set(
                namespace, label_selector=names.BALLOON_SELECTOR).items:
            time.sleep(2)
        said = outcome(cluster, namespace, chaos, census, recorder, created, finished)
    return said, chaos, census
