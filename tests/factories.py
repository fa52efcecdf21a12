"""Objects shaped like the ones Tekton v1.x and the API server produce."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import uuid
from typing import Any

import yaml
from kubernetes.client.exceptions import ApiException

RUN_UID = "6f1d0c2a-3b4e-4f5a-8b9c-0d1e2f3a4b5c"
# The required pod-affinity term Tekton gives a TaskRun pod while its own assistant is on.
TEKTON_ASSISTANT_TERM = {
    "labelSelector": {"matchLabels": {"app.kubernetes.io/instance": "affinity-assistant-0123456789",
                                      "app.kubernetes.io/component": "affinity-assistant"}},
    "topologyKey": "kubernetes.io/hostname",
}


def pipelinerun(
    name: str = "build-42",
    namespace: str = "team-a",
    uid: str = RUN_UID,
    *,
    workspaces: list[dict[str, Any]] | None = None,
    succeeded: str | None = "Unknown",
    spec_status: str | None = None,
    annotations: dict[str, str] | None = None,
    pod_template: dict[str, Any] | None = None,
    task_run_specs: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "pipelineRef": {"name": "fan-out-in"},
        "workspaces": workspaces
        if workspaces is not None
        else [{"name": "shared", "persistentVolumeClaim": {"claimName": "source"}}],
    }
    if spec_status:
        spec["status"] = spec_status
    if pod_template is not None:
        spec["taskRunTemplate"] = {"podTemplate": pod_template}
    if task_run_specs is not None:
        spec["taskRunSpecs"] = task_run_specs
    body: dict[str, Any] = {
        "apiVersion": "tekton.dev/v1",
        "kind": "PipelineRun",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "creationTimestamp": "2026-11-22T03:00:00Z",
            "generation": 1,
            "annotations": annotations or {},
        },
        "spec": spec,
        "status": {},
    }
    if succeeded is not None:
        body["status"]["conditions"] = [
            {"type": "Succeeded", "status": succeeded, "reason": "Running"}
        ]
    return body


def taskrun_pod(
    run: str = "build-42",
    run_uid: str | None = RUN_UID,
    task: str = "compile",
    namespace: str = "team-a",
    *,
    affinity: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
    claim: str = "source",
) -> dict[str, Any]:
    """A TaskRun pod as Tekton's pod builder makes it (labels, ws- volume, step containers)."""
    taskrun = f"{run}-{task}"
    labels = {
        "app.kubernetes.io/managed-by": "tekton-pipelines",
        "tekton.dev/pipeline": "fan-out-in",
        "tekton.dev/pipelineRun": run,
        "tekton.dev/pipelineTask": task,
        "tekton.dev/taskRun": taskrun,
        "tekton.dev/memberOf": "tasks",
        "tekton.dev/taskRunUID": str(uuid.uuid4()),
    }
    if run_uid:
        labels["tekton.dev/pipelineRunUID"] = run_uid
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "serviceAccountName": "default",
        "initContainers": [
            {
                "name": "prepare",
                "image": "ghcr.io/tektoncd/pipeline/entrypoint:v1.15.0",
                "command": ["/ko-app/entrypoint", "init", "/ko-app/entrypoint", "/tekton/bin/entrypoint"],
                "volumeMounts": [{"name": "tekton-internal-bin", "mountPath": "/tekton/bin"}],
            }
        ],
        "containers": [
            {
                "name": "step-build",
                "image": "busybox",
                "command": ["/tekton/bin/entrypoint"],
                "args": ["-post_file", "/tekton/run/0/out", "--", "sh", "-c", "make"],
                "volumeMounts": [{"name": "ws-k7x2p", "mountPath": "/workspace/shared"}],
            }
        ],
        "volumes": [
            {"name": "tekton-internal-bin", "emptyDir": {}},
            {"name": "ws-k7x2p", "persistentVolumeClaim": {"claimName": claim}},
        ],
    }
    if affinity is not None:
        spec["affinity"] = copy.deepcopy(affinity)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{taskrun}-pod",
            "namespace": namespace,
            "labels": labels,
            "annotations": annotations or {"pipeline.tekton.dev/release": "v1.15.0"},
            "ownerReferences": [
                {"apiVersion": "tekton.dev/v1", "kind": "TaskRun", "name": taskrun,
                 "uid": str(uuid.uuid4()), "controller": True, "blockOwnerDeletion": True}
            ],
        },
        "spec": spec,
    }


# The term by which Tekton's placeholders repel each other on a node (v1.15
# affinity_assistant.go): required in `isolate-pipelinerun`, preferred (weight 100) otherwise.
TEKTON_REPEL_TERM = {
    "labelSelector": {"matchLabels": {"app.kubernetes.io/component": "affinity-assistant"}},
    "topologyKey": "kubernetes.io/hostname",
}


def placeholder_pod(
    run: str = "build-42",
    namespace: str = "team-a",
    mode: str = "workspaces",
    *,
    anti_affinity: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The pod of Tekton's assistant's StatefulSet (v1.15), as the statefulset controller makes
    it in `mode` (workspaces, pipelineruns or isolate-pipelinerun): the run's labels and its own
    two, the run's claim as an unmounted volume, and Tekton's repulsion appended to the run's
    pod-template anti-affinity (`anti_affinity`, copied)."""
    instance = "affinity-assistant-c7b485007a"
    anti = copy.deepcopy(anti_affinity or {})
    if mode == "isolate-pipelinerun":
        key = "requiredDuringSchedulingIgnoredDuringExecution"
        anti[key] = [*anti.get(key, []), copy.deepcopy(TEKTON_REPEL_TERM)]
    else:
        key = "preferredDuringSchedulingIgnoredDuringExecution"
        anti[key] = [*anti.get(key, []),
                     {"weight": 100, "podAffinityTerm": copy.deepcopy(TEKTON_REPEL_TERM)}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{instance}-0",
            "namespace": namespace,
            "labels": {
                "tekton.dev/pipeline": "fan-out-in",
                "tekton.dev/pipelineRun": run,
                "app.kubernetes.io/instance": instance,
                "app.kubernetes.io/component": "affinity-assistant",
                "statefulset.kubernetes.io/pod-name": f"{instance}-0",
            },
        },
        "spec": {
            "containers": [{
                "name": "affinity-assistant", "image": "ghcr.io/tektoncd/pipeline/nop:v1.15.0",
                "args": ["tekton_run_indefinitely"],
                "resources": {"requests": {"cpu": "50m", "memory": "100Mi"},
                              "limits": {"cpu": "50m", "memory": "100Mi"}},
            }],
            "volumes": [{"name": "workspace-0", "persistentVolumeClaim": {"claimName": "source"}}],
            "affinity": {"podAntiAffinity": anti},
        },
    }


def admission_review(
    obj: dict[str, Any], *, operation: str = "CREATE", uid: str | None = None,
    kind: str = "Pod", group: str = "",
) -> dict[str, Any]:
    meta = obj.get("metadata", {})
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid or str(uuid.uuid4()),
            "kind": {"group": group, "version": "v1", "kind": kind},
            "resource": {"group": group, "version": "v1", "resource": "pods"},
            "requestKind": {"group": group, "version": "v1", "kind": kind},
            "requestResource": {"group": group, "version": "v1", "resource": "pods"},
            "name": meta.get("name", ""),
            "namespace": meta.get("namespace", ""),
            "operation": operation,
            "userInfo": {"username": "system:serviceaccount:tekton-pipelines:tekton-pipelines-controller"},
            "object": obj,
            "oldObject": None,
            "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


def resolution_request(
    params: dict[str, Any],
    resolved: dict[str, Any] | None = None,
    *,
    owner_uid: str = RUN_UID,
    resolver: str = "git",
    name: str | None = None,
    failed: bool = False,
) -> dict[str, Any]:
    """A ResolutionRequest as Tekton makes it for a run (owned by it), and as a resolver leaves
    it: `resolved` base64-encoded as YAML in status.data; no status while it resolves."""
    body: dict[str, Any] = {
        "apiVersion": "resolution.tekton.dev/v1beta1",
        "kind": "ResolutionRequest",
        "metadata": {
            "name": name or f"{resolver}-{hashlib.sha1(json.dumps(params).encode()).hexdigest()}",
            "namespace": "team-a",
            "labels": {"resolution.tekton.dev/type": resolver},
            "ownerReferences": [{"apiVersion": "tekton.dev/v1", "kind": "PipelineRun",
                                 "name": "build-42", "uid": owner_uid, "controller": True}],
        },
        "spec": {"params": [{"name": k, "value": v} for k, v in params.items()]},
    }
    if resolved is not None:
        data = base64.b64encode(yaml.safe_dump(resolved).encode()).decode()
        body["status"] = {"data": data, "conditions": [{"type": "Succeeded", "status": "True"}]}
    elif failed:
        body["status"] = {"conditions": [{"type": "Succeeded", "status": "False",
                                          "reason": "ResolutionTimedOut"}]}
    return body


def api_error(status: int, message: str = "") -> ApiException:
    """The client's exception for an API server's answer with this status and message."""
    exc = ApiException(status=status, reason="x")
    exc.body = json.dumps({"message": message}) if message else None
    return exc


# What a restarted API server's authorizer answers before its caches are filled (as a Role
# taken away would).
DENIED = ('pods is forbidden: User "system:serviceaccount:tcs:operator" cannot create resource '
          '"pods" in API group "" in the namespace "team"')
