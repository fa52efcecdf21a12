"""How long a run's reservation is left alone after the operator acted on it.

After acting on a run's reservation pod, the run's reservation is not acted on again before the
watch shows what the act did (client-go's expectations: a second scout made before the first is
seen would compete with it), nor longer than SETTLE_MAX, should the watch never show it. An act
that made no pod (re-planned without one) is waited on for SETTLE, and so is the deletion at a
layer's end: the next layer's pods come within moments, and the reservation decided before all
of them are seen would be in their way.
"""

from __future__ import annotations

from dataclasses import dataclass

SETTLE, SETTLE_MAX = 2.0, 10.0


@dataclass(frozen=True)
class Acted:
    at: float  # time.monotonic() of the act
    pod: str = ""  # the reservation pod it made or deleted, until the watch shows it ("": none)
    made: bool = True  # made (the watch is to show it) or deleted (it is to show it gone)
    hold: float = 0.0  # seconds waited on, whatever the watch shows

    def waits(self, now: float) -> bool:
        return self.left(now) > 0

    def left(self, now: float) -> float:
        """Seconds it is still waited on (at most SETTLE_MAX, or its hold)."""
        return max(self.hold, SETTLE_MAX if self.pod else 0.0) - (now - self.at)
