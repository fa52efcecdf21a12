"""Tekton Pipelines on a test cluster: CRDs and ConfigMaps read from the Go module cache, and
the controller run out of cluster (kwok never pulls images, so only names are needed)."""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from . import crds as crds_
from .api import ClusterApi
from .processes import ManagedProcess, free_port, http_ok, wait_until
from .versions import find_binary, read_versions

NAMESPACE = "tekton-pipelines"
FEATURE_FLAGS = "feature-flags"
# What the suite writes over Tekton's feature flags: its assistant off, scenarios switching it on
# where they need it; or nothing (E2E_TEKTON_DEFAULTS=1, one cell of `make e2e-matrix`): the flags
# as Tekton ships them, its assistant on (`coschedule: workspaces`), as most clusters run it.
AS_SHIPPED = os.environ.get("E2E_TEKTON_DEFAULTS") == "1"
DEFAULT_FEATURE_FLAGS: dict[str, str] = {} if AS_SHIPPED else {"coschedule": "disabled"}
# Passed to configure: Tekton's feature-flags ConfigMap exactly as Tekton ships it, whatever the
# suite's default (compared by identity).
SHIPPED: Mapping[str, str] = MappingProxyType({})
# A scenario's assistant mode (the assistant_mode fixture, e2e/tests/conftest.py) that stands for
# SHIPPED beside the `coschedule` values.
SHIPPED_MODE = "shipped"
# The coschedule values under which Tekton makes assistants, and the annotation it then puts on
# each TaskRun of a run with a claim workspace (pkg/workspace/affinity_assistant_names.go).
ASSISTANT_MODES = ("workspaces", "pipelineruns", "isolate-pipelinerun")
ASSISTANT_ANNOTATION = "pipeline.tekton.dev/affinity-assistant"
MODULE = "github.com/tektoncd/pipeline"
FAKE_IMAGE = "registry.invalid/tekton-coscheduler-e2e/{}:never-pulled"
IMAGE_FLAGS = (
    "entrypoint-image",
    "nop-image",
    "sidecarlogresults-image",
    "workingdirinit-image",
    "shell-image",
    "shell-image-win",
)
CRD_GROUP_SUFFIX = "tekton.dev"


def module_dir() -> Path:
    """Where the Go module cache holds github.com/tektoncd/pipeline at the pinned version."""
    return crds_.module_dir(MODULE, read_versions()["TEKTON_PIPELINE_VERSION"])


def crds() -> list[dict[str, Any]]:
    out = []
    for path in sorted((module_dir() / "config" / "300-crds").glob("*.yaml")):
        for doc in crds_.documents(path):
            # The conversion webhook is Tekton's webhook Deployment, which does not run here;
            # tests use tekton.dev/v1 only, the storage version, so no conversion is needed.
            doc["spec"]["conversion"] = {"strategy": "None"}
            out.append(doc)
    return out


def config_maps(feature_flags: Mapping[str, str] | None) -> list[dict[str, Any]]:
    out = []
    for path in sorted((module_dir() / "config").glob("config-*.yaml")):
        for doc in crds_.documents(path):
            if doc.get("kind") != "ConfigMap":
                continue
            doc["metadata"]["namespace"] = NAMESPACE
            data = doc.setdefault("data", {}) or {}
            doc["data"] = data
            name = doc["metadata"]["name"]
            if name == FEATURE_FLAGS and feature_flags is not SHIPPED:
                data.update(DEFAULT_FEATURE_FLAGS)
                data.update(feature_flags or {})
            if name == "pipelines-info":  # "devel" in the source; a release writes its version
                data["version"] = read_versions()["TEKTON_PIPELINE_VERSION"]
            if name == "config-observability":
                data["metrics-protocol"] = "none"  # no metrics server fighting for a fixed port
                data["tracing-protocol"] = "none"
            out.append(doc)
    return out


def _create_or_replace_cm(core: client.CoreV1Api, cm: Any) -> None:
    try:
        core.create_namespaced_config_map(NAMESPACE, cm)
    except ApiException as e:
        if e.status != 409:
            raise
        core.replace_namespaced_config_map(cm["metadata"]["name"], NAMESPACE, cm)


def deployed_in_cluster(cluster: ClusterApi) -> bool:
    """True where Tekton runs as a Deployment (kind, a real cluster), not as our local process."""
    with cluster.api_client() as api:
        try:
            client.AppsV1Api(api).read_namespaced_deployment(
                "tekton-pipelines-controller", NAMESPACE
            )
        except ApiException as e:
            if e.status == 404:
                return False
            raise
    return True


def configure(cluster: ClusterApi, feature_flags: Mapping[str, str] | None) -> None:
    """(Re)writes Tekton's ConfigMaps and returns once a running controller acts on them."""
    write_config(cluster, feature_flags)
    if cluster.tekton_running:
        followed(cluster, feature_flags)


def write_config(cluster: ClusterApi, feature_flags: Mapping[str, str] | None) -> None:
    """(Re)writes Tekton's ConfigMaps; a running controller picks the change up by watch."""
    with cluster.api_client() as api:
        core = client.CoreV1Api(api)
        for cm in config_maps(feature_flags):
            _create_or_replace_cm(core, cm)


def followed(
    cluster: ClusterApi, feature_flags: Mapping[str, str] | None, timeout: float = 60
) -> None:
    """Waits until Tekton's controller reads coschedule as written. The ConfigMap reaches it by
    watch, late on a busy machine, and a run it starts meanwhile under the old value is one its
    assistant never follows: started without an assistant, its later pods pinned to one
    nobody makes. Each try is a probe PipelineRun in Tekton's namespace (no coscheduling
    there): its first TaskRun names the assistant the mode written names (none if off)."""
    mode = suite_mode(feature_flags)
    with cluster.api_client() as api:
        crs = client.CustomObjectsApi(api)

        def probe() -> bool:
            name = f"config-probe-{uuid.uuid4().hex[:6]}"
            crs.create_namespaced_custom_object(
                "tekton.dev", "v1", NAMESPACE, "pipelineruns", _probe_run(name)
            )
            try:
                first = cluster.wait_for(
                    lambda: _task_runs(crs, name), timeout=30, what=f"TaskRun of {name}"
                )
            finally:
                crs.delete_namespaced_custom_object(
                    "tekton.dev", "v1", NAMESPACE, "pipelineruns", name
                )
            annotations = first[0]["metadata"].get("annotations") or {}
            return annotations.get(ASSISTANT_ANNOTATION) == assistant_name(mode, name)

        cluster.wait_for(
            probe, timeout=timeout, interval=0.2,
            what=f"Tekton's controller to read coschedule: {mode}",
        )


def suite_mode(feature_flags: Mapping[str, str] | None) -> str:
    """The coschedule mode Tekton reads once `configure(cluster, feature_flags)` is done: what
    the scenario writes, else the suite's default, else Tekton's own (`workspaces`)."""
    written = {} if feature_flags is SHIPPED else {**DEFAULT_FEATURE_FLAGS, **(feature_flags or {})}
    return written.get("coschedule") or shipped_mode()


def shipped_mode() -> str:
    """`coschedule` in the feature-flags ConfigMap of the pinned Tekton's source."""
    for cm in config_maps(SHIPPED):
        if cm["metadata"]["name"] == FEATURE_FLAGS:
            return str(cm["data"].get("coschedule") or "workspaces")
    return "workspaces"


def assistant_name(mode: str, run: str, workspace: str = "ws") -> str | None:
    """The assistant Tekton names on a TaskRun of `run` whose claim workspace is `workspace`
    (the probe's "ws"), in this coschedule mode; None where it makes none. Per claim in
    `workspaces`, per run otherwise: a switch between two modes that are both on is told apart
    too (pkg/reconciler/pipelinerun/affinity_assistant.go GetAffinityAssistantName)."""
    if mode not in ASSISTANT_MODES:
        return None
    key = (workspace if mode == "workspaces" else "") + run
    return f"affinity-assistant-{hashlib.sha256(key.encode()).hexdigest()[:10]}"


def _task_runs(crs: client.CustomObjectsApi, run: str) -> list[dict[str, Any]]:
    found: Any = crs.list_namespaced_custom_object(
        "tekton.dev", "v1", NAMESPACE, "taskruns", label_selector=f"tekton.dev/pipelineRun={run}"
    )
    return list(found.get("items") or [])


def _probe_run(name: str) -> dict[str, Any]:
    """One task with a workspace on a claim Tekton makes from a template: what the assistant
    is for."""
    step = {"name": "noop", "image": "busybox", "script": "true"}
    claim = {"spec": {"accessModes": ["ReadWriteOnce"],
                      "resources": {"requests": {"storage": "1Mi"}}}}
    return {
        "apiVersion": "tekton.dev/v1",
        "kind": "PipelineRun",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "pipelineSpec": {
                "workspaces": [{"name": "ws"}],
                "tasks": [{
                    "name": "probe",
                    "workspaces": [{"name": "ws", "workspace": "ws"}],
                    "taskSpec": {"workspaces": [{"name": "ws"}], "steps": [step]},
                }],
            },
            "workspaces": [{"name": "ws", "volumeClaimTemplate": claim}],
        },
    }


def install(cluster: ClusterApi, feature_flags: Mapping[str, str] | None) -> None:
    crds_.apply(cluster, crds())
    with cluster.api_client() as api:
        core = client.CoreV1Api(api)
        try:
            core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NAMESPACE)))
        except ApiException as e:
            if e.status != 409:
                raise
    write_config(cluster, feature_flags)  # the controller starts after


def controller_process(
    cluster: ClusterApi, logs_dir: Path, images: Mapping[str, str] | None = None,
    api_qps: int | None = None,
) -> tuple[ManagedProcess, int]:
    """The controller as its config/controller.yaml runs it, pointed at the cluster's kubeconfig.
    `images`: flag (without "-image") -> the image a real node has; else names never pulled.
    `api_qps`: its API client's rate (knative's flag; Tekton doubles it; its own default is 40
    a second, what paces a burst of runs: benchmarks at size raise it)."""
    probes_port = free_port()
    argv = [
        str(find_binary("tekton-controller")),
        f"-kubeconfig={cluster.kubeconfig}",
        "-disable-ha",
        *([f"-kube-api-qps={api_qps}", f"-kube-api-burst={2 * api_qps}"] if api_qps else []),
    ]
    for flag in IMAGE_FLAGS:  # every image flag must be non-empty or the controller exits
        what = flag.removesuffix("-image")
        argv += [f"-{flag}", (images or {}).get(what) or FAKE_IMAGE.format(what)]
    env = {
        **os.environ,
        "KUBECONFIG": str(cluster.kubeconfig),
        "SYSTEM_NAMESPACE": NAMESPACE,
        "KUBERNETES_MIN_VERSION": "v1.28.0",
        "CONFIG_DEFAULTS_NAME": "config-defaults",
        "CONFIG_LOGGING_NAME": "config-logging",
        "CONFIG_OBSERVABILITY_NAME": "config-observability",
        "CONFIG_FEATURE_FLAGS_NAME": FEATURE_FLAGS,
        "CONFIG_LEADERELECTION_NAME": "config-leader-election-controller",
        "CONFIG_SPIRE": "config-spire",
        "METRICS_DOMAIN": "tekton.dev/pipeline",
        "PROBES_PORT": str(probes_port),
        "PROFILING_PORT": str(free_port()),
    }
    proc = ManagedProcess("tekton-controller", argv, logs_dir / "tekton-controller.log", env=env)
    return proc, probes_port


def wait_ready(
    cluster: ClusterApi, proc: ManagedProcess, probes_port: int, timeout: float = 120
) -> None:
    """Probes answer first; a TaskRun that gets reconciled shows the informers and RBAC work."""
    wait_until(
        lambda: http_ok(f"http://127.0.0.1:{probes_port}/health"),
        timeout=timeout,
        what="Tekton controller probes",
        process=proc,
    )
    ns = f"tekton-smoke-{uuid.uuid4().hex[:6]}"
    with cluster.api_client() as api:
        client.CoreV1Api(api).create_namespace(
            client.V1Namespace(metadata=client.V1ObjectMeta(name=ns))
        )
        crs = client.CustomObjectsApi(api)
        body = {
            "apiVersion": "tekton.dev/v1",
            "kind": "TaskRun",
            "metadata": {"name": "smoke", "namespace": ns},
            "spec": {
                "taskSpec": {"steps": [{"name": "noop", "image": "busybox", "script": "true"}]}
            },
        }

        def created() -> bool:
            crs.create_namespaced_custom_object("tekton.dev", "v1", ns, "taskruns", body)
            return True

        # The namespace's default ServiceAccount may not exist yet; creation is then retried.
        cluster.wait_for(created, timeout=30, what="creating the smoke TaskRun")

        def reconciled() -> bool:
            if not proc.running():
                raise RuntimeError(f"Tekton controller exited:\n{proc.tail()}")
            tr: Any = crs.get_namespaced_custom_object("tekton.dev", "v1", ns, "taskruns", "smoke")
            return bool(tr.get("status", {}).get("conditions"))

        cluster.wait_for(
            reconciled, timeout=timeout, what="Tekton controller to reconcile a TaskRun"
        )
        client.CoreV1Api(api).delete_namespace(ns)
