"""Pinned versions (e2e/versions.env) and where e2e/build.sh puts the binaries."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

VERSIONS_FILE = Path(__file__).resolve().parents[2] / "versions.env"
BUILD_SCRIPT = VERSIONS_FILE.parent / "build.sh"


def read_versions(path: Path = VERSIONS_FILE) -> dict[str, str]:
    """The pins, each overridden by E2E_<KEY> in the environment if set (as build.sh does)."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            key = key.strip()
            out[key] = os.environ.get(f"E2E_{key}") or value.strip().strip("'\"")
    return out


@contextlib.contextmanager
def pinned(**overrides: str) -> Iterator[None]:
    """Within the block, read_versions() (and so find_binary) see these pins (E2E_<KEY>), as a
    run of `make e2e-matrix` would; the environment is restored after."""
    saved = {key: os.environ.get(f"E2E_{key}") for key in overrides}
    os.environ.update({f"E2E_{key}": value for key, value in overrides.items()})
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(f"E2E_{key}", None)
            else:
                os.environ[f"E2E_{key}"] = value


def cache_dir() -> Path:
    default = Path.home() / ".cache" / "tekton-coscheduler"
    return Path(os.environ.get("TEKTON_COSCHEDULER_CACHE") or default)


@dataclass(frozen=True)
class Component:
    name: str  # as e2e/build.sh calls it
    version_key: str
    binaries: tuple[str, ...]
    version_probe: tuple[str, ...]  # argv suffix whose output contains the version, if any
    module: str = ""  # else: the Go module whose version `go version -m` must show


COMPONENTS = {
    "etcd": Component("etcd", "ETCD_VERSION", ("etcd",), ("--version",)),
    "kubernetes": Component(
        "kubernetes",
        "KUBERNETES_VERSION",
        ("kube-apiserver", "kube-controller-manager", "kube-scheduler"),
        ("--version",),
    ),
    "kwok": Component("kwok", "KWOK_VERSION", ("kwok",), ("--version",)),
    "tekton": Component(
        "tekton",
        "TEKTON_PIPELINE_VERSION",
        ("tekton-controller",),
        (),
        module="github.com/tektoncd/pipeline",
    ),
    "helm": Component("helm", "HELM_VERSION", ("helm",), ("version", "--short")),
    "certmanager": Component(
        "certmanager",
        "CERT_MANAGER_VERSION",
        ("cert-manager-controller", "cert-manager-cainjector"),
        (),
        module="github.com/cert-manager/cert-manager",
    ),
    "karpenter": Component(
        "karpenter", "KARPENTER_VERSION", ("karpenter-kwok",), (), module="sigs.k8s.io/karpenter"
    ),
    # A real node (e2e/harness/cluster/realnode.py) and the registry it pulls from; images are
    # archives in the cache, pushed into that registry.
    "containerd": Component("containerd", "CONTAINERD_VERSION",
                            ("containerd", "ctr", "containerd-shim-runc-v2"), ("--version",)),
    "cni": Component("cni", "CNI_PLUGINS_VERSION", ("bridge", "loopback", "host-local", "portmap"),
                     (), module="github.com/containernetworking/plugins"),
    "kubelet": Component("kubelet", "KUBERNETES_VERSION", ("kubelet", "kube-proxy"),
                         ("--version",)),
    "registry": Component("registry", "REGISTRY_VERSION", ("registry",), (),
                          module="github.com/distribution/distribution/v3"),
}
COMPONENT_OF = {b: c for c in COMPONENTS.values() for b in c.binaries}


class BinaryNotFound(FileNotFoundError):
    pass


def _reports_version(path: str, component: Component, version: str) -> bool:
    if component.version_probe:
        argv = [path, *component.version_probe]
    elif component.module and shutil.which("go"):
        argv = ["go", "version", "-m", path]  # the controller has no --version flag
    else:
        return False
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    if component.module:
        return any(line.split()[1:3] == [component.module, version] for line in out.splitlines())
    return version in out or version.lstrip("v") in out


def find_binary(name: str) -> Path:
    """TEKTON_COSCHEDULER_BIN_DIR as is, then the build cache, then PATH at the pinned version;
    while a running e2e/build.sh has it still to build, it waits for that (e2e/harness/cluster/
    building.py: scenarios wait for their parts before their timeout starts; this is the net)."""
    component = COMPONENT_OF[name]
    version = read_versions()[component.version_key]
    while True:
        try:
            return _find_binary(name, component, version)
        except BinaryNotFound:
            if builder_of(component.name, version) is None:
                raise
            time.sleep(2)


def _find_binary(name: str, component: Component, version: str) -> Path:
    bin_dir = os.environ.get("TEKTON_COSCHEDULER_BIN_DIR")
    if bin_dir and (Path(bin_dir) / name).is_file():
        return Path(bin_dir) / name
    cached = cache_dir() / "bin" / f"{component.name}-{version}" / name
    if cached.is_file() and (cached.parent / ".stamp").is_file():
        return cached
    on_path = shutil.which(name)
    if on_path and _reports_version(on_path, component, version):
        return Path(on_path)
    raise BinaryNotFound(
        f"{name} {version} not found (looked in TEKTON_COSCHEDULER_BIN_DIR, {cached}, PATH); "
        f"build it with: {BUILD_SCRIPT} {component.name}"
    )


def builder_of(component: str, version: str | None = None) -> int | None:
    """The pid of a running build.sh that has still to build it, if any."""
    for plan in (cache_dir() / "building").glob("*"):
        if not plan.name.isdigit() or not alive(int(plan.name)):
            continue  # a build.sh killed before it could take its list away
        for line in _lines(plan):
            name, _, built = line.partition(" ")
            if name == component and (version is None or built == version):
                return int(plan.name)
    return None


def alive(pid: int) -> bool:
    """Not gone, and not a zombie its parent has yet to reap (a killed process the harness
    started stays one until reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def _lines(plan: Path) -> list[str]:
    try:
        return plan.read_text().splitlines()
    except OSError:  # taken away as it was read: that build.sh has ended
        return []


def have_binary(name: str) -> bool:
    try:
        find_binary(name)
    except BinaryNotFound:
        return False
    return True
