"""Real PipelineRuns for the e2e suite and the comparison: builders, a pod recorder, waits.

The kwok stage `pod-complete-taskrun` ends a TaskRun pod after the run-seconds annotation
with the exit-code annotation (a pod with the hold annotation: not before the test takes it off,
Runs.release); Tekton copies PipelineRun annotations (and the metadata of `spec.taskRunSpecs`)
to TaskRuns and their pods, which is how a run says what its pods do.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from controller.core.basics import names
from e2e.harness.cluster import ClusterHandle, create_once, name_of, node_schedulable, present

TEKTON = ("tekton.dev", "v1")
RUN_SECONDS = "e2e.tekton-coscheduler.dev/run-seconds"
EXIT_CODE = "e2e.tekton-coscheduler.dev/exit-code"
HOLD = "e2e.tekton-coscheduler.dev/hold"  # the pod runs until the test takes this off
LABEL_RUN_UID = "tekton.dev/pipelineRunUID"
LABEL_TASK = "tekton.dev/pipelineTask"
LABEL_TASK_RUN = "tekton.dev/taskRun"
FETCH = "fetch"
FAN_OUT = ("build-a", "build-b", "build-c")
PUBLISH = "publish"
SHARED = "shared"


# -- builders ------------------------------------------------------------------------------


def step(workspaces: Sequence[str]) -> dict[str, Any]:
    writes = "".join(
        f"echo $(context.taskRun.name) >> $(workspaces.{w}.path)/log\n" for w in workspaces
    )
    return {"name": "work", "image": "busybox", "script": f"#!/bin/sh\n{writes}true\n"}


def task(
    name: str, *, after: Sequence[str] = (), workspaces: Sequence[str] = (SHARED,), retries: int = 0
) -> dict[str, Any]:
    """A pipeline task with an embedded script step binding each pipeline workspace by name."""
    body: dict[str, Any] = {
        "name": name,
        "workspaces": [{"name": w, "workspace": w} for w in workspaces],
        "taskSpec": {"workspaces": [{"name": w} for w in workspaces], "steps": [step(workspaces)]},
    }
    if after:
        body["runAfter"] = list(after)
    if retries:
        body["retries"] = retries
    return body


def volume_claim_template(size: str = "1Gi") -> dict[str, Any]:
    return {
        "volumeClaimTemplate": {
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": size}},
            }
        }
    }


def claim(name: str) -> dict[str, Any]:
    return {"persistentVolumeClaim": {"claimName": name}}


def pipelinerun(
    name: str,
    tasks: Sequence[Mapping[str, Any]],
    workspaces: Mapping[str, Mapping[str, Any]],
    *,
    finally_tasks: Sequence[Mapping[str, Any]] = (),
    annotations: Mapping[str, str] | None = None,
    task_annotations: Mapping[str, Mapping[str, str]] | None = None,
    timeouts: Mapping[str, str] | None = None,
    pod_template: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A tekton.dev/v1 PipelineRun with an embedded pipelineSpec.

    task_annotations reach only that task's TaskRun and pods (through spec.taskRunSpecs),
    which is how one task is made to fail or to take longer than the others."""
    spec: dict[str, Any] = {
        "pipelineSpec": {
            "workspaces": [{"name": w} for w in workspaces],
            "tasks": [dict(t) for t in tasks],
        },
        "workspaces": [{"name": w, **binding} for w, binding in workspaces.items()],
    }
    if finally_tasks:
        spec["pipelineSpec"]["finally"] = [dict(t) for t in finally_tasks]
    if task_annotations:
        spec["taskRunSpecs"] = [
            {"pipelineTaskName": t, "metadata": {"annotations": dict(a)}}
            for t, a in task_annotations.items()
        ]
    if timeouts:
        spec["timeouts"] = dict(timeouts)
    if pod_template:
        spec["taskRunTemplate"] = {"podTemplate": dict(pod_template)}
    return {
        "apiVersion": "/".join(TEKTON),
        "kind": "PipelineRun",
        "metadata": {"name": name, "annotations": dict(annotations or {})},
        "spec": spec,
    }


def fan_out_fan_in(
    name: str, workspace: Mapping[str, Any] | None = None, **kw: Any
) -> dict[str, Any]:
    """fetch -> build-a | build-b | build-c -> publish, all on one shared workspace."""
    tasks = [
        task(FETCH),
        *(task(t, after=[FETCH]) for t in FAN_OUT),
        task(PUBLISH, after=FAN_OUT),
    ]
    return pipelinerun(name, tasks, {SHARED: workspace or volume_claim_template()}, **kw)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:5]}"


# -- what happened to the pods ------------------------------------------------------------


@dataclass
class PodSeen:
    """A pod as first seen bound, with client-clock times (seconds since the epoch)."""

    name: str
    labels: dict[str, str]
    first_seen: float
    node: str | None = None
    bound_at: float | None = None
    spec: dict[str, Any] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    deleted: bool = False
    deleted_at: float | None = None  # when the watch first showed it deleted
    gates: tuple[str, ...] = ()  # its scheduling gates when first seen (as made, if watched)

    @property
    def task(self) -> str:
        return self.labels.get(LABEL_TASK, "")

    @property
    def is_balloon(self) -> bool:
        return self.labels.get(names.LABEL_COMPONENT) == names.COMPONENT_BALLOON


class PodRecorder:
    """Watches one namespace's pods in a thread and keeps each pod's node and bind time, so
    that pods Tekton deletes (cancel, timeout, run deletion) are still accounted for."""

    def __init__(self, cluster: ClusterHandle, namespace: str) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self._pods: dict[str, PodSeen] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._synced = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"pods-{namespace}", daemon=True)

    def __enter__(self) -> PodRecorder:
        self._thread.start()
        if not self._synced.wait(30):
            raise TimeoutError(f"pod watch of {self.namespace} did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        with self.cluster.api_client() as api:
            core = client.CoreV1Api(api)
            version = ""
            while not self._stop.is_set():
                try:
                    version = self._watch_once(core, version)
                except ApiException as e:
                    if e.status != 410:  # 410 Gone: start over from a fresh list
                        time.sleep(0.5)
                    version = ""
                except Exception:  # a dropped connection: watch again
                    time.sleep(0.5)

    def _watch_once(self, core: client.CoreV1Api, version: str) -> str:
        # namespace "": every namespace's pods (a benchmark's runs spread over many)
        list_fn: Any = core.list_namespaced_pod if self.namespace else (
            core.list_pod_for_all_namespaces)
        args = (self.namespace,) if self.namespace else ()
        if not version:
            listed = list_fn(*args)
            for pod in listed.items:
                self._record(pod, deleted=False)
            version = listed.metadata.resource_version
            self._synced.set()
        w = watch.Watch()  # type: ignore[no-untyped-call]
        for event in w.stream(  # type: ignore[no-untyped-call]
                list_fn, *args, resource_version=version, timeout_seconds=5):
            self._record(event["object"], deleted=event["type"] == "DELETED")
            version = event["object"].metadata.resource_version
            if self._stop.is_set():
                w.stop()  # type: ignore[no-untyped-call]
        return version

    def _record(self, pod: client.V1Pod, deleted: bool) -> None:
        now = time.time()
        assert pod.metadata is not None and pod.spec is not None  # as every pod a watch shows
        key = present(pod.metadata.uid)  # not the name: a StatefulSet re-creates its pod under it
        with self._lock:
            seen = self._pods.get(key)
            if seen is None:
                seen = self._pods[key] = PodSeen(
                    name=name_of(pod), labels=dict(pod.metadata.labels or {}), first_seen=now,
                    gates=tuple(g.name for g in pod.spec.scheduling_gates or ()),
                )
            if pod.spec.node_name and seen.node is None:
                seen.node = pod.spec.node_name
                seen.bound_at = now
                seen.spec = client.ApiClient().sanitize_for_serialization(  # type: ignore[no-untyped-call]
                    pod.spec)
            seen.annotations = dict(pod.metadata.annotations or {})
            if deleted and not seen.deleted:
                seen.deleted, seen.deleted_at = True, now

    def all(self) -> list[PodSeen]:
        with self._lock:
            return list(self._pods.values())

    def pods(self, run_uid: str) -> list[PodSeen]:
        """The TaskRun pods of a run (not its balloon nor Tekton's assistant)."""
        with self._lock:
            return [
                p
                for p in self._pods.values()
                if p.labels.get(LABEL_RUN_UID) == run_uid and p.labels.get(LABEL_TASK_RUN)
            ]

    def balloons(self, run_uid: str) -> list[PodSeen]:
        with self._lock:
            return [
                p
                for p in self._pods.values()
                if p.is_balloon and p.labels.get(names.LABEL_RUN_UID) == run_uid
            ]

    def of_run(self, run_uid: str) -> list[PodSeen]:
        """Every pod of the run: its TaskRun pods, and ours (balloon, reservation pods)."""
        with self._lock:
            return [
                p
                for p in self._pods.values()
                if run_uid in (p.labels.get(LABEL_RUN_UID), p.labels.get(names.LABEL_RUN_UID))
            ]

    def first_balloon_node(self, run_uid: str) -> str | None:
        """Where the run's first balloon pod was bound: the anchor while the run was live."""
        bound = [b for b in self.balloons(run_uid) if b.node and b.bound_at]
        return min(bound, key=lambda b: b.bound_at or 0).node if bound else None

    def wait_pods(
        self, run_uid: str, tasks: Iterable[str], timeout: float = 120, bound: bool = True
    ) -> list[PodSeen]:
        """Waits until a pod of each task exists (and is bound); returns those pods."""
        wanted = set(tasks)

        def ready() -> list[PodSeen] | None:
            pods = [p for p in self.pods(run_uid) if p.task in wanted]
            done = {p.task for p in pods if p.node or not bound}
            return pods if done >= wanted else None

        return self.cluster.wait_for(
            ready, timeout=timeout, what=f"pods of {sorted(wanted)} {'bound' if bound else ''}"
        )


# -- runs -----------------------------------------------------------------------------------


def create_run(
    custom: client.CustomObjectsApi, namespace: str, body: Mapping[str, Any]
) -> dict[str, Any]:
    """Creates the run, or returns it if a lost answer's resend finds it made."""
    # The client types custom objects as `object`: they are the API server's JSON, a dict.
    return create_once(
        lambda: cast(dict[str, Any], custom.create_namespaced_custom_object(
            *TEKTON, namespace, "pipelineruns", dict(body)
        )),
        lambda: get_run(custom, namespace, body["metadata"]["name"]),
    )


def get_run(custom: client.CustomObjectsApi, namespace: str, name: str) -> dict[str, Any]:
    run = cast(dict[str, Any], custom.get_namespaced_custom_object(
        *TEKTON, namespace, "pipelineruns", name
    ))
    return run


def succeeded_condition(run: Mapping[str, Any]) -> dict[str, Any]:
    for cond in (run.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Succeeded":
            return dict(cond)
    return {}


def outcome(run: Mapping[str, Any]) -> tuple[str, str] | None:
    """(status, reason) of a finished run, None while it runs."""
    cond = succeeded_condition(run)
    if cond.get("status") in ("True", "False"):
        return str(cond["status"]), str(cond.get("reason", ""))
    return None


def wait_finished(
    cluster: ClusterHandle,
    custom: client.CustomObjectsApi,
    namespace: str,
    name: str,
    timeout: float = 180,
) -> dict[str, Any]:
    def finished() -> dict[str, Any] | None:
        run = get_run(custom, namespace, name)
        return run if outcome(run) else None

    return cluster.wait_for(finished, timeout=timeout, what=f"PipelineRun {name} finished")


def task_runs(
    custom: client.CustomObjectsApi, namespace: str, run_uid: str
) -> list[dict[str, Any]]:
    listed = cast(dict[str, Any], custom.list_namespaced_custom_object(
        *TEKTON, namespace, "taskruns", label_selector=f"{LABEL_RUN_UID}={run_uid}"
    ))
    return list(listed["items"])


def anchored_node(message: str) -> str:
    """The node an Anchored Event names: "the run's pods go to node <node>", and, where
    something was warm there, ": <what>" after it (a node's name holds no colon)."""
    return message.partition(" go to node ")[2].partition(":")[0].strip()


def anchored_nodes(core: client.CoreV1Api, namespace: str, run_uid: str) -> list[str]:
    """The nodes our Anchored Events on the run name. Picked by the API server (a field
    selector): a namespace of many runs holds thousands of Events, slow to read in whole."""
    return [
        anchored_node(str(event.message))
        for event in core.list_namespaced_event(
            namespace, field_selector=f"reason=Anchored,involvedObject.uid={run_uid}").items
        if event.reason == "Anchored" and event.involved_object.uid == run_uid
    ]


def schedulable_nodes(core: client.CoreV1Api) -> list[str]:
    return [name_of(n) for n in core.list_node().items if node_schedulable(n)]
