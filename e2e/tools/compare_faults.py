"""Nodes that go away, with tekton-coscheduler and with Tekton's own affinity assistant.

python -m e2e.tools.compare_faults [--events cordon taint lost deleted drain] [--wait 120]

The scenario of e2e/tests/test_faults.py, once per node event and per mode, on one local control
plane with the real Tekton controller: a run on two kwok nodes of its own (`small`, 2 CPUs, and
`big`, 8), its claim on a volume either node can use, anchored on `small` (ours: the balloon;
Tekton's: its affinity-assistant pod, `coschedule: workspaces`), its first task asking for more
CPU than `small` has. Then `small` is cordoned, tainted, lost (NotReady), deleted or drained. It
prints, per event and mode, how the run ended within --wait seconds after the event, how long
that took, where the anchor went, and what the run's owner was told (Warning and our Events on
the PipelineRun). Results also as JSON in build/compare_faults.json.
Last line: `faults: ours recovered X/N, assistant Y/N`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kubernetes import client

from controller.core.basics import names
from e2e.harness import faults
from e2e.harness import tekton_runs as tr
from e2e.harness.cluster import LocalCluster, present
from e2e.harness.cluster import tekton as tekton_cluster
from e2e.harness.coscheduler import Coscheduler, install_crds

MODES = ("tekton-coscheduler", "tekton-assistant")
ASSISTANT = "affinity-assistant"


@dataclass
class Outcome:
    event: str
    mode: str
    outcome: str  # Succeeded, Failed, or "stuck" (not finished within --wait)
    seconds: float  # from the node event to the run's end (NaN if stuck)
    anchor_before: str
    anchor_after: str
    told: list[str]  # reasons of the Events the run's owner got after the event


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def anchor_node(core: client.CoreV1Api, ns: str, run: dict[str, Any], mode: str) -> str:
    """The node of the run's live anchor pod: our balloon, or Tekton's assistant."""
    if mode == "tekton-coscheduler":
        selector = f"{names.BALLOON_SELECTOR},{names.LABEL_RUN_UID}={run['metadata']['uid']}"
    else:
        selector = f"app.kubernetes.io/component={ASSISTANT}"
    pods = [p for p in core.list_namespaced_pod(ns, label_selector=selector).items
            if present(p.spec).node_name and present(p.metadata).deletion_timestamp is None]
    return str(present(pods[0].spec).node_name) if pods else ""


def one(cluster: LocalCluster, operator: Coscheduler, mode: str, event: str,
        wait: float) -> Outcome:
    ours = mode == "tekton-coscheduler"
    tekton_cluster.configure(cluster, {"coschedule": "disabled" if ours else "workspaces"})
    if ours and operator.process is None:
        operator.start()
        operator.register_webhook()
    if not ours and operator.process is not None:
        operator.unregister_webhook()
        operator.stop()
    pool = faults.make_pool(cluster)
    faults.volumes_across_the_pool(cluster, pool)
    labels = {names.NAMESPACE_LABEL: "true"} if ours else {}
    ns = cluster.create_namespace(f"{event}-{mode[:6]}-{uuid.uuid4().hex[:4]}", labels=labels)
    with cluster.api_client() as api:
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        faults.cordon(cluster, pool.big)
        run = tr.create_run(custom, ns, faults.pool_pipeline(tr.unique(event), pool, "4"))
        before = cluster.wait_for(lambda: anchor_node(core, ns, run, mode), timeout=60,
                                  what=f"{mode}'s anchor placed")
        faults.cordon(cluster, pool.big, on=False)
        time.sleep(20)  # the first task waits beside its anchor (ours says so by now)
        started, t0 = time.monotonic(), time.time()
        say(f"{event} under {mode}: anchor on {before}")
        faults.node_event(cluster, event, pool.small)
        name = run["metadata"]["name"]
        finished = None
        while time.monotonic() - started < wait:
            current = tr.get_run(custom, ns, name)
            if tr.outcome(current):
                finished = current
                break
            time.sleep(1)
        after = anchor_node(core, ns, run, mode) if event != "deleted" or ours else ""
        told = sorted({
            present(e.reason) for e in core.list_namespaced_event(ns).items
            if e.involved_object.uid == run["metadata"]["uid"]
            and (e.type == "Warning" or (e.source and e.source.component == names.APP))
            and e.last_timestamp and e.last_timestamp.timestamp() >= t0 - 1
        })
        if finished is None:
            custom.delete_namespaced_custom_object(*tr.TEKTON, ns, "pipelineruns", name)
    outcome = present(tr.outcome(finished))[1] if finished else "stuck"
    return Outcome(event, mode, outcome,
                   time.monotonic() - started if finished else float("nan"),
                   before, after or "-", told)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.tools.compare_faults",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--events", nargs="+", choices=faults.NODE_EVENTS,
                        default=list(faults.NODE_EVENTS))
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--wait", type=float, default=120)
    parser.add_argument("--out", type=Path, default=Path("build/compare_faults.json"))
    args = parser.parse_args()
    results: list[Outcome] = []
    cluster = LocalCluster()
    try:
        say("starting the local control plane, kwok nodes and Tekton")
        cluster.start()
        cluster.add_nodes(2, prefix="other")  # healthy nodes in other zones, as in real clusters
        cluster.start_tekton()
        install_crds(cluster)
        # Anchored where the first task cannot fit, on purpose (see e2e/tests/test_faults.py):
        # capacity-aware anchoring, which would not allow it, is off for this comparison.
        operator = Coscheduler(cluster, env_overrides={"POD_NAMESPACE": "default",
                                                       "COSCHEDULER_CAPACITY_ANCHOR": "false"})
        for event in args.events:
            for mode in args.modes:
                results.append(one(cluster, operator, mode, event, args.wait))
                say(str(results[-1]))
        operator.stop()
    finally:
        cluster.stop()
    print(f"\n{'event':8} {'mode':19} {'outcome':10} {'seconds':>8}  anchor  told")
    for r in results:
        moved = f"{r.anchor_before} -> {r.anchor_after}"
        print(f"{r.event:8} {r.mode:19} {r.outcome:10} {r.seconds:8.1f}  {moved}  "
              f"{', '.join(r.told) or '(nothing)'}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps([asdict(r) for r in results], indent=2))
    recovered = {m: sum(1 for r in results if r.mode == m and r.outcome == "Succeeded")
                 for m in MODES}
    n = len(args.events)
    print(f"faults: ours recovered {recovered['tekton-coscheduler']}/{n}, "
          f"assistant {recovered['tekton-assistant']}/{n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
