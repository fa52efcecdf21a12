"""The project's image, built from its unchanged Dockerfile with buildah (no Docker engine), on
the base images e2e/build.sh made from Debian's packages under the names the Dockerfile's FROM
lines give; saved as an archive a real node's containerd imports. Cached by the content of what the
Dockerfile copies, so a second session with the same code builds nothing; only the last image
built is kept.
"""

from __future__ import annotations

import hashlib
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from . import realhost
from .versions import cache_dir, read_versions

REPOSITORY = "e2e.tekton-coscheduler.dev/tekton-coscheduler"
# What the Dockerfile copies (and .dockerignore leaves): the image's content follows from these.
INPUTS = ("Dockerfile", ".dockerignore", "requirements.lock", "pyproject.toml", "README.md")
# The machine's pip settings and CA bundle, mounted into the build read-only: pip reaches PyPI
# as the machine does, and the Dockerfile stays as users build it.
BUILD_MOUNTS = ("/etc/pip.conf", "/etc/ssl/certs")


@dataclass(frozen=True)
class Built:
    name: str  # repository:tag
    archive: Path  # docker-archive for `ctr images import`
    size_bytes: int  # the archive: the image's layers, uncompressed
    seconds: float  # the build's wall time (0: from the cache)


def buildah_command() -> list[str]:
    """buildah on the lab's own store (vfs: no overlay mounts needed)."""
    store = cache_dir() / "buildah"
    return ["buildah", "--root", str(store / "storage"), "--runroot", str(store / "run"),
            "--storage-driver", "vfs"]


def bud_options() -> list[str]:
    """How the lab builds the Dockerfile (and a release made in the lab: e2e/tests/
    test_release.py): the base from the store only, one layer per stage, the machine's pip
    settings mounted."""
    mounts = [f"--volume={m}:{m}:ro" for m in BUILD_MOUNTS if Path(m).exists()]
    return ["--pull=never", "--isolation=chroot", "--layers=false", *mounts]


def _buildah(*args: str, timeout: float = 900) -> str:
    argv = [*buildah_command(), *args]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed:\n{out.stdout[-4000:]}\n{out.stderr[-4000:]}")
    return out.stdout


def tag_of(repo: Path) -> str:
    digest = hashlib.sha256()
    files = [repo / f for f in INPUTS] + sorted((repo / "controller").rglob("*.py"))
    for path in files:
        if path.is_file():
            digest.update(str(path.relative_to(repo)).encode() + b"\0" + path.read_bytes())
    return "e2e-" + digest.hexdigest()[:16]


# The image configuration each base's publisher gives it, as far as a build reads it.
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
BASE_CONFIG = {
    # The official Python image.
    "BASE_IMAGE": ["--env", f"PATH={PATH}", "--env", "LANG=C.UTF-8", "--cmd", "python3"],
    # distroless's python3, :nonroot (its static.bzl and python.bzl).
    "RUNTIME_BASE_IMAGE": ["--env", f"PATH={PATH}", "--env",
                           "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
                           "--env", "LANG=C.UTF-8", "--user", "65532", "--workingdir",
                           "/home/nonroot", "--entrypoint", '["/usr/bin/python3.13"]'],
}
ROOTFS = {"BASE_IMAGE": "base.tar", "RUNTIME_BASE_IMAGE": "runtime.tar"}


def base_rootfs_dir() -> Path:
    """Where e2e/build.sh baseimage puts the root filesystems (its component's version)."""
    pins = read_versions()
    names = f"{pins['BASE_IMAGE']} {pins['RUNTIME_BASE_IMAGE']}"
    for old, new in (("/", "_"), (":", "_"), (" ", "_")):
        names = names.replace(old, new)
    return cache_dir() / "bin" / f"baseimage-{pins['BASE_SUITE']}-{names}"


def ensure_base() -> None:
    """The bases the Dockerfile's FROM lines name in buildah's store, each from the root
    filesystem e2e/build.sh made."""
    pins = read_versions()
    have = _buildah("images", "--format", "{{.Name}}:{{.Tag}}").split()
    for key, tar in ROOTFS.items():
        name = pins[key]
        if name in have:
            continue
        rootfs = base_rootfs_dir() / tar
        # e2e/build.sh writes each tar in place and its .stamp once both are whole: a tar
        # without the stamp is still being written (committed then, the base would lack files).
        if not rootfs.is_file() or not rootfs.with_name(".stamp").is_file():
            raise FileNotFoundError(f"{rootfs} not built: e2e/build.sh baseimage")
        container = _buildah("from", "scratch").strip()
        try:
            _buildah("add", container, str(rootfs), "/")
            _buildah("config", *BASE_CONFIG[key], container)
            _buildah("commit", container, name)
        finally:
            _buildah("rm", container)


def build(repo: Path) -> Built:
    with realhost.host_lock("image"):
        return _build(repo)


def _build(repo: Path) -> Built:
    tag = tag_of(repo)
    name = f"{REPOSITORY}:{tag}"
    archive = cache_dir() / "images" / f"tekton-coscheduler-{tag}.tar"
    seconds = 0.0
    if not archive.is_file():
        ensure_base()
        t0 = time.monotonic()
        _buildah("bud", *bud_options(), "-t", name, "-f", str(repo / "Dockerfile"), str(repo))
        seconds = time.monotonic() - t0
        archive.parent.mkdir(parents=True, exist_ok=True)
        partial = archive.with_suffix(".partial")
        _buildah("push", name, f"docker-archive:{partial}:{name}")
        partial.rename(archive)
        prune(keep=tag)
    return Built(name, archive, archive.stat().st_size, seconds)


# An archive another session (another checkout) built this recently may be about to be used.
KEEP_RECENT = 3 * 3600.0


def prune(keep: str) -> None:
    """Images of earlier code go (about 550 MiB each, archive and vfs store): the cache holds
    the last one built, and the archives of the last hours (another checkout's tests may be
    about to use theirs), not one per change."""
    for old in (cache_dir() / "images").glob("tekton-coscheduler-e2e-*.tar"):
        if (old.name != f"tekton-coscheduler-{keep}.tar"
                and time.time() - old.stat().st_mtime > KEEP_RECENT):
            old.unlink(missing_ok=True)
    for image in _buildah("images", "--format", "{{.Name}}:{{.Tag}}").split():
        if image.startswith(f"{REPOSITORY}:") and image != f"{REPOSITORY}:{keep}":
            _buildah("rmi", image)
