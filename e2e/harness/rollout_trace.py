"""A rollout's timeline through a real Service, for the call that failed: what each layer between
the API server and a replica did, with the host's clock.

While inside, it records
- every SYN, FIN and RST to or from the webhook's port and the Service's (tcpdump), and ARP
  requests that go unanswered (a packet sent to a pod address nobody holds);
- conntrack's events for the Service's address (a connection NATed to which replica, and when
  it ends);
- each change of the Service's EndpointSlices (which replica ready, serving, terminating);
- each change of the replicas' pods (deletion, container ended, Ready);
- each change of the DNAT rules kube-proxy wrote for the Service (iptables-save, polled);
- the replicas' own logs, followed from their start until they end.

`around(t)` gives the merged lines within a window of a moment (a failed call's), the evidence
a failure prints. Needs root and tcpdump/conntrack (Debian's); without them it records what it
can and says what it could not.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, cast

import urllib3
from kubernetes import client, watch

from .cluster.api import ClusterApi, name_of, present


class RolloutTrace:
    def __init__(self, cluster: ClusterApi, namespace: str, service: str, selector: str,
                 out: Path, ports: tuple[int, ...] = (443, 9443)) -> None:
        self.cluster, self.namespace, self.service, self.selector = (
            cluster, namespace, service, selector)
        self.out = out
        self.ports = ports
        self.lines: list[tuple[float, str, str]] = []  # (unix time, source, text)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._procs: list[subprocess.Popen[str]] = []
        self._threads: list[threading.Thread] = []
        self.missing: list[str] = []
        self._following: set[str] = set()

    def note(self, source: str, text: str, at: float | None = None) -> None:
        with self._lock:
            self.lines.append((time.time() if at is None else at, source, text))

    # -- start / stop --------------------------------------------------------------------------

    def __enter__(self) -> RolloutTrace:
        self.out.mkdir(parents=True, exist_ok=True)
        with self.cluster.api_client() as api:
            svc = client.CoreV1Api(api).read_namespaced_service(self.service, self.namespace)
        self.cluster_ip = present(present(svc.spec).cluster_ip)
        ports = " or ".join(f"port {p}" for p in self.ports)
        flags = "tcp[tcpflags] & (tcp-syn|tcp-fin|tcp-rst) != 0"
        self._spawn("tcpdump", ["tcpdump", "-i", "any", "-nn", "-tt", "-l", "-U",
                                f"(tcp and ({ports}) and {flags}) or arp"])
        self._spawn("conntrack", ["conntrack", "-E", "-p", "tcp", "-o", "timestamp",
                                  "--orig-dst", self.cluster_ip])
        for target in (self._endpoints, self._pods, self._rules):
            thread = threading.Thread(target=target, daemon=True, name=target.__name__)
            thread.start()
            self._threads.append(thread)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        for proc in self._procs:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
        for proc in self._procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
        for thread in self._threads:
            thread.join(3)
        with self._lock:
            merged = sorted(self.lines)
        with (self.out / "timeline.txt").open("w") as f:
            for at, source, text in merged:
                f.write(f"{at:.3f} {source:10} {text}\n")

    def _spawn(self, name: str, argv: list[str]) -> None:
        if shutil.which(argv[0]) is None:
            self.missing.append(name)
            return
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, bufsize=1)
        self._procs.append(proc)

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                at = time.time()
                if name == "tcpdump":
                    first = line.split(" ", 1)[0]
                    with contextlib.suppress(ValueError):
                        at = float(first)
                        line = line.split(" ", 1)[1]
                self.note(name, line.rstrip(), at)

        thread = threading.Thread(target=read, daemon=True, name=f"read-{name}")
        thread.start()
        self._threads.append(thread)

    # -- watchers ------------------------------------------------------------------------------

    def _watch(self, list_fn: Callable[[client.ApiClient], Callable[..., Any]], source: str,
               describe: Callable[[Any], str], **kwargs: object) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(Exception), self.cluster.api_client() as api:
                w = watch.Watch()  # type: ignore[no-untyped-call]
                for event in w.stream(  # type: ignore[no-untyped-call]
                        list_fn(api), self.namespace, timeout_seconds=5, **kwargs):
                    self.note(source, f"{event['type']} {describe(event['object'])}")
                    if self._stop.is_set():
                        w.stop()  # type: ignore[no-untyped-call]

    def _endpoints(self) -> None:
        def describe(s: client.V1EndpointSlice) -> str:
            eps = [f"{','.join(e.addresses)}[{e.target_ref.name if e.target_ref else '?'}]"
                   f" ready={c.ready} serving={c.serving} terminating={c.terminating}"
                   for e in s.endpoints or [] for c in [present(e.conditions)]]
            meta = present(s.metadata)
            return f"{meta.name} rv={meta.resource_version} " + "; ".join(eps)

        self._watch(lambda api: client.DiscoveryV1Api(api).list_namespaced_endpoint_slice,
                    "slices", describe,
                    label_selector=f"kubernetes.io/service-name={self.service}")

    def _pods(self) -> None:
        def describe(p: client.V1Pod) -> str:
            assert p.metadata is not None and p.status is not None  # as every pod a watch shows
            ready = next((c.status for c in p.status.conditions or [] if c.type == "Ready"), "?")
            states = []
            for c in p.status.container_statuses or []:
                state = present(c.state)
                if state.terminated:
                    states.append(f"{c.name}=terminated({state.terminated.exit_code} at "
                                  f"{state.terminated.finished_at})")
                elif state.running:
                    states.append(f"{c.name}=running")
                else:
                    states.append(f"{c.name}=waiting")
            deleting = " deleting" if p.metadata.deletion_timestamp else ""
            if p.status.pod_ip and name_of(p) not in self._following and any(
                    present(c.state).running for c in p.status.container_statuses or []):
                self._follow(name_of(p))
            return (f"{p.metadata.name} ip={p.status.pod_ip} phase={p.status.phase} "
                    f"ready={ready}{deleting} {' '.join(states)}")

        self._watch(lambda api: client.CoreV1Api(api).list_namespaced_pod, "pods", describe,
                    label_selector=self.selector)

    def _follow(self, pod: str) -> None:
        self._following.add(pod)

        def follow() -> None:
            with contextlib.suppress(Exception), self.cluster.api_client() as api:
                # Not preloaded, the client answers the raw urllib3 response (typed as str).
                resp = cast(urllib3.BaseHTTPResponse, client.CoreV1Api(api).read_namespaced_pod_log(
                    pod, self.namespace, follow=True, _preload_content=False))
                pending = ""
                for raw in resp.stream():
                    pending += raw.decode(errors="replace")
                    *whole, pending = pending.split("\n")
                    for line in whole:
                        self.note(f"log:{pod[-5:]}", line[:2000])
                    if self._stop.is_set():
                        return

        thread = threading.Thread(target=follow, daemon=True, name=f"log-{pod}")
        thread.start()
        self._threads.append(thread)

    def _rules(self) -> None:
        """The replicas kube-proxy's rules send new connections to (the webhook's target port
        is the only 9443 in this lab's NAT table)."""
        last = ""
        while not self._stop.wait(0.2):
            try:
                out = subprocess.run(["iptables-save", "-t", "nat"], capture_output=True,
                                     text=True, timeout=10).stdout
            except (OSError, subprocess.TimeoutExpired):
                continue
            text = json.dumps(sorted(set(re.findall(r"--to-destination (\S+:9443)", out))))
            if text != last:
                self.note("iptables", f"DNAT to {text}")
                last = text

    # -- reading -------------------------------------------------------------------------------

    def logged(self, event: str) -> list[dict[str, object]]:
        """The replicas' JSON log lines of this event, in the order they came."""
        found = []
        with self._lock:
            lines = sorted(self.lines)
        for _, source, text in lines:
            if source.startswith("log:") and f'"{event}"' in text:
                with contextlib.suppress(ValueError):
                    record = json.loads(text)
                    if record.get("event") == event:
                        found.append(record)
        return found

    def around(self, at: float, before: float = 12.0, after: float = 6.0) -> str:
        with self._lock:
            merged = sorted(line for line in self.lines if at - before <= line[0] <= at + after)
        return "\n".join(f"{t:.3f} {s:10} {x}" for t, s, x in merged)
