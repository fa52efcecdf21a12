"""A local control plane with real nodes, and the chart installed on them from the project's own
image: what the realnode scenarios and `make demo-real` share.

real_cluster() builds the image from the unchanged Dockerfile (cached by content), brings the
host network up, starts the control plane on its address and the lab's registry beside it,
pushes every image the nodes need into the registry (once: its storage is a cache), adds the
real nodes, which pull as users' nodes do, and starts Tekton configured with the step images
built here. On the way out it puts everything back, whatever failed.

Pods pull with a pull secret, where a user's would have it: the chart's `imagePullSecrets` for
the operator's own pods, the chart's `config.balloon.imagePullSecrets` for balloons, and, for
Tekton's pods, the default ServiceAccount of the team's namespace (what they run as unless a
run names another; Kubernetes' own way to give every pod of a namespace a pull secret).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import sys
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client

from controller.core.basics import names

from . import chart
from . import tekton_runs as tr
from .cluster import LocalCluster, images, present, project_image, realhost, realimages, realnode
from .cluster.registry import LabRegistry, repository
from .cluster.versions import cache_dir, find_binary

RELEASE, NAMESPACE = chart.RELEASE, chart.NAMESPACE
FULLNAME = f"{RELEASE}-tekton-coscheduler"
SELECTOR = "app.kubernetes.io/name=tekton-coscheduler,app.kubernetes.io/component=controller"
PULL_SECRET = "lab-registry"


@dataclass
class Real:
    cluster: LocalCluster
    nodes: realnode.RealNodes
    image: project_image.Built
    registry: LabRegistry
    # the admission mode the chart is installed in, and its further values ("": not installed)
    mode: str = ""


@dataclass(frozen=True)
class Parts:
    images: dict[str, Path]  # name -> archive: pause, Tekton's step images, busybox
    image: project_image.Built


def parts(repo: Path) -> Parts:
    """Raises FileNotFoundError or BinaryNotFound, having changed nothing, when something is
    not built (e2e/build.sh realnode)."""
    find_binary("registry")
    if shutil.which("skopeo") is None:
        raise FileNotFoundError("skopeo is not installed (e2e/build.sh debian)")
    return Parts(realimages.archives(), project_image.build(repo))


@contextmanager
def real_cluster(made: Parts, nodes: int = 2) -> Iterator[Real]:
    with realhost.host_lock("realnode"):
        yield from _real_cluster(made, nodes)


@contextmanager
def lab(repo: Path, nodes: int = 2) -> Iterator[Real]:
    """parts() and real_cluster() under one hold of the host's lab: between this checkout's
    image build and its push into the registry, no other session's build can prune the image
    (parts() then real_cluster() leave that window open while the lab waits for its turn).
    Raises what parts() raises when something is not built."""
    with realhost.host_lock("realnode"):
        yield from _real_cluster(parts(repo), nodes)


def _real_cluster(made: Parts, nodes: int) -> Iterator[Real]:
    image = made.image
    network = realhost.HostNetwork()
    cluster = LocalCluster(address=realhost.API_ADDRESS)
    registry = LabRegistry(cluster.run_dir, cluster.logs_dir)
    real_nodes: realnode.RealNodes | None = None
    if left := realhost.reclaim():
        print(f"reclaimed what a killed lab left: {', '.join(left)}", file=sys.stderr)
    try:
        network.up()
        cluster.start()
        assert cluster.kubeconfig is not None and cluster.pki is not None
        project, tag = repository(image.name)
        registry.start(cluster.pki, keep={project: tag})
        for name, archive in {**made.images, image.name: image.archive}.items():
            registry.push(archive, name)
        real_nodes = realnode.RealNodes(cluster, network, cluster.run_dir, cluster.logs_dir,
                                        cluster.pki.ca_cert, cluster.kubeconfig, registry)
        for _ in range(nodes):
            real_nodes.add()
        cluster.start_tekton(images=realimages.tekton_images())
        yield Real(cluster, real_nodes, image, registry)
    except BaseException:
        print(cluster.log_tails(60))
        raise
    finally:
        if real_nodes is not None:
            real_nodes.stop()
        registry.stop()
        cluster.stop()
        network.down()


def pull_secret(real: Real, namespace: str) -> str:
    """The lab registry's pull secret (kubernetes.io/dockerconfigjson) in the namespace, for
    every registry name the lab serves; its name."""
    config = real.registry.docker_config(realimages.REGISTRIES)
    with real.cluster.api_client() as api:
        client.CoreV1Api(api).create_namespaced_secret(namespace, {  # type: ignore[arg-type]
            "metadata": {"name": PULL_SECRET}, "type": "kubernetes.io/dockerconfigjson",
            "data": {".dockerconfigjson": base64.b64encode(json.dumps(config).encode()).decode()}})
    return PULL_SECRET


def namespace(real: Real, name: str, labels: Mapping[str, str] | None = None) -> str:
    """A team's namespace whose pods pull as its users' would: the pull secret in it, on the
    ServiceAccount its pods run as (Tekton's: `default`), so every pod created after gets it."""
    real.cluster.create_namespace(name, labels)
    secret = pull_secret(real, name)
    with real.cluster.api_client() as api:
        client.CoreV1Api(api).patch_namespaced_service_account(
            "default", name, {"imagePullSecrets": [{"name": secret}]})
    return name


def install(real: Real, mode: str, values: Mapping[str, Any] | None = None) -> None:
    """The chart with the project's image and the pull secret for its pods and the balloons'
    (in each team's namespace: namespace()), in this admission mode and with these further
    values (once: asking for others uninstalls and installs again), its two replicas Ready. The
    webhook, in webhook mode, is reached through the chart's Service with the chart's TLS."""
    wanted = mode + (f" {json.dumps(values, sort_keys=True)}" if values else "")
    if real.mode == wanted:
        return
    if real.mode:
        uninstall(real)
    else:  # the first install: the pull secret goes first (the release's namespace stays)
        real.cluster.create_namespace(NAMESPACE)
        pull_secret(real, NAMESPACE)
    image_repository, tag = repository(real.image.name)
    registry, _, name = image_repository.partition("/")
    secrets = [{"name": PULL_SECRET}]
    chart.install(real.cluster, "", "", {
        "admission.mode": mode, "image.registry": registry, "image.repository": name,
        "image.tag": tag,
        "image.pullPolicy": "IfNotPresent", "imagePullSecrets": secrets,
        "config.balloon.imagePullSecrets": secrets, **(values or {})}, keep_deployment=True)
    real.mode = wanted
    realnode.wait_pods_ready(real.cluster, NAMESPACE, SELECTOR, 2, timeout=180)
    # Ready replicas are not yet admission: in policy mode the leader makes the policy's
    # bindings once it leads, a few seconds later (a run started before then is not pinned).
    wait_pinning(real, PROBE_NAMESPACE)


PROBE_NAMESPACE = "pin-probe"  # opted in, holds no pod: dry runs ask admission in it


def wait_pinning(real: Real, ns: str, timeout: float = 120) -> None:
    """Until admission ties a TaskRun pod of `ns` (opted in) to its run. A dry-run pod tells."""
    with real.cluster.api_client() as api:
        core = client.CoreV1Api(api)
        try:
            core.read_namespace(ns)
        except client.ApiException as exc:
            if exc.status != 404:
                raise
            real.cluster.create_namespace(ns, {names.NAMESPACE_LABEL: "true"})

        def pinned() -> bool:
            pod = core.create_namespaced_pod(ns, {  # type: ignore[arg-type]
                "metadata": {"generateName": "probe-", "labels": {
                    "tekton.dev/pipelineRun": "probe", "tekton.dev/taskRun": "probe-t"}},
                "spec": {"containers": [{"name": "c", "image": realimages.busybox()}]}},
                dry_run="All")
            return present(pod.spec).affinity is not None

        real.cluster.wait_for(pinned, timeout=timeout, what=f"admission pins the pods of {ns}")


def uninstall(real: Real) -> None:
    """The chart's release uninstalled, if there is one (an install that failed early made
    none), and its replicas gone; the release's namespace and pull secret stay."""
    chart.run_helm(["uninstall", RELEASE, "--namespace", NAMESPACE, "--wait",
                    "--ignore-not-found"], kubeconfig=real.cluster.kubeconfig)
    real.cluster.wait_for(lambda: not realnode.pods(real.cluster, NAMESPACE, SELECTOR),
                          timeout=120, what="the old release's pods gone")


def rollout_restart(real: Real) -> int:
    """`kubectl rollout restart` of the chart's Deployment: its generation to wait for."""
    with real.cluster.api_client() as api:
        apps = client.AppsV1Api(api)
        restarted = {"kubectl.kubernetes.io/restartedAt": str(uuid.uuid4())}
        apps.patch_namespaced_deployment(FULLNAME, NAMESPACE, {"spec": {"template": {
            "metadata": {"annotations": restarted}}}})
        made = apps.read_namespaced_deployment(FULLNAME, NAMESPACE)
        return int(present(present(made.metadata).generation))


def rolled(real: Real, generation: int) -> bool:
    """Every replica of that generation Ready, none of an older one left."""
    with real.cluster.api_client() as api:
        status = present(
            client.AppsV1Api(api).read_namespaced_deployment(FULLNAME, NAMESPACE).status)
    return bool(present(status.observed_generation) >= generation and status.updated_replicas == 2
                and status.ready_replicas == 2 and status.replicas == 2)


def leader(real: Real) -> str:
    """The live pod whose reconciler holds the chart's Lease ("" while none does). Just after a
    rollout the Lease may still name a replica that stopped (its reconciler killed before it
    could hand the Lease back, under load): that one is no leader to act on."""
    with real.cluster.api_client() as api:
        lease = client.CoordinationV1Api(api).read_namespaced_lease(FULLNAME, NAMESPACE)
        holder = str(present(lease.spec).holder_identity or "").split("_")[0]
        if not holder:
            return ""
        try:
            pod = client.CoreV1Api(api).read_namespaced_pod(holder, NAMESPACE)
        except client.ApiException as exc:
            if exc.status == 404:
                return ""
            raise
    return "" if present(pod.metadata).deletion_timestamp else holder


def kill_reconciler(real: Real, pod_name: str) -> int:
    """SIGKILL to the reconciler child of that replica's server process (its container's
    first process), as a crash would: the server keeps answering and starts a new one."""
    with real.cluster.api_client() as api:
        pod = client.CoreV1Api(api).read_namespaced_pod(pod_name, NAMESPACE)
    node = next(n for n in real.nodes.nodes if n.name == present(pod.spec).node_name)
    statuses = present(present(pod.status).container_statuses)
    server = node.process(present(statuses[0].container_id))
    for child in Path(f"/proc/{server}/task/{server}/children").read_text().split():
        if b"reconcile" in Path(f"/proc/{child}/cmdline").read_bytes():
            os.kill(int(child), signal.SIGKILL)
            return int(child)
    raise LookupError(f"no reconciler under {pod_name}'s server (pid {server})")


def large_image(real: Real, megabytes: int = 300) -> tuple[str, int]:
    """A step image of busybox and `megabytes` MB no compression shrinks, in the lab's
    registry (made and pushed once: both are cached); its name and the bytes a node pulls."""
    name = realimages.image_name("large", f"{megabytes}m")
    archive = cache_dir() / "images" / f"large-{megabytes}m.tar"
    if not archive.is_file():
        images.large(archive, name, megabytes, Path("/bin/busybox"))
    real.registry.push(archive, name)
    return name, real.registry.size(name)


READERS = ["read-a", "read-b", "read-c"]
TASKS = [tr.FETCH, *READERS, "check"]


def write_and_read(name: str, volume: dict[str, Any]) -> dict[str, Any]:
    """fetch writes a file into the shared workspace; three tasks in parallel read it and add
    their own; check finds all four. Real steps, in busybox."""
    shared = tr.SHARED

    def task(task_name: str, script: str, after: list[str] | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "name": task_name,
            "workspaces": [{"name": shared, "workspace": shared}],
            "taskSpec": {"workspaces": [{"name": shared}], "steps": [
                {"name": "work", "image": realimages.busybox(),
                 "script": f"#!/bin/sh\nset -e\n{script}"}]},
        }
        if after:
            body["runAfter"] = after
        return body

    path = f"$(workspaces.{shared}.path)"
    tasks = [task(tr.FETCH, f"echo fetched > {path}/fetch"),
             *(task(r, f"grep -q fetched {path}/fetch\necho {r} > {path}/{r}", [tr.FETCH])
               for r in READERS),
             task("check", " && ".join(f"test -f {path}/{f}" for f in ["fetch", *READERS]),
                  READERS)]
    return tr.pipelinerun(name, tasks, {shared: volume})
