"""The smoke runs of the benches that hand commits over (`tests/bench/smoke.py`)."""

from __future__ import annotations

import pytest

from tests.bench.smoke import params, run_quick


@pytest.mark.parametrize("name", params("test_bench_handing_over"))
def test_bench_quick_json(name: str) -> None:
    run_quick(name)
