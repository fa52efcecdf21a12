"""`make bench-scale`: R concurrent runs on N nodes in K namespaces, E more namespaces opted in
with nothing in them, F finished runs kept, three ways.

python -m bench.scale [--runs 1000] [--nodes 100] [--finished 5000] [--namespaces 1]
                      [--enabled 0] [--modes tekton-coscheduler none tekton-assistant]
                      [--images 10] [--pipelines R/10] [--seed 1]

One local control plane (kwok nodes, the real Tekton controller). F finished PipelineRuns are
kept around (made cancelled, so that Tekton finishes them without pods). Our operator starts
(leading, its webhook registered), E namespaces opt in, and the operator at rest is measured:
threads, watches it holds open on the API server (`apiserver_longrunning_requests`, less those
open before it started), RSS and idle CPU over 30 s. Then, for each mode in turn, R
fan-out/fan-in runs (fetch -> build-a|b|c -> publish on one volumeClaimTemplate claim, zonal
volumes), spread over K namespaces of their own, are created at once and run to their end:
tekton-coscheduler (the namespaces opted in), no coscheduling, and Tekton's own affinity
assistant (`coschedule: workspaces`). Our operator stays up in every mode: its CPU per run in
the other modes is what runs it does not serve cost it; each figure also less the operator's own
pace at rest over the same time (the idle CPU above: its lease, resync, node watch), "beyond
idle". Per mode it prints: runs with every pod on one node (and, for ours, on the balloon's
node), misplaced pods, orphan balloons a minute after the end, time from PipelineRun creation to
balloon bound (ours) and to the first layer bound, p50 and p99, and the ratios to no
coscheduling; the operator's CPU seconds per run (creation to 10 s after the last run ended) and
peak RSS (server and reconciler), API requests per run by verb, reconcile lag, the webhook's
p99, and the runs with any Warning Event, by reason. JSON in build/scale.json; PNG plots in
build/scale-*.png. Last line: `scale: R runs on N nodes in K namespaces (E enabled): co-located
X/R, cpu per run C ms, threads T, watches W, RSS M MiB, idle cpu I%, cpu per run not ours U ms,
first pod bound p99 vs none Q x, runs with a Warning W, misplaced M, orphans O, api requests per
run Z, beyond idle: cpu per run D ms, not ours V ms`, then, with images, `, bytes to pull vs
none X x, vs assistant Y x, cache hits H%`.

Warm anchors (bench/scale_warm.py; `--images 0` leaves them out): the nodes report 3 each of
`--images` builder images in `status.images`, each run's steps use its pipeline's image (one of
`--pipelines` a namespace, a label of the run), and our mode's namespaces have a policy asking
for warm caches keyed by that label. Per mode: the bytes the nodes its pods ran on had to pull,
and the runs that went where their pipeline's previous run went; for ours also the operator's
warm counters.
"""
from __future__ import annotations

import argparse
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

from kubernetes import client

from bench import footprint as fp
from bench import scale_report, scale_warm
from bench.pod_churn import cpu_seconds, tree_rss_mib
from bench.profile import Profile, top_frames
from bench.scale_report import OURS, ModeResult
from controller.core.basics import names
from e2e.harness import faults, release
from e2e.harness import tekton_runs as tr
from e2e.harness.cluster import LocalCluster, present
from e2e.harness.cluster import tekton as tekton_cluster
from e2e.harness.coscheduler import install_crds
from e2e.harness.figures import percentile

MODES = {"tekton-coscheduler": "disabled", "none": "disabled", "tekton-assistant": "workspaces"}
TASKS = [tr.FETCH, *tr.FAN_OUT, tr.PUBLISH]


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def component_cpu(cluster: LocalCluster, operator: Operator | None) -> dict[str, float]:
    """CPU seconds so far of every process of the control plane, Tekton, kwok and ours: where
    two cores go when the machine saturates."""
    procs = {p.name: p.pid for p in cluster.processes if p.pid}
    if operator and operator.proc.process and operator.proc.process.pid:
        procs["tekton-coscheduler"] = operator.proc.process.pid
    return {name: cpu_seconds(pid) for name, pid in procs.items()}


class Operator:
    """Our operator as an administrator installs it (the chart, its ServiceAccount, the admission
    mode the chart picks: `auto` is policy where the API server serves MutatingAdmissionPolicy),
    its counters read from /metrics."""

    def __init__(self, cluster: LocalCluster, admission: str) -> None:
        self.proc = release.deploy(cluster, env={
            "COSCHEDULER_LOG_LEVEL": "INFO", "COSCHEDULER_RESYNC_INTERVAL": "30",
            "COSCHEDULER_LEASE_DURATION": "15"}, values={"admission.mode": admission})
        self.admission = self.proc.env()["COSCHEDULER_ADMISSION_MODE"]

    def metrics(self) -> dict[Series, float]:
        return {(x.name, tuple(sorted(x.labels.items()))): x.value for x in self.proc.samples()}


Series = tuple[str, tuple[tuple[str, str], ...]]  # a sample's name and its sorted labels


def api_requests(before: dict[Series, float], after: dict[Series, float],
                 kind: Callable[[dict[str, str]], str]) -> dict[str, float]:
    """The operator's requests over the mode, summed by `kind` of their labels."""
    out: dict[str, float] = {}
    for key, value in after.items():
        name, labels = key[0], dict(key[1])
        if name == "tekton_coscheduler_api_requests_total":
            out[kind(labels)] = out.get(kind(labels), 0.0) + value - before.get(key, 0.0)
    return out


def by_verb(labels: dict[str, str]) -> str:
    return "lease" if labels["resource"] == "leases" else labels["verb"]


def by_resource(labels: dict[str, str]) -> str:
    """Which calls a run costs ("patch pods")."""
    return f"{labels['verb']} {labels['resource']}"


def watch_events(before: dict[Series, float], after: dict[Series, float]) -> dict[str, float]:
    """The leader's run and pod watch events over the mode: decoded, and dropped from a glance,
    in all and by watch ("decoded pods-marked")."""
    out: dict[str, float] = {}
    for key, value in after.items():
        name, labels = key[0], dict(key[1])
        if name == "tekton_coscheduler_watch_events_total":
            kind = "decoded" if labels["decoded"] == "true" else "dropped"
            for each in (kind, f"{kind} {labels['watch']}"):
                out[each] = out.get(each, 0.0) + value - before.get(key, 0.0)
    return out


def histogram_p99(before: dict[Series, float], after: dict[Series, float], name: str) -> float:
    """The 99th percentile's bucket bound over the run, from the server's histogram (the
    process that answers admission), all label sets summed."""
    by_bound: dict[float, float] = {}
    for key, value in after.items():
        labels = dict(key[1])
        if key[0] == name + "_bucket" and labels.get("process") != "reconciler":
            bound = float(labels["le"])
            by_bound[bound] = by_bound.get(bound, 0.0) + value - before.get(key, 0.0)
    buckets = sorted(by_bound.items())
    total = buckets[-1][1] if buckets else 0
    for bound, count in buckets:
        if total and count >= 0.99 * total:
            return bound
    return float("nan")


def finished_runs(cluster: LocalCluster, count: int) -> None:
    """Runs as Tekton leaves them once finished. Tekton finishes a run created cancelled without
    a pod, but at its API client's pace (about 5 a second here: 34 minutes for 10,000), so the
    first is finished by Tekton and the others are created and given its status."""
    if not count:
        return
    ns = cluster.create_namespace(f"old-{uuid.uuid4().hex[:5]}",
                                  labels={names.NAMESPACE_LABEL: "true"})
    with cluster.api_client() as api:
        custom = client.CustomObjectsApi(api)

        def make(i: int) -> None:
            body = tr.pipelinerun(f"old-{i}", [tr.task("t", workspaces=())], {})
            body["spec"]["status"] = "Cancelled"
            tr.create_run(custom, ns, body)

        def finished(name: str) -> dict[str, Any] | None:
            run = cast(dict[str, Any],
                       custom.get_namespaced_custom_object(*tr.TEKTON, ns, "pipelineruns", name))
            return run if tr.outcome(run) else None

        make(0)
        status = cluster.wait_for(lambda: finished("old-0"), timeout=120,
                                  what="a run finished by Tekton")["status"]

        def copy(i: int) -> None:
            make(i)
            custom.patch_namespaced_custom_object_status(
                *tr.TEKTON, ns, "pipelineruns", f"old-{i}", {"status": status})

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(copy, range(1, count)))

        def all_done() -> bool:
            listed = cast(dict[str, Any],
                          custom.list_namespaced_custom_object(*tr.TEKTON, ns, "pipelineruns"))
            return sum(1 for r in listed["items"] if tr.outcome(r)) >= count

        cluster.wait_for(all_done, timeout=60 + count / 5, what=f"{count} runs finished",
                         interval=5)


def volumes(cluster: LocalCluster, runs: int) -> None:
    """Free zonal volumes for one mode's runs, made just before it: every mode meets a pool of
    the same size. Like cloud block storage, a run whose pods spread over two nodes would meet
    Multi-Attach errors on real nodes (kwok does not enforce attachment), so the count of runs
    on one node is what the modes are compared on. The scheduler checks every free volume's
    node affinity against every node for each pod with an unbound claim (FindMatchingVolume:
    82% of its CPU at 1,000 runs), so a pool made for all modes at once slowed the first."""
    zones = ["zone-a", "zone-b"] * (runs // 2 + 5)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda zone: faults.add_pv(cluster, faults.ZONE, zone), zones))


def one_mode(cluster: LocalCluster, mode: str, runs: int, namespaces: int, operator: Operator,
             timeout: float, settle: float, profile: Path | None, idle_rate: float,
             warm: scale_warm.Warm | None = None) -> ModeResult:
    """The runs spread over `namespaces` namespaces (opted in for ours only); our operator is
    up in every mode, its CPU counted: in the others, what runs it does not serve cost it."""
    tekton_cluster.configure(cluster, {"coschedule": MODES[mode]})
    labels = {names.NAMESPACE_LABEL: "true"} if mode == OURS else {}
    tag = uuid.uuid4().hex[:4]
    nss = [cluster.create_namespace(f"{mode[:12]}-{tag}-{i}", labels=labels)
           for i in range(namespaces)]
    result = ModeResult(mode, runs)
    volumes(cluster, runs)
    warmed = warm.mode(mode == OURS, nss) if warm else None  # ours: its policies, Ready
    stats: dict[str, Any] = {}
    recorded = nss[0] if namespaces == 1 else ""  # "": every namespace's pods
    with cluster.api_client() as api, tr.PodRecorder(cluster, recorded) as recorder:
        custom, apps = client.CustomObjectsApi(api), client.AppsV1Api(api)
        pid = operator.proc.process.pid if operator.proc.process else None
        before = operator.metrics()
        cpu0, began = (cpu_seconds(pid) if pid else 0.0), time.monotonic()
        components0 = component_cpu(cluster, operator)
        peak = [tree_rss_mib(pid) if pid else 0.0]
        created: dict[str, tuple[str, float]] = {}  # run name -> (uid, client time)
        done: dict[str, dict[str, Any]] = {}
        # run uid -> when its balloon StatefulSet was made (the API server's clock, 1 s steps):
        # what tells our reaction apart from the StatefulSet controller's in a balloon's delay
        sts_made: dict[str, float] = {}
        stop = threading.Event()

        def sample() -> None:
            t0 = time.time()
            while not stop.is_set():
                live = len(created) - len(done)
                listed = balloons_in(apps, nss) if mode == OURS else []
                for sts in listed:
                    uid = (sts.metadata.labels or {}).get(names.LABEL_RUN_UID)
                    if uid and sts.metadata.creation_timestamp:
                        sts_made.setdefault(uid, sts.metadata.creation_timestamp.timestamp())
                result.series.append((time.time() - t0, live, len(listed)))
                if pid:
                    peak[0] = max(peak[0], tree_rss_mib(pid))
                stop.wait(2)

        sampler = threading.Thread(target=sample, daemon=True)
        spy = Profile(pid, profile / f"profile-{mode}.txt") if profile and pid else None
        if spy:
            spy.start()
        started = time.time()
        sampler.start()

        def make(i: int) -> None:
            body = tr.fan_out_fan_in(f"{mode[:6]}-{i}-{uuid.uuid4().hex[:4]}")
            if warmed:
                warmed.dress(body, i)
            made = tr.create_run(custom, nss[i % len(nss)], body)
            created[made["metadata"]["name"]] = (made["metadata"]["uid"], time.time())

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(make, range(runs)))
        say(f"{mode}: {runs} runs created in {time.time() - started:.0f} s")
        deadline = time.monotonic() + timeout
        while len(done) < runs and time.monotonic() < deadline:
            for ns in nss:
                listed = cast(dict[str, Any],
                              custom.list_namespaced_custom_object(*tr.TEKTON, ns, "pipelineruns"))
                for run in listed["items"]:
                    if tr.outcome(run):
                        done.setdefault(run["metadata"]["name"], run)
            time.sleep(3)
        result.wall_seconds = time.time() - started
        say(f"{mode}: {len(done)}/{runs} runs finished in {result.wall_seconds:.0f} s")
        result.cores = {
            name: round((spent - components0.get(name, 0.0)) / result.wall_seconds, 3)
            for name, spent in component_cpu(cluster, operator).items()
        }
        stop.set()
        sampler.join(10)
        time.sleep(min(settle, 10))  # what the operator does once runs end (balloons go)
        if spy:
            spy.stop()
            stats["profile"] = top_frames(spy.out)
        if pid:
            after = operator.metrics()
            spent = cpu_seconds(pid) - cpu0
            stats |= {
                "cpu_seconds_per_run": spent / runs,
                "idle_cpu_seconds_per_second": idle_rate,
                # What a run adds to the operator's own pace at rest (its lease, resync, node
                # watch): a mode of 1,000 runs lasts 600 to 800 s, and that pace with it.
                "cpu_seconds_per_run_beyond_idle": max(
                    0.0, spent - idle_rate * (time.monotonic() - began)) / runs,
                "peak_rss_mib": peak[0],
                "requests_per_run": {
                    k: round(v / runs, 2) for k, v in api_requests(before, after, by_verb).items()
                },
                "requests_per_run_by_resource": {
                    k: round(v / runs, 2)
                    for k, v in api_requests(before, after, by_resource).items() if v
                },
                "watch_events_per_run": {
                    k: round(v / runs, 1) for k, v in watch_events(before, after).items()},
                "webhook_p99_ms": histogram_p99(
                    before, after, "tekton_coscheduler_admission_duration_seconds") * 1000,
            }
        time.sleep(max(settle - 10, 0))
        result.orphans = len(balloons_in(apps, nss))
        warned: dict[str | None, set[str]] = {}  # run name -> reasons
        for ns in nss:
            for event in client.CoreV1Api(api).list_namespaced_event(ns).items:
                if event.type == "Warning" and event.involved_object.kind == "PipelineRun":
                    reason = present(event.reason)
                    warned.setdefault(event.involved_object.name, set()).add(reason)
                    result.examples.setdefault(reason, event.message or "")
        result.warned = len(warned)
        for reasons in warned.values():
            for reason in reasons:
                result.warnings[reason] = result.warnings.get(reason, 0) + 1
        lags, to_sts, to_pod = [], [], []
        for name, (uid, t_created) in created.items():
            run = done.get(name)
            result.succeeded += bool(run and tr.outcome(run) == ("True", "Succeeded"))
            pods = recorder.pods(uid)
            nodes_ = {p.node for p in pods if p.node}
            balloons = [b for b in recorder.balloons(uid) if b.node and b.bound_at]
            anchor = min(balloons, key=lambda b: b.bound_at or 0) if balloons else None
            if anchor is not None:
                result.anchors.append((anchor.bound_at or 0) - t_created)
                lags.append(anchor.first_seen - t_created)
                if uid in sts_made:
                    to_sts.append(sts_made[uid] - t_created)
                    to_pod.append(anchor.first_seen - sts_made[uid])
                anchored = {b.node for b in balloons}
                result.misplaced += sum(1 for p in pods if p.node and p.node not in anchored)
            fetch = [p.bound_at for p in pods if p.task == tr.FETCH and p.bound_at]
            if fetch:
                result.first_layers.append(min(fetch) - t_created)
            if len(nodes_) == 1 and len(pods) >= len(TASKS) and (
                mode != OURS or (anchor is not None and nodes_ == {anchor.node})
            ):
                result.co_located += 1
        if lags:
            stats["reconcile_lag_p50_s"] = percentile(lags, 50)
            stats["reconcile_lag_p99_s"] = percentile(lags, 99)
        if to_sts:  # the lag above in two: our part, then the StatefulSet controller's
            stats["run_to_statefulset_p50_p99_s"] = (percentile(to_sts, 50), percentile(to_sts, 99))
            stats["statefulset_to_pod_p50_p99_s"] = (percentile(to_pod, 50), percentile(to_pod, 99))
        if warmed:
            result.warm = warmed.figures(created, recorder, before, operator.metrics())
    result.operator = stats
    result.anchor_p50 = percentile(result.anchors, 50)
    result.anchor_p99 = percentile(result.anchors, 99)
    result.first_layer_p50 = percentile(result.first_layers, 50)
    result.first_layer_p99 = percentile(result.first_layers, 99)
    return result


def balloons_in(apps: client.AppsV1Api, namespaces: list[str]) -> list[Any]:
    listed = apps.list_stateful_set_for_all_namespaces(label_selector=names.BALLOON_SELECTOR)
    return [s for s in listed.items if s.metadata and s.metadata.namespace in set(namespaces)]


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--finished", type=int, default=5000)
    parser.add_argument("--namespaces", type=int, default=1,
                        help="namespaces each mode's runs are spread over")
    parser.add_argument("--enabled", type=int, default=0,
                        help="more namespaces opted in, with no run in them")
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--settle", type=float, default=60)
    parser.add_argument("--out", type=Path, default=Path("build"))
    parser.add_argument("--tekton-qps", type=int, default=None,
                        help="Tekton's API rate (its default, 40 a second, paces a burst)")
    parser.add_argument("--admission", choices=["auto", "policy", "webhook"], default="auto",
                        help="the chart's admission.mode (auto: policy where served)")
    parser.add_argument("--profile", action="store_true",
                        help="py-spy samples the operator in each mode: top frames")
    parser.add_argument("--images", type=int, default=10,
                        help="builder images the nodes report, one a pipeline's steps "
                             "(0: none, busybox steps, no warm policy)")
    parser.add_argument("--pipelines", type=int, default=0,
                        help="pipelines a namespace's runs belong to (0: one per 10 runs)")
    parser.add_argument("--seed", type=int, default=1, help="which images each node holds")
    args = parser.parse_args()
    args.pipelines = args.pipelines or max(1, args.runs // args.namespaces // 10)
    results: list[ModeResult] = []
    with LocalCluster() as cluster:
        say(f"{args.nodes} kwok nodes in two zones (each mode gets a zonal volume a run, made "
            "just before it)")
        nodes = cluster.add_nodes(args.nodes, pods=500, cpu="64", memory="256Gi", wait=False)
        cluster.start_tekton(api_qps=args.tekton_qps)
        install_crds(cluster)
        warm = scale_warm.Warm(cluster, nodes, args.images, args.pipelines, args.seed
                               ) if args.images else None
        if warm:  # once kwok has initialised the nodes (Tekton's start takes longer)
            warm.hold()
            say(f"warm anchors: {warm.describe()}")
        say(f"{args.finished} finished runs kept")
        finished_runs(cluster, args.finished)
        baseline = fp.open_watches(cluster)
        operator = Operator(cluster, args.admission)
        args.admission = operator.admission  # what the chart chose: the report says which
        say(f"the operator leads, admission by {operator.admission}")
        say(f"{args.enabled} namespaces opted in, nothing in them")
        fp.enabled_namespaces(cluster, args.enabled)
        time.sleep(15)  # the operator takes them in; then it rests
        assert operator.proc.process is not None and operator.proc.process.pid
        footprint = fp.measure(cluster, operator.proc.process.pid, baseline)
        say(f"operator at rest: {footprint}")
        for mode in args.modes:
            results.append(one_mode(cluster, mode, args.runs, args.namespaces, operator,
                                    args.timeout, args.settle,
                                    args.out if args.profile else None,
                                    footprint.idle_cpu_percent / 100, warm))
            say(f"{mode}: {results[-1].co_located}/{args.runs} co-located")
        operator.proc.stop()
    scale_report.report(args, results, footprint)
    return 0


if __name__ == "__main__":
    sys.exit(main())
