"""The main job: a fan-out/fan-in PipelineRun with a shared workspace, co-located.

python -m e2e.tools.demo [--nodes 4] [--keep]

Starts a throwaway local control plane (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, kwok nodes, the Tekton Pipelines controller), installs tekton-coscheduler with
its Helm chart (the controller itself runs on this host, with the chart's ServiceAccount token,
since no container can run here), submits one PipelineRun (one task, three
in parallel, one after, all sharing a volumeClaimTemplate workspace), and prints where every
pod and volume went, with a verdict. Then stops everything.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

from kubernetes import client

from controller.core.basics import names
from e2e.harness import release
from e2e.harness import tekton_runs as tr
from e2e.harness.cluster import ClusterHandle, LocalCluster, name_of, present
from e2e.harness.coscheduler import Coscheduler

NAMESPACE = "demo"
STEP = {
    "name": "work",
    "image": "busybox",
    "script": "#!/bin/sh\necho working > $(workspaces.source.path)/out",
}


def fan_out_fan_in(name: str) -> dict[str, Any]:
    def task(task_name: str, after: list[str]) -> dict[str, Any]:
        return {
            "name": task_name,
            "runAfter": after,
            "workspaces": [{"name": "source", "workspace": "shared"}],
            "taskSpec": {"workspaces": [{"name": "source"}], "steps": [STEP]},
        }

    middle = ["build-a", "build-b", "build-c"]
    return {
        "apiVersion": "tekton.dev/v1",
        "kind": "PipelineRun",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "pipelineSpec": {
                "workspaces": [{"name": "shared"}],
                "tasks": [
                    task("fetch", []),
                    *(task(m, ["fetch"]) for m in middle),
                    task("publish", middle),
                ],
            },
            "workspaces": [
                {
                    "name": "shared",
                    "volumeClaimTemplate": {
                        "spec": {
                            "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1Gi"}},
                        }
                    },
                }
            ],
        },
    }


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


@contextmanager
def step(text: str) -> Iterator[None]:
    start = time.monotonic()
    say(f"{text} ...")
    yield
    say(f"{text}: done in {time.monotonic() - start:.1f}s")


def succeeded(run: dict[str, Any]) -> str | None:
    for cond in (run.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Succeeded" and cond.get("status") in ("True", "False"):
            return str(cond["status"])
    return None


def report(cluster: ClusterHandle, run: dict[str, Any]) -> bool:
    uid = run["metadata"]["uid"]
    with cluster.api_client() as api:
        core = client.CoreV1Api(api)
        pods = core.list_namespaced_pod(
            NAMESPACE, label_selector=f"tekton.dev/pipelineRunUID={uid}"
        ).items
        balloons = core.list_namespaced_pod(
            NAMESPACE, label_selector=f"{names.LABEL_RUN_UID}={uid}"
        ).items
        pvcs = {
            name_of(p): p
            for p in core.list_namespaced_persistent_volume_claim(NAMESPACE).items
        }
        pvs = {name_of(p): p for p in core.list_persistent_volume().items}
        anchored = [
            e.message
            for e in core.list_namespaced_event(NAMESPACE).items
            if e.reason == "Anchored" and e.involved_object.uid == uid
        ]

    def claims(pod: Any) -> list[str]:
        return [
            v.persistent_volume_claim.claim_name
            for v in pod.spec.volumes or []
            if v.persistent_volume_claim
        ]

    rows = [("pod", "task", "node", "claims")]
    for pod in sorted(balloons, key=name_of):
        rows.append(
            (name_of(pod), "(balloon)", present(pod.spec).node_name or "-", ", ".join(claims(pod)))
        )
    for pod in sorted(pods, key=lambda p: present(present(p.metadata).creation_timestamp)):
        rows.append(
            (
                name_of(pod),
                present(present(pod.metadata).labels).get("tekton.dev/pipelineTask", "?"),
                present(pod.spec).node_name or "-",
                ", ".join(claims(pod)),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    print()
    for i, row in enumerate(rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    print()
    volume_nodes = set()
    for name in sorted({c for p in pods for c in claims(p)}):
        pvc = pvcs.get(name)
        volume_name = present(pvc.spec).volume_name if pvc else None
        pv = pvs.get(volume_name) if volume_name else None
        affinity = present(pv.spec).node_affinity if pv else None
        terms = present(affinity.required).node_selector_terms if affinity else []
        where = ",".join(
            v for t in terms for e in t.match_expressions or [] for v in e.values or []
        )
        volume_nodes.add(where)
        volume = name_of(pv) if pv else "(unbound)"
        print(f"claim {name} -> volume {volume} on node {where or '?'}")
    print(
        f"balloon: {anchored[0] if anchored else 'never anchored'}; "
        f"{'still there' if balloons else 'deleted when the run finished'}"
    )
    task_nodes = {present(p.spec).node_name for p in pods}
    anchor = {present(b.spec).node_name for b in balloons} | {
        tr.anchored_node(present(m)) for m in anchored}
    ok = (
        len(pods) == 5
        and len(task_nodes) == 1
        and (not anchor or anchor == task_nodes)
        and volume_nodes <= task_nodes
    )
    print()
    if ok:
        node = task_nodes.pop()
        print(f"VERDICT: co-located. All {len(pods)} task pods and the workspace volume on {node}.")
    else:
        print(
            f"VERDICT: NOT co-located: task pods on {sorted(n or '-' for n in task_nodes)}, "
            f"volumes on {sorted(volume_nodes)}, balloon on {sorted(n or '-' for n in anchor)}."
        )
    return ok


def keep(cluster: ClusterHandle) -> None:
    """--keep: the cluster stays up for a look around until Ctrl-C."""
    say(f"cluster kept: KUBECONFIG={cluster.kubeconfig}; Ctrl-C to stop")
    while True:
        time.sleep(3600)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument(
        "--keep", action="store_true", help="leave the cluster running; Ctrl-C ends it"
    )
    args = parser.parse_args()

    cluster = LocalCluster()
    operator: Coscheduler | None = None
    try:
        with step("starting the local control plane"):
            cluster.start()
        with step(f"adding {args.nodes} kwok nodes, each with two local volumes"):
            nodes = cluster.add_nodes(args.nodes, prefix="worker")
            for node in nodes:
                for i in range(2):
                    cluster.add_local_pv(f"{node}-disk-{i}", node)
        with step("starting Tekton Pipelines (its own affinity assistant off)"):
            cluster.start_tekton()
        with step(
            "helm install tekton-coscheduler; its controller runs here as the chart's account"
        ):
            operator = release.deploy(cluster)
            cluster.create_namespace(NAMESPACE, labels={names.NAMESPACE_LABEL: "true"})
        name = f"fan-out-in-{uuid.uuid4().hex[:5]}"
        with cluster.api_client() as api:
            custom = client.CustomObjectsApi(api)
            with step(f"running PipelineRun {name}: fetch -> build-a|build-b|build-c -> publish"):
                cluster.wait_for(
                    lambda: custom.create_namespaced_custom_object(
                        "tekton.dev", "v1", NAMESPACE, "pipelineruns", fan_out_fan_in(name)
                    ),
                    timeout=30,
                    what="PipelineRun accepted",
                )

                def finished() -> dict[str, Any] | None:
                    run = cast(dict[str, Any], custom.get_namespaced_custom_object(
                        "tekton.dev", "v1", NAMESPACE, "pipelineruns", name
                    ))
                    return run if succeeded(run) else None

                run = cluster.wait_for(finished, timeout=300, what=f"PipelineRun {name} to finish")
        say(f"PipelineRun {name}: Succeeded={succeeded(run)}")
        ok = report(cluster, run) and succeeded(run) == "True"
        if args.keep:
            keep(cluster)
        return 0 if ok else 1
    except KeyboardInterrupt:
        return 130
    except Exception:
        print(cluster.log_tails(20), file=sys.stderr)
        raise
    finally:
        if operator is not None:
            operator.stop()
        with step("stopping everything"):
            cluster.stop()


if __name__ == "__main__":
    raise SystemExit(main())
