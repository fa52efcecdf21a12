"""Warm anchors on kwok nodes: nodes that report images in `status.images` (as a kubelet reports
what it has pulled, the largest first), and runs whose steps use them.

kwok pulls nothing: a node "holds" an image because its status says so, which is all the
scheduler's ImageLocality, and our preference, ever read. kwok's stages patch the conditions
and leave `status.images` as the test wrote it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from e2e.harness import tekton_runs as tr
from e2e.harness.cluster import ClusterHandle
from e2e.harness.cluster.api import ClusterApi
from e2e.harness.coscheduler import Coscheduler
from e2e.harness.faults import POOL, POOL_ZONE

MB = 10**6


@dataclass(frozen=True)
class WarmPool:
    """Kwok nodes of one zone for one scenario; every pod of its runs held to them."""

    label: dict[str, str]
    nodes: list[str]


def make_pool(cluster: ClusterHandle, count: int = 3, cpu: str = "4") -> WarmPool:
    pid = uuid.uuid4().hex[:5]
    label = {POOL: pid}
    return WarmPool(label, cluster.add_nodes(count, prefix=f"warm-{pid}", cpu=cpu,
                                             zones=(POOL_ZONE,), labels=label))


def remove_pool(cluster: ClusterApi, pool: WarmPool) -> None:
    with cluster.api_client() as api:
        for node in pool.nodes:
            try:
                client.CoreV1Api(api).delete_node(node)
            except ApiException as exc:
                if exc.status != 404:
                    raise


KNOWN = "tekton_coscheduler_warm_node_images"


def weighs(operator: Coscheduler) -> bool:
    """Whether the operator's code has warm anchors (it counts the nodes' images). Code from
    before them (E2E_OPERATOR_SOURCE: how a scenario is seen failing first) has nothing of its
    bookkeeping to wait for, and is judged by where it anchors."""
    return any(s.name == KNOWN for s in operator.samples())


def hold(cluster: ClusterApi, node: str, images: Mapping[str, int],
         operator: Coscheduler | None = None) -> None:
    """The node reports these images (reference -> bytes), each by its tag and a digest; with
    `operator`, returns once its node watch has seen them (its count of node images grew)."""
    listed = [{"names": [f"{ref.split(':')[0]}@sha256:{uuid.uuid4().hex * 2}", ref],
               "sizeBytes": size} for ref, size in images.items()]
    operator = operator if operator is not None and weighs(operator) else None
    known = operator.metric(KNOWN) if operator else 0.0
    with cluster.api_client() as api:
        client.CoreV1Api(api).patch_node_status(node, {"status": {"images": listed}})
    if operator is not None:
        cluster.wait_for(lambda: operator.metric(KNOWN) >= known + len(images), timeout=30,
                         what=f"the operator sees {node}'s images")


def image(name: str = "builder") -> str:
    """An image name no other scenario uses (no node but those a test says holds it)."""
    return f"registry.e2e.test/{name}-{uuid.uuid4().hex[:6]}:1.0"


def _tasks(step_image: str) -> list[dict[str, Any]]:
    tasks = [tr.task(tr.FETCH), tr.task("build", after=[tr.FETCH])]
    for task in tasks:
        task["taskSpec"]["steps"][0]["image"] = step_image
    return tasks


def run(name: str, step_image: str, pool: WarmPool) -> dict[str, Any]:
    """fetch -> build, both steps in `step_image`, on an emptyDir: nothing but the images and
    the pool's nodes chooses their node."""
    return tr.pipelinerun(name, _tasks(step_image), {tr.SHARED: {"emptyDir": {}}},
                          pod_template={"nodeSelector": dict(pool.label)})


def pipeline(custom: client.CustomObjectsApi, namespace: str, name: str, step_image: str) -> None:
    """A Pipeline of the namespace, as teams keep theirs, for runs by pipelineRef."""
    custom.create_namespaced_custom_object(*tr.TEKTON, namespace, "pipelines", {
        "apiVersion": "/".join(tr.TEKTON), "kind": "Pipeline", "metadata": {"name": name},
        "spec": {"workspaces": [{"name": tr.SHARED}], "tasks": _tasks(step_image)}})


def run_of(pipeline_name: str, pool: WarmPool) -> dict[str, Any]:
    return {"apiVersion": "/".join(tr.TEKTON), "kind": "PipelineRun",
            "metadata": {"name": tr.unique(pipeline_name)},
            "spec": {"pipelineRef": {"name": pipeline_name},
                     "workspaces": [{"name": tr.SHARED, "emptyDir": {}}],
                     "taskRunTemplate": {"podTemplate": {"nodeSelector": dict(pool.label)}}}}


def warm_nodes(custom: client.CustomObjectsApi, namespace: str, policy: str) -> dict[str, Any]:
    """The policy's status.warmNodes: where each pipeline last ran."""
    found = cast(dict[str, Any], custom.get_namespaced_custom_object(
        "tekton-coscheduler.dev", "v1alpha1", namespace, "coschedulingpolicies", policy))
    return dict((found.get("status") or {}).get("warmNodes") or {})
