"""Pure: how long a failed item waits before it is tried again (the work queue's per-item
backoff, as client-go's ItemExponentialFailureRateLimiter): milliseconds at first, doubling
with each failure in a row, capped; never less than what the API server asked (Retry-After),
which is honoured up to a limit of its own."""

from __future__ import annotations

BASE = 0.02  # seconds before the first retry
CAP = 60.0  # the longest backoff
MOST_ASKED = 300.0  # a Retry-After longer than this is taken as this


def delay(failures: int, asked: float | None = None, base: float = BASE,
          cap: float = CAP) -> float:
    """Seconds to wait after the `failures`-th failure in a row (1 for the first)."""
    backoff = min(cap, base * float(2 ** max(0, min(failures - 1, 60))))
    return max(backoff, min(asked or 0.0, MOST_ASKED))
