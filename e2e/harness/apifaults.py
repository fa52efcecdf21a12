"""Faults between the operator and the API server, for e2e/tests/test_apifaults.py: a replica
paused and woken, the Lease's renewal forbidden, API Priority and Fairness rejecting the
operator's calls, the API server restarted; and what the replicas' own log lines say they did
meanwhile (e2e/harness/leaders.py reads them).
"""

from __future__ import annotations

import contextlib
import os
import signal
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from kubernetes import client

from controller.core.basics import names
from e2e.harness import chart, leaders
from e2e.harness.cluster import ClusterHandle, LocalCluster, as_dict, name_of, present
from e2e.harness.coscheduler import Coscheduler
from e2e.harness.figures import percentile
from e2e.harness.periodic import Periodic
from e2e.harness.scenario import Scenario


@contextlib.contextmanager
def running(replica: Coscheduler, env: Mapping[str, str]) -> Iterator[Coscheduler]:
    """The replica with `env` over its settings meanwhile, then as it was (each start takes the
    Lease at once: the process stopped hands it back)."""
    own = dict(replica.env_overrides)

    def restart(settings: Mapping[str, str]) -> None:
        replica.stop()
        replica.env_overrides = dict(settings)
        replica.start()
        replica.wait_effective()

    restart({**own, **env})
    try:
        yield replica
    finally:
        restart(own)


# -- a replica's processes --------------------------------------------------------------------


def members(replica: Coscheduler) -> list[int]:
    """The replica's server and its reconciler child (which leads a process group of its own,
    so a signal to the server's group would not reach it)."""
    assert replica.process is not None and replica.process.pid is not None
    return [replica.process.pid, *replica.process.children()]


def pause(replica: Coscheduler) -> list[int]:
    """SIGSTOP to the whole replica, as a frozen VM or a stopped container: nothing of it runs,
    its clocks do. Returns the pids to resume."""
    pids = members(replica)
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    return pids


def resume(pids: Iterable[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


# -- what the replicas said ---------------------------------------------------------------------


def logs(replica: Coscheduler) -> list[Path]:
    """Every process the replica has run logs to a file of its own."""
    return sorted(replica.cluster.logs_dir.glob(f"{replica.name}-*.log"))


def lines_of(replica: Coscheduler) -> list[leaders.Line]:
    return leaders.of_logs(logs(replica))


def log_events(replica: Coscheduler, events: Iterable[str], **fields: Any
               ) -> list[tuple[float, dict[str, Any]]]:
    """(time, line) of the replica's JSON log lines that are one of `events` with these fields,
    oldest first."""
    wanted = set(events)
    found = [(leaders.stamp(entry), entry) for path in logs(replica)
             for entry in leaders.entries(path)
             if entry.get("event") in wanted
             and all(entry.get(k) == v for k, v in fields.items())]
    return sorted(found, key=lambda x: x[0])


def relisted(replica: Coscheduler, watch: str, since: float) -> float | None:
    """When the replica's `watch` first had to begin again from the start after `since` (the
    new API server's watch cache too new for its resourceVersion: 410 Gone, in the stream or
    as the answer), by its log lines; None while it has not."""
    lines = [*log_events(replica, ["watch restarts", "watch listed again"], watch=watch),
             *log_events(replica, ["watch failed"], watch=watch, status=410)]
    return min((t for t, _ in lines if t > since), default=None)


# -- the API server ------------------------------------------------------------------------------

# Seconds a restarted kube-apiserver is given to stop before SIGKILL: it holds its watches open
# to the end of its grace (about 14 s away with the harness's 10 s, about 6 with this).
GRACE = 3.0


def restart_apiserver(cluster: LocalCluster) -> float:
    """Restarts the kube-apiserver; returns once it is ready again, with the seconds it was
    away."""
    return cluster.restart("kube-apiserver", grace=GRACE)


def refresh(cluster: LocalCluster) -> None:
    """The controller-manager and the scheduler started again, current, after restarts of the
    API server. Seen after them: the StatefulSet controller made no pod for a minute or two
    (its informers behind its own writes, "read version ... is not as new as written version",
    and each StatefulSet requeued with a backoff that doubles), once made a deleted balloon's
    pod again, and the scheduler said its cache was corrupted; every later scenario that needed
    a pod failed. They are the harness's, not under test here; a cluster's static pods would be
    restarted by their liveness probes. kwok too, as a kubelet: in a cold CI run a pod on a node
    added after the module's restarts was bound but not run within a minute (a watch of kwok's
    left stale by the restarts is the likely cause, not traced)."""
    for component in ("kube-controller-manager", "kube-scheduler", "kwok"):
        cluster.restart(component)


def settle(cluster: LocalCluster, nodes: Mapping[str, str], timeout: float = 120) -> None:
    """Until the rest of the control plane is current again after restarts of the API server:
    the controller-manager's and the scheduler's own watches back off too (client-go's, up to
    30 s), and a balloon needs both. A StatefulSet's pod, bound to one of `nodes` and running,
    says they are."""
    name = f"settle-{uuid.uuid4().hex[:6]}"
    body: Any = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
                 "spec": {"selector": {"matchLabels": {"settle": name}}, "replicas": 1,
                          "serviceName": name, "template": {
                              "metadata": {"labels": {"settle": name}},
                              "spec": {"nodeSelector": dict(nodes), "containers": [
                                  {"name": "pause", "image": "registry.k8s.io/pause:3.10"}]}}}}
    with cluster.api_client() as api:
        apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
        apps.create_namespaced_stateful_set("default", body)
        try:
            cluster.wait_for(
                lambda: present(core.read_namespaced_pod(f"{name}-0", "default").status).phase
                == "Running", timeout=timeout, what="the control plane current")
        finally:
            apps.delete_namespaced_stateful_set(name, "default")


# -- the Lease ----------------------------------------------------------------------------------


class LeaseWatch(Periodic):
    """Reads the operator's Lease every `period` seconds: each holder's last renewal (its
    renewTime, the wall clock of the round that wrote it), from which its renew deadline is
    known (the round's start plus two thirds of the Lease: kube/leadership.py)."""

    def __init__(self, cluster: ClusterHandle, replica: Coscheduler, period: float = 0.2) -> None:
        super().__init__(period, "lease-watch", cluster)
        env = replica.env()
        self.lease = env.get("COSCHEDULER_LEASE_NAME", "tekton-coscheduler")
        self.namespace = env.get("POD_NAMESPACE", "default")
        self.renewed: dict[str, float] = {}  # holder -> its last renewTime, seconds since epoch
        self.holder: str | None = None  # as last read
        self.coordination = client.CoordinationV1Api(self.api)

    def tick(self) -> None:
        spec = present(self.coordination.read_namespaced_lease(self.lease, self.namespace).spec)
        self.holder = spec.holder_identity
        if spec.holder_identity and spec.renew_time:
            self.renewed[spec.holder_identity] = spec.renew_time.timestamp()


@contextlib.contextmanager
def lease_updates_forbidden(cluster: ClusterHandle) -> Iterator[str]:
    """The chart's leader-election Role without `update` on leases (a mistaken RBAC change, an
    admission policy gone wrong): the holder can no longer renew; `get` and `create` stay.
    Yields the Role's name; the rules are put back whatever happens."""
    with cluster.api_client() as api:
        rbac = client.RbacAuthorizationV1Api(api)
        role = next(r for r in rbac.list_namespaced_role(chart.NAMESPACE).items
                    if any("leases" in (rule.resources or []) for rule in r.rules or []))
        rules = [as_dict(rule) for rule in present(role.rules)]
        narrowed = [{**rule, "verbs": [v for v in rule["verbs"] if v != "update"]}
                    if "leases" in rule.get("resources", []) else rule for rule in rules]
        rbac.patch_namespaced_role(name_of(role), chart.NAMESPACE, {"rules": narrowed})
        try:
            yield name_of(role)
        finally:
            rbac.patch_namespaced_role(name_of(role), chart.NAMESPACE, {"rules": rules})


# -- runs ------------------------------------------------------------------------------------------


class Space(Scenario):
    """An opted-in namespace of hand-made runs (Tekton's objects without its controller: what
    the operator reads is the same), each held to some nodes by its pod template."""

    def __init__(self, cluster: ClusterHandle, nodes: Mapping[str, str]) -> None:
        ns = cluster.create_namespace(f"af-{uuid.uuid4().hex[:6]}",
                                      labels={names.NAMESPACE_LABEL: "true"})
        super().__init__(cluster, ns)
        self.nodes = dict(nodes)

    def start(self, name: str, claim: str = "", nodes: Mapping[str, str] | None = None
              ) -> dict[str, Any]:
        """A run on `claim` (else an emptyDir: no volume decides where it goes)."""
        volume = {"persistentVolumeClaim": {"claimName": claim}} if claim else {"emptyDir": {}}
        return self.run(name=name, workspaces=[{"name": "w", **volume}],
                        pod_template={"nodeSelector": dict(nodes or self.nodes)})

    def anchored(self) -> set[str]:
        """Uids of the runs whose balloon pod is bound."""
        pods = self.core.list_namespaced_pod(self.ns, label_selector=names.BALLOON_SELECTOR).items
        return {present(present(p.metadata).labels)[names.LABEL_RUN_UID]
                for p in pods if present(p.spec).node_name}

    def warnings(self) -> list[str]:
        """Every Warning said on a run of the namespace: `run: reason: message`."""
        return [f"{e.involved_object.name}: {e.reason}: {e.message}"
                for e in self.core.list_namespaced_event(self.ns).items
                if e.type == "Warning" and e.involved_object.kind == "PipelineRun"]

    def delete(self) -> None:
        """The namespace goes with its runs: a few hundred live ones would keep the operator
        reading them for the rest of the session."""
        self.core.delete_namespace(self.ns)
        self.close()


class Stream(Periodic):
    """A run started every `every` seconds until stopped: work that keeps a leader writing."""

    def __init__(self, space: Space, prefix: str, every: float = 0.25) -> None:
        super().__init__(every, f"stream-{prefix}")
        self.space, self.prefix = space, prefix
        self.uids: list[str] = []

    def tick(self) -> None:
        run = self.space.start(f"{self.prefix}-{len(self.uids)}")
        self.uids.append(run["metadata"]["uid"])


# -- figures ---------------------------------------------------------------------------------------


def spread(values: Sequence[float]) -> str:
    return (f"p50 {percentile(values, 50):.1f} s, p95 {percentile(values, 95):.1f} s, "
            f"max {max(values, default=0):.1f} s (n={len(values)})")


def timestamp(at: float) -> str:
    return datetime.fromtimestamp(at).strftime("%H:%M:%S.%f")[:-3]
