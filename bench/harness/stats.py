"""The one percentile every bench and soak reports: nearest rank, so a p99 is always one of the
samples (never above the largest, as an interpolating or exclusive quantile can be)."""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["percentile", "summary"]


def percentile(values: Sequence[float], q: float) -> float:
    """The `q`-quantile (0 < q <= 1) of `values` by nearest rank: the smallest sample that at
    least `q` of them do not exceed. NaN when there are none."""
    if not 0 < q <= 1:
        raise ValueError(f"a quantile is in (0, 1], got {q}")
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def summary(values: Sequence[float], quantiles: Sequence[float] = (0.5, 0.99)) -> dict[str, float]:
    """`n`, each quantile as `p50`, `p90`, `p99` … (rounded to 0.1) and `max`; NaN for each
    when there are no samples."""
    shown: dict[str, float] = {"n": len(values)}
    for q in quantiles:
        shown[f"p{round(q * 100):g}"] = round(percentile(values, q), 1)
    shown["max"] = round(max(values), 1) if values else math.nan
    return shown
