"""Every failed call to the API server, in one place: what it was, and whether trying again can
help. The work queue (faces/serial.py) asks this of whatever a handler raised, and retries with
the backoff of core/replica/backoff.py when it can.

Transient: the API server throttled us (429, its Retry-After honoured) or failed (5xx), a write
met a newer version (409), the request timed out or its connection broke (urllib3's errors,
which are not ApiExceptions, and the socket's). A denial by the API server's authorizer (401;
403 "User ... cannot <verb> resource ...") is retried too, and said only once it has lasted: an
API server that has just started answers so for a fraction of a second before its authorizer's
caches are filled (seen after restarts in e2e/tests/test_apifaults.py), and a Role mended ends
the rest; client-go's queue retries it too. What lasts (LASTING tries in a row, some 20 s of the
backoff) is worth a person's attention: `worth_saying`. Permanent for the object as it is: a
403 of admission (a quota exceeded, a namespace being deleted, a policy), said at once and left
to the run's next event; invalid (400, 422: the same request fails the same way); gone (404,
410). An exception that is none of these is a bug of ours: retried too, with the same
backoff, and logged with its traceback, since the next event may carry what it needed.
NotLeading is raised before a write leaves a replica that may no longer hold the Lease
(kube/fencing.py): never retried here, the replica stops.
"""

from __future__ import annotations

import email.utils
import re
import time
from contextvars import ContextVar
from dataclasses import dataclass

import urllib3
from kubernetes.client.exceptions import ApiException

from controller.kube.api import api_message
from controller.kube.fencing import NotLeading

RETRIED_STATUSES = {429: "throttled", 409: "conflict", 500: "server", 502: "server",
                    503: "server", 504: "server"}
PERMANENT_STATUSES = {400: "invalid", 403: "forbidden", 404: "gone", 410: "gone",
                      422: "invalid"}  # 401, and an authorizer's 403: "denied", below
# The authorizer's words (k8s.io/apiserver's forbidden message): `User "..." cannot create
# resource "pods" ...`; admission's 403s (quota, a terminating namespace) say otherwise.
_DENIED = re.compile(r'User "[^"]*" cannot ')
# Tries in a row after which a failure that lasts is said: with core/replica/backoff.py's 20 ms
# doubling, the tenth comes some 20 s after the first.
LASTING = 10

# How many times in a row the item being handled has failed before this try: set by the work
# queue (faces/serial.py) around each handler, read where a failure is said.
failed_before: ContextVar[int] = ContextVar("failed_before", default=0)


@dataclass(frozen=True)
class Failure:
    reason: str  # a bounded word, for the metric's label and the log
    retry: bool
    after: float | None = None  # seconds the API server asked us to wait (Retry-After)
    bug: bool = False  # not the API server's doing: logged with its traceback
    lasting: bool = False  # retried, but worth a person's attention once it has lasted


def classify(exc: BaseException) -> Failure:
    if isinstance(exc, NotLeading):
        return Failure("not-leading", retry=False)
    if isinstance(exc, ApiException):
        status = int(exc.status or 0)
        if status in RETRIED_STATUSES:
            return Failure(RETRIED_STATUSES[status], retry=True, after=retry_after(exc))
        if status == 401 or (status == 403 and _DENIED.search(api_message(exc))):
            return Failure("denied", retry=True, lasting=True)
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


def worth_saying(failure: Failure) -> bool:
    """Whether a failure is said to the run's owners (a Warning Event) now: one that trying
    again cannot mend, or one that may mend but has lasted LASTING tries of this item. What
    mends itself (throttled, a timeout, an API server's first moments) is never a Warning."""
    return not failure.retry or (failure.lasting and failed_before.get() + 1 >= LASTING)


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
