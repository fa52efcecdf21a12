"""CustomResourceDefinitions of third parties (and ours) put on a test cluster, and where the Go
module cache holds the projects that ship them."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from .api import ClusterApi


@functools.cache
def module_dir(module: str, version: str) -> Path:
    """The Go module cache's copy of module@version, downloaded if missing. A module whose go
    line names a newer Go than the installed one is refused after it is unpacked (Karpenter's):
    its files are read all the same, as e2e/build.sh builds from them."""
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"}
    with tempfile.TemporaryDirectory() as cwd:  # outside any module: no go.mod interferes
        out = subprocess.run(
            ["go", "mod", "download", "-json", f"{module}@{version}"],
            capture_output=True,
            text=True,
            env=env,
            cwd=cwd,
            timeout=600,
        )
    if out.returncode == 0:
        return Path(json.loads(out.stdout)["Dir"])
    cache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True,
                           env=env, timeout=60).stdout.strip()
    unpacked = Path(cache) / f"{_escaped(module)}@{version}"
    if "requires go" in out.stdout and (unpacked / "go.mod").is_file():
        return unpacked
    raise RuntimeError(f"go mod download {module}@{version} failed:\n{out.stdout}{out.stderr}")


def _escaped(module: str) -> str:
    """The module cache's spelling of a path: each capital letter as '!' and its lower case."""
    return "".join(f"!{c.lower()}" if c.isupper() else c for c in module)


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def apply(cluster: ClusterApi, crds: Iterable[dict[str, Any]], timeout: float = 60) -> None:
    """Creates or replaces each CRD and waits until all are Established."""
    with cluster.api_client() as api:
        ext = client.ApiextensionsV1Api(api)
        names = []
        for crd in crds:
            _create_or_replace(ext, crd)
            names.append(crd["metadata"]["name"])

        def established() -> bool:
            for name in names:
                status = ext.read_custom_resource_definition(name).status
                conds = (status.conditions if status else None) or []
                if not any(c.type == "Established" and c.status == "True" for c in conds):
                    return False
            return True

        cluster.wait_for(established, timeout=timeout, what=f"CRDs Established: {names}")


def _create_or_replace(ext: client.ApiextensionsV1Api, crd: Any) -> None:
    # create, not client-side apply: Tekton's TaskRun CRD is over the 256 KiB annotation limit.
    try:
        ext.create_custom_resource_definition(crd)
    except ApiException as e:
        if e.status != 409:
            raise
        current = ext.read_custom_resource_definition(crd["metadata"]["name"])
        crd["metadata"]["resourceVersion"] = (
            current.metadata or client.V1ObjectMeta()
        ).resource_version
        ext.replace_custom_resource_definition(crd["metadata"]["name"], crd)
