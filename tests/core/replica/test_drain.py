"""When a draining webhook replica may stop: never while its Service may still send it calls."""

from __future__ import annotations

from controller.core.replica.drain import Drain, done, listed

PLAN = Drain(started=100.0, minimum=10.0, maximum=60.0, margin=3.0, quiet=2.0)


def slice_(*endpoints: tuple[str, bool | None]) -> dict[str, object]:
    return {"endpoints": [
        {"targetRef": {"kind": "Pod", "name": pod},
         "conditions": {} if ready is None else {"ready": ready}}
        for pod, ready in endpoints]}


def test_a_pod_is_listed_while_any_slice_offers_it_ready() -> None:
    assert listed([slice_(("a", True), ("b", True))], "a")
    assert listed([slice_(("b", True)), slice_(("a", None))], "a")  # no condition: ready
    assert not listed([slice_(("a", False), ("b", True))], "a")  # terminating: not ready
    assert not listed([slice_(("b", True))], "a")
    assert not listed([], "a")
    assert not listed([{"endpoints": None}, {}], "a")


def test_it_answers_at_least_the_shortest_drain() -> None:
    assert done(PLAN, 105.0, unlisted_since=100.5, last_call=None) == (
        False, "the shortest drain has not passed")


def test_it_answers_while_the_endpoints_still_list_it() -> None:
    assert done(PLAN, 130.0, unlisted_since=None, last_call=None) == (
        False, "the Service's endpoints still list this replica")


def test_the_proxies_get_a_margin_after_the_endpoints_drop_it() -> None:
    assert done(PLAN, 111.0, unlisted_since=109.0, last_call=None)[0] is False
    assert done(PLAN, 112.0, unlisted_since=109.0, last_call=None) == (True, "drained")


def test_it_answers_while_calls_still_arrive() -> None:
    assert done(PLAN, 115.0, unlisted_since=101.0, last_call=114.0) == (
        False, "calls still arrive")
    assert done(PLAN, 116.0, unlisted_since=101.0, last_call=114.0) == (True, "drained")


def test_the_longest_drain_ends_it_whatever_it_sees() -> None:
    assert done(PLAN, 160.0, unlisted_since=None, last_call=159.9) == (
        True, "the longest drain passed")


def test_with_the_floor_alone_it_stops_at_the_floor_once_calls_stop() -> None:
    floor = Drain(started=0.0, minimum=10.0, maximum=10.0)
    assert done(floor, 10.0, unlisted_since=0.0, last_call=9.9) == (
        True, "the longest drain passed")
