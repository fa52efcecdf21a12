"""One policy for every failed call: what is tried again, what is said, what is dropped."""

from __future__ import annotations

import pytest
import urllib3

from controller.kube import errors
from tests import factories

answered = factories.api_error
DENIED = factories.DENIED


@pytest.mark.parametrize(("exc", "reason", "retry", "lasting"), [
    (answered(429), "throttled", True, False),
    (answered(503), "server", True, False),
    (answered(409), "conflict", True, False),
    (answered(403, DENIED), "denied", True, True),
    (answered(401), "denied", True, True),
    (answered(403, 'pods "x" is forbidden: exceeded quota: q, requested: pods=1'), "forbidden",
     False, False),
    (answered(403, 'unable to create new content in namespace team because it is being '
                   'terminated'), "forbidden", False, False),
    (answered(403), "forbidden", False, False),
    (answered(422, "spec: Invalid value"), "invalid", False, False),
    (answered(404), "gone", False, False),
    (answered(0), "connection", True, False),
    # urllib3 raises it with no pool too (its responses' own read timeouts); the stub wants one.
    (urllib3.exceptions.ReadTimeoutError(None, "/", "read timed out"),  # type: ignore[arg-type]
     "timeout", True, False),
    (ConnectionResetError(), "connection", True, False),
    (KeyError("spec"), "error", True, False),
])
def test_each_failure_is_judged_once(exc: BaseException, reason: str, retry: bool,
                                     lasting: bool) -> None:
    failure = errors.classify(exc)
    assert (failure.reason, failure.retry, failure.lasting) == (reason, retry, lasting)


def test_a_denial_is_said_only_once_it_has_lasted_and_a_permanent_failure_at_once() -> None:
    denial = errors.classify(answered(403, DENIED))
    quota = errors.classify(answered(403, "exceeded quota: q"))
    throttled = errors.classify(answered(429))
    for before, sayable in [(0, False), (errors.LASTING - 2, False), (errors.LASTING - 1, True),
                            (errors.LASTING + 5, True)]:
        token = errors.failed_before.set(before)
        try:
            assert errors.worth_saying(denial) is sayable, before
            assert errors.worth_saying(quota)
            assert not errors.worth_saying(throttled)
        finally:
            errors.failed_before.reset(token)
