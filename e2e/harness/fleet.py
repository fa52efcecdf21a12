"""The operator's replicas as a Deployment runs them: the one the chart installed and standbys
with its settings, told apart by their Lease identity; the leader can be killed and replaced."""

from __future__ import annotations

import time
from pathlib import Path

from kubernetes import client

from e2e.harness import leaders
from e2e.harness.cluster import LocalCluster, present
from e2e.harness.coscheduler import Coscheduler


class Fleet:
    """The operator's replicas: the one installed, and standbys with its settings."""

    def __init__(self, cluster: LocalCluster, first: Coscheduler, standbys: int = 2,
                 name: str = "standby") -> None:
        self.cluster = cluster
        self.replicas = [first] + [
            Coscheduler(cluster, env_overrides=first.env_overrides, name=f"{name}-{i}",
                        kubeconfig=first.kubeconfig, source=first.source)
            for i in range(standbys)
        ]
        self.killed: dict[Path, float] = {}  # a replica's log -> when it was killed

    def start(self) -> None:
        for replica in self.replicas:
            if replica.process is None:
                replica.start()

    def leader(self) -> Coscheduler | None:
        """The live replica whose reconciler holds the Lease now (by the Lease's identity, as
        a restarted replica keeps its name but not its identity)."""
        holder = self.holder()
        for replica in self.replicas:
            if holder and replica.process and any(
                x.event == leaders.LEADING and x.who == holder
                for x in leaders.read(replica.process.log_path)
            ):
                return replica
        return None

    def holder(self) -> str | None:
        env = self.replicas[0].env()
        try:
            with self.cluster.api_client() as api:
                lease = client.CoordinationV1Api(api).read_namespaced_lease(
                    env.get("COSCHEDULER_LEASE_NAME", "tekton-coscheduler"),
                    env.get("POD_NAMESPACE", "default"),
                )
        except Exception:  # the API server may be the fault of the moment
            return None
        return str(present(lease.spec).holder_identity or "") or None

    def kill_leader(self) -> str | None:
        replica = self.leader()
        if replica is None or replica.process is None:
            return None
        self.killed[replica.process.log_path] = time.time()
        replica.kill()
        replica.start()  # the Deployment's new pod
        return replica.name

    def logs(self) -> list[tuple[list[leaders.Line], float | None]]:
        """Every replica process's leadership lines, the killed ones' included."""
        paths = {p for r in self.replicas
                 for p in self.cluster.logs_dir.glob(f"{r.name}-*.log")}
        return [(leaders.read(p), self.killed.get(p)) for p in sorted(paths)]

    def stop_standbys(self) -> None:
        """Standbys hand the Lease back as they stop; the first replica runs on."""
        first, *standbys = self.replicas
        if first.process is None:
            first.start()
        for replica in standbys:
            replica.stop()
