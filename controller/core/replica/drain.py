"""When a webhook replica told to stop may stop answering.

The API server reaches a replica through its Service: a new connection goes wherever the node's
proxy rules (kube-proxy) send it, and those follow the Service's EndpointSlices, which follow the
pod. A replica that stops listening while some rule still names it fails the calls sent there:
refused while its network lives, and, once the pod's network is gone, a connection that hangs
until the webhook's timeout. Tekton fails the TaskRun either way. So a replica keeps answering
(not ready, closing each connection after its answer) until it has seen itself leave every
EndpointSlice of its Service, the proxies have had a margin to follow, and no call has come
for a while: measured, not guessed. A floor keeps the old fixed drain as the least, and a
ceiling bounds it within the pod's termination grace.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# After the EndpointSlices no longer list this replica as ready: the proxies' sync (kube-proxy
# writes its rules at most once a second by default, later on a busy node).
PROXY_MARGIN = 3.0
# No call for this long: whatever still routes to this replica has stopped.
QUIET = 2.0


@dataclass(frozen=True)
class Drain:
    started: float
    minimum: float
    maximum: float
    margin: float = PROXY_MARGIN
    quiet: float = QUIET


def listed(slices: Iterable[Mapping[str, Any]], pod: str) -> bool:
    """Whether any EndpointSlice still offers this pod as a ready endpoint (what proxies send
    new connections to; a terminating pod is listed not ready)."""
    for slice_ in slices:
        for endpoint in slice_.get("endpoints") or ():
            if ((endpoint.get("targetRef") or {}).get("name") == pod
                    and (endpoint.get("conditions") or {}).get("ready") is not False):
                return True
    return False


def done(drain: Drain, now: float, unlisted_since: float | None,
         last_call: float | None) -> tuple[bool, str]:
    """(may stop, why). `unlisted_since`: when this replica was first seen absent from its
    Service's ready endpoints (None: not yet). `last_call`: the last admission call's time."""
    elapsed = now - drain.started
    if elapsed >= drain.maximum:
        return True, "the longest drain passed"
    if elapsed < drain.minimum:
        return False, "the shortest drain has not passed"
    if unlisted_since is None:
        return False, "the Service's endpoints still list this replica"
    if now - unlisted_since < drain.margin:
        return False, "the proxies' margin has not passed"
    if last_call is not None and now - last_call < drain.quiet:
        return False, "calls still arrive"
    return True, "drained"
