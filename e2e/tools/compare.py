"""Ours vs Tekton's affinity assistant vs no coscheduling, on the fan-out/fan-in pipeline.

python -m e2e.tools.compare [--runs 20] [--nodes 4] [--volumes zonal|node] [--block 5] [--csv FILE]
                      [--modes tekton-coscheduler tekton-assistant none]

Starts one local control plane (kwok nodes, the real Tekton controller) and runs the pipeline
of e2e/harness/tekton_runs.py (fetch -> build-a|build-b|build-c -> publish, one volumeClaimTemplate
workspace) --runs times in each of three modes:

  tekton-coscheduler  our operator and webhook on, Tekton's `coschedule: disabled`
  tekton-assistant    Tekton's own affinity assistant (`coschedule: pipelineruns`); our
                      operator stopped and its webhook unregistered
  none                neither: Tekton's `coschedule: disabled`, our operator stopped

Modes take turns in blocks of --block runs, so that load from other work on the machine
falls on all three alike; each block starts with an uncounted run that checks the mode is in
effect (a balloon, an assistant pod, or neither). Runs within a block go one after another.

Measured on the client clock: from just before the PipelineRun is created to the moment our
pod watch first sees our balloon pod bound (ours only), the `fetch` pod bound (the first
layer), all three build pods bound (the fan-out layer), and the run finished (Succeeded
condition set, polled every 0.1 s).

Volumes: `zonal` (default) models network block storage: ReadWriteOnce volumes that any node
of one zone can attach, but only one node at a time. Pods of a run that land on two nodes would
fail with Multi-Attach errors on real nodes; kwok does not enforce attachment, so such runs
complete here and the "one node" share tells how many would have hit the error. With `node`
(local volumes pinned to one node) the volume alone puts every pod of a run on one node in all
three modes, so only the timings differ.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

from kubernetes import client

from controller.core.basics import names
from e2e.harness import tekton_runs as tr
from e2e.harness.cluster import ClusterHandle, LocalCluster, present
from e2e.harness.cluster import tekton as tekton_cluster
from e2e.harness.coscheduler import Coscheduler, install_crds

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
ASSISTANT_COMPONENT = "affinity-assistant"


@dataclass(frozen=True)
class Mode:
    name: str
    coschedule: str  # Tekton's feature flag
    operator: bool  # our operator running and its webhook registered


MODES = (
    Mode("tekton-coscheduler", "disabled", True),
    Mode("tekton-assistant", "pipelineruns", False),
    Mode("none", "disabled", False),
)


@dataclass
class Sample:
    mode: str
    run: str
    succeeded: bool
    anchor: float  # seconds from creation to our balloon pod bound (NaN without ours)
    first_layer: float  # seconds from creation to the fetch pod bound
    fan_out: float  # ... to all three build pods bound
    finished: float  # ... to the run finished
    nodes: int  # distinct nodes of the run's task pods


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


# -- volumes --------------------------------------------------------------------------------


def pv_body(name: str, key: str, value: str) -> dict[str, Any]:
    """A 1Gi ReadWriteOnce volume of the default class that nodes with key=value can use."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "local-wffc",
            "local": {"path": f"/mnt/compare/{name}"},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}
                    ]
                }
            },
        },
    }


def add_volumes(core: client.CoreV1Api, nodes: Sequence[str], kind: str, count: int) -> None:
    """count free volumes in every zone (zonal) or on every node (node): wherever a run goes,
    its claim finds one, as a dynamic provisioner would make it."""
    if kind == "zonal":
        domains = sorted({present(present(core.read_node(n).metadata).labels)[ZONE] for n in nodes})
        key = ZONE
    else:
        domains, key = sorted(nodes), HOSTNAME
    for domain in domains:
        for _ in range(count):
            core.create_persistent_volume(pv_body(f"cmp-{uuid.uuid4().hex[:10]}", key, domain))  # type: ignore[arg-type]


# -- modes ----------------------------------------------------------------------------------


class Bench:
    """The cluster, one namespace and pod recorder per mode, and our operator when wanted."""

    def __init__(self, cluster: ClusterHandle, nodes: Sequence[str], volumes: str) -> None:
        self.cluster = cluster
        self.nodes = list(nodes)
        self.volumes = volumes
        self.api = cluster.api_client()
        self.core = client.CoreV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.operator = Coscheduler(cluster)
        self.recorders: dict[str, tr.PodRecorder] = {}
        self.namespaces: dict[str, str] = {}

    def close(self) -> None:
        self.operator_off()
        for recorder in self.recorders.values():
            recorder.__exit__()
        self.api.close()  # type: ignore[no-untyped-call]

    def prepare(self) -> None:
        install_crds(self.cluster)
        for mode in MODES:
            labels = {names.NAMESPACE_LABEL: "true"} if mode.operator else {}
            ns = self.cluster.create_namespace(f"cmp-{mode.name}", labels=labels)
            self.namespaces[mode.name] = ns
            self.recorders[mode.name] = tr.PodRecorder(self.cluster, ns).__enter__()

    def operator_on(self) -> None:
        if self.operator.process is None:
            self.operator.start()
            self.operator.register_webhook()

    def operator_off(self) -> None:
        if self.operator.process is not None:
            self.operator.unregister_webhook()
            self.operator.stop()

    def switch(self, mode: Mode) -> None:
        if mode.operator:
            tekton_cluster.configure(self.cluster, {"coschedule": mode.coschedule})
            self.operator_on()
        else:
            self.operator_off()
            tekton_cluster.configure(self.cluster, {"coschedule": mode.coschedule})

    def in_effect(self, mode: Mode, run: dict[str, Any]) -> bool:
        """Did the (uncounted) run see the mode: a balloon, an assistant pod, or neither?"""
        uid = run["metadata"]["uid"]
        recorder = self.recorders[mode.name]
        balloon = bool(recorder.balloons(uid))
        assistant = any(
            p.labels.get("app.kubernetes.io/component") == ASSISTANT_COMPONENT
            and p.labels.get("tekton.dev/pipelineRun") == run["metadata"]["name"]
            for p in recorder.all()
        )
        want = {"tekton-coscheduler": (True, False), "tekton-assistant": (False, True)}
        return (balloon, assistant) == want.get(mode.name, (False, False))

    # -- one run ----------------------------------------------------------------------------

    def measure(self, mode: Mode, timeout: float = 180) -> tuple[Sample, dict[str, Any]]:
        ns, recorder = self.namespaces[mode.name], self.recorders[mode.name]
        name = tr.unique("fan")
        t0 = time.time()
        run = tr.create_run(self.custom, ns, tr.fan_out_fan_in(name))
        done, t_done = self._wait_done(ns, name, timeout)
        uid = run["metadata"]["uid"]
        pods = recorder.wait_pods(uid, [tr.FETCH, *tr.FAN_OUT, tr.PUBLISH], timeout=10)
        bound = {p.task: (p.bound_at or float("nan")) - t0 for p in pods}
        balloons = [p.bound_at for p in recorder.balloons(uid) if p.bound_at]
        sample = Sample(
            mode=mode.name,
            run=name,
            succeeded=tr.outcome(done) == ("True", "Succeeded"),
            anchor=min(balloons) - t0 if balloons else float("nan"),
            first_layer=bound[tr.FETCH],
            fan_out=max(bound[t] for t in tr.FAN_OUT),
            finished=t_done - t0,
            nodes=len({p.node for p in pods}),
        )
        return sample, run

    def _wait_done(self, ns: str, name: str, timeout: float) -> tuple[dict[str, Any], float]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = tr.get_run(self.custom, ns, name)
            if tr.outcome(run):
                return run, time.time()
            time.sleep(0.1)
        raise TimeoutError(f"PipelineRun {ns}/{name} not finished after {timeout:g}s")

    def block(self, mode: Mode, runs: int) -> list[Sample]:
        self.switch(mode)
        add_volumes(self.core, self.nodes, self.volumes, runs + 1)
        _, warmup = self.measure(mode)
        if not self.in_effect(mode, warmup):
            raise RuntimeError(
                f"mode {mode.name} not in effect for run {warmup['metadata']['name']}"
            )
        samples = [self.measure(mode)[0] for _ in range(runs)]
        say(
            f"{mode.name}: {runs} runs, finished in "
            + ", ".join(f"{s.finished:.1f}" for s in samples)
            + " s"
        )
        return samples


# -- report ---------------------------------------------------------------------------------


def table(samples: Sequence[Sample]) -> str:
    header = (
        "mode",
        "runs",
        "ok",
        "balloon med",
        "max",
        "1st layer med",
        "max",
        "fan-out med",
        "max",
        "finished med",
        "max",
        "on one node",
    )
    rows = [header]
    for mode in MODES:
        mine = [s for s in samples if s.mode == mode.name]
        if not mine:
            continue

        def fig(values: list[float]) -> tuple[str, str]:
            values = [v for v in values if v == v]  # NaN: not measured in this mode
            if not values:
                return "-", "-"
            return f"{statistics.median(values):.2f}s", f"{max(values):.2f}s"

        one = sum(1 for s in mine if s.nodes == 1)
        rows.append(
            (
                mode.name,
                str(len(mine)),
                str(sum(s.succeeded for s in mine)),
                *fig([s.anchor for s in mine]),
                *fig([s.first_layer for s in mine]),
                *fig([s.fan_out for s in mine]),
                *fig([s.finished for s in mine]),
                f"{one}/{len(mine)} ({100 * one / len(mine):.0f}%)",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = [
        "  ".join(
            c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def write_csv(path: str, samples: Sequence[Sample]) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(asdict(samples[0])))
        writer.writeheader()
        writer.writerows(asdict(s) for s in samples)


@contextmanager
def local_cluster(nodes: int) -> Iterator[tuple[LocalCluster, list[str]]]:
    cluster = LocalCluster()
    try:
        say("starting the local control plane, kwok nodes and Tekton")
        cluster.start()
        names_ = cluster.add_nodes(nodes, prefix="cmp")
        cluster.start_tekton()
        yield cluster, names_
    except Exception:
        print(cluster.log_tails(20), file=sys.stderr)
        raise
    finally:
        cluster.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.tools.compare", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--runs", type=int, default=20, help="counted runs per mode")
    parser.add_argument("--nodes", type=int, default=4, help="kwok nodes, in two zones")
    parser.add_argument("--volumes", choices=("zonal", "node"), default="zonal")
    parser.add_argument("--block", type=int, default=5, help="runs per mode before the next")
    parser.add_argument("--csv", help="also write every run's figures here")
    parser.add_argument(
        "--modes",
        nargs="+",
        choices=[m.name for m in MODES],
        default=[m.name for m in MODES],
        help="which modes to run",
    )
    args = parser.parse_args(argv)
    modes = [m for m in MODES if m.name in args.modes]

    samples: list[Sample] = []
    with local_cluster(args.nodes) as (cluster, nodes):
        bench = Bench(cluster, nodes, args.volumes)
        try:
            bench.prepare()
            while len(samples) < args.runs * len(modes):
                for mode in modes:
                    left = args.runs - sum(1 for s in samples if s.mode == mode.name)
                    if left > 0:
                        samples += bench.block(mode, min(args.block, left))
        finally:
            bench.close()
    print(
        f"\nfan-out/fan-in PipelineRun (fetch -> build-a|b|c -> publish, one "
        f"volumeClaimTemplate workspace), {args.runs} runs per mode, {args.nodes} kwok nodes in "
        f"two zones, {args.volumes} volumes, load average {os.getloadavg()[0]:.1f}; seconds from "
        "PipelineRun creation\n"
    )
    print(table(samples))
    if args.csv:
        write_csv(args.csv, samples)
    return 0 if all(s.succeeded for s in samples) else 1


if __name__ == "__main__":
    raise SystemExit(main())
