"""Pure: how the harness configures a real node's parts (containerd, the CNI bridge, kubelet,
kube-proxy), and why each setting is what this host needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import realimages
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
    # The registries the lab serves mapped to its registry (hosts/<name>: mirror below), every
    # other one to a closed port on loopback (hosts/_default): no pull looks a name up or
    # sends a packet beyond the machine. No credentials here: containerd would send them for
    # every pull without a pod's own, and a pod without the pull secret would get its image.
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


def mirror(lab: str, registry: str, ca: Path) -> str:
    """hosts.toml for one registry host the lab serves (hosts/<registry>/): its images come
    from the lab's registry at `lab`, under the path of their whole name (override_path), over
    TLS with the lab's CA. The lab is the `server`, the one host tried: were it a [host]
    entry instead, containerd would try the default server next, the registry's real one."""
    return (f'server = "https://{lab}/v2/{registry}"\noverride_path = true\n'
            f'capabilities = ["pull", "resolve"]\nca = "{ca}"\n')


def hosts(lab: str, ca: Path) -> dict[str, str]:
    """containerd's registry configuration, a hosts.toml per directory: each registry host the
    lab serves mapped to the lab's registry at `lab`, every other one to a closed port."""
    return {"_default": HOSTS_TOML,
            **{registry: mirror(lab, registry, ca) for registry in realimages.REGISTRIES}}


def kubelet(address: str, ca: Path, cgroup_root: str, root: Path, socket: Path) -> dict[str, Any]:
    """A kubelet on this host: cgroupfs on a v1/v2 hybrid (1.35+ refuses v1 unless told), its
    own cgroup root, no OOM score it may not set, pods' resolv.conf empty, no image GC (every
    node's images share the host's disk, whose use says nothing of one node's; and what a node
    pulled stays there, as the comparisons of what runs pulled need), and pods resynced every
    few seconds (Tekton's steps start sooner)."""
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
        # Tekton's steps wait for the pod's tekton.dev/ready annotation in a downward-API file
        # (running-in-environment-with-injected-sidecars, on by default); the kubelet often
        # rewrites that file only at a pod's periodic resync, every syncFrequency plus up to
        # half again (default 1m: a step waited 60 to 90 s for it, in most runs of the lab).
        "syncFrequency": "5s",
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
