"""Choosing what runs the cluster: local processes (default), the current kubeconfig, or kind."""

from __future__ import annotations

import enum
import os
import tempfile
from pathlib import Path
from typing import Any

from kubernetes import client, config

from .api import name_of, present
from .handle import LOCAL_STORAGE_CLASS, ClusterHandle
from .local import LocalCluster


class Backend(enum.StrEnum):
    LOCAL = "local"
    EXISTING = "existing"
    KIND = "kind"


class ExistingCluster(ClusterHandle):
    """Whatever KUBECONFIG (or ~/.kube/config) points at. Nothing is created at start but the
    local-wffc StorageClass (not made default); kwok and the Tekton controller start here, as
    local processes, only when add_nodes / start_tekton need them."""

    backend = "existing"

    def __init__(self, kubeconfig: Path | None = None, logs_dir: Path | None = None) -> None:
        super().__init__(
            logs_dir or Path(tempfile.mkdtemp(prefix="tekton-coscheduler-e2e-")) / "logs"
        )
        default = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or "~/.kube/config"
        self.kubeconfig = Path(kubeconfig or default).expanduser()

    def start(self) -> ExistingCluster:
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        cfg = client.Configuration()
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(self.kubeconfig), client_configuration=cfg
        )
        self.server = cfg.host
        with self.api_client() as api:
            client.VersionApi(api).get_code()  # fails fast when the cluster is unreachable
        self.ensure_storage_class(LOCAL_STORAGE_CLASS, default=False)
        return self


# Two workers in two zones: co-location means something, and a zonal volume has a choice.
KIND_CONFIG = """\
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
  - role: control-plane
  - role: worker
    labels: {topology.kubernetes.io/zone: zone-a}
  - role: worker
    labels: {topology.kubernetes.io/zone: zone-b}
"""


class KindCluster(ExistingCluster):
    """A kind cluster through pytest-kind-ng (needs Docker, so untested on Docker-less machines)."""

    backend = "kind"

    def __init__(self, name: str = "tekton-coscheduler-e2e") -> None:
        super().__init__(kubeconfig=Path("/nonexistent"))
        self.name = name
        self._kind: Any = None

    def start(self) -> KindCluster:
        from pytest_kind import KindCluster as _Kind  # type: ignore[import-not-found]  # optional extra

        self.logs_dir.mkdir(parents=True, exist_ok=True)
        config_file = self.logs_dir / "kind.yaml"
        config_file.write_text(KIND_CONFIG)
        kind = _Kind(self.name)
        kind.create(config_file)
        self._kind = kind
        self.kubeconfig = Path(kind.kubeconfig_path)
        super().start()
        return self

    def load_image(self, image: str) -> None:
        """Copies a locally built image into every node (no registry involved)."""
        self._kind.load_docker_image(image)

    def workers(self) -> list[str]:
        with self.api_client() as api:
            nodes = client.CoreV1Api(api).list_node().items
        return sorted(
            name_of(n)
            for n in nodes
            if "node-role.kubernetes.io/control-plane" not in (present(n.metadata).labels or {})
        )

    def stop(self) -> None:
        super().stop()
        kind, self._kind = self._kind, None
        if kind is not None:
            kind.delete()


def open_cluster(backend: Backend | str = Backend.LOCAL) -> ClusterHandle:
    """An unstarted handle for the backend; use it as a context manager or call start()/stop()."""
    match Backend(backend):
        case Backend.LOCAL:
            return LocalCluster()
        case Backend.EXISTING:
            return ExistingCluster()
        case Backend.KIND:
            return KindCluster()
