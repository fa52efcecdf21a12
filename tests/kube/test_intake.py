"""The run and pod intake: events glanced at, only the wanted decoded, the watch resumed."""

from __future__ import annotations

import json
from typing import Any

from kubernetes.client.exceptions import ApiException

from controller.core.replica import glance
from controller.kube.intake import Intake
from controller.kube.reflector import lines
from controller.metrics import Metrics
from tests import factories
from tests.readings import said


def event(kind: str, obj: dict[str, Any]) -> bytes:
    return (f'{{"type":"{kind}","object":' + json.dumps(obj, separators=(",", ":")) + "}\n"
            ).encode()


def run(namespace: str, uid: str, version: str) -> dict[str, Any]:
    body = factories.pipelinerun(namespace=namespace, uid=uid)
    body["metadata"]["resourceVersion"] = version
    return body


class Watch:
    """A fake watch endpoint: each call serves the next batch of raw chunks."""

    def __init__(self, *batches: list[bytes]) -> None:
        self.batches = list(batches)
        self.asked: list[dict[str, Any]] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Watch:
        self.asked.append(kwargs)
        self.chunks = self.batches.pop(0) if self.batches else []
        return self

    def stream(self, amt: Any = None, decode_content: bool = False) -> Any:
        yield from self.chunks

    def release_conn(self) -> None:
        pass


def intake(watch: Watch, enabled: set[str], metrics: Metrics | None = None
           ) -> tuple[Intake, list[tuple[str, str]]]:
    got: list[tuple[str, str]] = []
    return Intake(
        "runs", watch, (), lambda kind, obj: got.append((kind, obj["metadata"]["uid"])),
        lambda seen: glance.may_concern(seen, enabled.__contains__, lambda _: False),
        metrics=metrics,
    ), got


def test_lines_are_split_across_chunks_whatever_their_size() -> None:
    raw = b'{"a":1}\n{"b":2}\n\n{"c":' + b"3" * 100_000 + b"}\n"
    for size in (1, 7, 64, len(raw)):
        chunks = [raw[i:i + size] for i in range(0, len(raw), size)]
        assert list(lines(iter(chunks))) == [b'{"a":1}', b'{"b":2}', b'{"c":' + b"3" * 100_000
                                             + b"}"]


def test_events_of_namespaces_that_did_not_opt_in_are_never_decoded() -> None:
    """What the glance saves, counted: 1,000 events of others decode nothing."""
    others = [event("MODIFIED", run(f"team-{i}", f"u{i}", str(10 + i))) for i in range(1000)]
    ours = event("ADDED", run("team-a", "mine", "5000"))
    watch = Watch([*others[:500], ours, *others[500:]])
    metrics = Metrics()
    taken, got = intake(watch, {"team-a"}, metrics)
    taken.watch_once()
    assert got == [("ADDED", "mine")]
    counted = {decoded: said(metrics, "watch_events_total", watch="runs", decoded=decoded)
               for decoded in ("true", "false")}
    assert counted == {"true": 1, "false": 1000}
    assert taken.version == "1009"  # the last event's, though it was not decoded


class Listing:
    def __init__(self, items: list[dict[str, Any]], version: str) -> None:
        self.data = json.dumps({"items": items, "metadata": {"resourceVersion": version}}
                               ).encode()


class Server(Watch):
    """Watches as Watch serves them; a list (no `watch`) answers what `listing` holds."""

    def __init__(self, *batches: list[bytes]) -> None:
        super().__init__(*batches)
        self.listing: Listing = Listing([], "0")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("watch"):
            self.asked.append({"list": True, **kwargs})
            return self.listing
        return super().__call__(*args, **kwargs)


def test_the_watch_resumes_from_the_last_version_and_lists_again_after_an_error() -> None:
    """After 410 Gone the intake lists: what the list shows is handed on as ADDED, what it no
    longer shows of what was handed on as DELETED (a deletion in the gap is never lost), and
    the watch goes on from the list's version."""
    gone = b'{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired"}}\n'
    server = Server([event("ADDED", run("team-a", "a", "7")), event("ADDED", run("team-a", "b",
                                                                                 "8"))],
                    [gone], [event("MODIFIED", run("team-a", "a", "12"))])
    taken, got = intake(server, {"team-a"})
    assert taken.watch_once()
    assert taken.watch_once()  # 410 Gone: the server is there, the list comes at once
    server.listing = Listing([run("team-a", "a", "9"), run("other", "c", "10")], "11")
    assert taken.watch_once()
    # from the start (every object sent as ADDED), from 8, a list, then from the list's 11
    assert [a.get("list") or a.get("resource_version") for a in server.asked] == [
        None, "8", True, "11"]
    # What vanished is handed on before what the list shows: the handlers' queue serves them
    # in that order, so a run decided meanwhile is not given a term towards a pod that is gone.
    assert got == [("ADDED", "a"), ("ADDED", "b"), ("DELETED", "b"), ("ADDED", "a"),
                   ("MODIFIED", "a")]
    assert set(taken.known) == {"a"}


def test_a_bookmark_moves_the_version_and_tells_no_one() -> None:
    watch = Watch([b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"77"}}}\n'])
    taken, got = intake(watch, set())
    taken.watch_once()
    assert (got, taken.version) == ([], "77")


def test_a_version_too_old_is_followed_by_a_list_and_the_watch_from_there() -> None:
    calls: list[dict[str, Any]] = []
    taken: Intake

    def list_fn(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        if len(calls) == 1:
            raise ApiException(status=410, reason="Gone")
        if not kwargs.get("watch"):
            return Listing([], "20")
        taken.stop()
        return Watch([])()

    taken, _ = intake(Watch(), set())
    taken._list_fn = list_fn
    taken.version = "3"
    taken._stopped.wait = lambda timeout=None: False  # type: ignore[method-assign]
    taken.run()
    assert [c.get("resource_version") for c in calls] == ["3", None, "20"]
    assert calls[1].get("watch") is None  # a list, then the watch from its version


def test_a_watch_gone_again_right_after_a_list_waits_as_a_failure() -> None:
    """A 410 on a resumed watch is listed again at once; one on the watch from a version just
    listed is the API server failing, and waits out the pause like any failure (no loop of
    lists)."""
    gone = b'{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired"}}\n'
    broken = b'{"type":"ERROR","object":{"kind":"Status","code":500,"reason":"InternalError"}}\n'
    server = Server([gone], [gone], [broken])
    taken, _ = intake(server, {"team-a"})
    taken.version = "5"
    assert taken.watch_once()  # resumed from 5: gone, list again at once
    assert not taken.watch_once()  # listed, and gone again: a failure
    assert not taken.watch_once()  # listed again; any other ERROR is a failure too


def test_a_watch_refused_with_410_on_resuming_lists_again_at_once() -> None:
    """A restarted API server may answer the resumed watch's request itself with 410 (not an
    event in its stream): the intake lists again at once, not after the pause of a failure."""
    calls: list[dict[str, Any]] = []

    def list_fn(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        if kwargs.get("watch") and kwargs.get("resource_version") == "3":
            raise ApiException(status=410, reason="Gone")
        if not kwargs.get("watch"):
            return Listing([], "20")
        return Watch([])()

    taken, _ = intake(Watch(), set())
    taken._list_fn = list_fn
    taken.version = "3"
    assert taken.watch_once()  # refused: list at once
    assert taken.watch_once()  # the list, then the watch from its version
    assert [c.get("resource_version") for c in calls] == ["3", None, "20"]
