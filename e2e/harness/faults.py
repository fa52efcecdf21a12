"""What happens to nodes in a real cluster, done to kwok nodes: cordon, taint, lose, delete,
drain (through the Eviction API, as `kubectl drain` does), and volumes by zone or by node."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from e2e.harness import tekton_runs as tr
from e2e.harness.cluster import LOCAL_STORAGE_CLASS, ClusterHandle, name_of, present
from e2e.harness.cluster.api import ClusterApi

HOSTNAME = "kubernetes.io/hostname"
NODE_LEASES = "kube-node-lease"
ZONE = "topology.kubernetes.io/zone"


def cordon(cluster: ClusterApi, node: str, on: bool = True) -> None:
    with cluster.api_client() as api:
        client.CoreV1Api(api).patch_node(node, {"spec": {"unschedulable": on}})


def taint(cluster: ClusterApi, node: str, key: str, effect: str = "NoSchedule") -> None:
    with cluster.api_client() as api:
        core = client.CoreV1Api(api)
        taints = [t.to_dict() for t in present(core.read_node(node).spec).taints or []]
        taints.append({"key": key, "value": "now", "effect": effect})
        core.patch_node(node, {"spec": {"taints": taints}})


def untaint(cluster: ClusterApi, node: str, key: str) -> None:
    with cluster.api_client() as api:
        core = client.CoreV1Api(api)
        taints = [t.to_dict() for t in present(core.read_node(node).spec).taints or []
                  if t.key != key]
        core.patch_node(node, {"spec": {"taints": taints}})


PARTITIONED = "e2e.tekton-coscheduler.dev/partitioned"


def lose(cluster: ClusterApi, node: str) -> None:
    """The node stops heart-beating, as when its kubelet or machine dies. The node controller
    deems a node alive while either its Ready condition's heartbeat or its Lease moves, so both
    must stop: a marker the kwok heartbeat stages exclude (cluster/stages), then the node's
    Lease taken from kwok (it renews only a Lease it holds). NotReady follows within the
    controller-manager's grace period. (Removing kwok's own annotation does not do it: kwok
    keeps renewing what it already manages.)"""
    with cluster.api_client() as api:
        client.CoreV1Api(api).patch_node(node, {"metadata": {"annotations": {PARTITIONED: "true"}}})
        time.sleep(1)  # kwok, still holding the Lease, processes the marker first
        _take_lease(client.CoordinationV1Api(api), node)


def _take_lease(coordination: client.CoordinationV1Api, node: str, tries: int = 10) -> None:
    """The taking is itself a last renewal, as a dying kubelet's last heartbeat, and must be the
    newest: from Kubernetes 1.37 the node controller, finding a Lease expired, reads the live
    one, and if it is not the last renewal it saw (by renewTime) waits for its cache to catch
    up, for good if the live Lease's renewTime is older than kwok's last. So the renewTime is
    after the one it replaces, and the write is conditional on the Lease read (kwok may renew
    it in between: then read again)."""
    for _ in range(tries):
        lease = coordination.read_namespaced_lease(node, NODE_LEASES)
        renewed, last = datetime.now(UTC), present(lease.spec).renew_time
        if last is not None and renewed <= last:
            renewed = last + timedelta(milliseconds=1)
        try:
            coordination.patch_namespaced_lease(node, NODE_LEASES, {
                "metadata": {"resourceVersion": present(lease.metadata).resource_version},
                "spec": {"holderIdentity": "e2e-partition", "leaseDurationSeconds": 3600,
                         "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")},
            })
            return
        except ApiException as exc:
            if exc.status != 409:  # 409: renewed by kwok since the read
                raise
    raise RuntimeError(f"could not take the Lease of node {node} from kwok in {tries} tries")


def delete_node(cluster: ClusterApi, node: str) -> None:
    with cluster.api_client() as api:
        client.CoreV1Api(api).delete_node(node)


def drain(cluster: ClusterApi, node: str, timeout: float = 120) -> tuple[float, int]:
    """kubectl drain: cordon, then evict every pod on the node through the Eviction API,
    retrying those a PodDisruptionBudget protects (429) until they are gone. Returns the seconds
    it took and how many evictions were refused on the way."""
    started, refused = time.monotonic(), 0
    cordon(cluster, node)
    with cluster.api_client() as api:
        core = client.CoreV1Api(api)
        while time.monotonic() - started < timeout:
            pods = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items
            pods = [p for p in pods if present(p.metadata).deletion_timestamp is None]
            if not pods:
                return time.monotonic() - started, refused
            for pod in pods:
                body: Any = {"apiVersion": "policy/v1", "kind": "Eviction",
                             "metadata": {"name": name_of(pod),
                                          "namespace": present(pod.metadata).namespace}}
                try:
                    core.create_namespaced_pod_eviction(
                        name_of(pod), present(present(pod.metadata).namespace), body)
                except ApiException as exc:
                    if exc.status == 429:
                        refused += 1
                    elif exc.status != 404:
                        raise
            time.sleep(1)
    raise TimeoutError(f"drain of {node} did not finish in {timeout}s")


def evict(cluster: ClusterApi, namespace: str, pod: str) -> int:
    """One eviction through the Eviction API: 201, or the refusal's status (429: a budget)."""
    body: Any = {"apiVersion": "policy/v1", "kind": "Eviction",
                 "metadata": {"name": pod, "namespace": namespace}}
    with cluster.api_client() as api:
        try:
            client.CoreV1Api(api).create_namespaced_pod_eviction(pod, namespace, body)
        except ApiException as exc:
            return int(exc.status)
    return 201


def add_pv(cluster: ClusterApi, key: str, value: str, size: str = "1Gi") -> str:
    """A free ReadWriteOnce volume any node with label key=value can use: by zone (like cloud
    block storage: the anchor may move within the zone) or by hostname (a local disk)."""
    name = f"pv-{uuid.uuid4().hex[:10]}"
    body: Any = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": LOCAL_STORAGE_CLASS,
            "volumeMode": "Filesystem",
            "local": {"path": f"/mnt/e2e/{name}"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}]}},
        },
    }
    with cluster.api_client() as api:
        client.CoreV1Api(api).create_persistent_volume(body)
    return name


def remove_unused_pvs(cluster: ClusterApi, names: list[str]) -> None:
    """Deletes those of the volumes `names` that no claim took."""
    with cluster.api_client() as api:
        core = client.CoreV1Api(api)
        for pv in core.list_persistent_volume().items:
            if name_of(pv) in names and present(pv.status).phase == "Available":
                core.delete_persistent_volume(name_of(pv))


# -- a pool of two nodes for one scenario ---------------------------------------------------------

POOL = "e2e.tekton-coscheduler.dev/pool"
POOL_ZONE = "zone-faults"


@dataclass
class Pool:
    """Kwok nodes of one zone for one scenario: `small` (2 CPUs) and `big` (8 CPUs; none in a
    pool an autoscaler grows, see harness/capacity.py). Every
    pod of the scenario's runs, balloon or assistant included, is held to them by the runs' pod
    template, and their volumes are keyed by the pool so that no other scenario takes them."""

    label: dict[str, str]
    small: str
    big: str = ""


def make_pool(cluster: ClusterHandle, big: bool = True, big_cpu: str = "8") -> Pool:
    pid = uuid.uuid4().hex[:5]
    label = {POOL: pid}
    [small] = cluster.add_nodes(1, prefix=f"small-{pid}", cpu="2", zones=(POOL_ZONE,), labels=label)
    if not big:
        return Pool(label, small)
    [big_node] = cluster.add_nodes(
        1, prefix=f"big-{pid}", cpu=big_cpu, zones=(POOL_ZONE,), labels=label)
    return Pool(label, small, big_node)


def remove_pool(cluster: ClusterApi, pool: Pool) -> None:
    """Deletes the pool's nodes (those still there) and its volumes no claim took."""
    with cluster.api_client() as api:
        core = client.CoreV1Api(api)
        for node in filter(None, (pool.small, pool.big)):
            try:
                core.delete_node(node)
            except ApiException as exc:
                if exc.status != 404:
                    raise
        for pv in core.list_persistent_volume().items:
            affinity = ((present(pv.spec).node_affinity or client.V1VolumeNodeAffinity()).required)
            terms = affinity.node_selector_terms if affinity else []
            keyed = {(e.key, v) for t in terms for e in t.match_expressions or []
                     for v in e.values or []}
            pinned = {(POOL, pool.label[POOL]), (HOSTNAME, pool.small), (HOSTNAME, pool.big)}
            if keyed & pinned and present(pv.status).phase == "Available":
                core.delete_persistent_volume(name_of(pv))


def volumes_across_the_pool(cluster: ClusterApi, pool: Pool, count: int = 2) -> None:
    """Volumes any node of the pool can use, as cloud disks any node of a zone can: a claim
    bound to one can follow its anchor to the pool's other node."""
    for _ in range(count):
        add_pv(cluster, POOL, pool.label[POOL])


def pool_pipeline(
    name: str, pool: Pool, first_cpu: str, first_seconds: str = "1", first_held: bool = False
) -> dict[str, Any]:
    """fetch (asking first_cpu) -> build, on one claim, every pod held to the pool. A held
    fetch runs until the test lets it go (Runs.release)."""
    fetch, build = tr.task(tr.FETCH), tr.task("build", after=[tr.FETCH])
    fetch["taskSpec"]["steps"][0]["computeResources"] = {"requests": {"cpu": first_cpu}}
    return tr.pipelinerun(
        name,
        [fetch, build],
        {tr.SHARED: tr.volume_claim_template()},
        pod_template={"nodeSelector": dict(pool.label)},
        task_annotations={tr.FETCH: {tr.HOLD: "true"} if first_held
                          else {tr.RUN_SECONDS: first_seconds}},
    )


NODE_EVENTS = ("cordon", "taint", "lost", "deleted", "drain")


def node_event(cluster: ClusterApi, kind: str, node: str) -> None:
    if kind == "cordon":
        cordon(cluster, node)
    elif kind == "taint":
        taint(cluster, node, "e2e.tekton-coscheduler.dev/maintenance")
    elif kind == "lost":
        lose(cluster, node)
    elif kind == "deleted":
        delete_node(cluster, node)
    elif kind == "drain":
        drain(cluster, node)
    else:
        raise ValueError(kind)
