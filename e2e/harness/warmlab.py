"""Warm anchors on real nodes (e2e/tools/compare_warm.py): a large step image on one node only,
and a pipeline whose task keeps an incremental cache on its node.

The two real nodes share this host's filesystem, so a node-local cache is a hostPath directory
with one subdirectory per node (the step reads its node's name from the downward API), as each
node of a cluster would have its own disk.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kubernetes import client

from controller.core.basics.times import parse_time
from e2e.harness import real as real_
from e2e.harness import tekton_runs as tr
from e2e.harness.cluster import LOCAL_STORAGE_CLASS, realimages, realnode
from e2e.harness.cluster.api import ClusterApi, name_of, present
from e2e.harness.cluster.realnode import RealNode
from e2e.harness.real import Real
from e2e.harness.runs import Runs

CACHED_TASK = "build"
PIPELINE = "cached-build"
WARM_SECONDS, COLD_SECONDS = 1, 8


def _listed(real: Real) -> dict[str, set[str]]:
    with real.cluster.api_client() as api:
        return {name_of(n): {name for i in (present(n.status).images or [])
                             for name in i.names or []}
                for n in client.CoreV1Api(api).list_node().items}


def held_by(real: Real, image: str, holder: RealNode) -> None:
    """The image on `holder` only, as each node's kubelet reports it (status.images: what the
    operator and the scheduler read). Pulled with ctr through the node's registry configuration
    (setup: no kubelet Pulled Event, so not counted); removed from the other node, its content
    collected, so that the next pull there fetches every byte again."""
    creds = real.registry.credentials
    for node in real.nodes.nodes:
        if node is holder:
            node.ctr("images", "pull", "--hosts-dir", str(node.hosts), "--user",
                     f"{creds.username}:{creds.password}", image)
        else:
            forget(real, node, image)
    real.cluster.wait_for(
        lambda: all((image in _listed(real).get(n.name, set())) == (n is holder)
                    for n in real.nodes.nodes),
        timeout=180, what=f"{image} reported by {holder.name} only")


def forget(real: Real, node: RealNode, image: str) -> None:
    """The image gone from the node, so that the next pull there fetches its large layer again:
    every reference, the layers' blobs, and the snapshot of its top layer. Each kept a pull from
    fetching a byte (the registry's log showed no blob sent while the kubelet's Pulled Event gave
    the image's whole size all the same): the CRI plugin keeps a pulled image under its tag and
    under `repository@digest`; blobs with no reference left stayed (held by containerd's leases,
    inferred: the node had some); and containerd's unpacker fetches no layer whose snapshot is
    already there."""
    repository = image.split("@")[0].rsplit(":", 1)[0]  # our images' names carry a tag
    refs = [ref for ref in node.ctr("images", "ls", "-q").stdout.split()
            if ref == image or ref.startswith(f"{repository}@")]
    if refs:
        node.ctr("images", "rm", "--sync", *refs)
    blobs = set(layers(real, image))
    if held := blobs & set(node.ctr("content", "ls", "-q").stdout.split()):
        node.ctr("content", "rm", *sorted(held))
    top = chain_ids(real.registry.config(image)["rootfs"]["diff_ids"])[-1]

    def snapshot_gone() -> bool:  # a container of the last run may stand on it a moment more
        node.ctr("snapshots", "rm", top, check=False)
        return top not in node.ctr("snapshots", "ls").stdout
    real.cluster.wait_for(snapshot_gone, timeout=60,
                          what=f"{image}'s top layer unpacked no more on {node.name}")
    left = [ref for ref in node.ctr("images", "ls", "-q").stdout.split()
            if ref.startswith((f"{repository}:", f"{repository}@"))]
    left += sorted(set(node.ctr("content", "ls", "-q").stdout.split()) & blobs)
    assert not left, f"{node.name} still holds {left}"


def layers(real: Real, image: str) -> list[str]:
    """The digests of the image's layers, as the lab's registry serves its manifest."""
    manifest = real.registry.manifest(image)
    assert manifest is not None, f"{image} is not in the lab's registry"
    return [str(layer["digest"]) for layer in json.loads(manifest)["layers"]]


def chain_ids(diff_ids: Sequence[str]) -> list[str]:
    """The snapshot keys of an image's layers (the OCI image spec's ChainID of each)."""
    chain: list[str] = []
    for diff_id in diff_ids:
        chain.append(diff_id if not chain else
                     "sha256:" + hashlib.sha256(f"{chain[-1]} {diff_id}".encode()).hexdigest())
    return chain


def warm_up(real: Real) -> None:
    """A run pinned to each node first: Tekton's images and the balloon's pause are then on
    both, so that what the runs measured pull is the large image alone."""
    ns = real_.namespace(real, f"warmup-{uuid.uuid4().hex[:5]}")
    with tr.PodRecorder(real.cluster, ns) as recorder:
        s = Runs(real.cluster, ns, recorder)
        made = []
        for node in real.nodes.nodes:
            body = tr.pipelinerun(tr.unique("warmup"), [tr.task(tr.FETCH)],
                                  {tr.SHARED: {"emptyDir": {}}},
                                  pod_template={"nodeSelector": {
                                      "kubernetes.io/hostname": node.name}})
            body["spec"]["pipelineSpec"]["tasks"][0]["taskSpec"]["steps"][0]["image"] = (
                realimages.busybox())
            made.append(s.start(body))
        for run in made:
            assert tr.outcome(s.done(run, timeout=300)) == ("True", "Succeeded")


def large_first(name: str, image: str) -> dict[str, Any]:
    """fetch (in the large image) -> check (busybox), one volumeClaimTemplate workspace on a
    node-local volume (both nodes have one)."""
    first, second = tr.task(tr.FETCH), tr.task("check", after=[tr.FETCH])
    first["taskSpec"]["steps"][0]["image"] = image
    second["taskSpec"]["steps"][0]["image"] = realimages.busybox()
    return tr.pipelinerun(name, [first, second], {tr.SHARED: claim_template()})


def volumes(real: Real) -> None:
    """A free node-local volume on each node, for one run's claim."""
    for node in real.nodes.nodes:
        realnode.local_volume(real.cluster, node, f"pv-{uuid.uuid4().hex[:6]}")


def first_step_seconds(real: Real, namespace: str, run_name: str) -> float:
    """From the PipelineRun's creation to its first task's step running (both the API server's
    and the kubelet's whole seconds)."""
    with real.cluster.api_client() as api:
        pods = client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=(
            f"{tr.LABEL_TASK}={tr.FETCH},tekton.dev/pipelineRun={run_name}")).items
        made = tr.get_run(client.CustomObjectsApi(api), namespace, run_name)
    created = parse_time(made["metadata"]["creationTimestamp"])
    started = [present(state.started_at)
               for p in pods for s in present(p.status).container_statuses or []
               if s.name.startswith("step-")
               and (state := present(s.state).running or present(s.state).terminated)]
    assert created is not None and started, (run_name, "no step started")
    return (min(started) - created).total_seconds()


def cached_pipeline(cluster: ClusterApi, namespace: str, cache: Path) -> None:
    """A Pipeline whose one task finds its node's cache warm when the pipeline's previous run
    left it there (param `previous`), else rebuilds it; result `cache`: warm or cold."""
    cache.mkdir(parents=True, exist_ok=True)
    script = f"""#!/bin/sh
set -e
dir=/cache/$NODE_NAME
mkdir -p "$dir"
if [ "$(cat "$dir/built" 2>/dev/null)" = "$(params.previous)" ]; then
  sleep {WARM_SECONDS}; printf warm > $(results.cache.path)
else
  sleep {COLD_SECONDS}; printf cold > $(results.cache.path)
fi
echo "$(params.run)" > "$dir/built"
"""
    # A workspace on a volumeClaimTemplate too, as most pipelines have: Tekton's assistant
    # anchors a run by it (it does nothing for a run without one).
    task = {"name": CACHED_TASK, "params": [{"name": p, "value": f"$(params.{p})"}
                                           for p in ("run", "previous")],
            "workspaces": [{"name": tr.SHARED, "workspace": tr.SHARED}],
            "taskSpec": {
                "workspaces": [{"name": tr.SHARED}],
                "params": [{"name": "run"}, {"name": "previous"}],
                "results": [{"name": "cache"}],
                "volumes": [{"name": "cache", "hostPath": {"path": str(cache),
                                                            "type": "Directory"}}],
                "steps": [{"name": "build", "image": realimages.busybox(), "script": script,
                           "env": [{"name": "NODE_NAME", "valueFrom": {
                               "fieldRef": {"fieldPath": "spec.nodeName"}}}],
                           "volumeMounts": [{"name": "cache", "mountPath": "/cache"}]}]}}
    with cluster.api_client() as api:
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            *tr.TEKTON, namespace, "pipelines", {
                "apiVersion": "/".join(tr.TEKTON), "kind": "Pipeline",
                "metadata": {"name": PIPELINE},
                "spec": {"params": [{"name": "run"}, {"name": "previous"}],
                         "workspaces": [{"name": tr.SHARED}], "tasks": [task]}})


def claim_template() -> dict[str, Any]:
    template = tr.volume_claim_template()
    template["volumeClaimTemplate"]["spec"]["storageClassName"] = LOCAL_STORAGE_CLASS
    return template


def cached_run(i: int) -> dict[str, Any]:
    return {"apiVersion": "/".join(tr.TEKTON), "kind": "PipelineRun",
            "metadata": {"name": f"{PIPELINE}-{i}"},
            "spec": {"pipelineRef": {"name": PIPELINE},
                     "workspaces": [{"name": tr.SHARED, **claim_template()}],
                     "params": [{"name": "run", "value": str(i)},
                                {"name": "previous", "value": str(i - 1)}]}}


def found_warm(real: Real, namespace: str, run: dict[str, Any]) -> bool:
    """The task's result: its node's cache held what the previous run left."""
    with real.cluster.api_client() as api:
        task_runs = tr.task_runs(client.CustomObjectsApi(api), namespace,
                                 run["metadata"]["uid"])
    for task_run in task_runs:
        for result in (task_run.get("status") or {}).get("results") or []:
            if result.get("name") == "cache":
                return bool(result.get("value") == "warm")
    return False


def duration(run: dict[str, Any]) -> float:
    """The run's own start to completion (Tekton's status times)."""
    status = run.get("status") or {}
    start, end = parse_time(status.get("startTime")), parse_time(status.get("completionTime"))
    return (end - start).total_seconds() if start and end else float("nan")
