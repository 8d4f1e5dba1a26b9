"""The soaks' smoke runs (`tests/bench/smoke.py`)."""

from __future__ import annotations

import pytest

from tests.bench.smoke import params, run_quick


@pytest.mark.parametrize("name", params("test_bench_soaks"))
def test_soak_quick_json(name: str) -> None:
    run_quick(name)
