"""The streams' queue hands the resync's look at a run back with the very body it was given:
a look at a live run checks by identity that no newer event replaced it (Operator.look); the
runs of a namespace switched on are looked at once."""

from __future__ import annotations

import threading
import time
from typing import Any

import kubernetes
from kubernetes.client.exceptions import ApiException

from controller.faces.serial import Serial
from controller.faces.streams import Streams, Work, merge
from controller.faces.streams import handle as _handled
from controller.faces.streams import work as works
from controller.kube.client import Kube
from controller.kube.clusterview import Facts


class Operator:
    def __init__(self) -> None:
        self.submit: Any = None
        self.looked: list[tuple[Any, bool]] = []
        self.done = threading.Event()

    def may_concern(self, seen: Any) -> bool:
        return True

    def look(self, body: Any, listed: bool = False) -> None:
        self.looked.append((body, listed))
        self.done.set()


def test_a_resync_s_look_reaches_the_operator_with_the_body_itself() -> None:
    operator = Operator()
    streams = Streams(operator, Kube(kubernetes.client.ApiClient()), 1.0,  # type: ignore[arg-type]
                      workers=1)
    assert operator.submit == streams.submit_run  # Operator.nudge puts looks on this queue
    body = {"metadata": {"uid": "run-uid", "name": "build", "namespace": "team-a"}}
    streams.work.start()
    streams.submit_run("run-uid", body, False)
    assert operator.done.wait(5)
    streams.work.stop()
    [(seen, listed)] = operator.looked
    assert seen is body and listed is False


def _streams(operator: Operator, runs_of: Any) -> Streams:
    kube = Kube(kubernetes.client.ApiClient())
    kube.list_pipelineruns = runs_of  # type: ignore[method-assign]
    return Streams(operator, kube, 1.0, workers=1)  # type: ignore[arg-type]


def test_the_runs_of_a_namespace_switched_on_are_listed_and_each_looked_at() -> None:
    """A run whose event came before the view knew its namespace was dropped by the run watch
    (made just after the label, or before it): without this it would wait for its next
    event. A failed list is tried again on the queue."""
    operator = Operator()
    run = {"metadata": {"uid": "run-uid", "name": "build", "namespace": "team-b"}}
    asked: list[str | None] = []

    def runs_of(namespace: str | None = None) -> list[dict[str, Any]]:
        asked.append(namespace)
        if len(asked) == 1:
            raise ApiException(status=503, reason="Service Unavailable")
        return [run]

    streams = _streams(operator, runs_of)
    streams.work.start()
    streams.on_facts(Facts(synced=True, enabled_namespaces=frozenset({"team-a"})),
                     Facts(synced=True, enabled_namespaces=frozenset({"team-a", "team-b"})))
    assert operator.done.wait(5)
    streams.work.stop()
    assert asked == ["team-b", "team-b"]
    assert operator.looked == [(run, True)]  # as the first resync round's: decided whatever


def test_no_list_for_the_view_s_first_sync_nor_a_namespace_switched_off() -> None:
    """The first sync is every namespace: the leader's first resync round lists them all."""
    operator = Operator()
    asked: list[str | None] = []

    def listing(namespace: str | None = None) -> list[Any]:
        asked.append(namespace)
        return []

    streams = _streams(operator, listing)
    streams.work.start()
    both = frozenset({"team-a", "team-b"})
    streams.on_facts(Facts(), Facts(synced=True, enabled_namespaces=both))
    streams.on_facts(Facts(synced=True, enabled_namespaces=both),
                     Facts(synced=True, enabled_namespaces=frozenset({"team-a"})))
    streams.work.stop()
    assert asked == [] and operator.looked == []


def _pod(name: str, run_uid: str, version: str) -> dict[str, Any]:
    """A TaskRun pod of a run, as Tekton labels it (the run's uid among its labels)."""
    return {"metadata": {"uid": f"{name}-uid", "name": name, "namespace": "team-a",
                         "resourceVersion": version,
                         "labels": {"tekton.dev/pipelineRun": "build",
                                    "tekton.dev/pipelineRunUID": run_uid,
                                    "tekton.dev/taskRun": f"build-{name}"}}}


def test_a_run_s_own_events_and_its_pods_are_one_key_each_object_s_newest_in_order() -> None:
    """controller-runtime's shape: what concerns a run is put under the run's key, so one
    worker at a time acts on a run, whatever object's event woke it; each object keeps its
    newest event, and the objects come in the order they first came."""
    handled: list[tuple[str, str, str]] = []
    streams = Streams(Operator(), Kube(kubernetes.client.ApiClient()), 1.0,  # type: ignore[arg-type]
                      workers=1)
    run = {"metadata": {"uid": "run-uid", "name": "build", "namespace": "team-a",
                        "resourceVersion": "1"}}
    streams.on_pod = lambda kind, pod: handled.append(  # type: ignore[method-assign]
        ("pod", pod["metadata"]["name"], pod["metadata"]["resourceVersion"]))
    streams.on_run = lambda kind, body: handled.append(  # type: ignore[method-assign]
        ("run", kind, body["metadata"]["resourceVersion"]))
    streams.on_resync = lambda kind, body: handled.append(  # type: ignore[method-assign]
        ("look", kind, body["metadata"]["resourceVersion"]))
    pods, runs = streams._to(streams.on_pod, of_run=True), streams._to(streams.on_run,
                                                                        of_run=False)
    pods("ADDED", _pod("fetch", "run-uid", "1"))
    runs("MODIFIED", run)
    pods("MODIFIED", _pod("fetch", "run-uid", "2"))  # replaces the waiting one, in its place
    pods("ADDED", _pod("build", "run-uid", "1"))
    streams.submit_run("run-uid", {**run, "metadata": {**run["metadata"], "resourceVersion": "0"}},
                       False)  # a look never replaces a watch event waiting
    pods("ADDED", _pod("other", "other-uid", "1"))  # another run: a key of its own
    assert streams.work.backlog() == 2
    streams.work.start()
    deadline = time.monotonic() + 5
    while len(handled) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    streams.work.stop()
    assert handled[:3] == [("pod", "fetch", "2"), ("run", "MODIFIED", "1"), ("pod", "build", "1")]
    assert handled[3:] == [("pod", "other", "1")]


def test_a_run_s_work_that_failed_keeps_its_pods_events_beside_what_came_meanwhile() -> None:
    """The queue merges a failed work back with the key's newer one: a pod's event that came
    with the failure is not lost to the newer event of another object of the run."""
    seen: list[tuple[str, str]] = []
    failed = threading.Event()
    release = threading.Event()
    finished = threading.Event()

    def handler(kind: str, obj: Any) -> None:
        name = obj["metadata"]["name"]
        seen.append((name, kind))
        if name == "run" and not failed.is_set():
            failed.set()
            release.wait(5)
            raise ApiException(status=503, reason="Service Unavailable")
        if name == "late":
            finished.set()

    work: Serial[Work] = Serial(_handled, workers=1, name="test", merge=merge)
    work.start()
    work.put("run-uid", merge(works("pod", handler, "ADDED", {"metadata": {"name": "pod"}}),
                              works("run", handler, "MODIFIED", {"metadata": {"name": "run"}})))
    assert failed.wait(5)
    work.put("run-uid", works("late", handler, "ADDED", {"metadata": {"name": "late"}}))
    release.set()
    assert finished.wait(5)
    work.stop()
    assert seen == [("pod", "ADDED"), ("run", "MODIFIED"),
                    ("pod", "ADDED"), ("run", "MODIFIED"), ("late", "ADDED")]


def test_a_failing_call_of_a_run_s_work_holds_up_none_after_it() -> None:
    """A pod's deletion must not wait out the backoff of its run's failing event: each call of
    the work is made, then the failure the queue may mend is raised for the whole to be tried
    again (a permanent one of the calls does not hide a transient one)."""
    made: list[str] = []

    def failing(status: int) -> Any:
        def handler(kind: str, obj: Any) -> None:
            made.append(obj["metadata"]["name"])
            raise ApiException(status=status, reason="failed")
        return handler

    def fine(kind: str, obj: Any) -> None:
        made.append(obj["metadata"]["name"])

    item = merge(merge(works("run", failing(422), "MODIFIED", {"metadata": {"name": "run"}}),
                       works(("pod", "a"), failing(503), "DELETED", {"metadata": {"name": "a"}})),
                 works(("pod", "b"), fine, "DELETED", {"metadata": {"name": "b"}}))
    try:
        _handled(item)
    except ApiException as exc:
        assert exc.status == 503  # the one trying again may mend
    else:
        raise AssertionError("the failure was not raised")
    assert made == ["run", "a", "b"]
