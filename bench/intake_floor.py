"""Benchmark: what one watch event costs the leader's intake before anything of ours decides.

python -m bench.intake_floor [--pods 300] [--rounds 2]

A run of a namespace that did not opt in costs the leader its events: 29 a run in
`make bench-scale` (its pods' and its PipelineRun's), each read from the watch and glanced at,
none decoded. This measures the floor under that: one local control plane (kwok nodes), N pods
labelled as Tekton labels TaskRun pods, in a namespace that did not opt in, created, run by
kwok and deleted, R times, while three readers, each on its own watch with the operator's pod
selector, take every event in a thread of their own:

  read    the watch's chunks, nothing else (TLS, urllib3's chunked reading)
  glance  the operator's intake, events not ours dropped undecoded (kube/intake.py)
  decode  the same intake, every event decoded (orjson), as before the glance

Prints each reader's CPU per event (its thread's own CPU time over the events it read); JSON
in build/intake-floor.json.
Last line: `intake: read R us, glance G us, decode D us per event (N events of B bytes)`.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kubernetes import client

from controller.core.replica import glance
from controller.kube.intake import Intake
from controller.kube.reflector import open_watch
from controller.metrics import Metrics
from e2e.harness.cluster import LocalCluster, present

# Tekton's TaskRun pods, as the leader's pod watch selected them before it watched only the pods
# it serves (faces/streams.py): the floor of reading one pod event, whoever's it is.
SELECTOR = "app.kubernetes.io/managed-by=tekton-pipelines"


class Reader(threading.Thread):
    """One watch, read again and again in a thread of its own until stopped; its thread's CPU
    time and the events it read."""

    def __init__(self, name: str, once: Callable[[threading.Event], object],
                 events: Callable[[], float], size: Callable[[], float] = lambda: 0.0) -> None:
        super().__init__(name=name, daemon=True)
        self.once, self.count, self.size = once, events, size
        self.stopped = threading.Event()
        self.cpu = 0.0

    def run(self) -> None:
        started = time.thread_time()
        while not self.stopped.is_set():
            self.once(self.stopped)
        self.cpu = time.thread_time() - started

    @property
    def per_event_us(self) -> float:
        return self.cpu / max(self.count(), 1) * 1e6


def reading(core: client.CoreV1Api) -> Reader:
    seen = {"events": 0, "bytes": 0}

    def once(stopped: threading.Event) -> None:
        resp = open_watch(core.list_pod_for_all_namespaces, (), "", 20, 10,
                          label_selector=SELECTOR)
        try:
            for chunk in resp.stream(amt=None, decode_content=False):
                seen["events"] += chunk.count(b"\n")
                seen["bytes"] += len(chunk)
                if stopped.is_set():
                    break
        finally:
            resp.release_conn()

    return Reader("read", once, lambda: seen["events"], lambda: seen["bytes"])


def intake(core: client.CoreV1Api, decode: bool) -> Reader:
    """The operator's intake; `decode`: every event wanted (none is ours here)."""
    metrics = Metrics()
    taken = Intake("pods", core.list_pod_for_all_namespaces, (), lambda kind, obj: None,
                   lambda seen: decode or glance.may_concern(seen, lambda _: False,
                                                            lambda _: False),
                   metrics=metrics, watch_seconds=20, label_selector=SELECTOR)

    def events() -> float:
        return sum(metrics.registry.get_sample_value(
            "tekton_coscheduler_watch_events_total", {"watch": "pods", "decoded": d}) or 0
            for d in ("true", "false"))

    return Reader("decode" if decode else "glance", lambda _: taken.watch_once(), events)


def tekton_pod(name: str) -> dict[str, Any]:
    """About the size of a TaskRun pod as the API server returns it (9 KB with its status)."""
    env = [{"name": f"PARAM_{k}", "value": "v" * 40} for k in range(10)]
    steps = [{"name": f"step-{j}", "image": "busybox", "command": ["/bin/sh", "-c", "x" * 200],
              "env": env} for j in range(3)]
    labels = {"app.kubernetes.io/managed-by": "tekton-pipelines", "tekton.dev/pipelineRun": "r",
              "tekton.dev/pipelineRunUID": f"uid-{name}", "tekton.dev/taskRun": f"r-{name}"}
    return {"metadata": {"name": name, "labels": labels,
                         "annotations": {"pipeline.tekton.dev/release": "a" * 500}},
            "spec": {"containers": steps}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with LocalCluster() as cluster:
        cluster.add_nodes(4, pods=500, cpu="64", memory="256Gi", wait=True)
        ns = cluster.create_namespace("not-opted-in")
        apis = [cluster.api_client() for _ in range(4)]
        core = client.CoreV1Api(apis[0])
        readers = [reading(client.CoreV1Api(apis[1])), intake(client.CoreV1Api(apis[2]), False),
                   intake(client.CoreV1Api(apis[3]), True)]
        for reader in readers:
            reader.start()
        time.sleep(2)  # every watch open before the first pod
        with ThreadPoolExecutor(8) as pool:
            for r in range(args.rounds):
                names = [f"p{r}-{i}" for i in range(args.pods)]
                list(pool.map(lambda n: core.create_namespaced_pod(ns, tekton_pod(n)), names))  # type: ignore[arg-type]
                cluster.wait_for(lambda: all(present(p.status).phase == "Running" for p in
                                             core.list_namespaced_pod(ns).items),
                                 timeout=120, what="the pods running")
                list(pool.map(lambda n: core.delete_namespaced_pod(n, ns, grace_period_seconds=0),
                              names))
                cluster.wait_for(lambda: not core.list_namespaced_pod(ns).items, timeout=120,
                                 what="the pods gone")
        time.sleep(2)
        for reader in readers:
            reader.stopped.set()
        core.create_namespaced_pod(ns, tekton_pod("last"))  # type: ignore[arg-type]  # an event, so that each sees stop
        for reader in readers:
            reader.join(30)
        for api in apis:
            api.close()  # type: ignore[no-untyped-call]
    read = readers[0]
    size = read.size() / max(read.count(), 1)
    for reader in readers:
        print(f"{reader.name:7s} {reader.count():6.0f} events, {reader.cpu * 1000:7.1f} ms CPU, "
              f"{reader.per_event_us:5.0f} us per event")
    figures = {r.name: {"events": r.count(), "cpu_seconds": r.cpu, "us_per_event": r.per_event_us}
               for r in readers} | {"bytes_per_event": size}
    Path("build").mkdir(exist_ok=True)
    Path("build/intake-floor.json").write_text(json.dumps(figures, indent=2))
    print(f"intake: read {read.per_event_us:.0f} us, glance {readers[1].per_event_us:.0f} us, "
          f"decode {readers[2].per_event_us:.0f} us per event ({read.count():.0f} events of "
          f"{size:.0f} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
