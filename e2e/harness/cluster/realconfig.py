"""Pure: how the harness configures a real node's parts (containerd, the CNI bridge, kubelet,
kube-proxy), and why each setting is what this host needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .processes import free_port
from .realhost import POD_NETWORK


def cni(name: str, bridge: str, index: int, gateway: str, data_dir: Path) -> dict[str, Any]:
    """The node's bridge and its /24: the host routes between nodes' bridges; no masquerade,
    so nothing from a pod looks like the host's own traffic (realhost's FORWARD rule keeps it
    on the machine)."""
    return {
        "cniVersion": "1.0.0",
        "name": name,
        "plugins": [{
            "type": "bridge", "bridge": bridge, "isGateway": True, "ipMasq": False,
            "hairpinMode": True,
            "ipam": {"type": "host-local", "dataDir": str(data_dir),
                     "ranges": [[{"subnet": f"10.88.{index}.0/24",
                                  "rangeStart": f"10.88.{index}.10", "gateway": gateway}]],
                     "routes": [{"dst": "0.0.0.0/0"}]},
        }],
    }


def containerd(base: Path, socket: Path, cni_bin: Path, cni_conf: Path, pause: str) -> str:
    """containerd 2.x (config version 3), its directories, sockets and runc state its own."""
    return f"""version = 3
root = "{base / 'root'}"
state = "{base / 'state'}"
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = "{socket}"

[ttrpc]
  address = "{base / 'state' / 'ttrpc.sock'}"

[debug]
  address = ""

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{pause}"
  [plugins.'io.containerd.cri.v1.images'.registry]
    # Every registry mapped to a closed port on loopback (hosts/_default): a pull fails at
    # once, and never looks a name up or sends a packet beyond the machine.
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
    conf_dir = "{cni_conf}"
    use_internal_loopback = true

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
"""


HOSTS_TOML = 'server = "https://127.0.0.1:9"\n[host."https://127.0.0.1:9"]\n' \
    '  capabilities = ["pull", "resolve"]\n'


def kubelet(address: str, ca: Path, cgroup_root: str, root: Path, socket: Path) -> dict[str, Any]:
    """A kubelet on this host: cgroupfs on a v1/v2 hybrid (1.35+ refuses v1 unless told), its
    own cgroup root, no OOM score it may not set, pods' resolv.conf empty, no image GC (the
    images were imported, none can be pulled)."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": address,
        "port": free_port(),
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": free_port(),
        "authentication": {"x509": {"clientCAFile": str(ca)},
                           "webhook": {"enabled": False}, "anonymous": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": cgroup_root,
        "failCgroupV1": False,
        "failSwapOn": False,
        "oomScoreAdj": 0,
        "resolvConf": str(root / "resolv.conf"),
        "podLogsDir": str(root / "pod-logs"),
        "clusterDNS": [],
        "containerRuntimeEndpoint": f"unix://{socket}",
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "1Mi", "nodefs.available": "1%",
                         "imagefs.available": "1%"},
        "serializeImagePulls": False,
        "maxPods": 50,
        "registerNode": True,
        "nodeStatusReportFrequency": "10s",
    }


def kube_proxy(kubeconfig: Path) -> dict[str, Any]:
    """kube-proxy for the host, iptables mode, changing no sysctl (conntrack left alone, no
    localhost node ports)."""
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
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
    }
