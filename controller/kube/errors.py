"""Every failed call to the API server, in one place: what it was, and whether trying again can
help. The work queue (faces/serial.py) asks this of whatever a handler raised, and retries with
the backoff of core/backoff.py when it can.

Transient: the API server throttled us (429, its Retry-After honoured) or failed (5xx), a write
met a newer version (409), the request timed out or its connection broke (urllib3's errors,
which are not ApiExceptions, and the socket's). Permanent for the object as it is: forbidden
(RBAC, a namespace being deleted), invalid (400, 422: the same request fails the same way),
gone (404, 410). An exception that is none of these is a bug of ours: retried too, with the same
backoff, and logged with its traceback, since the next event may carry what it needed.
NotLeading is raised before a write leaves a replica that may no longer hold the Lease
(kube/fencing.py): never retried here, the replica stops.
"""

from __future__ import annotations

import email.utils
import time
from dataclasses import dataclass

import urllib3
from kubernetes.client.exceptions import ApiException

from controller.kube.fencing import NotLeading

RETRIED_STATUSES = {429: "throttled", 409: "conflict", 500: "server", 502: "server",
                    503: "server", 504: "server"}
PERMANENT_STATUSES = {400: "invalid", 401: "forbidden", 403: "forbidden", 404: "gone",
                      410: "gone", 422: "invalid"}


@dataclass(frozen=True)
class Failure:
    reason: str  # a bounded word, for the metric's label and the log
    retry: bool
    after: float | None = None  # seconds the API server asked us to wait (Retry-After)
    bug: bool = False  # not the API server's doing: logged with its traceback


def classify(exc: BaseException) -> Failure:
    if isinstance(exc, NotLeading):
        return Failure("not-leading", retry=False)
    if isinstance(exc, ApiException):
        status = int(exc.status or 0)
        if status in RETRIED_STATUSES:
            return Failure(RETRIED_STATUSES[status], retry=True, after=retry_after(exc))
        if status in PERMANENT_STATUSES:
            return Failure(PERMANENT_STATUSES[status], retry=False)
        if status == 0:  # the client's own: no answer came
            return Failure("connection", retry=True)
        return Failure(f"http-{status}", retry=status >= 500)
    if isinstance(exc, TimeoutError | urllib3.exceptions.TimeoutError):
        return Failure("timeout", retry=True)
    if isinstance(exc, urllib3.exceptions.HTTPError | OSError):
        return Failure("connection", retry=True)
    return Failure("error", retry=True, bug=True)


def retry_after(exc: ApiException) -> float | None:
    """The Retry-After the API server sent (seconds, or an HTTP date), if any."""
    value = (exc.headers or {}).get("Retry-After") if exc.headers else None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(str(value))
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
