"""The host's side of real nodes: the harness's links, rules and sysctls, and everything a
node leaves on the host (processes, mounts, cgroups), put back when it stops. Nothing here lets
a packet leave the machine: pods route between the nodes' bridges and to the API server's
address, and a FORWARD rule rejects anything else from the pod network.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from kubernetes import client

from .api import ClusterApi, present
from .versions import find_binary

API_ADDRESS = "10.87.0.1"
API_LINK = "tcsapi0"
POD_NETWORK = "10.88.0.0/16"
CHAIN = "TCS-E2E-FORWARD"
CGROUP_PREFIX = "tcs-e2e-"  # a node's cgroup root: /tcs-e2e-<node>
NODE_ROOT = re.compile(r"/\S*/tekton-coscheduler-e2e-[^/ ]+/real-\d+(?=/|$| )")


@contextlib.contextmanager
def host_lock(name: str) -> Iterator[None]:
    """One holder at a time on this host: a real-node lab takes fixed links, addresses and
    rules, and the image build prunes the images of other code from a store every checkout
    shares, so two test sessions (two worktrees, a demo beside the tests) take turns."""
    folder = Path("/run/lock") if Path("/run/lock").is_dir() else Path("/tmp")
    path = folder / f"tekton-coscheduler-{name}.lock"
    with path.open("a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for another session's {name} on this host ({path})", file=sys.stderr)
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
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


def reclaim() -> list[str]:
    """What a lab killed before its teardown left on the host, put back: its nodes' processes,
    mounts and cgroups, kube-proxy's rules, the harness's links and rules. Called holding
    host_lock("realnode"), so no live lab owns any of it. A lab that finds the host so would
    otherwise fail at its first link ("File exists"); what was found is returned, to be said."""
    found: list[str] = []
    cgroups = sorted({d for top in Path("/sys/fs/cgroup").glob("*")
                      for d in top.glob(f"{CGROUP_PREFIX}*") if d.is_dir()}
                     | set(Path("/sys/fs/cgroup").glob(f"{CGROUP_PREFIX}*")))
    pids = {int(p) for d in cgroups for procs in d.rglob("cgroup.procs")
            for p in _read(procs).split()}
    pids |= {pid for pid in pids_with("/tekton-coscheduler-e2e-")
             if NODE_ROOT.search(_cmdline(pid))}
    for pid in sorted(pids - {os.getpid()}):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)
            found.append(f"process {pid}")
    roots = {m.group(0) for line in _read(Path("/proc/self/mountinfo")).splitlines()
             if (m := NODE_ROOT.search(line.split()[4]))}
    for root in sorted(roots):
        unmount_under(Path(root))
        found.append(f"mounts under {root}")
    for name in sorted({d.name for d in cgroups}):
        remove_cgroups(f"/{name}")
        found.append(f"cgroup {name}")
    if found:
        with contextlib.suppress(FileNotFoundError):
            run(str(find_binary("kube-proxy")), "--cleanup", check=False)
    links = run("ip", "-o", "link", "show", check=False).stdout
    ours = re.compile(rf"^\d+: ({API_LINK}|tcsbr\d+)[:@]|master tcsbr\d+ ")
    for line in links.splitlines():
        if ours.search(line):
            name = line.split(":")[1].strip().split("@")[0]
            run("ip", "link", "delete", name, check=False)
            found.append(f"link {name}")
    if run("iptables", "-w", "-S", CHAIN, check=False).returncode == 0:
        while run("iptables", "-w", "-D", "FORWARD", "-j", CHAIN, check=False).returncode == 0:
            pass
        run("iptables", "-w", "-F", CHAIN, check=False)
        run("iptables", "-w", "-X", CHAIN, check=False)
        found.append(f"iptables chain {CHAIN}")
    if "htb 1:" in run("tc", "qdisc", "show", "dev", "lo", check=False).stdout:
        run("tc", "qdisc", "delete", "dev", "lo", "root", check=False)
        found.append("the shaping on lo")
    return found


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace")
    except OSError:
        return ""


class HostNetwork:
    """The harness's links, rules and sysctls on the host, put back by down()."""

    def __init__(self) -> None:
        self.bridges: list[str] = []
        self._forward: str | None = None  # net.ipv4.ip_forward as found
        self._up = False

    def up(self) -> None:
        # A bridge with no ports holds the address (this kernel has no dummy links).
        run("ip", "link", "add", API_LINK, "type", "bridge")
        self._up = True
        run("ip", "addr", "add", f"{API_ADDRESS}/32", "dev", API_LINK)
        run("ip", "link", "set", API_LINK, "up")
        path = Path("/proc/sys/net/ipv4/ip_forward")
        self._forward = path.read_text().strip()
        path.write_text("1")  # between the nodes' bridges, on this host only (CHAIN)
        run("iptables", "-w", "-N", CHAIN)
        run("iptables", "-w", "-A", CHAIN, "-s", POD_NETWORK, "-d", POD_NETWORK, "-j", "ACCEPT")
        run("iptables", "-w", "-A", CHAIN, "-s", POD_NETWORK, "-j", "REJECT")
        run("iptables", "-w", "-A", CHAIN, "-d", POD_NETWORK, "-j", "ACCEPT")
        run("iptables", "-w", "-I", "FORWARD", "1", "-j", CHAIN)

    def bridge(self, index: int) -> tuple[str, str]:
        """A bridge for node `index`: its name and its address (the node's InternalIP and its
        pods' gateway)."""
        name, address = f"tcsbr{index}", f"10.88.{index}.1"
        run("ip", "link", "add", name, "type", "bridge")
        self.bridges.append(name)
        run("ip", "addr", "add", f"{address}/24", "dev", name)
        run("ip", "link", "set", name, "up")
        return name, address

    def down(self) -> None:
        for name in self.bridges:
            run("ip", "link", "delete", name, check=False)
        self.bridges.clear()
        if self._up:
            run("iptables", "-w", "-D", "FORWARD", "-j", CHAIN, check=False)
            run("iptables", "-w", "-F", CHAIN, check=False)
            run("iptables", "-w", "-X", CHAIN, check=False)
            run("ip", "link", "delete", API_LINK, check=False)
            self._up = False
        if self._forward is not None:
            Path("/proc/sys/net/ipv4/ip_forward").write_text(self._forward)
            self._forward = None


@contextlib.contextmanager
def shaped(address: str, port: int, mbit: int) -> Iterator[None]:
    """What `address:port` sends goes at `mbit` megabits a second while inside, as a registry
    beyond the cluster answers. The lab's nodes and registry share this host, so its answers
    leave through lo: an HTB class there takes them, matched by source address and port. HTB
    has no default class here, so everything else goes by its direct queue, unshaped."""
    run("tc", "qdisc", "replace", "dev", "lo", "root", "handle", "1:", "htb")
    try:
        run("tc", "class", "add", "dev", "lo", "parent", "1:", "classid", "1:10", "htb",
            "rate", f"{mbit}mbit", "ceil", f"{mbit}mbit", "burst", "256k", "cburst", "256k",
            "quantum", "65536")
        run("tc", "filter", "add", "dev", "lo", "parent", "1:", "protocol", "ip", "prio", "1",
            "u32", "match", "ip", "src", f"{address}/32", "match", "ip", "sport", str(port),
            "0xffff", "flowid", "1:10")
        yield
    finally:
        run("tc", "qdisc", "delete", "dev", "lo", "root", check=False)


def pids_with(needle: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if needle.encode() in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
    return found


def unmount_under(root: Path) -> None:
    """Mounts left under a node's directories (rootfs, volumes, netns), deepest first."""
    prefix = str(root.resolve())
    mounts = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = line.split()[4].replace("\\040", " ")
            if point == prefix or point.startswith(prefix + "/"):
                mounts.append(point)
    for point in sorted(set(mounts), key=len, reverse=True):
        run("umount", "-l", point, check=False)


def make_cgroups(cgroup_root: str) -> None:
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


def remove_cgroups(cgroup_root: str) -> None:
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


def cgroup_limits(cluster: ClusterApi, cgroup_root: str, pod: str,
                  namespace: str) -> dict[str, int]:
    """The CPU and memory limits the kubelet gave a pod's cgroup (cgroupfs driver, cgroup v1
    or v2), as the kernel holds them."""
    with cluster.api_client() as api:
        found = client.CoreV1Api(api).read_namespaced_pod(pod, namespace)
    qos = {"Guaranteed": "", "Burstable": "burstable", "BestEffort": "besteffort"}[
        present(present(found.status).qos_class)]
    rel = Path(cgroup_root.strip("/")) / "kubepods" / qos / f"pod{present(found.metadata).uid}"
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
