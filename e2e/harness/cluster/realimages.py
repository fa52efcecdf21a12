"""The images a real node runs, as e2e/build.sh made them: pause (every pod's sandbox and the
balloon), Tekton's own images and busybox (its shell and the steps')."""

from __future__ import annotations

import os
from pathlib import Path

from .versions import read_versions

IMAGE_PREFIX = "e2e.tekton-coscheduler.dev"


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


def tekton_images() -> dict[str, str]:
    """Tekton controller's image flags (without "-image") -> the images a real node has."""
    version = read_versions()["TEKTON_PIPELINE_VERSION"]
    return {**{what: image_name(what, version) for what in TEKTON_IMAGES},
            "shell-win": image_name("shell", version)}


def busybox() -> str:
    return image_name("busybox", read_versions()["TEKTON_PIPELINE_VERSION"])
