"""The parts e2e/build.sh has still to build, and waiting for them.

`make test` builds the parts in the background (e2e/build.sh --background) while lint, the unit
tests and the first scenarios run. Every running build.sh lists what it has still to build in
$CACHE/building/<pid>, "component version" a line, and takes a line off once the component is
built (or was there). A scenario that needs a part on such a list waits for it rather than skip
for want of it; a part no live build.sh plans is looked for once, as before.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterable, Iterator

from .versions import alive, builder_of, cache_dir, read_versions

# What the control plane needs (every scenario on a cluster), and what a real node needs.
BASE = ("etcd", "kubernetes", "kwok", "helm")
REALNODE = ("debian", "containerd", "cni", "kubelet", "tektonimages", "pause", "baseimage",
            "registry")
# Parts the build makes after the control plane's, in its order (e2e/build.sh, all): scenarios
# needing a later one run later (e2e/tests/conftest.py), so they find it built, not wait for it.
# "tekton-before" is the older Tekton line the upgrade scenarios start from.
LATE = ("certmanager", "tekton", "karpenter", "realnode", "tekton-before")
POLL = 2.0
# The longest a scenario waits for the component being built to end before it runs anyway
# (Kubernetes took 204 s cold).
QUIET_WITHIN = 600.0


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


@contextlib.contextmanager
def quiet(say: Callable[[str], None] = lambda _: None,
          timeout: float = QUIET_WITHIN) -> Iterator[float]:
    """The block runs with no component being built: a scenario whose timing is what it tests
    (a pause that must fall mid-round, a deletion in the gap after a restart) failed in cold CI
    runs beside the build, nice 19 and all (two cores, their caches and memory shared). Every
    running build.sh holds before its next component while this lives (e2e/build.sh hold_on);
    the one being built is waited for first. Yields how many seconds that took."""
    holds = cache_dir() / "hold"
    holds.mkdir(parents=True, exist_ok=True)
    hold = holds / str(os.getpid())
    hold.write_text("")
    start = time.monotonic()
    try:
        said = False
        while time.monotonic() - start < timeout and (busy := _building()):
            if not said:
                said = True
                say(f"waiting for e2e/build.sh to finish {busy} before a scenario that needs "
                    "the machine to itself")
            time.sleep(POLL)
        yield time.monotonic() - start
    finally:
        hold.unlink(missing_ok=True)


def _building() -> str:
    """The component a live build.sh is building now, if any."""
    for current in (cache_dir() / "building").glob("*.current"):
        pid = current.name.removesuffix(".current")
        if pid.isdigit() and alive(int(pid)):
            with contextlib.suppress(OSError):
                return current.read_text().strip() or "a component"
    return ""
