"""The streams' queue hands the resync's look at a run back with the very body it was given:
a look at a live run checks by identity that no newer event replaced it (Operator.look); the
runs of a namespace switched on are looked at once."""

from __future__ import annotations

import threading
from typing import Any

import kubernetes
from kubernetes.client.exceptions import ApiException

from controller.faces.streams import Streams
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
