"""Proof that the harness is a real control plane: the real scheduler, controllers and Tekton."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from e2e.harness.cluster import ClusterHandle, as_dict, node_schedulable

pytestmark = pytest.mark.e2e

EXIT_CODE = "e2e.tekton-coscheduler.dev/exit-code"
RUN_SECONDS = "e2e.tekton-coscheduler.dev/run-seconds"


def _pod(name: str, **spec: Any) -> Any:
    container = {"name": "main", "image": "registry.invalid/never-pulled", "command": ["true"]}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [container], **spec},
    }


def _succeeded(obj: Any) -> str | None:
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
            d = as_dict(node)
            assert d["metadata"]["labels"]["topology.kubernetes.io/zone"] == "zone-x"
            assert d["status"]["allocatable"]["cpu"] == "2"


def test_wait_for_first_consumer_binds_to_the_node_of_the_only_pv(
    cluster: ClusterHandle, namespace: str
) -> None:
    nodes = cluster.add_nodes(3, prefix="topo")
    target = nodes[1]
    pv = f"pv-{namespace}"
    cluster.add_local_pv(pv, target, size="1Gi")
    with cluster.api_client() as api:
        core = client.CoreV1Api(api)
        claim: Any = {
            "metadata": {"name": "data"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }
        if cluster.backend != "local":  # only the local backend makes local-wffc the default
            claim["spec"]["storageClassName"] = "local-wffc"
        core.create_namespaced_persistent_volume_claim(namespace, claim)

        def pvc() -> dict[str, Any]:
            return as_dict(core.read_namespaced_persistent_volume_claim("data", namespace))

        def pod() -> dict[str, Any]:
            return as_dict(core.read_namespaced_pod("consumer", namespace))

        assert pvc()["spec"]["storageClassName"] == "local-wffc"
        assert pvc()["status"]["phase"] == "Pending"  # waits for its first consumer
        volume = {"name": "d", "persistentVolumeClaim": {"claimName": "data"}}
        core.create_namespaced_pod(namespace, _pod("consumer", volumes=[volume]))
        node = cluster.wait_for(
            lambda: pod()["spec"].get("nodeName"), timeout=60, what="the consumer's scheduling"
        )
        assert node == target
        cluster.wait_for(lambda: pvc()["status"]["phase"] == "Bound", what="the PVC to bind")
        assert pvc()["spec"]["volumeName"] == pv
        cluster.wait_for(lambda: pod()["status"]["phase"] == "Running", what="kwok to run it")


def test_statefulset_pods_are_created_and_bound(cluster: ClusterHandle, namespace: str) -> None:
    cluster.add_nodes(1, prefix="sts")
    labels = {"app": "web"}
    sts: Any = {
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "serviceName": "web",
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": _pod("x")["spec"]},
        },
    }
    with cluster.api_client() as api:
        apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
        apps.create_namespaced_stateful_set(namespace, sts)

        def all_running() -> bool:
            pods = [as_dict(p) for p in core.list_namespaced_pod(namespace).items]
            return len(pods) == 2 and all(
                p["spec"].get("nodeName") and p["status"]["phase"] == "Running" for p in pods
            )

        cluster.wait_for(all_running, timeout=90, what="web-0 and web-1 scheduled and Running")
        cluster.wait_for(
            lambda: (
                as_dict(apps.read_namespaced_stateful_set("web", namespace))["status"].get(
                    "readyReplicas"
                )
                == 2
            ),
            what="the StatefulSet to count 2 ready replicas",
        )
        # Deleting the StatefulSet: the garbage collector deletes its pods, kwok confirms.
        apps.delete_namespaced_stateful_set("web", namespace, propagation_policy="Background")
        cluster.wait_for(
            lambda: not core.list_namespaced_pod(namespace).items,
            what="the StatefulSet's pods to be garbage-collected",
        )


def test_garbage_collector_deletes_dependents(cluster: ClusterHandle, namespace: str) -> None:
    with cluster.api_client() as api:
        core = client.CoreV1Api(api)
        owner: Any = {"metadata": {"name": "owner"}}
        uid = as_dict(core.create_namespaced_config_map(namespace, owner))["metadata"]["uid"]
        ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}
        dependent: Any = {"metadata": {"name": "dependent", "ownerReferences": [ref]}}
        core.create_namespaced_config_map(namespace, dependent)
        core.delete_namespaced_config_map("owner", namespace, propagation_policy="Background")

        def gone() -> bool:
            try:
                core.read_namespaced_config_map("dependent", namespace)
            except ApiException as e:
                return bool(e.status == 404)
            return False

        cluster.wait_for(gone, what="the garbage collector to delete the dependent")


@pytest.fixture(scope="module")
def taskrun_owner_group(cluster: ClusterHandle) -> str:
    """A stand-in CRD whose kind is TaskRun: kwok's stage matches owners by kind alone, and an
    owner that exists keeps the garbage collector from deleting the pods."""
    group = "stand-in.e2e.tekton-coscheduler.dev"
    schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    crd: Any = {
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
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }
    with cluster.api_client() as api:
        ext = client.ApiextensionsV1Api(api)
        ext.create_custom_resource_definition(crd)

        def established() -> bool:
            got = as_dict(ext.read_custom_resource_definition(f"taskruns.{group}"))
            conds = got.get("status", {}).get("conditions", [])
            return any(c["type"] == "Established" and c["status"] == "True" for c in conds)

        cluster.wait_for(established, timeout=30, what="the stand-in TaskRun CRD")
    return group


@pytest.mark.parametrize(("exit_code", "phase"), [("0", "Succeeded"), ("3", "Failed")])
def test_taskrun_owned_pod_completes_via_kwok_stage(
    cluster: ClusterHandle, namespace: str, taskrun_owner_group: str, exit_code: str, phase: str
) -> None:
    cluster.add_nodes(1, prefix="kwokstage")
    group = taskrun_owner_group
    with cluster.api_client() as api:
        crs, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
        owner: Any = crs.create_namespaced_custom_object(
            group,
            "v1",
            namespace,
            "taskruns",
            {"apiVersion": f"{group}/v1", "kind": "TaskRun", "metadata": {"name": "tr"}},
        )
        pod = _pod("tr-pod", restartPolicy="Never")
        pod["spec"]["containers"].append(
            {"name": "two", "image": "x.invalid/y", "command": ["true"]}
        )
        pod["metadata"]["ownerReferences"] = [
            {
                "apiVersion": f"{group}/v1",
                "kind": "TaskRun",
                "name": "tr",
                "uid": owner["metadata"]["uid"],
            }
        ]
        pod["metadata"]["annotations"] = {EXIT_CODE: exit_code, RUN_SECONDS: "0.5"}
        core.create_namespaced_pod(namespace, pod)

        def finished() -> dict[str, Any] | None:
            got = as_dict(core.read_namespaced_pod("tr-pod", namespace))
            return got if got["status"]["phase"] in ("Succeeded", "Failed") else None

        done = cluster.wait_for(finished, what="kwok's pod-complete-taskrun stage to end the pod")
        assert done is not None
        assert done["status"]["phase"] == phase
        codes = [s["state"]["terminated"]["exitCode"] for s in done["status"]["containerStatuses"]]
        assert codes == [int(exit_code)] * 2


def _pipeline_run(name: str, annotations: dict[str, str] | None) -> Any:
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
    [(None, "True"), ({EXIT_CODE: "1"}, "False")],
    ids=["succeeds", "step-fails"],
)
def test_real_tekton_runs_a_pipelinerun(
    tekton: ClusterHandle, namespace: str, annotations: dict[str, str] | None, expected: str
) -> None:
    tekton.add_nodes(1, prefix="tekton")
    name = f"pr-{uuid.uuid4().hex[:6]}"
    with tekton.api_client() as api:
        crs = client.CustomObjectsApi(api)
        args = ("tekton.dev", "v1", namespace, "pipelineruns")
        crs.create_namespaced_custom_object(*args, _pipeline_run(name, annotations))

        def get() -> Any:
            return crs.get_namespaced_custom_object(*args, name)

        status = tekton.wait_for(
            lambda: _succeeded(get()), timeout=120, what=f"PipelineRun {name} to finish"
        )
        assert status == expected, get().get("status")
        pods = [as_dict(p) for p in client.CoreV1Api(api).list_namespaced_pod(namespace).items]
        assert len(pods) == 1 and pods[0]["spec"]["nodeName"]
