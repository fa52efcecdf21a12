"""Benchmark: what the operator's own calls cost it, sent by path (kube/api.py) and through the
client library's generated methods (as the operator sent them before).

python -m bench.client_calls [--calls 200]

One local control plane. The calls the operator makes for a run, each made N times both ways,
interleaved, against the real API server: a balloon's StatefulSet created, its annotations
patched, read back, an Event posted about it, the StatefulSet deleted. Counted: the calling
thread's CPU time per call (time.thread_time: the client's work, TLS included; neither the API
server's time nor the wait for it). Both ways go through the same client (tried once, every
request counted and fenced as the operator's are). JSON in build/client-calls.json, a plot in
build/client-calls.png.
Last line: `client-calls: by path P us, generated methods G us per call (G/P x over N calls of
each of K kinds)`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import kubernetes
import orjson
import urllib3

from controller.kube import connection
from controller.kube.client import Kube
from controller.metrics import Metrics
from e2e.harness.cluster import LocalCluster

NS = "bench-client"
KINDS = ("create", "patch", "read", "event", "delete")


def statefulset(name: str) -> dict[str, Any]:
    """About a balloon's size: a pause container, three claims, a required node affinity."""
    labels = {"app.kubernetes.io/managed-by": "tekton-coscheduler", "bench": name}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": name, "namespace": NS, "labels": labels},
            "spec": {"replicas": 0, "serviceName": name, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
                                         "resources": {"requests": {"cpu": "1m"}}}],
                         "volumes": [{"name": f"v{i}", "persistentVolumeClaim": {
                             "claimName": f"claim-{i}"}} for i in range(3)],
                         "affinity": {"nodeAffinity": {
                             "requiredDuringSchedulingIgnoredDuringExecution": {
                                 "nodeSelectorTerms": [{"matchExpressions": [{
                                     "key": "kubernetes.io/hostname", "operator": "In",
                                     "values": ["node-a", "node-b"]}]}]}}}}}}}


def event(about: dict[str, Any]) -> dict[str, Any]:
    meta = about["metadata"]
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{meta['name']}.", "namespace": NS},
            "involvedObject": {"apiVersion": "apps/v1", "kind": "StatefulSet",
                               "name": meta["name"], "namespace": NS, "uid": meta["uid"]},
            "reason": "Bench", "message": "the run's pods go to node node-a", "type": "Normal",
            "source": {"component": "bench"}}


def by_path(kube: Kube) -> dict[str, Callable[[str, dict[str, Any]], Any]]:
    return {
        "create": lambda name, _: kube.create_statefulset(statefulset(name))[0],
        "patch": lambda name, _: kube.annotate_statefulset(NS, name, {"bench": "1"}),
        "read": lambda name, _: kube.get_statefulset(NS, name),
        "event": lambda name, made: kube.send("POST", f"/api/v1/namespaces/{NS}/events",
                                              event(made)),
        "delete": lambda name, made: kube.delete_statefulset(NS, name, made["metadata"]["uid"]),
    }


def undecoded(answer: object) -> urllib3.BaseHTTPResponse:
    """Not preloaded (`raw` below), the client answers urllib3's response, not its model."""
    return cast(urllib3.BaseHTTPResponse, answer)


def generated(api: kubernetes.client.ApiClient) -> dict[str, Callable[[str, dict[str, Any]], Any]]:
    """The same calls as the operator made them before: answers as bytes, decoded by orjson."""
    apps, core = kubernetes.client.AppsV1Api(api), kubernetes.client.CoreV1Api(api)
    raw: dict[str, Any] = {"_preload_content": False, "_request_timeout": 30}

    def delete(name: str, made: dict[str, Any]) -> None:
        options = kubernetes.client.V1DeleteOptions(
            propagation_policy="Background",
            preconditions=kubernetes.client.V1Preconditions(uid=made["metadata"]["uid"]))
        undecoded(apps.delete_namespaced_stateful_set(name, NS, body=options, **raw)).read()

    return {
        "create": lambda name, _: orjson.loads(undecoded(apps.create_namespaced_stateful_set(
            NS, statefulset(name), **raw)).data),  # type: ignore[arg-type]
        "patch": lambda name, _: undecoded(apps.patch_namespaced_stateful_set(
            name, NS, {"metadata": {"annotations": {"bench": "1"}}}, **raw)).read(),
        "read": lambda name, _: orjson.loads(
            undecoded(apps.read_namespaced_stateful_set(name, NS, **raw)).data),
        "event": lambda name, made: undecoded(core.create_namespaced_event(
            NS, event(made), **raw)).read(),  # type: ignore[arg-type]
        "delete": delete,
    }


def measure(ways: dict[str, dict[str, Callable[[str, dict[str, Any]], Any]]],
            calls: int) -> dict[str, dict[str, list[float]]]:
    """CPU seconds of each call, by way and kind: the ways take turns, one object each."""
    spent: dict[str, dict[str, list[float]]] = {w: {k: [] for k in KINDS} for w in ways}
    for i in range(calls):
        for way, made_by in ways.items():
            name = f"{way.replace(' ', '-')}-{i}"
            made: dict[str, Any] = {}
            for kind in KINDS:
                start = time.thread_time()
                answer = made_by[kind](name, made)
                spent[way][kind].append(time.thread_time() - start)
                if kind == "create":
                    made = answer
    return spent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    with LocalCluster() as cluster:
        cluster.create_namespace(NS)
        cfg = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(cluster.kubeconfig), client_configuration=cfg)
        api = connection.api_client(cfg)
        kube = Kube(api, metrics=Metrics())
        spent = measure({"by path": by_path(kube), "generated": generated(api)}, args.calls)
    us = {way: {k: statistics.median(v) * 1e6 for k, v in kinds.items()}
          for way, kinds in spent.items()}
    for kind in KINDS:
        path_us, generated_us = us["by path"][kind], us["generated"][kind]
        print(f"{kind:7s} by path {path_us:6.0f} us, generated {generated_us:6.0f} us "
              f"({generated_us / path_us:.1f} x)")
    mean = {way: statistics.mean(figures.values()) for way, figures in us.items()}
    out = Path("build")
    out.mkdir(exist_ok=True)
    (out / "client-calls.json").write_text(json.dumps(
        {"calls": args.calls, "median_us": us, "mean_of_kinds_us": mean}, indent=2))
    plot(us, out / "client-calls.png")
    print(f"client-calls: by path {mean['by path']:.0f} us, generated methods "
          f"{mean['generated']:.0f} us per call ({mean['generated'] / mean['by path']:.1f} x "
          f"over {args.calls} calls of each of {len(KINDS)} kinds)")
    return 0


def plot(us: dict[str, dict[str, float]], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 3.5))
    width = 0.4
    for n, (way, figures) in enumerate(us.items()):
        ax.bar([i + n * width for i in range(len(KINDS))], [figures[k] for k in KINDS],
               width, label=way)
    ax.set_xticks([i + width / 2 for i in range(len(KINDS))], KINDS)
    ax.set_ylabel("client CPU per call (us, median)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)


if __name__ == "__main__":
    raise SystemExit(main())
