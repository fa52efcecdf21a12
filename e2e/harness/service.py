"""A Service in front of replicas running on the host, as kube-proxy makes one.

The local control plane has no kube-proxy, and its API server calls webhooks by URL. To roll
replicas as a Deployment would, the webhook configuration points at this proxy: each new TCP
connection goes to one of the replicas whose /readyz answers 200 (the EndpointSlice's ready
endpoints), chosen at random; connections are forwarded byte for byte (TLS passes through).
Readiness is polled every `period` seconds, which plays the endpoints' propagation delay: a
replica that stops answering ready is dropped from new connections within one period, while
connections already open stay with it, as with iptables.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
import urllib.request
from dataclasses import dataclass

from e2e.harness.cluster.processes import free_port


@dataclass(frozen=True)
class Backend:
    port: int
    health_port: int


class LocalService:
    def __init__(self, period: float = 1.0) -> None:
        self.port = free_port()
        self.period = period
        self.backends: list[Backend] = []
        self.ready: list[Backend] = []
        self.connections = 0
        self.refused = 0  # a connection that found no ready backend, or whose backend refused
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None

    # -- control, from the test's thread ------------------------------------------------------
    def start(self) -> None:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def add(self, backend: Backend) -> None:
        self.backends = [*self.backends, backend]

    def remove(self, backend: Backend) -> None:
        self.backends = [b for b in self.backends if b != backend]

    # -- the proxy ------------------------------------------------------------------------------
    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._forward, "127.0.0.1", self.port)
        self._poller = asyncio.create_task(self._poll())

    async def _stop(self) -> None:
        self._poller.cancel()
        if self._server is not None:
            self._server.close()

    async def _poll(self) -> None:
        while True:
            backends = self.backends
            ready = await asyncio.gather(*(asyncio.to_thread(_ready, b) for b in backends))
            self.ready = [b for b, ok in zip(backends, ready, strict=True) if ok]
            await asyncio.sleep(self.period)

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        ready = self.ready
        try:
            if not ready:
                raise ConnectionRefusedError("no ready endpoint")
            backend = random.choice(ready)
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", backend.port)
        except OSError:
            self.refused += 1
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(ConnectionError, OSError):
            writer.close()


def _ready(backend: Backend) -> bool:
    try:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{backend.health_port}/readyz", timeout=1
        ) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False
