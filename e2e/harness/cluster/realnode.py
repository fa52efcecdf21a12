"""Real nodes beside kwok's: each a kubelet with a containerd of its own (runc, the CNI bridge
plugin), and one kube-proxy for the host. What users install runs there as real containers.

Everything stays on this machine (realhost.py: the API server's address, the pod network's
routes and rules); each node's pods get a bridge and a /24 of 10.88.0.0/16, the bridge plugin
does not masquerade, pods get an empty resolv.conf, and containerd pulls only from the lab's
registry (registry.py: the registry hosts it serves are mapped to it, every other one to a
closed local port) and keeps its network namespaces in its own state directory. Pods pull
with their pull secrets; the one image containerd pulls itself, its pinned sandbox image, the
node pulls once as it boots, with the lab's credentials (as cloud providers' nodes pull their
pause): containerd's own registry credentials would serve every pod that has no secret.

stop() deletes the nodes' pods through the API (so that the kubelet tears their sandboxes
down), stops what it started by its process id, and puts back every link, rule, sysctl, mount
and cgroup the harness changed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from kubernetes import client

from . import realconfig, realhost, realimages, realpulls
from .api import ClusterApi, name_of, present
from .processes import ManagedProcess, wait_until
from .realhost import HostNetwork
from .realpulls import Pulled
from .registry import LabRegistry, local_env
from .versions import find_binary

LABEL = "e2e.tekton-coscheduler.dev/real-node"
# containerd's shims put their sockets here whatever containerd started them.
SHIM_SOCKETS = Path("/run/containerd/s")


@dataclass
class RealNode:
    """One node: its containerd and kubelet, as processes of the harness."""

    name: str
    index: int
    root: Path
    address: str
    bridge: str
    containerd: ManagedProcess | None = None
    kubelet: ManagedProcess | None = None
    booted: list[Pulled] = field(default_factory=list)  # what the node pulled as it booted

    @property
    def socket(self) -> Path:
        return self.root / "containerd" / "containerd.sock"

    @property
    def cgroup_root(self) -> str:
        return f"/{realhost.CGROUP_PREFIX}{self.name}"

    def ctr(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return realhost.run(str(find_binary("ctr")), "--address", str(self.socket), "--namespace",
                    "k8s.io", *args, check=check)

    @property
    def hosts(self) -> Path:
        """containerd's registry configuration: a directory per registry host."""
        return self.root / "containerd" / "hosts"

    def process(self, container_id: str) -> int:
        """The host pid of a running container's first process (as `ctr tasks ls` shows)."""
        for line in self.ctr("tasks", "ls").stdout.splitlines()[1:]:
            task, pid, *_ = line.split()
            if task == container_id.removeprefix("containerd://"):
                return int(pid)
        raise LookupError(f"no task {container_id} on {self.name}")


class RealNodes:
    """Real nodes of a local control plane whose API server listens on API_ADDRESS."""

    def __init__(self, cluster: ClusterApi, network: HostNetwork, run_dir: Path, logs_dir: Path,
                 ca: Path, kubeconfig: Path, registry: LabRegistry) -> None:
        self.cluster = cluster
        self.registry = registry
        self.run_dir = run_dir
        self.logs_dir = logs_dir
        self.ca = ca
        self.kubeconfig = kubeconfig
        self.network = network
        self.nodes: list[RealNode] = []
        self.proxy: ManagedProcess | None = None
        # containerd's shims put their sockets in one directory for every containerd: those
        # that were not there before are ours, removed at stop(), with the directory if it is.
        self._made_run_dir = not SHIM_SOCKETS.parent.exists()
        self._sockets_before = set(SHIM_SOCKETS.glob("*")) if SHIM_SOCKETS.is_dir() else set()

    # -- start ------------------------------------------------------------------------------

    def start_proxy(self) -> None:
        """kube-proxy for the host, iptables mode, changing no sysctl (conntrack left alone)."""
        config = self.run_dir / "kube-proxy.yaml"
        config.write_text(yaml.safe_dump(realconfig.kube_proxy(self.kubeconfig)))
        self.proxy = ManagedProcess("kube-proxy", [str(find_binary("kube-proxy")),
                                                   f"--config={config}"],
                                    self.logs_dir / "kube-proxy.log")
        self.proxy.start()

    def add(self) -> RealNode:
        """A real node, Ready, its sandbox image pulled; it pulls every other as pods ask."""
        if not self.nodes:
            self.start_proxy()
        index = len(self.nodes)
        bridge, address = self.network.bridge(index)
        node = RealNode(f"real-{index}", index, self.run_dir / f"real-{index}", address, bridge)
        self.nodes.append(node)
        self._containerd(node)
        self._pull_sandbox(node)
        self._kubelet(node)
        self.cluster.wait_for(lambda: self._ready(node.name), timeout=120,
                              what=f"real node {node.name} Ready")
        return node

    def _ready(self, name: str) -> bool:
        with self.cluster.api_client() as api:
            try:
                node = client.CoreV1Api(api).read_node(name)
            except client.ApiException:
                return False
        return any(c.type == "Ready" and c.status == "True"
                   for c in present(node.status).conditions or [])

    def _containerd(self, node: RealNode) -> None:
        base = node.root / "containerd"
        cni = node.root / "cni"
        for d in (base / "root", base / "state", cni / "net.d"):
            d.mkdir(parents=True, exist_ok=True)
        for name, text in realconfig.hosts(self.registry.host, self.registry.ca).items():
            (node.hosts / name).mkdir(parents=True, exist_ok=True)
            (node.hosts / name / "hosts.toml").write_text(text)
        (cni / "net.d" / "10-tcs.conflist").write_text(json.dumps(realconfig.cni(
            f"tcs-{node.name}", node.bridge, node.index, node.address, cni / "ipam")))
        config = realconfig.containerd(base, node.socket, find_binary("bridge").parent,
                                       cni / "net.d", realimages.sandbox())
        path = base / "config.toml"
        path.write_text(config)
        env = local_env(PATH=f"{find_binary('containerd').parent}:{os.environ['PATH']}")
        node.containerd = ManagedProcess(f"containerd-{node.name}", [
            str(find_binary("containerd")), f"--config={path}", "--log-level=warn"],
            self.logs_dir / f"containerd-{node.name}.log", env=env)
        node.containerd.start()
        wait_until(lambda: node.socket.exists() and node.ctr("version", check=False).returncode
                   == 0, timeout=60, what=f"containerd of {node.name}", process=node.containerd)

    def _pull_sandbox(self, node: RealNode) -> None:
        """The pinned sandbox image, through the node's registry configuration, with the lab's
        credentials (on ctr's command line: they are the lab's own, made for this lab)."""
        image, creds = realimages.sandbox(), self.registry.credentials
        started = time.monotonic()
        out = node.ctr("images", "pull", "--hosts-dir", str(node.hosts), "--user",
                       f"{creds.username}:{creds.password}", image, check=False)
        if out.returncode != 0:
            raise RuntimeError(f"{node.name} could not pull {image}: {out.stderr.strip()}")
        node.booted.append(Pulled(image, self.registry.size(image),
                                  time.monotonic() - started, node.name))

    def pulled(self, node: str | None = None) -> list[Pulled]:
        """What the nodes (or this one) pulled: as they booted, then as their kubelets said."""
        booted = [p for n in self.nodes if node in (None, n.name) for p in n.booted]
        return booted + realpulls.pulled(self.cluster, node)

    def _kubelet(self, node: RealNode) -> None:
        kdir = node.root / "kubelet"
        kdir.mkdir(parents=True, exist_ok=True)
        realhost.make_cgroups(node.cgroup_root)  # the kubelet wants its cgroup root to exist
        (node.root / "resolv.conf").write_text("")  # pods look nothing up beyond the machine
        config = node.root / "kubelet.yaml"
        config.write_text(yaml.safe_dump(realconfig.kubelet(
            node.address, self.ca, node.cgroup_root, node.root, node.socket)))
        node.kubelet = ManagedProcess(f"kubelet-{node.name}", [
            str(find_binary("kubelet")),
            f"--config={config}",
            f"--kubeconfig={self.kubeconfig}",
            f"--root-dir={kdir}",
            f"--cert-dir={node.root / 'pki'}",
            f"--hostname-override={node.name}",
            f"--node-ip={node.address}",
            f"--node-labels={LABEL}=true",
            "--v=1",
        ], self.logs_dir / f"kubelet-{node.name}.log")
        node.kubelet.start()

    # -- stop -------------------------------------------------------------------------------

    def stop(self) -> None:
        """Every pod of the real nodes deleted (the kubelets tear their sandboxes down), then
        the processes the harness started stopped, by id, and the host put back."""
        with contextlib.suppress(Exception):
            self._delete_pods()
        for node in self.nodes:
            if node.kubelet is not None:
                node.kubelet.stop()
            self._end_tasks(node)
            if node.containerd is not None:
                node.containerd.stop()
            self._kill_shims(node)
            realhost.unmount_under(node.root)
            realhost.remove_cgroups(node.cgroup_root)
        if self.proxy is not None:
            self.proxy.stop()
            self.proxy = None
            realhost.run(str(find_binary("kube-proxy")), "--cleanup", check=False)
        self.network.down()
        self.nodes.clear()
        if SHIM_SOCKETS.is_dir():
            for left in set(SHIM_SOCKETS.glob("*")) - self._sockets_before:
                with contextlib.suppress(OSError):
                    left.unlink()
        if self._made_run_dir:
            shutil.rmtree(SHIM_SOCKETS.parent, ignore_errors=True)

    def _delete_pods(self) -> None:
        names = {n.name for n in self.nodes}
        with self.cluster.api_client() as api:
            core = client.CoreV1Api(api)
            # Cordoned first: a Deployment's pod deleted here (the chart's operator) came back on
            # the node at once, and the wait below ran to its end (60 s of each lab's teardown).
            for name in names:
                with contextlib.suppress(client.ApiException):
                    core.patch_node(name, {"spec": {"unschedulable": True}})
            for pod in core.list_pod_for_all_namespaces().items:
                if present(pod.spec).node_name in names:
                    with contextlib.suppress(client.ApiException):
                        core.delete_namespaced_pod(
                            name_of(pod), present(present(pod.metadata).namespace),
                            grace_period_seconds=0)

            def gone() -> bool:
                return not [p for p in core.list_pod_for_all_namespaces().items
                            if present(p.spec).node_name in names]

            with contextlib.suppress(TimeoutError):
                self.cluster.wait_for(gone, timeout=60, what="the real nodes' pods gone")

    @staticmethod
    def _end_tasks(node: RealNode) -> None:
        if node.containerd is None or not node.containerd.running():
            return
        def listed() -> set[str]:
            return set(node.ctr("tasks", "ls", "-q", check=False).stdout.split())

        tasks = listed()
        for task in tasks:
            node.ctr("tasks", "kill", "-s", "SIGKILL", task, check=False)
        # Until none is listed, not until each delete succeeds: a task its shim already took
        # away fails to delete ("not found") for good, and each such kept a node's teardown
        # to the whole deadline (about 20 s a node in the real-node module).
        deadline = time.monotonic() + 20
        while (left := listed() & tasks) and time.monotonic() < deadline:
            for task in left:
                node.ctr("tasks", "delete", task, check=False)
            time.sleep(0.2)
        for container in node.ctr("containers", "ls", "-q", check=False).stdout.split():
            node.ctr("containers", "delete", container, check=False)

    @staticmethod
    def _kill_shims(node: RealNode) -> None:
        """Shims that outlived their containerd: ours, found by the node's socket in their
        command line (they lead sessions of their own)."""
        for pid in realhost.pids_with(str(node.socket)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)


def local_volume(cluster: ClusterApi, node: RealNode, name: str, size: str = "1Gi") -> None:
    """A local PersistentVolume on the node: a real directory its kubelet mounts."""
    path = node.root / "volumes" / name
    path.mkdir(parents=True, exist_ok=True)
    with cluster.api_client() as api:
        client.CoreV1Api(api).create_persistent_volume({  # type: ignore[arg-type]
            "metadata": {"name": name},
            "spec": {
                "capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "local-wffc",
                "local": {"path": str(path)},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In",
                     "values": [node.name]}]}]}},
            },
        })


def pods(cluster: ClusterApi, namespace: str, selector: str) -> list[client.V1Pod]:
    with cluster.api_client() as api:
        found: list[client.V1Pod] = client.CoreV1Api(api).list_namespaced_pod(
            namespace, label_selector=selector).items
    return found


def wait_pods_ready(cluster: ClusterApi, namespace: str, selector: str, count: int,
                    timeout: float = 180) -> list[client.V1Pod]:
    """`count` pods of the selector, each Ready."""
    def ready() -> list[client.V1Pod] | None:
        with cluster.api_client() as api:
            pods = client.CoreV1Api(api).list_namespaced_pod(namespace,
                                                             label_selector=selector).items
        up = [p for p in pods if any(c.type == "Ready" and c.status == "True"
                                     for c in (present(p.status).conditions or []))]
        return up if len(up) >= count else None

    return cluster.wait_for(ready, timeout=timeout, what=f"{count} pods {selector} Ready")
