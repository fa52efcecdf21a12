"""Webhook mode under a rolling restart: no pod creation fails, no TaskRun fails.

Two replicas sit behind a Service made as kube-proxy makes one (e2e/harness/service.py: kernel
NAT to the ready replicas, each new connection to one at random, open ones left where they
are). While pods are created at a steady 50 a second, each replica is replaced in turn as a
Deployment's rolling update does (the new one ready first, then SIGTERM to the old one, which
drains), and the leader's reconciler is killed outright. Real PipelineRuns run meanwhile. Every
pod creation must succeed and carry the term: with the suite's short drain, and with the
chart's.
"""

from __future__ import annotations

import socket
import subprocess
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml

from e2e.harness import service
from e2e.harness import tekton_runs as tr
from e2e.harness.cluster import ClusterHandle
from e2e.harness.coscheduler import REPO, Coscheduler
from e2e.harness.load import PodLoad
from e2e.harness.runs import Runs
from e2e.harness.service import Backend, LocalService
from e2e.harness.tekton_runs import PodRecorder

pytestmark = pytest.mark.e2e

ROLL_LABEL = "e2e.tekton-coscheduler.dev/rollout"
RATE = 50  # pods a second
SUITE_DRAIN = 3.0  # longer than the Service takes to drop a replica that stopped being ready
CHART_DRAIN = float(yaml.safe_load((REPO / "charts/tekton-coscheduler/values.yaml").read_text())
                    ["config"]["shutdownDrainSeconds"])


class Replicas:
    """tekton-coscheduler replicas in webhook mode, for the namespaces carrying ROLL_LABEL, with
    a Lease of their own (the session's operator serves the other namespaces)."""

    def __init__(self, cluster: ClusterHandle, session: Coscheduler, drain: float) -> None:
        self.cluster, self.session, self.drain = cluster, session, drain
        self.service = LocalService(period=0.5, failures=3)
        self.first: Coscheduler | None = None
        self.count = 0

    def start_one(self) -> Coscheduler:
        self.count += 1
        replica = Coscheduler(
            self.cluster,
            name=f"roll-{self.count}",
            kubeconfig=self.session.kubeconfig,
            tls_files=(self.first.cert, self.first.key) if self.first else None,
            env_overrides={
                **self.session.env_overrides,
                "COSCHEDULER_ADMISSION_MODE": "webhook",
                "COSCHEDULER_NAMESPACE_LABEL": ROLL_LABEL,
                "COSCHEDULER_LEASE_NAME": "tekton-coscheduler-rollout",
                "COSCHEDULER_SHUTDOWN_DRAIN_SECONDS": str(self.drain),
            },
        )
        replica.start()
        self.first = self.first or replica
        self.service.add(self.backend(replica))
        # Wait until the Service sends connections to it (endpoints updated).
        self.cluster.wait_for(lambda: self.backend(replica) in self.service.ready, timeout=10,
                              what=f"{replica.name} ready behind the Service")
        return replica

    def retire(self, replica: Coscheduler) -> None:
        """SIGTERM, as the kubelet sends it: the replica drains, then exits."""
        replica.stop(grace=self.drain + 15)
        self.service.remove(self.backend(replica))

    @staticmethod
    def backend(replica: Coscheduler) -> Backend:
        return Backend(replica.webhook_port, replica.health_port)


@pytest.fixture(params=[SUITE_DRAIN, CHART_DRAIN], ids=["suite-drain", "chart-drain"])
def replicas(
    request: pytest.FixtureRequest, cluster: ClusterHandle, tekton: ClusterHandle,
    coscheduler: Coscheduler, nodes: list[str],
) -> Iterator[tuple[Replicas, list[Coscheduler]]]:
    why = service.unavailable()
    if why:
        pytest.skip(why)
    pool = Replicas(cluster, coscheduler, request.param)
    pool.service.start()
    live: list[Coscheduler] = []
    config = None
    try:
        live += [pool.start_one(), pool.start_one()]
        assert pool.first is not None
        config = pool.first.register_webhook(
            name="tekton-coscheduler-rollout",
            label=ROLL_LABEL,
            url=f"https://127.0.0.1:{pool.service.port}/mutate-pods",
        )
        yield pool, live
    finally:
        try:
            if config is not None and pool.first is not None:
                pool.first.unregister_webhook(config)
            # Drained together, not one after another: the API server may still call the
            # webhook it has yet to see unregistered (Tekton's pods of the runs above), and a
            # killed replica would fail those calls.
            with ThreadPoolExecutor(max(1, len(live))) as stopping:
                list(stopping.map(lambda r: r.stop(grace=pool.drain + 15), live))
        finally:
            pool.service.stop()  # its rules go whatever happened above


def leader(cluster: ClusterHandle, replicas: list[Coscheduler]) -> Coscheduler:
    """The replica whose reconciler holds the Lease (a new one takes it within seconds of the
    old one handing it back)."""

    def leading() -> Coscheduler | None:
        # The Lease may still name a replica whose reconciler just lost it and exited (its server
        # starts a new one after a pause): that one has no reconciler to kill yet.
        return next((r for r in replicas
                     if r.leads() and r.process is not None and r.process.children()), None)

    found: Coscheduler = cluster.wait_for(leading, timeout=30, what="a replica leads")
    return found


def test_rolling_both_replicas_and_killing_the_leader_fails_no_pod_creation(
    cluster: ClusterHandle, replicas: tuple[Replicas, list[Coscheduler]]
) -> None:
    pool, live = replicas
    ns = cluster.create_namespace(f"roll-{uuid.uuid4().hex[:6]}", labels={ROLL_LABEL: "true"})
    with PodRecorder(cluster, ns) as recorder, PodLoad(cluster, ns, RATE) as load:
        runs = Runs(cluster, ns, recorder)
        pipeline_runs = [
            runs.start(tr.pipelinerun(tr.unique("roll"), [tr.task("first"),
                                                          tr.task("second", after=["first"])],
                                      {tr.SHARED: {"emptyDir": {}}},
                                      annotations={tr.RUN_SECONDS: "4"}))
            for _ in range(3)
        ]
        cluster.wait_for(lambda: len(load.created) >= RATE, timeout=30,
                         what="pods admitted before the rollout")
        for old in list(live):  # a rolling update: surge one, then retire one
            live.append(pool.start_one())
            pool.retire(old)
            live.remove(old)
        assert leader(cluster, live).kill_reconciler()
        before = len(load.created)
        cluster.wait_for(lambda: len(load.created) >= before + 5 * RATE, timeout=60,
                         what="pods admitted after the reconciler was killed")
        outcomes = [tr.outcome(runs.done(r, timeout=180)) for r in pipeline_runs]
    print(f"drain {pool.drain} s: pods created {len(load.created)}, failed "
          f"{len(load.failures)}, service connections {pool.service.connections}, refused "
          f"{pool.service.refused}")
    assert load.failures == []
    assert len(load.created) >= 1000
    assert pool.service.refused == 0
    assert outcomes == [("True", "Succeeded")] * 3


def test_the_service_refuses_when_no_replica_is_ready_and_leaves_no_rule_behind(
    cluster: ClusterHandle,
) -> None:
    """The harness itself: with no ready replica a new connection is refused (kube-proxy's
    REJECT) and counted; once stopped, its chains are gone."""
    why = service.unavailable()
    if why:
        pytest.skip(why)
    svc = LocalService(period=0.2, failures=1)
    svc.start()
    try:
        svc.add(Backend(1, 1))  # nothing answers its probe: never ready
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", svc.port), timeout=5).close()
        assert (svc.connections, svc.refused) == (1, 1)
    finally:
        svc.stop()
    listed = subprocess.run(["iptables", "-w", "-t", "nat", "-S"], capture_output=True,
                            text=True, check=True).stdout
    assert svc.entry not in listed
