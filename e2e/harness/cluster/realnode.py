"""Real nodes beside kwok's: each a kubelet with a containerd of its own (runc, the CNI bridge
plugin), and one kube-proxy for the host. What users install runs there as real containers.

Everything stays on this machine. The API server listens on an address of the harness's own (on a
link of its own), which pods reach through their bridge and the `kubernetes` Service; each
node's pods get a bridge and a /24 of 10.88.0.0/16, routed by the host between bridges but
never beyond them (a FORWARD rule rejects anything else from the pod network, and the bridge
plugin does not masquerade); pods get an empty resolv.conf; containerd pulls nothing (every
registry is mapped to a closed local port) and keeps its network namespaces in its own state
directory. stop() deletes the nodes' pods through the API (so that the kubelet tears their
sandboxes down), stops what it started by its process id, and puts back every link, rule,
sysctl, mount and cgroup the harness changed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml
from kubernetes import client

from .api import ClusterApi
from .processes import ManagedProcess, free_port, wait_until
from .versions import find_binary, read_versions

API_ADDRESS = "10.87.0.1"
API_LINK = "tcsapi0"
POD_NETWORK = "10.88.0.0/16"
SERVICE_IP = "10.96.0.1"
LABEL = "e2e.tekton-coscheduler.dev/real-node"
CHAIN = "TCS-E2E-FORWARD"
IMAGE_PREFIX = "e2e.tekton-coscheduler.dev"
SHIM_SOCKETS = Path("/run/containerd/s")


def image_name(what: str, version: str) -> str:
    """As e2e/build.sh names the images it makes (image_name there)."""
    return f"{IMAGE_PREFIX}/{what}:{version}"


def images_dir(component: str) -> Path:
    """The cache directory e2e/build.sh wrote a component's image archives to."""
    pins = read_versions()
    version = {"tektonimages": pins["TEKTON_PIPELINE_VERSION"],
               "pause": f"{pins['PAUSE_VERSION']}-{pins['KUBERNETES_VERSION']}"}[component]
    root = Path(os.environ.get("TEKTON_COSCHEDULER_CACHE",
                               Path.home() / ".cache" / "tekton-coscheduler"))
    return root / "bin" / f"{component}-{version}"


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(list(argv), capture_output=True, text=True, timeout=120)
    if check and out.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {out.stderr.strip() or out.stdout.strip()}")
    return out


def can_run_containers() -> str | None:
    """Why this host cannot run a real node; None when it can."""
    if os.geteuid() != 0:
        return "a real node needs root (network links, iptables, mounts, cgroups)"
    for tool in ("runc", "iptables", "ip"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (e2e/build.sh debian)"
    if not Path("/sys/fs/cgroup").exists():
        return "no cgroup filesystem"
    return None


class HostNetwork:
    """The harness's links, rules and sysctls on the host, put back by down()."""

    def __init__(self) -> None:
        self.bridges: list[str] = []
        self._forward: str | None = None  # net.ipv4.ip_forward as found
        self._up = False

    def up(self) -> None:
        # A bridge with no ports holds the address (this kernel has no dummy links).
        _run("ip", "link", "add", API_LINK, "type", "bridge")
        self._up = True
        _run("ip", "addr", "add", f"{API_ADDRESS}/32", "dev", API_LINK)
        _run("ip", "link", "set", API_LINK, "up")
        path = Path("/proc/sys/net/ipv4/ip_forward")
        self._forward = path.read_text().strip()
        path.write_text("1")  # between the nodes' bridges, on this host only (CHAIN)
        _run("iptables", "-w", "-N", CHAIN)
        _run("iptables", "-w", "-A", CHAIN, "-s", POD_NETWORK, "-d", POD_NETWORK, "-j", "ACCEPT")
        _run("iptables", "-w", "-A", CHAIN, "-s", POD_NETWORK, "-j", "REJECT")
        _run("iptables", "-w", "-A", CHAIN, "-d", POD_NETWORK, "-j", "ACCEPT")
        _run("iptables", "-w", "-I", "FORWARD", "1", "-j", CHAIN)

    def bridge(self, index: int) -> tuple[str, str]:
        """A bridge for node `index`: its name and its address (the node's InternalIP and its
        pods' gateway)."""
        name, address = f"tcsbr{index}", f"10.88.{index}.1"
        _run("ip", "link", "add", name, "type", "bridge")
        self.bridges.append(name)
        _run("ip", "addr", "add", f"{address}/24", "dev", name)
        _run("ip", "link", "set", name, "up")
        return name, address

    def down(self) -> None:
        for name in self.bridges:
            _run("ip", "link", "delete", name, check=False)
        self.bridges.clear()
        if self._up:
            _run("iptables", "-w", "-D", "FORWARD", "-j", CHAIN, check=False)
            _run("iptables", "-w", "-F", CHAIN, check=False)
            _run("iptables", "-w", "-X", CHAIN, check=False)
            _run("ip", "link", "delete", API_LINK, check=False)
            self._up = False
        if self._forward is not None:
            Path("/proc/sys/net/ipv4/ip_forward").write_text(self._forward)
            self._forward = None


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

    @property
    def socket(self) -> Path:
        return self.root / "containerd" / "containerd.sock"

    @property
    def cgroup_root(self) -> str:
        return f"/tcs-e2e-{self.name}"

    def ctr(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return _run(str(find_binary("ctr")), "--address", str(self.socket), "--namespace",
                    "k8s.io", *args, check=check)

    def import_image(self, archive: Path) -> None:
        self.ctr("images", "import", "--no-unpack=false", str(archive))

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
                 ca: Path, kubeconfig: Path) -> None:
        self.cluster = cluster
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
        config.write_text(yaml.safe_dump({
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(self.kubeconfig)},
            "mode": "iptables",
            "clusterCIDR": POD_NETWORK,
            "bindAddress": "127.0.0.1",
            "healthzBindAddress": f"127.0.0.1:{free_port()}",
            "metricsBindAddress": f"127.0.0.1:{free_port()}",
            "hostnameOverride": "real-0",
            "nodePortAddresses": [POD_NETWORK],
            "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s",
                          "tcpCloseWaitTimeout": "0s"},
            "iptables": {"localhostNodePorts": False},
        }))
        self.proxy = ManagedProcess("kube-proxy", [str(find_binary("kube-proxy")),
                                                   f"--config={config}"],
                                    self.logs_dir / "kube-proxy.log")
        self.proxy.start()

    def add(self, images: Iterable[Path] = ()) -> RealNode:
        """A real node, Ready, with these image archives imported into its containerd."""
        if not self.nodes:
            self.start_proxy()
        index = len(self.nodes)
        bridge, address = self.network.bridge(index)
        node = RealNode(f"real-{index}", index, self.run_dir / f"real-{index}", address, bridge)
        self.nodes.append(node)
        self._containerd(node)
        for archive in images:
            node.import_image(archive)
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
        return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])

    def _containerd(self, node: RealNode) -> None:
        base = node.root / "containerd"
        cni = node.root / "cni"
        for d in (base / "root", base / "state", cni / "net.d", base / "hosts" / "_default"):
            d.mkdir(parents=True, exist_ok=True)
        # Every registry mapped to a closed port on loopback: a pull fails at once, and never
        # looks a name up or sends a packet beyond the machine.
        (base / "hosts" / "_default" / "hosts.toml").write_text(
            'server = "https://127.0.0.1:9"\n[host."https://127.0.0.1:9"]\n'
            '  capabilities = ["pull", "resolve"]\n')
        (cni / "net.d" / "10-tcs.conflist").write_text(json.dumps({
            "cniVersion": "1.0.0",
            "name": f"tcs-{node.name}",
            "plugins": [{
                "type": "bridge", "bridge": node.bridge, "isGateway": True, "ipMasq": False,
                "hairpinMode": True,
                "ipam": {"type": "host-local", "dataDir": str(cni / "ipam"),
                         "ranges": [[{"subnet": f"10.88.{node.index}.0/24",
                                      "rangeStart": f"10.88.{node.index}.10",
                                      "gateway": node.address}]],
                         "routes": [{"dst": "0.0.0.0/0"}]},
            }],
        }))
        cni_bin = find_binary("bridge").parent
        pause = f"registry.k8s.io/pause:{read_versions()['PAUSE_VERSION']}"
        config = f"""version = 3
root = "{base / 'root'}"
state = "{base / 'state'}"
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = "{node.socket}"

[ttrpc]
  address = "{base / 'state' / 'ttrpc.sock'}"

[debug]
  address = ""

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{pause}"
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = "{base / 'hosts'}"

[plugins.'io.containerd.cri.v1.runtime']
  # Processes here lack CAP_SYS_RESOURCE: runc could not lower a container's oom_score_adj.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_cdi = false
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
    SystemdCgroup = false
    Root = "{base / 'state' / 'runc'}"
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["{cni_bin}"]
    conf_dir = "{cni / 'net.d'}"
    use_internal_loopback = true

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
"""
        path = base / "config.toml"
        path.write_text(config)
        env = {**os.environ, "PATH": f"{find_binary('containerd').parent}:{os.environ['PATH']}"}
        node.containerd = ManagedProcess(f"containerd-{node.name}", [
            str(find_binary("containerd")), f"--config={path}", "--log-level=warn"],
            self.logs_dir / f"containerd-{node.name}.log", env=env)
        node.containerd.start()
        wait_until(lambda: node.socket.exists() and node.ctr("version", check=False).returncode
                   == 0, timeout=60, what=f"containerd of {node.name}", process=node.containerd)

    def _kubelet(self, node: RealNode) -> None:
        kdir = node.root / "kubelet"
        kdir.mkdir(parents=True, exist_ok=True)
        _make_cgroups(node.cgroup_root)  # the kubelet wants its cgroup root to exist
        (node.root / "resolv.conf").write_text("")  # pods look nothing up beyond the machine
        config = node.root / "kubelet.yaml"
        config.write_text(yaml.safe_dump({
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": node.address,
            "port": free_port(),
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": free_port(),
            "authentication": {"x509": {"clientCAFile": str(self.ca)},
                               "webhook": {"enabled": False}, "anonymous": {"enabled": False}},
            "authorization": {"mode": "AlwaysAllow"},
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": node.cgroup_root,
            "failCgroupV1": False,
            "failSwapOn": False,
            "oomScoreAdj": 0,
            "resolvConf": str(node.root / "resolv.conf"),
            "podLogsDir": str(node.root / "pod-logs"),
            "clusterDNS": [],
            "containerRuntimeEndpoint": f"unix://{node.socket}",
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "evictionHard": {"memory.available": "1Mi", "nodefs.available": "1%",
                             "imagefs.available": "1%"},
            "serializeImagePulls": False,
            "maxPods": 50,
            "registerNode": True,
            "nodeStatusReportFrequency": "10s",
        }))
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
            _unmount_under(node.root)
            _remove_cgroups(node.cgroup_root)
        if self.proxy is not None:
            self.proxy.stop()
            self.proxy = None
            _run(str(find_binary("kube-proxy")), "--cleanup", check=False)
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
            for pod in core.list_pod_for_all_namespaces().items:
                if pod.spec.node_name in names:
                    with contextlib.suppress(client.ApiException):
                        core.delete_namespaced_pod(pod.metadata.name, pod.metadata.namespace,
                                                   grace_period_seconds=0)

            def gone() -> bool:
                return not [p for p in core.list_pod_for_all_namespaces().items
                            if p.spec.node_name in names]

            with contextlib.suppress(TimeoutError):
                self.cluster.wait_for(gone, timeout=60, what="the real nodes' pods gone")

    @staticmethod
    def _end_tasks(node: RealNode) -> None:
        if node.containerd is None or not node.containerd.running():
            return
        tasks = node.ctr("tasks", "ls", "-q", check=False).stdout.split()
        for task in tasks:
            node.ctr("tasks", "kill", "-s", "SIGKILL", task, check=False)
        deadline = time.monotonic() + 20
        for task in tasks:
            while node.ctr("tasks", "delete", task, check=False).returncode != 0:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.2)
        for container in node.ctr("containers", "ls", "-q", check=False).stdout.split():
            node.ctr("containers", "delete", container, check=False)

    @staticmethod
    def _kill_shims(node: RealNode) -> None:
        """Shims that outlived their containerd: ours, found by the node's socket in their
        command line (they lead sessions of their own)."""
        for pid in _pids_with(str(node.socket)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)


def _pids_with(needle: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if needle.encode() in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
    return found


def _unmount_under(root: Path) -> None:
    """Mounts left under a node's directories (rootfs, volumes, netns), deepest first."""
    prefix = str(root.resolve())
    mounts = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = line.split()[4].replace("\\040", " ")
            if point == prefix or point.startswith(prefix + "/"):
                mounts.append(point)
    for point in sorted(set(mounts), key=len, reverse=True):
        _run("umount", "-l", point, check=False)


def _make_cgroups(cgroup_root: str) -> None:
    """The node's cgroup root in every controller (cgroup v1; v2 where unified), a cpuset with
    its parent's CPUs and memory nodes."""
    base = Path("/sys/fs/cgroup")
    tops = [d for d in base.iterdir() if d.is_dir()] if not (base / "cgroup.controllers").exists() \
        else [base]
    for top in tops:
        path = top / cgroup_root.strip("/")
        with contextlib.suppress(OSError):
            path.mkdir(exist_ok=True)
            for name in ("cpuset.cpus", "cpuset.mems"):
                if (top / name).exists() and not (path / name).read_text().strip():
                    (path / name).write_text((top / name).read_text())


def _remove_cgroups(cgroup_root: str) -> None:
    """The node's cgroup hierarchy, in every controller, leaves first (empty by now)."""
    base = Path("/sys/fs/cgroup")
    for top in [base / cgroup_root.strip("/"), *(d / cgroup_root.strip("/")
                                                  for d in base.iterdir() if d.is_dir())]:
        if not top.is_dir():
            continue
        for d in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            with contextlib.suppress(OSError):
                d.rmdir()
        with contextlib.suppress(OSError):
            top.rmdir()


def archives() -> list[Path]:
    """The image archives e2e/build.sh made for a real node: pause (the balloon's and every
    pod's sandbox), Tekton's images and busybox."""
    pause = images_dir("pause") / "pause.tar"
    tekton = images_dir("tektonimages")
    found = [pause, *(tekton / f"{what}.tar" for what in TEKTON_IMAGES), tekton / "busybox.tar"]
    missing = [str(p) for p in found if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"not built: {', '.join(missing)} (e2e/build.sh realnode)")
    return found


TEKTON_IMAGES = ("entrypoint", "nop", "workingdirinit", "sidecarlogresults", "shell")


def tekton_images() -> dict[str, str]:
    """Tekton controller's image flags (without "-image") -> the images a real node has."""
    version = read_versions()["TEKTON_PIPELINE_VERSION"]
    return {**{what: image_name(what, version) for what in TEKTON_IMAGES},
            "shell-win": image_name("shell", version)}


def busybox() -> str:
    return image_name("busybox", read_versions()["TEKTON_PIPELINE_VERSION"])


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


def cgroup_limits(cluster: ClusterApi, node: RealNode, pod: str, namespace: str) -> dict[str, int]:
    """The CPU and memory limits the kubelet gave a pod's cgroup (cgroupfs driver, cgroup v1
    or v2), as the kernel holds them."""
    with cluster.api_client() as api:
        found = client.CoreV1Api(api).read_namespaced_pod(pod, namespace)
    qos = {"Guaranteed": "", "Burstable": "burstable", "BestEffort": "besteffort"}[
        found.status.qos_class]
    rel = Path(node.cgroup_root.strip("/")) / "kubepods" / qos / f"pod{found.metadata.uid}"
    base = Path("/sys/fs/cgroup")
    if (base / "cpu" / rel).is_dir():  # v1
        quota = int((base / "cpu" / rel / "cpu.cfs_quota_us").read_text())
        period = int((base / "cpu" / rel / "cpu.cfs_period_us").read_text())
        memory = int((base / "memory" / rel / "memory.limit_in_bytes").read_text())
    else:
        quota_text, period_text = (base / rel / "cpu.max").read_text().split()
        quota, period = int(quota_text), int(period_text)
        memory = int((base / rel / "memory.max").read_text())
    return {"cpu_quota_millicores": quota * 1000 // period, "memory_bytes": memory}


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
                                     for c in (p.status.conditions or []))]
        return up if len(up) >= count else None

    return cluster.wait_for(ready, timeout=timeout, what=f"{count} pods {selector} Ready")
