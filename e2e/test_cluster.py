"""Proof that the harness is a real control plane: the real scheduler, controllers and Tekton."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from e2e.cluster import ClusterHandle, node_schedulable

pytestmark = pytest.mark.e2e


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    container = {"name": "main", "image": "registry.invalid/never-pulled", "command": ["true"]}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [container], **spec},
    }


def _succeeded(obj: dict[str, Any]) -> str | None:
    """'True'/'False' once the Succeeded condition is final, else None."""
    for cond in obj.get("status", {}).get("conditions", []):
        if cond["type"] == "Succeeded" and cond["status"] in ("True", "False"):
            return str(cond["status"])
    return None


def test_nodes_become_ready(cluster: ClusterHandle) -> None:
    names = cluster.add_nodes(2, prefix="ready", zones=("zone-x",), cpu="2", memory="4Gi")
    with cluster.api_client() as api:
        core = client.CoreV1Api(api)
        for name in names:
            node = core.read_node(name)
            assert node_schedulable(node)
            assert node.metadata.labels["topology.kubernetes.io/zone"] == "zone-x"
            assert node.status.allocatable["cpu"] == "2"


def test_wait_for_first_consumer_binds_to_the_node_of_the_only_pv(
    cluster: ClusterHandle, namespace: str
) -> None:
    nodes = cluster.add_nodes(3, prefix="topo")
    target = nodes[1]
    pv = f"pv-{namespace}"
    cluster.add_local_pv(pv, target, size="1Gi")
    with cluster.api_client() as api:
        core = client.CoreV1Api(api)
        core.create_namespaced_persistent_volume_claim(
            namespace,
            {
                "metadata": {"name": "data"},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    # no storageClassName: local-wffc is the default class
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            },
        )
        pvc = core.read_namespaced_persistent_volume_claim("data", namespace)
        assert pvc.spec.storage_class_name == "local-wffc"
        assert pvc.status.phase == "Pending"  # waits for its first consumer
        core.create_namespaced_pod(
            namespace,
            _pod(
                "consumer", volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]
            ),
        )
        pod = cluster.wait_for(
            lambda: (p := core.read_namespaced_pod("consumer", namespace)).spec.node_name and p,
            timeout=60,
            what="the PVC consumer to be scheduled",
        )
        assert pod.spec.node_name == target
        pvc = cluster.wait_for(
            lambda: (
                (c := core.read_namespaced_persistent_volume_claim("data", namespace)).status.phase
                == "Bound"
                and c
            ),
            timeout=60,
            what="the PVC to bind",
        )
        assert pvc.spec.volume_name == pv
        cluster.wait_for(
            lambda: core.read_namespaced_pod("consumer", namespace).status.phase == "Running",
            timeout=30,
            what="kwok to run the pod",
        )


def test_statefulset_pods_are_created_and_bound(cluster: ClusterHandle, namespace: str) -> None:
    cluster.add_nodes(1, prefix="sts")
    labels = {"app": "web"}
    with cluster.api_client() as api:
        apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
        apps.create_namespaced_stateful_set(
            namespace,
            {
                "metadata": {"name": "web"},
                "spec": {
                    "replicas": 2,
                    "serviceName": "web",
                    "selector": {"matchLabels": labels},
                    "template": {"metadata": {"labels": labels}, "spec": _pod("x")["spec"]},
                },
            },
        )

        def all_running() -> bool:
            pods = core.list_namespaced_pod(namespace, label_selector="app=web").items
            return len(pods) == 2 and all(
                p.spec.node_name and p.status.phase == "Running" for p in pods
            )

        cluster.wait_for(all_running, timeout=90, what="web-0 and web-1 scheduled and Running")
        cluster.wait_for(
            lambda: apps.read_namespaced_stateful_set("web", namespace).status.ready_replicas == 2,
            timeout=60,
            what="the StatefulSet to count 2 ready replicas",
        )


def test_garbage_collector_deletes_dependents(cluster: ClusterHandle, namespace: str) -> None:
    with cluster.api_client() as api:
        core = client.CoreV1Api(api)
        owner = core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
        ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}
        core.create_namespaced_config_map(
            namespace, {"metadata": {"name": "dependent", "ownerReferences": [ref]}}
        )
        core.delete_namespaced_config_map("owner", namespace, propagation_policy="Background")

        def gone() -> bool:
            try:
                core.read_namespaced_config_map("dependent", namespace)
            except ApiException as e:
                return e.status == 404
            return False

        cluster.wait_for(gone, timeout=60, what="the garbage collector to delete the dependent")


@pytest.fixture(scope="module")
def taskrun_owner_kind(cluster: ClusterHandle) -> str:
    """A stand-in CRD whose kind is TaskRun: kwok's stage matches owners by kind alone, and an
    owner that exists keeps the garbage collector from deleting the pods."""
    group = "stand-in.e2e.tekton-coscheduler.dev"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"taskruns.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "taskruns", "singular": "taskrun", "kind": "TaskRun"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }
    with cluster.api_client() as api:
        ext = client.ApiextensionsV1Api(api)
        ext.create_custom_resource_definition(crd)
        cluster.wait_for(
            lambda: any(
                c.type == "Established" and c.status == "True"
                for c in ext.read_custom_resource_definition(f"taskruns.{group}").status.conditions
                or []
            ),
            timeout=30,
            what="the stand-in TaskRun CRD",
        )
    return group


@pytest.mark.parametrize(("exit_code", "phase"), [("0", "Succeeded"), ("3", "Failed")])
def test_taskrun_owned_pod_completes_via_kwok_stage(
    cluster: ClusterHandle, namespace: str, taskrun_owner_kind: str, exit_code: str, phase: str
) -> None:
    cluster.add_nodes(1, prefix="kwokstage")
    group = taskrun_owner_kind
    with cluster.api_client() as api:
        crs, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
        owner = crs.create_namespaced_custom_object(
            group,
            "v1",
            namespace,
            "taskruns",
            {"apiVersion": f"{group}/v1", "kind": "TaskRun", "metadata": {"name": "tr"}},
        )
        pod = _pod("tr-pod")
        pod["spec"]["restartPolicy"] = "Never"
        pod["spec"]["containers"].append(
            {"name": "step-two", "image": "x.invalid/y", "command": ["true"]}
        )
        pod["metadata"]["ownerReferences"] = [
            {
                "apiVersion": f"{group}/v1",
                "kind": "TaskRun",
                "name": "tr",
                "uid": owner["metadata"]["uid"],
            }
        ]
        pod["metadata"]["annotations"] = {
            "e2e.tekton-coscheduler.dev/exit-code": exit_code,
            "e2e.tekton-coscheduler.dev/run-seconds": "0.5",
        }
        core.create_namespaced_pod(namespace, pod)
        done = cluster.wait_for(
            lambda: (
                (p := core.read_namespaced_pod("tr-pod", namespace)).status.phase
                in ("Succeeded", "Failed")
                and p
            ),
            timeout=60,
            what="kwok's pod-complete-taskrun stage to finish the pod",
        )
        assert done.status.phase == phase
        codes = [s.state.terminated.exit_code for s in done.status.container_statuses]
        assert codes == [int(exit_code)] * 2


def _pipeline_run(name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    task_spec: dict[str, Any] = {
        "steps": [{"name": "hello", "image": "registry.invalid/busybox", "script": "echo hello"}]
    }
    if annotations:
        task_spec["metadata"] = {"annotations": annotations}  # Tekton copies these to the pod
    return {
        "apiVersion": "tekton.dev/v1",
        "kind": "PipelineRun",
        "metadata": {"name": name},
        "spec": {"pipelineSpec": {"tasks": [{"name": "only", "taskSpec": task_spec}]}},
    }


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [(None, "True"), ({"e2e.tekton-coscheduler.dev/exit-code": "1"}, "False")],
    ids=["succeeds", "step-fails"],
)
def test_real_tekton_runs_a_pipelinerun(
    tekton: ClusterHandle, namespace: str, annotations: dict[str, str] | None, expected: str
) -> None:
    tekton.add_nodes(1, prefix="tekton")
    name = f"pr-{uuid.uuid4().hex[:6]}"
    with tekton.api_client() as api:
        crs = client.CustomObjectsApi(api)
        crs.create_namespaced_custom_object(
            "tekton.dev", "v1", namespace, "pipelineruns", _pipeline_run(name, annotations)
        )
        status = tekton.wait_for(
            lambda: _succeeded(
                crs.get_namespaced_custom_object(
                    "tekton.dev", "v1", namespace, "pipelineruns", name
                )
            ),
            timeout=120,
            what=f"PipelineRun {name} to finish",
        )
        pr = crs.get_namespaced_custom_object("tekton.dev", "v1", namespace, "pipelineruns", name)
        assert status == expected, pr.get("status")
        pods = client.CoreV1Api(api).list_namespaced_pod(namespace).items
        assert len(pods) == 1 and pods[0].spec.node_name
