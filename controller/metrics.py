"""Prometheus metrics, served on their own port."""

from __future__ import annotations

import functools
import importlib.metadata
import platform

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)

PREFIX = "tekton_coscheduler"
# No *_created series: they double every counter and histogram, and two processes' would clash
# when the server re-exports the reconciler's figures (faces/probes.py merges the families).
disable_created_metrics()  # type: ignore[no-untyped-call]
# The process's CPU, memory, open files and start time (process_*), the interpreter (python_info)
# and its garbage collector (python_gc_*): the collectors prometheus_client puts on its default
# registry, which ours is not. Each process exports its own: the server's merge labels them apart.
STANDARD_COLLECTORS = (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR)


@functools.cache  # read from the installed metadata once a process: milliseconds each time
def versions() -> dict[str, str]:
    """The build_info labels: this package's version as installed (pyproject.toml's, the one
    place it is kept), the Python that runs it, and kopf's."""

    def of(package: str) -> str:
        try:
            return importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:  # run from a tree never installed
            return "unknown"

    return {"version": of("tekton-coscheduler"), "python_version": platform.python_version(),
            "kopf_version": of("kopf")}


class Metrics:
    """One registry per process (and per test), so tests never share counters."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        for collector in STANDARD_COLLECTORS:
            r.register(collector)
        self.build_info = Gauge(
            f"{PREFIX}_build_info",
            "Always 1: the operator's version and the Python that runs it, as labels",
            ["version", "python_version", "kopf_version"],
            registry=r,
        )
        self.build_info.labels(**versions()).set(1)
        self.leader = Gauge(
            f"{PREFIX}_leader",
            "1 while this replica's reconciler holds the Lease (it alone reconciles), else 0",
            registry=r,
        )
        self.ready = Gauge(
            f"{PREFIX}_ready",
            "1 while this replica's server reports ready (/readyz: its readiness probe), so it "
            "is among the webhook Service's ready endpoints; the reconciler's sample is always 0",
            registry=r,
        )
        self.balloons_active = Gauge(
            f"{PREFIX}_balloons_active", "Balloon StatefulSets that exist now", registry=r
        )
        self.balloons_created = Counter(
            f"{PREFIX}_balloons_created", "Balloon StatefulSets created", registry=r
        )
        self.balloons_deleted = Counter(
            f"{PREFIX}_balloons_deleted", "Balloon StatefulSets deleted", ["reason"], registry=r
        )
        self.balloon_problems = Counter(
            f"{PREFIX}_balloon_problems",
            "Balloons that could not be created or placed",
            ["reason"],
            registry=r,
        )
        self.gates_released = Counter(
            f"{PREFIX}_gates_released",
            "Pods released from the scheduling gate that held them until their anchor was bound",
            registry=r,
        )
        self.resync_rounds = Counter(
            f"{PREFIX}_resync_rounds", "Resync rounds run to their end", registry=r
        )
        self.resync_left_alone = Gauge(
            f"{PREFIX}_resync_runs_left_alone",
            "Live runs the last resync round left alone: settled, or reconciled by an event since",
            registry=r,
        )
        self.reservations = Counter(
            f"{PREFIX}_reservations",
            "Reservation pods made and deleted (capacity-aware anchoring), by action",
            ["action"],
            registry=r,
        )
        self.watch_events = Counter(
            f"{PREFIX}_watch_events",
            "PipelineRun and pod watch events the leader read, by watch and whether they were "
            "decoded (the others, of namespaces not opted in, were dropped from a glance)",
            ["watch", "decoded"],
            registry=r,
        )
        self.events_waiting = Gauge(
            f"{PREFIX}_events_waiting",
            "Keys of the leader's work queue (a run, whose own events and its pods' are one "
            "key; a sweep; a policy) with work waiting for a handler thread (the leader "
            "falling behind shows here first)",
            registry=r,
        )
        self.events_oldest_seconds = Gauge(
            f"{PREFIX}_events_oldest_seconds",
            "Seconds the longest-waiting key of the leader's work queue has waited (to run, "
            "or to be tried again after a failure)",
            registry=r,
        )
        self.work_retries = Counter(
            f"{PREFIX}_work_retries",
            "Events of the leader's work queue that failed and were put back after a backoff, "
            "by reason (throttled, server, conflict, timeout, connection, error)",
            ["reason"],
            registry=r,
        )
        self.work_dropped = Counter(
            f"{PREFIX}_work_dropped",
            "Events of the leader's work queue that failed where trying again cannot help, by "
            "reason (forbidden, invalid, gone, not-leading)",
            ["reason"],
            registry=r,
        )
        self.oldest_unanchored = Gauge(
            f"{PREFIX}_oldest_unanchored_run_seconds",
            "Seconds the oldest started PipelineRun of ours has gone without a bound anchor (its "
            "balloon pod), at the last resync round: 0 when every run has one",
            registry=r,
        )
        self.events_superseded = Counter(
            f"{PREFIX}_events_superseded",
            "Events that joined work of their key already waiting for its turn (a newer event "
            "of the same object replacing the older there)",
            registry=r,
        )
        self.admissions = Counter(
            f"{PREFIX}_admissions", "Admission requests by outcome", ["outcome"], registry=r
        )
        self.admission_seconds = Histogram(
            f"{PREFIX}_admission_duration_seconds",
            "Time to answer one admission request",
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0),
            registry=r,
        )
        self.warm_image_bytes = Counter(
            f"{PREFIX}_warm_image_bytes",
            "Bytes of anchored runs' step and sidecar images (as nodes report their sizes): "
            "already held by the anchor's node, or to pull there",
            ["on_anchor"],
            registry=r,
        )
        self.warm_node_images = Gauge(
            f"{PREFIX}_warm_node_images",
            "Images the nodes report holding (node.status.images, a node and an image a "
            "sample), as the leader's node watch last saw them: what warm anchors weigh",
            registry=r,
        )
        self.warm_cache_runs = Counter(
            f"{PREFIX}_warm_cache_runs",
            "Anchored runs whose policy asks for warm pipeline caches: anchored where their "
            "pipeline's last run was (hit), elsewhere (miss), or their pipeline's first (first)",
            ["outcome"],
            registry=r,
        )
        self.run_to_anchor_seconds = Histogram(
            f"{PREFIX}_run_to_anchor_seconds",
            "Time from PipelineRun creation to its balloon pod bound to a node",
            buckets=(0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300),
            registry=r,
        )
        self.misplaced_pods = Counter(
            f"{PREFIX}_misplaced_pods",
            "Pods of an anchored run bound to a node other than their balloon's",
            registry=r,
        )
        self.waiting_pods = Gauge(
            f"{PREFIX}_waiting_pods",
            "Pods of anchored runs, and balloons, the scheduler cannot place now, by reason",
            ["reason"],
            registry=r,
        )
        self.longest_wait = Gauge(
            f"{PREFIX}_longest_wait_seconds",
            "How long the pod that has waited longest for a node has waited",
            registry=r,
        )
        self.anchor_moves = Counter(
            f"{PREFIX}_anchor_moves",
            "Anchors that moved to another node, by why they left the old one",
            ["reason"],
            registry=r,
        )
        self.anchor_blocked = Gauge(
            f"{PREFIX}_anchors_on_unavailable_nodes",
            "Anchors on nodes that can no longer keep them, which cannot move yet",
            registry=r,
        )
        self.tekton_assistant_on = Gauge(
            f"{PREFIX}_tekton_affinity_assistant_enabled",
            "1 while Tekton's own affinity assistant is on (coschedule not 'disabled')",
            registry=r,
        )
        self.tekton_assistant_mode = Gauge(
            f"{PREFIX}_tekton_affinity_assistant_mode",
            "Tekton's coschedule flag: 1 for the mode it is in, 0 for the others ('unknown': a"
            " value Tekton does not know)",
            ["mode"],
            registry=r,
        )
        self.reconciler_restarts = Counter(
            f"{PREFIX}_reconciler_restarts",
            "Reconciler processes that ended and were started again (3: the Lease was lost)",
            ["exit_code"],
            registry=r,
        )
        self.policy_bindings = Gauge(
            f"{PREFIX}_admission_policy_bindings",
            "Policy mode: MutatingAdmissionPolicyBindings in place (0 while standing aside)",
            registry=r,
        )
        self.binding_problems = Counter(
            f"{PREFIX}_admission_policy_binding_errors",
            "Policy mode: failed attempts to put the bindings in place",
            registry=r,
        )
        self.api_requests = Counter(
            f"{PREFIX}_api_requests",
            "Requests this process sent to the API server, by verb and resource (RBAC's names)"
            " and status code",
            ["verb", "resource", "code"],
            registry=r,
        )
        self.policy_problems = Gauge(
            f"{PREFIX}_policy_problems",
            "CoschedulingPolicies that cannot be used as written",
            registry=r,
        )
        self.version_tested = Gauge(
            f"{PREFIX}_version_tested",
            "1 if the cluster's release of the component is one this release was tested on",
            ["component", "version"],
            registry=r,
        )
