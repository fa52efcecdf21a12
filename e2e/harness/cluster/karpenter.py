"""Karpenter with its kwok provider, beside a test cluster: a real autoscaler that makes and
removes (kwok) nodes. Its CRDs come from the Go module cache; the controller runs here as a
process (built by `e2e/build.sh karpenter`). The nodes it makes carry the kwok annotation that
our kwok manages, so they turn Ready like any other.

Only pods that tolerate the NodePool's taint make it add nodes: other scenarios' pods, left
pending on purpose, must not grow the cluster under them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from . import crds
from .api import ClusterApi, name_of, present
from .processes import ManagedProcess, free_port
from .versions import find_binary, read_versions

MODULE = "sigs.k8s.io/karpenter"
GROUP, VERSION = "karpenter.sh", "v1"
NODE_CLASS_GROUP, NODE_CLASS_VERSION = "karpenter.kwok.sh", "v1alpha1"
NODE_CLASS = "e2e"
# Pods that want a made node tolerate this taint; the NodePool puts it on every node it makes.
TAINT = "e2e.tekton-coscheduler.dev/autoscaled"
# Made nodes: nodeclaim name label (the Node's own name is random).
NODEPOOL_LABEL = "karpenter.sh/nodepool"
# What Karpenter puts on a node it has decided to remove, before it drains it.
DISRUPTED_TAINT = "karpenter.sh/disrupted"


def crd_documents() -> list[dict[str, Any]]:
    versions = read_versions()
    root = crds.module_dir(MODULE, versions["KARPENTER_VERSION"]) / "kwok"
    paths = sorted((root / "charts" / "crds").glob("*.yaml"))
    paths += sorted((root / "apis" / "crds").glob("*.yaml"))
    return [doc for path in paths for doc in crds.documents(path)]


def instance_types(zone: str, sizes: dict[str, int]) -> list[dict[str, Any]]:
    """Instance types of `sizes` (name -> CPUs, 4 GiB of memory per CPU) in one zone, priced by
    CPU so that Karpenter picks the smallest that fits."""
    return [
        {
            "name": name,
            "offerings": [{"Price": 0.05 * cpus, "Available": True, "Requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]},
            ]}],
            "architecture": "amd64",
            "operatingSystems": ["linux"],
            "resources": {"cpu": str(cpus), "memory": f"{4 * cpus}Gi", "pods": "110"},
        }
        for name, cpus in sizes.items()
    ]


def process(
    cluster: ClusterApi, logs_dir: Path, types: list[dict[str, Any]]
) -> ManagedProcess:
    """The controller, unstarted; the binary is looked up first."""
    binary = find_binary("karpenter-kwok")
    types_path = logs_dir.parent / "karpenter-instance-types.json"
    types_path.write_text(json.dumps(types, indent=1))
    argv = [
        str(binary),
        "--disable-leader-election",
        f"--instance-types-file-path={types_path}",
        f"--metrics-port={free_port()}",
        f"--health-probe-port={free_port()}",
        # Pods that arrive together are batched for one decision; the scenarios make a run's
        # scout and wait for its node, so a short window is enough.
        "--batch-idle-duration=1s",
        "--batch-max-duration=3s",
        "--log-level=debug",
    ]
    env = {"KUBECONFIG": str(cluster.kubeconfig), "SYSTEM_NAMESPACE": "kube-system",
           "HOME": str(logs_dir)}
    return ManagedProcess("karpenter", argv, logs_dir / "karpenter.log", env=env, cwd=logs_dir)


def node_pool(name: str, labels: dict[str, str], cpu_limit: int,
              consolidate_after: str = "10s", tainted: bool = True) -> dict[str, Any]:
    """A NodePool whose nodes carry `labels` and TAINT (if `tainted`: on a cluster of many
    scenarios), removed when empty or underutilised."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "requirements": [
                        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                        {"key": "karpenter.sh/capacity-type", "operator": "In",
                         "values": ["on-demand"]},
                    ],
                    "taints": [{"key": TAINT, "effect": "NoSchedule"}] if tainted else [],
                    "nodeClassRef": {"group": NODE_CLASS_GROUP, "kind": "KWOKNodeClass",
                                     "name": NODE_CLASS},
                    "expireAfter": "Never",
                },
            },
            "limits": {"cpu": str(cpu_limit)},
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized",
                           "consolidateAfter": consolidate_after, "budgets": [{"nodes": "100%"}]},
        },
    }


def toleration() -> dict[str, str]:
    return {"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}


def apply_node_pool(cluster: ClusterApi, pool: dict[str, Any]) -> None:
    """The KWOKNodeClass (once) and the NodePool."""
    with cluster.api_client() as api:
        custom = client.CustomObjectsApi(api)
        node_class = {"apiVersion": f"{NODE_CLASS_GROUP}/{NODE_CLASS_VERSION}",
                      "kind": "KWOKNodeClass", "metadata": {"name": NODE_CLASS}}
        for group, version, plural, body in (
            (NODE_CLASS_GROUP, NODE_CLASS_VERSION, "kwoknodeclasses", node_class),
            (GROUP, VERSION, "nodepools", pool),
        ):
            try:
                custom.create_cluster_custom_object(group, version, plural, body)
            except ApiException as exc:
                if exc.status != 409:
                    raise


def delete_node_pool(cluster: ClusterApi, name: str) -> None:
    """Karpenter then drains and removes the pool's nodes itself."""
    with cluster.api_client() as api:
        try:
            client.CustomObjectsApi(api).delete_cluster_custom_object(
                GROUP, VERSION, "nodepools", name)
        except ApiException as exc:
            if exc.status != 404:
                raise


def disrupting(cluster: ClusterApi, node: str) -> bool:
    """Has Karpenter started taking the node away (its disruption taint, or deleting it)?"""
    with cluster.api_client() as api:
        try:
            found = client.CoreV1Api(api).read_node(node)
        except ApiException as exc:
            if exc.status == 404:
                return True
            raise
    taints = present(found.spec).taints or []
    return present(found.metadata).deletion_timestamp is not None or any(
        t.key == DISRUPTED_TAINT for t in taints)


def made_nodes(cluster: ClusterApi, pool: str) -> list[str]:
    """Names of the nodes the pool's NodeClaims became."""
    with cluster.api_client() as api:
        nodes = client.CoreV1Api(api).list_node(label_selector=f"{NODEPOOL_LABEL}={pool}").items
    return sorted(name_of(n) for n in nodes)
