"""bench/harness/stats.py: the one percentile definition of the benchmarks (nearest rank)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.harness.stats import percentile, summary

samples = st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=300)
quantile = st.floats(0.001, 1.0)


@given(samples, quantile)
def test_a_percentile_is_a_sample_with_at_least_q_of_them_at_or_below_it(
    values: list[float], q: float
) -> None:
    got = percentile(values, q)
    assert got in values
    assert sum(v <= got for v in values) >= q * len(values)
    assert sum(v < got for v in values) < q * len(values), "the smallest such sample"


@given(samples)
def test_p99_never_exceeds_the_largest_sample_and_p100_is_it(values: list[float]) -> None:
    assert percentile(values, 0.99) <= max(values)
    assert percentile(values, 1.0) == max(values)


def test_known_values() -> None:
    hundred = [float(v) for v in range(1, 101)]
    assert (percentile(hundred, 0.5), percentile(hundred, 0.99)) == (50.0, 99.0)
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert percentile([7.0], 0.99) == 7.0
    assert math.isnan(percentile([], 0.5))
    empty = summary([], (0.5,))
    assert empty["n"] == 0 and set(empty) == {"n", "p50", "max"}
    assert math.isnan(empty["p50"]) and math.isnan(empty["max"])
    assert summary(hundred, (0.5, 0.9, 0.99)) == {
        "n": 100, "p50": 50.0, "p90": 90.0, "p99": 99.0, "max": 100.0,
    }  # fmt: skip


@pytest.mark.parametrize("q", [0, -0.5, 1.5])
def test_a_quantile_outside_0_1_is_refused(q: float) -> None:
    with pytest.raises(ValueError, match="quantile"):
        percentile([1.0], q)
