"""A real Kubernetes control plane for the e2e suite and the demo (see e2e/build.sh)."""

from .api import create_once, name_of, present
from .backends import Backend, ExistingCluster, KindCluster, open_cluster
from .handle import (
    FAKE_NODE_ANNOTATION,
    LOCAL_STORAGE_CLASS,
    ClusterHandle,
    as_dict,
    node_schedulable,
)
from .local import LocalCluster
from .pki import issue_cert, load_ca
from .versions import BinaryNotFound, find_binary, have_binary, read_versions

__all__ = [
    "FAKE_NODE_ANNOTATION",
    "LOCAL_STORAGE_CLASS",
    "Backend",
    "BinaryNotFound",
    "ClusterHandle",
    "ExistingCluster",
    "KindCluster",
    "LocalCluster",
    "as_dict",
    "create_once",
    "find_binary",
    "have_binary",
    "issue_cert",
    "load_ca",
    "name_of",
    "node_schedulable",
    "open_cluster",
    "present",
    "read_versions",
]
