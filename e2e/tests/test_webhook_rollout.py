"""Webhook mode under a rolling restart: no pod creation fails, no TaskRun fails.

Two replicas sit behind a local Service (e2e/harness/service.py: new connections go to ready
replicas, as kube-proxy sends them). While pods are created at a steady 50 a second, each
replica is replaced in turn as a Deployment's rolling update does (the new one ready first,
then SIGTERM to the old one, which drains), and the leader's reconciler is killed outright.
Real PipelineRuns run meanwhile. Every pod creation must succeed and carry the term.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from controller.core import affinity
from e2e.harness import tekton_runs as tr
from e2e.harness.cluster import ClusterHandle
from e2e.harness.coscheduler import Coscheduler
from e2e.harness.runs import Runs
from e2e.harness.service import Backend, LocalService
from e2e.harness.tekton_runs import PodRecorder
from tests import factories

pytestmark = pytest.mark.e2e

ROLL_LABEL = "e2e.tekton-coscheduler.dev/rollout"
RATE = 50  # pods a second
SECONDS = 30
DRAIN = 3.0  # longer than the Service's propagation (its readiness period)


class Replicas:
    """tekton-coscheduler replicas in webhook mode, for the namespaces carrying ROLL_LABEL, with
    a Lease of their own (the session's operator serves the other namespaces)."""

    def __init__(self, cluster: ClusterHandle, session: Coscheduler) -> None:
        self.cluster, self.session = cluster, session
        self.service = LocalService(period=0.5)
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
                "COSCHEDULER_SHUTDOWN_DRAIN_SECONDS": str(DRAIN),
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
        replica.stop(grace=DRAIN + 15)
        self.service.remove(self.backend(replica))

    @staticmethod
    def backend(replica: Coscheduler) -> Backend:
        return Backend(replica.webhook_port, replica.health_port)


@pytest.fixture
def replicas(
    cluster: ClusterHandle, tekton: ClusterHandle, coscheduler: Coscheduler, nodes: list[str]
) -> Iterator[tuple[Replicas, list[Coscheduler]]]:
    pool = Replicas(cluster, coscheduler)
    pool.service.start()
    live = [pool.start_one(), pool.start_one()]
    assert pool.first is not None
    config = pool.first.register_webhook(
        name="tekton-coscheduler-rollout",
        label=ROLL_LABEL,
        url=f"https://127.0.0.1:{pool.service.port}/mutate-pods",
    )
    try:
        yield pool, live
    finally:
        pool.first.unregister_webhook(config)
        for replica in live:
            replica.stop(grace=DRAIN + 15)
        pool.service.stop()


def leader(cluster: ClusterHandle, replicas: list[Coscheduler]) -> Coscheduler:
    """The replica whose reconciler holds the Lease (a new one takes it within seconds of the
    old one handing it back)."""

    def leading() -> Coscheduler | None:
        return next((r for r in replicas if r.leads()), None)

    found: Coscheduler = cluster.wait_for(leading, timeout=30, what="a replica leads")
    return found


def test_rolling_both_replicas_and_killing_the_leader_fails_no_pod_creation(
    cluster: ClusterHandle, replicas: tuple[Replicas, list[Coscheduler]]
) -> None:
    pool, live = replicas
    ns = cluster.create_namespace(f"roll-{uuid.uuid4().hex[:6]}", labels={ROLL_LABEL: "true"})
    created: list[str] = []
    failures: list[str] = []
    stop = threading.Event()
    local = threading.local()

    def create_one(i: int) -> None:
        if not hasattr(local, "api"):
            local.api = cluster.api_client()
        pod = factories.taskrun_pod(run=f"load-{i % 20}", task=f"t{i}", namespace=ns)
        pod["metadata"]["name"] = f"load-{i}"
        # Nothing schedules these: they cost the API server, not the scheduler or kwok.
        pod["spec"]["schedulerName"] = "e2e-nobody"
        try:
            made = client.CoreV1Api(local.api).create_namespaced_pod(ns, pod)
        except ApiException as e:
            failures.append(f"{e.status} {e.reason}: {(e.body or '')[:300]}")
            return
        if affinity.balloon_terms(local.api.sanitize_for_serialization(made)["spec"]):
            created.append(made.metadata.name)
        else:
            failures.append(f"{made.metadata.name} created without the term")

    def load() -> None:
        with ThreadPoolExecutor(max_workers=12) as workers:
            started, i = time.monotonic(), 0
            while not stop.is_set() and time.monotonic() - started < SECONDS:
                due = started + i / RATE
                time.sleep(max(0.0, due - time.monotonic()))
                workers.submit(create_one, i)
                i += 1

    with PodRecorder(cluster, ns) as recorder:
        runs = Runs(cluster, ns, recorder)
        loader = threading.Thread(target=load)
        loader.start()
        pipeline_runs = [
            runs.start(tr.pipelinerun(tr.unique("roll"), [tr.task("first"),
                                                          tr.task("second", after=["first"])],
                                      {tr.SHARED: {"emptyDir": {}}},
                                      annotations={tr.RUN_SECONDS: "4"}))
            for _ in range(3)
        ]
        try:
            time.sleep(2)
            for old in list(live):  # a rolling update: surge one, then retire one
                live.append(pool.start_one())
                pool.retire(old)
                live.remove(old)
            killed = leader(cluster, live).kill_reconciler()
            assert killed
        finally:
            loader.join(SECONDS + 30)
            stop.set()
        outcomes = [tr.outcome(runs.done(r, timeout=180)) for r in pipeline_runs]
    print(f"pods created {len(created)}, failed {len(failures)}, service connections "
          f"{pool.service.connections}, refused {pool.service.refused}")
    assert failures == []
    assert len(created) >= 1000
    assert pool.service.refused == 0
    assert outcomes == [("True", "Succeeded")] * 3
