"""The watch caches: list, then watch; each change to the store, and each object an event brings."""

from __future__ import annotations

import json
from typing import Any

from controller.kube.reflector import Reflector
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
