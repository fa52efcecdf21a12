"""What a test sees of a cluster, whatever runs it: API access and helpers for test fixtures."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from . import cert_manager, crds, karpenter, tekton
from .api import ClusterApi
from .processes import ManagedProcess, free_port, http_ok, tail, wait_until
from .versions import find_binary, pinned

T = TypeVar("T")

FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"
NODE_LEASE_SECONDS = 8
LOCAL_STORAGE_CLASS = "local-wffc"
STAGES_DIR = Path(__file__).resolve().parent / "stages"


class ClusterHandle(ClusterApi):
    """Base of every backend. Subclasses set kubeconfig and server in start().

    Local helper processes (kwok, the Tekton controller) work against any cluster, so they are
    started from here; stop() ends exactly those."""

    backend = "base"
    start_timeout = 90.0

    def __init__(self, logs_dir: Path) -> None:
        super().__init__()
        self.logs_dir = logs_dir
        self.server: str = ""
        self.ca_path: Path | None = None
        self.processes: list[ManagedProcess] = []
        self._node_counters: dict[str, Iterator[int]] = {}
        self._kwok_started = False
        self._cert_manager_started = False
        self._karpenter: ManagedProcess | None = None
        self._healthy: dict[str, Callable[[], bool]] = {}  # component -> its health check

    # lifecycle ---------------------------------------------------------------------------
    def start(self) -> ClusterHandle:
        raise NotImplementedError

    def stop(self) -> None:
        # Reverse order: for the local backend, clients before the apiserver, it before etcd.
        for proc in reversed(self.processes):
            proc.stop()
        self.processes.clear()
        self._kwok_started = False
        self.tekton_running = False
        self._cert_manager_started = False
        self._karpenter = None

    def __enter__(self) -> ClusterHandle:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # local processes -----------------------------------------------------------------------
    def _spawn(
        self, name: str, argv: list[str], env: Mapping[str, str] | None = None,
        restart_on_exit: bool = False,
    ) -> ManagedProcess:
        proc = ManagedProcess(name, argv, self.logs_dir / f"{name}.log", env=env, cwd=self.logs_dir,
                              restart_on_exit=restart_on_exit)
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        self.processes.append(proc)
        proc.start()
        return proc

    def start_kwok(self) -> None:
        """kwok, the fake kubelets, with the Stages in e2e/harness/cluster/stages; idempotent."""
        if self._kwok_started:
            return
        # One file with every Stage: kwok reads multi-document configs.
        config_path = self.logs_dir.parent / "kwok.yaml"
        config_path.write_text(
            "\n---\n".join(p.read_text() for p in sorted(STAGES_DIR.glob("*.yaml")))
        )
        port = free_port()
        proc = self._spawn(
            "kwok",
            [
                str(find_binary("kwok")),
                f"--kubeconfig={self.kubeconfig}",
                f"--config={config_path}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={FAKE_NODE_ANNOTATION}=fake",
                f"--server-address=127.0.0.1:{port}",
                # Renewed every quarter of it: a node whose kwok stops renewing (faults.lose) is
                # NotReady within the controller-manager's grace period (local.py: 12 s).
                f"--node-lease-duration-seconds={NODE_LEASE_SECONDS}",
                "--cidr=10.244.0.1/16",
                "--node-ip=10.0.0.1",
            ],
        )
        self._healthy[proc.name] = lambda: http_ok(f"http://127.0.0.1:{port}/healthz")
        wait_until(
            self._healthy[proc.name],
            timeout=self.start_timeout,
            what=f"kwok /healthz on port {port}",
            process=proc,
        )
        self._kwok_started = True

    def start_tekton(
        self, feature_flags: Mapping[str, str] | None = None,
        images: Mapping[str, str] | None = None, api_qps: int | None = None,
    ) -> None:
        """Makes Tekton Pipelines run with these feature-flags (coschedule: disabled unless set).

        A Tekton already deployed in the cluster is only reconfigured; otherwise its CRDs and
        ConfigMaps come from the Go module cache and the controller runs here as a process.
        `images`: the images Tekton's pods use, where a real node runs them."""
        if self.tekton_running or tekton.deployed_in_cluster(self):
            tekton.configure(self, feature_flags)
            self.tekton_running = True
            return
        proc, probes_port = tekton.controller_process(  # binary first
            self, self.logs_dir, images, api_qps)
        tekton.install(self, feature_flags)
        self.processes.append(proc)
        proc.start()
        tekton.wait_ready(self, proc, probes_port)
        self.tekton_running = True

    def upgrade_tekton(self, version: str) -> None:
        """Tekton upgraded in place to `version` (built by e2e/build.sh with that pin): its
        controller stopped, the CRDs and ConfigMaps of `version` applied (feature flags back to
        the suite's default), that version's controller started. Runs in flight carry on."""
        old = next(p for p in self.processes if p.name == "tekton-controller")
        with pinned(TEKTON_PIPELINE_VERSION=version):
            proc, probes_port = tekton.controller_process(self, self.logs_dir)  # binary first
            old.stop()
            self.processes.remove(old)
            tekton.install(self, None)
            self.processes.append(proc)
            proc.start()
            tekton.wait_ready(self, proc, probes_port)

    def start_cert_manager(self) -> None:
        """cert-manager's CRDs, controller and cainjector; idempotent. Readiness is left to the
        caller: a Certificate that becomes Ready is the proof that matters."""
        if self._cert_manager_started:
            return
        procs = cert_manager.processes(self, self.logs_dir)  # binaries found first
        crds.apply(self, cert_manager.crd_documents())
        for proc in procs:
            self.processes.append(proc)
            proc.start()
        self._cert_manager_started = True

    def start_karpenter(self, zone: str, sizes: dict[str, int]) -> None:
        """Karpenter's CRDs and its kwok provider, offering instance types of `sizes` (name ->
        CPUs) in `zone`; idempotent. Nodes come only for a NodePool (karpenter.node_pool)."""
        if self._karpenter is not None:
            return
        self.start_kwok()
        proc = karpenter.process(self, self.logs_dir, karpenter.instance_types(zone, sizes))
        crds.apply(self, karpenter.crd_documents())
        self.processes.append(proc)
        proc.start()
        self._karpenter = proc

    def stop_karpenter(self) -> None:
        """Stops the autoscaler; the nodes it made stay until deleted."""
        if self._karpenter is not None:
            self._karpenter.stop()
            self.processes.remove(self._karpenter)
            self._karpenter = None

    # API ---------------------------------------------------------------------------------
    @contextmanager
    def _core(self) -> Iterator[client.CoreV1Api]:
        with self.api_client() as api:
            yield client.CoreV1Api(api)

    # diagnostics -------------------------------------------------------------------------
    def log_paths(self) -> list[Path]:
        return sorted(self.logs_dir.glob("*.log")) if self.logs_dir.exists() else []

    def log_tails(self, lines: int = 40) -> str:
        parts = [
            f"===== {p.name} (last {lines} lines) =====\n{tail(p, lines)}" for p in self.log_paths()
        ]
        return "\n".join(parts) if parts else f"(no component logs in {self.logs_dir})"

    def print_log_tails(self, lines: int = 40) -> None:
        print(self.log_tails(lines))

    # helpers -----------------------------------------------------------------------------
    def create_namespace(self, name: str, labels: Mapping[str, str] | None = None) -> str:
        with self._core() as core:
            body = client.V1Namespace(
                metadata=client.V1ObjectMeta(name=name, labels=dict(labels or {}))
            )
            core.create_namespace(body)
        return name

    def add_nodes(
        self,
        n: int,
        *,
        prefix: str = "node",
        zones: Sequence[str] = ("zone-a", "zone-b"),
        cpu: str = "4",
        memory: str = "8Gi",
        pods: int = 110,
        labels: Mapping[str, str] | None = None,
        wait: bool = True,
        timeout: float = 60.0,
    ) -> list[str]:
        """Creates n fake (kwok) nodes <prefix>-<i>, zones round-robin, and waits until Ready."""
        self.start_kwok()
        counter = self._node_counters.setdefault(prefix, itertools.count())
        names: list[str] = []
        capacity = {"cpu": cpu, "memory": memory, "pods": str(pods), "ephemeral-storage": "100Gi"}
        with self._core() as core:
            for _ in range(n):
                i = next(counter)
                name = f"{prefix}-{i}"
                node_labels = {
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "topology.kubernetes.io/zone": zones[i % len(zones)],
                    "type": "kwok",
                    **dict(labels or {}),
                }
                body: Any = {  # the client takes plain manifests as well as models
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {
                        "name": name,
                        "labels": node_labels,
                        "annotations": {FAKE_NODE_ANNOTATION: "fake"},
                    },
                    # Nodes, unlike most kinds, keep the status given on create: capacity sticks.
                    "status": {"capacity": capacity, "allocatable": capacity},
                }
                core.create_node(body)
                names.append(name)
            if wait:
                for name in names:
                    self.wait_for(
                        functools.partial(_schedulable_by_name, core, name),
                        timeout=timeout,
                        what=f"node {name} Ready without taints (is kwok running?)",
                    )
        return names

    def ensure_storage_class(self, name: str = LOCAL_STORAGE_CLASS, *, default: bool) -> None:
        body = client.V1StorageClass(
            metadata=client.V1ObjectMeta(
                name=name,
                annotations={"storageclass.kubernetes.io/is-default-class": "true"}
                if default
                else {},
            ),
            provisioner="kubernetes.io/no-provisioner",
            volume_binding_mode="WaitForFirstConsumer",
            reclaim_policy="Delete",
        )
        with self.api_client() as api:
            try:
                client.StorageV1Api(api).create_storage_class(body)
            except ApiException as e:
                if e.status != 409:
                    raise

    def add_local_pv(
        self, name: str, node: str, size: str = "1Gi", storage_class: str = LOCAL_STORAGE_CLASS
    ) -> None:
        """A local PV pinned to `node` by nodeAffinity; nothing is mounted, so the path is fake."""
        body: Any = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": name, "labels": {"e2e.tekton-coscheduler.dev/node": node}},
            "spec": {
                "capacity": {"storage": size},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": storage_class,
                "volumeMode": "Filesystem",
                "local": {"path": f"/mnt/e2e/{name}"},
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "kubernetes.io/hostname",
                                        "operator": "In",
                                        "values": [node],
                                    }
                                ]
                            }
                        ]
                    }
                },
            },
        }
        with self._core() as core:
            core.create_persistent_volume(body)


def node_schedulable(node: client.V1Node) -> bool:
    """Ready, untainted (the node controller taints not-ready nodes) and not cordoned."""
    status, spec = node.status or client.V1NodeStatus(), node.spec or client.V1NodeSpec()
    ready = any(c.type == "Ready" and c.status == "True" for c in status.conditions or [])
    return ready and not spec.taints and not spec.unschedulable


def _schedulable_by_name(core: client.CoreV1Api, name: str) -> bool:
    return node_schedulable(core.read_node(name))


def as_dict(obj: object) -> dict[str, Any]:
    """A client model as the plain camelCase dict the API speaks (easy to read in tests)."""
    out: dict[str, Any] = client.ApiClient().sanitize_for_serialization(obj)  # type: ignore[no-untyped-call]
    return out
