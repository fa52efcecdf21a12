"""Percentiles as the benchmarks and the fault scenarios print them: one definition (three had
drifted apart: nearest rank, a floor index, and this one)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence


def percentile(values: Sequence[float], q: int) -> float:
    """The q-th percentile (1 to 99) of values, between ranks as Python's statistics module
    cuts them, never beyond the values seen (its "inclusive" method: the default extrapolates,
    and a p95 of four values came out above their max); nan for none."""
    if not values:
        return float("nan")
    if len(values) == 1:
        return float(values[0])
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]
