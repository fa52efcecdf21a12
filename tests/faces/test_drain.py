"""The server's drain: it answers until its Service's endpoints drop it, the proxies have had a
margin and calls stopped; an API that refuses the look leaves the shortest drain."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from controller.faces import drain
from controller.settings import Settings


class Slices:
    """A Service's EndpointSlices that list the pod ready until `drop()` is called."""

    def __init__(self, error: int | None = None) -> None:
        self.ready, self.error, self.looks = True, error, 0

    def list_endpoint_slices(self, namespace: str, service: str) -> list[dict[str, Any]]:
        assert (namespace, service) == ("tcs", "tcs-webhook")
        self.looks += 1
        if self.error:
            raise ApiException(status=self.error)
        return [{"endpoints": [{"targetRef": {"name": "replica-a"},
                                "conditions": {"ready": self.ready}}]}]


@pytest.fixture(autouse=True)
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(drain, "POLL", 0.02)
    monkeypatch.setattr(drain, "MARGIN", 0.3)
    monkeypatch.setattr(drain, "QUIET", 0.2)
    monkeypatch.setenv("POD_NAME", "replica-a")
    monkeypatch.setenv("POD_NAMESPACE", "tcs")


def settings(**more: Any) -> Settings:
    return Settings(**{"shutdown_drain_seconds": 0.1, "shutdown_drain_max_seconds": 5,
                       "webhook_service": "tcs-webhook", **more})


async def timed(api: Slices, calls: drain.Calls, **more: Any) -> float:
    loop = asyncio.get_running_loop()
    started = loop.time()
    await drain.drain(settings(**more), api, calls, loop.time)  # type: ignore[arg-type]
    return loop.time() - started


async def test_it_answers_until_the_endpoints_drop_it_and_then_a_margin() -> None:
    api = Slices()
    loop = asyncio.get_running_loop()
    loop.call_later(0.5, lambda: setattr(api, "ready", False))
    took = await timed(api, drain.Calls(loop.time))
    assert 0.5 + 0.3 <= took < 1.5
    assert api.looks > 3


async def test_it_answers_while_calls_keep_coming() -> None:
    api = Slices()
    api.ready = False
    loop = asyncio.get_running_loop()
    calls = drain.Calls(loop.time)
    for at in (0.1, 0.25, 0.4, 0.55, 0.7, 0.85, 1.0):
        loop.call_later(at, calls.seen)
    took = await timed(api, calls)
    assert 1.0 + 0.2 <= took < 2.0
    assert calls.while_draining == 7


async def test_a_refused_look_leaves_the_shortest_drain() -> None:
    api = Slices(error=403)
    loop = asyncio.get_running_loop()
    calls = drain.Calls(loop.time)
    loop.call_later(0.35, calls.seen)
    took = await timed(api, calls, shutdown_drain_seconds=0.4)
    assert 0.4 <= took < 0.6
    assert api.looks == 1


async def test_the_longest_drain_bounds_it() -> None:
    api = Slices()  # never dropped
    loop = asyncio.get_running_loop()
    took = await timed(api, drain.Calls(loop.time), shutdown_drain_max_seconds=0.6)
    assert 0.6 <= took < 1.2


async def test_without_a_service_it_drains_for_the_shortest_time_even_as_calls_come() -> None:
    """Calls that reach a replica by its address (no Service) never stop coming."""
    api = Slices()
    loop = asyncio.get_running_loop()
    calls = drain.Calls(loop.time)
    for at in (0.1, 0.2, 0.3, 0.4, 0.5):
        loop.call_later(at, calls.seen)
    took = await timed(api, calls, webhook_service=None, shutdown_drain_seconds=0.4)
    assert 0.4 <= took < 0.6
    assert api.looks == 0
