"""cert-manager on a test cluster: its CRDs from the Go module cache, its controller and
cainjector run here as processes (built by `e2e/build.sh certmanager`). Its own admission
webhook is left out: it only validates and defaults cert-manager's resources."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import crds
from .api import ClusterApi
from .processes import ManagedProcess, free_port
from .versions import find_binary, read_versions

MODULE = "github.com/cert-manager/cert-manager"
GROUP, VERSION = "cert-manager.io", "v1"


def crd_documents() -> list[dict[str, Any]]:
    version = read_versions()["CERT_MANAGER_VERSION"]
    out = []
    for path in sorted((crds.module_dir(MODULE, version) / "deploy" / "crds").glob("crd-*.yaml")):
        for doc in crds.documents(path):
            # In this release the files are also Helm templates: only their labels are templated.
            doc["metadata"].pop("labels", None)
            out.append(doc)
    return out


def processes(cluster: ClusterApi, logs_dir: Path) -> list[ManagedProcess]:
    """The controller and the cainjector, unstarted; binaries are looked up first."""
    kubeconfig = f"--kubeconfig={cluster.kubeconfig}"
    controller = [
        str(find_binary("cert-manager-controller")),
        kubeconfig,
        "--leader-elect=false",
        f"--metrics-listen-address=127.0.0.1:{free_port()}",
    ]
    cainjector = [str(find_binary("cert-manager-cainjector")), kubeconfig, "--leader-elect=false"]
    return [
        ManagedProcess(Path(argv[0]).name, argv, logs_dir / f"{Path(argv[0]).name}.log")
        for argv in (controller, cainjector)
    ]
