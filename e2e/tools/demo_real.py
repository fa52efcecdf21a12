"""The main job on real nodes: the chart's operator from our own image, real steps on a real volume.

python -m e2e.tools.demo_real [--keep]     (root; `make demo-real` builds what it needs first)

Starts a throwaway local control plane, a registry beside it and two real nodes (a kubelet with
its own containerd, runc and CNI bridge each; kube-proxy), builds the project's image from the
unchanged Dockerfile and pushes it with the other images into the registry, `helm install`s the
chart with it (two replicas, policy-mode admission, the registry's pull secret), starts Tekton
with its step images built here, and runs one PipelineRun whose first task writes a file into
a volumeClaimTemplate workspace on a local volume, three tasks in parallel read it and add
their own, and the last checks all four. Prints where every pod and volume went, the balloon's
cgroup limits as the kernel holds them, what each node pulled, and a verdict. Then stops
everything and puts the host back as it was. The nodes pull only from the lab's registry, and
nothing leaves this machine.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from typing import Any, cast

from kubernetes import client

from controller.core.basics import names
from e2e.harness import real as real_
from e2e.harness import tekton_runs as tr
from e2e.harness.cluster import BinaryNotFound, name_of, present, realhost, realnode
from e2e.harness.coscheduler import REPO
from e2e.tools.demo import NAMESPACE, keep, report, say, step, succeeded


def replicas(made: real_.Real) -> None:
    pods = realnode.pods(made.cluster, real_.NAMESPACE, real_.SELECTOR)
    for pod in pods:
        ready = all(c.ready for c in present(pod.status).container_statuses or [])
        say(f"replica {name_of(pod)} on {present(pod.spec).node_name}: "
            f"{'Ready' if ready else 'not ready'}, image {present(pod.spec).containers[0].image}")


def balloon_cgroup(made: real_.Real, uid: str) -> None:
    with made.cluster.api_client() as api:
        balloons = client.CoreV1Api(api).list_namespaced_pod(
            NAMESPACE, label_selector=f"{names.LABEL_RUN_UID}={uid}").items
    nodes = {n.name: n for n in made.nodes.nodes}
    for pod in balloons:
        node = nodes.get(present(pod.spec).node_name or "")  # "": no node's name
        if node is not None:
            limits = realhost.cgroup_limits(made.cluster, node.cgroup_root, name_of(pod),
                                            NAMESPACE)
            say(f"balloon {name_of(pod)}: QoS {present(pod.status).qos_class}, cgroup {limits}")


def run_once(made: real_.Real) -> bool:
    with step("helm install tekton-coscheduler from the image built here (policy mode)"):
        real_.install(made, "policy")
    replicas(made)
    real_.namespace(made, NAMESPACE, {names.NAMESPACE_LABEL: "true"})
    for node in made.nodes.nodes:  # a volume on each node: the scheduler chooses the anchor
        realnode.local_volume(made.cluster, node, f"{node.name}-disk")
    name = f"write-read-{uuid.uuid4().hex[:5]}"
    with made.cluster.api_client() as api:
        custom = client.CustomObjectsApi(api)
        with step(f"running PipelineRun {name}: fetch -> read-a|read-b|read-c -> check"):
            body = real_.write_and_read(name, tr.volume_claim_template())
            body["metadata"]["namespace"] = NAMESPACE
            custom.create_namespaced_custom_object("tekton.dev", "v1", NAMESPACE,
                                                   "pipelineruns", body)

            def finished() -> dict[str, Any] | None:
                run = cast(dict[str, Any], custom.get_namespaced_custom_object(
                    "tekton.dev", "v1", NAMESPACE, "pipelineruns", name))
                return run if succeeded(run) else None

            run = made.cluster.wait_for(finished, timeout=300, what=f"PipelineRun {name} ended")
        balloon_cgroup(made, run["metadata"]["uid"])
    say(f"PipelineRun {name}: Succeeded={succeeded(run)} (its steps really ran: the last "
        "found the files of the other four on the shared volume)")
    for node in made.nodes.nodes:
        pulls = made.nodes.pulled(node.name)
        say(f"{node.name} pulled {len(pulls)} images, {sum(p.bytes for p in pulls) / 2**20:.0f} "
            f"MiB in {sum(p.seconds for p in pulls):.1f}s: "
            + ", ".join(p.image.rsplit("/", 1)[-1] for p in pulls))
    return report(made.cluster, run) and succeeded(run) == "True"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true",
                        help="leave the cluster running; Ctrl-C ends it")
    args = parser.parse_args()
    why = realhost.can_run_containers()
    if why:
        print(f"this host cannot run the real-node demo: {why}", file=sys.stderr)
        return 2
    try:
        with step("building the project's image from its Dockerfile (cached by content)"):
            parts = real_.parts(REPO)
    except (FileNotFoundError, BinaryNotFound) as exc:
        print(f"{exc}\nrun `bash e2e/build.sh realnode` (make demo-real does)", file=sys.stderr)
        return 2
    say(f"image {parts.image.name}: {parts.image.size_bytes / 2**20:.0f} MiB")
    try:
        say("starting the control plane, two real nodes and Tekton ...")
        start = time.monotonic()
        with real_.real_cluster(parts, nodes=2) as made:
            say(f"... up in {time.monotonic() - start:.1f}s")
            ok = run_once(made)
            if args.keep:
                keep(made.cluster)
            return 0 if ok else 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
