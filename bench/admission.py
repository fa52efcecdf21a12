"""Benchmark of the admission webhook: 10,000 requests to a running server over HTTPS.

python -m bench.admission [--requests N] [--concurrency C]

Prints the handler's own latency (decode, decide, encode, in process), the latency seen by a
client over HTTPS with keep-alive, requests per second, and the server's resident memory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import trustme

from bench.webhook_server import FixedFacts
from controller.core.admission import admission
from e2e.harness.figures import percentile
from tests import factories


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def bodies(n: int) -> list[bytes]:
    """A realistic mix: mostly TaskRun pods to patch, some already anchored, some others."""
    out = []
    for i in range(n):
        pod = factories.taskrun_pod(task=f"task-{i % 50}")
        if i % 10 == 7:
            pod["metadata"]["namespace"] = "not-enabled"
        out.append(json.dumps(factories.admission_review(pod)).encode())
    return out


def handler_latency(payloads: list[bytes]) -> list[float]:
    facts = FixedFacts()
    samples = []
    for body in payloads:
        start = time.perf_counter()
        uid, request = admission.parse(body)
        json.dumps(admission.response(uid, admission.decide(request, facts)))
        samples.append(time.perf_counter() - start)
    return samples


async def client(
    url: str, ctx: ssl.SSLContext, payloads: list[bytes], concurrency: int
) -> list[float]:
    samples: list[float] = []
    queue = list(reversed(payloads))
    connector = aiohttp.TCPConnector(limit=concurrency, ssl=ctx)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            while queue:
                body = queue.pop()
                start = time.perf_counter()
                async with session.post(
                    url, data=body, headers={"Content-Type": "application/json"}
                ) as r:
                    await r.read()
                    if r.status != 200:
                        raise RuntimeError(f"status {r.status}")
                samples.append(time.perf_counter() - start)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return samples


def wait_port(port: int, timeout: float = 15) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"webhook did not listen on {port}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    payloads = bodies(args.requests)

    handler = [s * 1000 for s in handler_latency(payloads)]  # ms
    print(
        f"handler (in process): p50 {percentile(handler, 50):.3f} ms  "
        f"p99 {percentile(handler, 99):.3f} ms  max {max(handler):.3f} ms  "
        f"over {len(handler)} requests"
    )

    with tempfile.TemporaryDirectory() as tmp:
        ca = trustme.CA()
        cert = ca.issue_cert("127.0.0.1")
        cert.cert_chain_pems[0].write_to_path(f"{tmp}/tls.crt")
        cert.private_key_pem.write_to_path(f"{tmp}/tls.key")
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.webhook_server",
                f"{tmp}/tls.crt",
                f"{tmp}/tls.key",
                str(port),
            ],
            cwd=Path(__file__).resolve().parent.parent,
            env={**os.environ},
        )
        try:
            wait_port(port)
            idle = rss_mib(server.pid)
            ctx = ssl.create_default_context()
            ca.configure_trust(ctx)
            url = f"https://127.0.0.1:{port}/mutate-pods"
            asyncio.run(client(url, ctx, payloads[:500], args.concurrency))  # warm up
            start = time.perf_counter()
            samples = asyncio.run(client(url, ctx, payloads, args.concurrency))
            elapsed = time.perf_counter() - start
            loaded = rss_mib(server.pid)
        finally:
            server.terminate()
            server.wait(10)
    ms = [s * 1000 for s in samples]
    print(
        f"over HTTPS ({args.concurrency} keep-alive connections): p50 {percentile(ms, 50):.3f} ms  "
        f"p99 {percentile(ms, 99):.3f} ms  mean {statistics.mean(ms):.3f} ms  "
        f"{len(samples) / elapsed:.0f} requests/s"
    )
    print(f"server resident memory: {idle:.1f} MiB idle, {loaded:.1f} MiB after the run")


if __name__ == "__main__":
    main()
