"""The parts e2e/build.sh has still to build, and waiting for them.

`make test` builds the parts in the background (e2e/build.sh --background) while lint, the unit
tests and the first scenarios run. Every running build.sh lists what it has still to build in
$CACHE/building/<pid>, "component version" a line, and takes a line off once the component is
built (or was there). A scenario that needs a part on such a list waits for it rather than skip
for want of it; a part no live build.sh plans is looked for once, as before.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from .versions import builder_of, read_versions

# What the control plane needs (every scenario on a cluster), and what a real node needs.
BASE = ("etcd", "kubernetes", "kwok", "helm")
REALNODE = ("debian", "containerd", "cni", "kubelet", "tektonimages", "pause", "baseimage",
            "registry")
# Parts the build makes after the control plane's, in its order (e2e/build.sh, all): scenarios
# needing a later one run later (e2e/tests/conftest.py), so they find it built, not wait for it.
# "tekton-before" is the older Tekton line the upgrade scenarios start from.
LATE = ("certmanager", "tekton", "karpenter", "realnode", "tekton-before")
POLL = 2.0


def rank(parts: Iterable[str]) -> int:
    """0 for the control plane's parts alone, else 1 + the latest of LATE among them."""
    return max((LATE.index(p) + 1 for p in parts if p in LATE), default=0)


def components(part: str) -> list[tuple[str, str | None]]:
    """A part as build.sh components and versions (None: any version it builds)."""
    versions = read_versions()
    if part == "realnode":
        return [(c, None) for c in REALNODE]
    if part == "tekton":
        return [("tekton", versions["TEKTON_PIPELINE_VERSION"])]
    if part == "tekton-before":
        return [("tekton", versions["TEKTON_UPGRADE_FROM"])]
    return [(part, None)]


def wait_for(parts: Iterable[str], say: Callable[[str], None] = lambda _: None,
             timeout: float = 3600.0) -> float:
    """Returns once no running build.sh has any of these parts still to build (built, given up,
    or never planned); how many seconds that took. Past the timeout it returns all the same:
    the scenario then finds the part or not, and says so."""
    wanted = [c for part in parts for c in components(part)]
    start = time.monotonic()
    said: set[str] = set()
    while time.monotonic() - start < timeout:
        pending = [(c, v, pid) for c, v in wanted if (pid := builder_of(c, v)) is not None]
        if not pending:
            break
        component, version, pid = pending[0]
        what = f"{component} {version or ''}".strip()
        if what not in said:
            said.add(what)
            say(f"waiting for e2e/build.sh (pid {pid}) to build {what}")
        time.sleep(POLL)
    return time.monotonic() - start

