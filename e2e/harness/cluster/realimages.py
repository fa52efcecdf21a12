"""The images a real node runs, as e2e/build.sh made them, and the names the lab's registry
serves them under: pause (every pod's sandbox, and the balloon's image), Tekton's own images
and busybox (its shell and the steps')."""

from __future__ import annotations

import os
from pathlib import Path

from .versions import read_versions

IMAGE_PREFIX = "e2e.tekton-coscheduler.dev"
# The registry hosts whose names the lab's registry serves (each node's containerd maps them to
# it); any other registry is unreachable from a node.
REGISTRIES = ("registry.k8s.io", IMAGE_PREFIX)


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


TEKTON_IMAGES = ("entrypoint", "nop", "workingdirinit", "sidecarlogresults", "shell")


def balloon() -> str:
    """The chart's balloon image (config.balloon.image's default)."""
    return f"registry.k8s.io/pause:{read_versions()['PAUSE_VERSION']}"


def sandbox() -> str:
    """The nodes' own pause, containerd's pinned sandbox image: a name of the node image's, as
    cloud providers' nodes pin a pause of their own registry. Not the balloon's name, so that
    the balloon's image is pulled, with the chart's pull secret, like any pod's."""
    return image_name("pause", read_versions()["PAUSE_VERSION"])


def archives() -> dict[str, Path]:
    """Name -> the archive e2e/build.sh made for it: what the lab's registry serves."""
    pause = images_dir("pause") / "pause.tar"
    tekton = images_dir("tektonimages")
    version = read_versions()["TEKTON_PIPELINE_VERSION"]
    found = {balloon(): pause, sandbox(): pause, busybox(): tekton / "busybox.tar",
             **{image_name(what, version): tekton / f"{what}.tar" for what in TEKTON_IMAGES}}
    missing = sorted({str(p) for p in found.values() if not p.is_file()})
    if missing:
        raise FileNotFoundError(f"not built: {', '.join(missing)} (e2e/build.sh realnode)")
    return found


def tekton_images() -> dict[str, str]:
    """Tekton controller's image flags (without "-image") -> the images a real node pulls."""
    version = read_versions()["TEKTON_PIPELINE_VERSION"]
    return {**{what: image_name(what, version) for what in TEKTON_IMAGES},
            "shell-win": image_name("shell", version)}


def busybox() -> str:
    return image_name("busybox", read_versions()["TEKTON_PIPELINE_VERSION"])
