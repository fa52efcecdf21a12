"""Capacity scenarios: runs whose widest layer asks for real room, on a pool of kwok nodes.

A fan-out of builds that each ask for CPU, and a filler pod that makes the bigger node look the
busier one to a pause container: the balloon alone would take the small node, where the fan-out
cannot fit.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from kubernetes import client

from e2e.harness import faults
from e2e.harness import tekton_runs as tr
from e2e.harness.cluster import ClusterHandle, karpenter
from e2e.harness.cluster.api import ClusterApi
from e2e.harness.faults import Pool


def fan_out(
    name: str, pool: Pool | None, build_cpu: str, builds: Sequence[str] = tr.FAN_OUT,
    build_seconds: str = "6", fetch_cpu: str | None = None, publish_seconds: str | None = None,
    tolerations: Sequence[Mapping[str, str]] = (), publish_cpu: str | None = None,
) -> dict[str, Any]:
    """fetch (asking fetch_cpu, running 3 s) -> the builds (each asking build_cpu, running
    build_seconds) -> publish (asking publish_cpu, running publish_seconds); every pod held to
    the pool, if one is given, and tolerating `tolerations`."""
    fetch = tr.task(tr.FETCH)
    fanned = [tr.task(b, after=[tr.FETCH]) for b in builds]
    publish = tr.task(tr.PUBLISH, after=list(builds))
    for task, cpu in [(fetch, fetch_cpu), *((b, build_cpu) for b in fanned),
                      (publish, publish_cpu)]:
        if cpu:
            task["taskSpec"]["steps"][0]["computeResources"] = {"requests": {"cpu": cpu}}
    template: dict[str, Any] = {"nodeSelector": dict(pool.label)} if pool else {}
    if tolerations:
        template["tolerations"] = [dict(t) for t in tolerations]
    seconds = {tr.FETCH: "3", **{b: build_seconds for b in builds}}
    if publish_seconds:
        seconds[tr.PUBLISH] = publish_seconds
    return tr.pipelinerun(
        name,
        [fetch, *fanned, publish],
        {tr.SHARED: tr.volume_claim_template()},
        pod_template=template or None,
        task_annotations={task: {tr.RUN_SECONDS: s} for task, s in seconds.items()},
    )


def filler(cluster: ClusterApi, namespace: str, node: str, cpu: str) -> None:
    """An unrelated pod asking `cpu` on the node (as busy as other tenants make it)."""
    with cluster.api_client() as api:
        client.CoreV1Api(api).create_namespaced_pod(namespace, {  # type: ignore[arg-type]
            "metadata": {"name": f"filler-{node}"},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": node},
                     "containers": [{"name": "c", "image": "pause",
                                     "resources": {"requests": {"cpu": cpu}}}]},
        })


def layer_spread(pods: Sequence[tr.PodSeen], tasks: Sequence[str]) -> float:
    """Seconds between the first and the last pod of the layer bound to a node."""
    times = [p.bound_at for p in pods if p.task in tasks and p.bound_at]
    assert len(times) == len(tasks), f"not every pod of {list(tasks)} was bound"
    return max(times) - min(times)


def timeline(pods: Sequence[tr.PodSeen]) -> str:
    """When each pod was seen made, bound and deleted, in seconds from the first: what a
    failed spread shows, to tell a pod Tekton made late from one that waited for room."""
    if not pods:
        return "no pods seen"
    start = min(p.first_seen for p in pods)

    def at(t: float | None) -> str:
        return "-" if t is None else f"{t - start:+.2f}"

    return "\n".join(
        f"{p.name}: made {at(p.first_seen)}, bound {at(p.bound_at)} on {p.node or '-'}, "
        f"deleted {at(p.deleted_at)}"
        for p in sorted(pods, key=lambda p: p.first_seen)
    )


def reservation_priority_class(cluster: ClusterApi, name: str) -> None:
    """The PriorityClass the chart makes for reservation pods, for an operator run without
    the chart (benchmarks)."""
    with cluster.api_client() as api:
        try:
            client.SchedulingV1Api(api).create_priority_class({  # type: ignore[arg-type]
                "metadata": {"name": name}, "value": -5, "preemptionPolicy": "Never"})
        except client.ApiException as exc:
            if exc.status != 409:
                raise


@contextmanager
def autoscaled_pool(cluster: ClusterHandle) -> Iterator[tuple[Pool, str]]:
    """A pool of one small node (2 CPUs) and a NodePool (named as the pool) that the autoscaler
    grows with nodes of the pool when its pods need them, and empties and shrinks itself. The
    made nodes carry karpenter.TAINT: only the scenario's runs, which tolerate it, go there.
    Removed afterwards: the NodePool first (Karpenter takes its nodes away), then the rest."""
    pool = faults.make_pool(cluster, big=False)
    name = f"pool-{pool.label[faults.POOL]}"
    karpenter.apply_node_pool(cluster, karpenter.node_pool(name, pool.label, cpu_limit=32))
    try:
        yield pool, name
    finally:
        karpenter.delete_node_pool(cluster, name)
        cluster.wait_for(lambda: not karpenter.made_nodes(cluster, name), timeout=120,
                         what=f"the nodes of NodePool {name} removed")
        faults.remove_pool(cluster, pool)
