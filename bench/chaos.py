"""`make bench-chaos`: hundreds of runs while the operator and the control plane are knocked over.

python -m bench.chaos [--runs 300] [--nodes 20] [--seconds 600] [--leader-every 20] [--lease 15]

One local control plane (kwok nodes in two zones, a zonal volume for every run, the real Tekton
controller), the chart installed, and three replicas of the operator with production settings
(lease of 15 s, resync 30 s). R fan-out/fan-in runs are created over the first 80 % of the chaos
(e2e/harness/chaos.py): the leading replica is killed (SIGKILL) every 20 s and a new one starts,
the kube-apiserver and the kube-controller-manager are each restarted once, and the node
anchoring most runs is cordoned, then uncordoned. Then it counts what must be zero: runs failed
or stuck, misplaced pods, orphan balloons a minute after the end, duplicate balloons, two
leaders acting at once (every write is logged with the Lease holder it acts as), and says the
longest time without a leader (the API server's own restart not counted). JSON in
build/chaos.json, a timeline in build/chaos-timeline.png. Last line:
`chaos: R runs: failed or stuck because of us F (by Tekton, API server down: T), misplaced M,
orphans O, duplicate balloons D, two leaders at once L, max leaderless S s (lease T s)`. Tekton
fails a TaskRun whose pod it cannot build while the API server is down (its GET of the
ServiceAccount is refused, before any admission): such runs are listed apart, with Tekton's words.
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path

from bench.scale import say
from controller.core.basics import names
from e2e.harness import chaos, faults, leaders, release
from e2e.harness import tekton_runs as tr
from e2e.harness.cluster import LocalCluster
from e2e.harness.fleet import Fleet


def plot(done: chaos.Chaos, census: chaos.Census, fleet: Fleet, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t0 = done.started
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 5), sharex=True,
                                      height_ratios=(3, 1))
    top.plot([t - t0 for t, _ in census.series], [n for _, n in census.series],
             label="balloons")
    for t, what in done.events:
        top.axvline(t - t0, color="red" if "leader" in what else "grey", alpha=0.4)
        if "leader" not in what:
            top.annotate(what.split(" (")[0], (t - t0, 0), rotation=90, fontsize=7,
                         va="bottom")
    top.set_ylabel("balloons")
    top.legend(loc="upper right")
    spans = leaders.leading_spans(fleet.logs())
    bottom.broken_barh([(s - t0, e - s) for s, e in spans], (0, 1), color="tab:green")
    bottom.set_yticks([])
    bottom.set_ylabel("a leader")
    bottom.set_xlabel("seconds since the chaos began (red: leader killed)")
    fig.savefig(path, dpi=100, bbox_inches="tight")
    return path


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.chaos", description=__doc__)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=600, help="how long the chaos lasts")
    parser.add_argument("--leader-every", type=float, default=20)
    parser.add_argument("--lease", type=int, default=15, help="the Lease's duration, seconds")
    parser.add_argument("--timeout", type=float, default=900,
                        help="how long runs may take to finish after the chaos")
    parser.add_argument("--out", type=Path, default=Path("build"))
    args = parser.parse_args()
    with LocalCluster() as cluster:
        say(f"{args.nodes} kwok nodes in two zones, a zonal volume for every run")
        cluster.add_nodes(args.nodes, pods=500, cpu="64", memory="256Gi", wait=False)
        zones = ["zone-a", "zone-b"] * (args.runs // 2 + 1)
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda zone: faults.add_pv(cluster, faults.ZONE, zone), zones))
        cluster.start_tekton()
        operator = release.deploy(cluster, env={
            "COSCHEDULER_LEASE_DURATION": str(args.lease), "COSCHEDULER_RESYNC_INTERVAL": "30",
            "COSCHEDULER_LOG_LEVEL": "INFO", "COSCHEDULER_BALLOON_STUCK_AFTER": "30"})
        fleet = Fleet(cluster, operator, standbys=2)
        fleet.start()
        ns = cluster.create_namespace("chaos", labels={names.NAMESPACE_LABEL: "true"})
        bodies = [tr.fan_out_fan_in(f"chaos-{i}", annotations={tr.RUN_SECONDS: "5"})
                  for i in range(args.runs)]
        say(f"{args.runs} runs over {args.seconds * 0.8:.0f} s; the leader killed every "
            f"{args.leader_every:.0f} s")
        said, done, census = chaos.drive(
            cluster, fleet, ns, bodies, chaos.Plan.over(args.seconds, args.leader_every),
            timeout=args.timeout)
        args.out.mkdir(parents=True, exist_ok=True)
        png = plot(done, census, fleet, args.out / "chaos-timeline.png")
        logs = fleet.logs()
        for replica in fleet.replicas:
            replica.stop()
    print(f"\n{args.runs} runs on {args.nodes} nodes, 3 replicas, lease {args.lease} s\n")
    for t, what in done.events:
        print(f"  {t - done.started:7.1f} s  {what}")
    print(f"\nsucceeded {said.succeeded}/{said.runs}, failed {len(said.failed)} (and "
          f"{len(said.failed_by_outage)} failed by Tekton while the API server was down), "
          f"stuck {len(said.stuck)}, misplaced pods {said.misplaced}, orphan balloons "
          f"{said.orphans}, duplicate balloons {said.duplicates}")
    print(f"leaders {said.leader_changes} (from {len(logs)} replica processes), writes "
          f"{said.writes}, two leaders at once {len(said.overlapping_leaders)}, writes with no "
          f"holder {said.unheld_writes}, max leaderless {said.max_leaderless:.1f} s")
    for what in said.failed + said.stuck:
        print(f"  not succeeded: {what}")
    for what in said.failed_by_outage:
        print(f"  failed by Tekton, the API server down: {what}")
    if said.chaos_error:
        print(f"  the chaos stopped early: {said.chaos_error}")
    (args.out / "chaos.json").write_text(json.dumps(
        {"runs": args.runs, "nodes": args.nodes, "seconds": args.seconds, "lease": args.lease,
         "events": [(t - done.started, what) for t, what in done.events],
         "outcome": asdict(said)}, indent=2))
    print(f"plot: {png}")
    print(f"chaos: {args.runs} runs: failed or stuck because of us "
          f"{len(said.failed) + len(said.stuck)} (by Tekton, API server down: "
          f"{len(said.failed_by_outage)}), "
          f"misplaced {said.misplaced}, orphans {said.orphans}, duplicate balloons "
          f"{said.duplicates}, two leaders at once {len(said.overlapping_leaders)}, max "
          f"leaderless {said.max_leaderless:.1f} s (lease {args.lease} s)")
    return 0 if said.zero() and said.max_leaderless < 2 * args.lease else 1


if __name__ == "__main__":
    sys.exit(main())
