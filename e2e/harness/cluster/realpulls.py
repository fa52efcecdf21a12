"""What real nodes pulled, as their kubelets said it: for scenarios that check a pull happened
and benchmarks that report the bytes a node pulled.

The kubelet's Event for a pull (reason Pulled) reads `Successfully pulled image "IMAGE" in 1.2s
(1.3s including waiting). Image size: N bytes.`; an image it found on the node says "already
present" instead and is not a pull. N is the image's size as the registry gave it (its
compressed layers and config): what the node fetched, unless it already held some of the blobs
under another name.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from kubernetes import client

from .api import ClusterApi

_PULLED = re.compile(r'Successfully pulled image "(?P<image>[^"]+)" in (?P<took>\S+) '
                     r"\(.*\)\. Image size: (?P<size>\d+) bytes")
_GO_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_GO_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)")


class Pulled(NamedTuple):
    image: str
    bytes: int
    seconds: float
    node: str


def go_duration(text: str) -> float:
    """Seconds in a Go duration as the kubelet prints it: 1m2.5s, 850ms, 12.3µs."""
    parts = _GO_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a Go duration: {text!r}")
    return sum(float(n) * _GO_UNITS[u] for n, u in parts)


def parse(message: str, node: str) -> Pulled | None:
    """The pull an Event's message tells of; None for any other message."""
    found = _PULLED.search(message)
    if found is None:
        return None
    return Pulled(found["image"], int(found["size"]), go_duration(found["took"]), node)


def pulled(cluster: ClusterApi, node: str | None = None) -> list[Pulled]:
    """Every image the kubelets said they pulled (of `node` alone if given), oldest first. An
    Event the API server folded (count > 1: the same message again) is one pull per count."""
    with cluster.api_client() as api:
        events = client.CoreV1Api(api).list_event_for_all_namespaces(
            field_selector="reason=Pulled").items
    found: list[tuple[float, Pulled]] = []
    for event in events:
        host = event.source.host if event.source is not None else None
        if host is None or (node is not None and host != node):
            continue
        pull = parse(event.message or "", host)
        if pull is not None:
            when = event.first_timestamp or event.event_time or event.metadata.creation_timestamp
            found += [(when.timestamp() if when else 0.0, pull)] * max(1, event.count or 1)
    return [pull for _, pull in sorted(found, key=lambda f: f[0])]
