"""The watch caches: list, then watch; each change to the store, and each object an event brings."""

from __future__ import annotations

import json
import threading
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException

from controller.kube.reflector import Reflector, run_forever
from controller.kube.store import Indexed, key_of


def obj(name: str, version: str) -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": name, "resourceVersion": version}}


class Response:
    def __init__(self, body: Any = None, lines: list[dict[str, Any]] | None = None) -> None:
        self.data = json.dumps(body).encode()
        self.lines = lines or []

    def stream(self, amt: Any = None, decode_content: bool = False) -> Any:
        for line in self.lines:
            yield (json.dumps(line) + "\n").encode()

    def release_conn(self) -> None:
        pass


def test_each_object_a_watch_event_brings_is_told_after_the_store_holds_it_with_its_last(
) -> None:
    stores: list[set[str]] = []
    told: list[tuple[str, str, str, bool, set[str]]] = []
    events = [
        {"type": "ADDED", "object": obj("b", "2")},
        {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "3"}}},
        {"type": "MODIFIED", "object": obj("a", "4")},
        {"type": "DELETED", "object": obj("b", "5")},
    ]
    reflector: Reflector

    def list_fn(*args: Any, watch: bool = False, **kwargs: Any) -> Response:
        if not watch:
            return Response({"items": [obj("a", "1")], "metadata": {"resourceVersion": "1"}})
        if not events:
            reflector.stop()
            return Response(lines=[])
        batch = events[:]
        events.clear()
        return Response(lines=batch)

    def on_object(o: dict[str, Any], old: dict[str, Any] | None, deleted: bool) -> None:
        meta = o["metadata"]
        last = old["metadata"]["resourceVersion"] if old else ""
        told.append((meta["name"], meta["resourceVersion"], last, deleted, set(stores[-1])))

    def on_change(store: Indexed) -> None:
        stores.append({key_of(o) for o in store.values()})

    reflector = Reflector("test", list_fn, (), on_change, on_object=on_object)
    reflector.run()
    assert stores[0] == {"ns/a"}  # the list: told as a store, not object by object
    # The version replaced: none for an addition, the one the store held for a deletion.
    assert told == [("b", "2", "", False, {"ns/a", "ns/b"}),
                    ("a", "4", "1", False, {"ns/a", "ns/b"}), ("b", "5", "2", True, {"ns/a"})]


def relisted(first: list[dict[str, Any]], second: list[dict[str, Any]],
             on_object: Any) -> Reflector:
    """A reflector that lists `first`, has its watch ended by 410 Gone, lists `second`."""
    lists, watches = [first, second], [[{"type": "ERROR", "object": {"code": 410}}], []]
    reflector: Reflector

    def list_fn(*args: Any, watch: bool = False, **kwargs: Any) -> Response:
        if not watch:
            return Response({"items": lists.pop(0), "metadata": {"resourceVersion": "9"}})
        if not watches:
            reflector.stop()
        return Response(lines=watches.pop(0) if watches else [])

    reflector = Reflector("test", list_fn, (), on_object=on_object)
    reflector._stopped.wait = lambda timeout=None: False  # type: ignore[method-assign]
    reflector.run()
    return reflector


def test_a_list_after_a_broken_watch_tells_what_changed_and_what_vanished_in_the_gap() -> None:
    """410 Gone: the store lists again, and its listeners hear of the object deleted while no
    watch ran (as deleted), the one changed (with the version it replaced) and the one new."""
    told: list[tuple[str, str, bool]] = []

    def on_object(o: dict[str, Any], old: dict[str, Any] | None, deleted: bool) -> None:
        told.append((o["metadata"]["name"], old["metadata"]["resourceVersion"] if old else "",
                     deleted))

    reflector = relisted([obj("a", "1"), obj("b", "1")], [obj("a", "5"), obj("c", "6")],
                         on_object)
    assert sorted(told) == [("a", "1", False), ("b", "1", True), ("c", "", False)]
    assert {key_of(o) for o in reflector.store.values()} == {"ns/a", "ns/c"}


def test_a_list_after_a_broken_watch_tells_what_appeared_in_the_gap_from_an_empty_store(
) -> None:
    """A store that was synced empty: what the relist shows is told as added all the same."""
    told: list[str] = []
    relisted([], [obj("a", "5")], lambda o, old, deleted: told.append(o["metadata"]["name"]))
    assert told == ["a"]


def test_a_first_list_told_object_by_object_is_told_before_the_store_counts_as_synced(
) -> None:
    """For listeners keeping a view of every object (the nodes): whoever waits for `synced`
    finds every listed object already told."""
    told: list[tuple[str, bool, bool]] = []
    reflector: Reflector

    def list_fn(*args: Any, watch: bool = False, **kwargs: Any) -> Response:
        if watch:
            reflector.stop()
            return Response(lines=[])
        return Response({"items": [obj("a", "1"), obj("b", "1")],
                         "metadata": {"resourceVersion": "1"}})

    def on_object(o: dict[str, Any], old: dict[str, Any] | None, deleted: bool) -> None:
        told.append((o["metadata"]["name"], deleted, reflector.synced.is_set()))

    reflector = Reflector("test", list_fn, (), on_object=on_object, tell_list=True)
    reflector.run()
    assert sorted(told) == [("a", False, False), ("b", False, False)]
    assert reflector.synced.is_set()


def pauses_of(outcomes: list[str], failure: Exception) -> list[float | None]:
    """The pauses run_forever takes over these outcomes of a watch ("fail": it raises
    `failure` at once; "long": after running 60 s)."""
    clock, pauses = [0.0], []
    stopped = threading.Event()

    def once() -> bool:
        kind = outcomes.pop(0)
        if not outcomes:
            stopped.set()
        if kind == "long":
            clock[0] += 60
        raise failure

    def wait(timeout: float | None = None) -> bool:
        pauses.append(timeout)
        clock[0] += timeout or 0
        return stopped.is_set()

    stopped.wait = wait  # type: ignore[method-assign]
    run_forever("test", once, stopped, clock=lambda: clock[0])
    return pauses


def test_the_pause_between_watches_grows_while_they_fail_and_resets_after_a_healthy_one(
) -> None:
    """Five failures in a row wait 1, 2, 4, 8, 16 s; a watch that then ran 60 s before it
    broke is followed by the shortest pause again (not 30 s for the process's whole life)."""
    failure = ApiException(status=500, reason="Internal Server Error")
    pauses = pauses_of(["fail"] * 5 + ["long", "fail"], failure)
    assert pauses[:5] == [1.0, 2.0, 4.0, 8.0, 16.0]
    assert pauses[5] == 1.0


def test_while_the_api_server_refuses_connections_the_pause_stays_short() -> None:
    """A restart of 15 s: tried every 2 s at most, so the cache is current within 2 s of its
    return (it waited 8 s, then 16)."""
    refused = urllib3.exceptions.MaxRetryError(None, "/api", OSError("refused"))  # type: ignore[arg-type]
    assert pauses_of(["fail"] * 6, refused) == [1.0, 2.0, 2.0, 2.0, 2.0, 2.0]


def test_a_client_error_without_an_answer_is_the_api_server_out_of_reach_too() -> None:
    """The kubernetes client raises ApiException(status=0) when no answer came (kube/errors.py
    reads it as a connection failure): the same short pause as a refused connection."""
    no_answer = ApiException(status=0, reason="Connection reset by peer")
    assert pauses_of(["fail"] * 5, no_answer) == [1.0, 2.0, 2.0, 2.0, 2.0]


def test_a_watch_ended_by_410_gone_lists_again_at_once() -> None:
    """A restarted API server's watch cache no longer keeps the version the watch resumed
    from: the store lists again at once, not after a pause in which it is stale (a StatefulSet
    deleted in the gap kept in the cache gave the next run a term towards a balloon that was
    gone: e2e/tests/test_apifaults.py); other ERROR events wait out the pause."""
    pauses: list[float | None] = []
    watches = [[{"type": "ADDED", "object": obj("a", "10")},
                {"type": "ERROR", "object": {"code": 410, "reason": "Expired"}}],
               [{"type": "ERROR", "object": {"code": 410, "reason": "Expired"}}],
               [{"type": "ERROR", "object": {"code": 500, "reason": "InternalError"}}], []]
    reflector: Reflector

    def list_fn(*args: Any, watch: bool = False, **kwargs: Any) -> Response:
        if not watch:
            return Response({"items": [], "metadata": {"resourceVersion": "9"}})
        if len(watches) == 1:
            reflector.stop()
        return Response(lines=watches.pop(0))

    reflector = Reflector("test", list_fn, ())

    def wait(timeout: float | None = None) -> bool:
        pauses.append(timeout)
        return reflector._stopped.is_set()

    reflector._stopped.wait = wait  # type: ignore[method-assign]
    reflector.run()
    # None after the first 410; after one straight after a list (no loop), and the 500.
    assert pauses == [1.0, 2.0]
