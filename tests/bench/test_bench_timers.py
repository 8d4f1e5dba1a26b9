"""The smoke runs of the benches of timers and jobs on one dev server (`tests/bench/smoke.py`),
and the check that every bench has a smoke run."""

from __future__ import annotations

import pytest

from tests.bench.smoke import BENCHES, GROUPS, params, run_quick
from tests.helpers.processes import REPO


def test_every_bench_has_a_row_and_a_module_that_runs_it() -> None:
    """Every bench module (`bench/*.py` but `__init__` and the `_` helpers) is smoke-tested, by
    exactly one of the modules `GROUPS` names, each of which exists."""
    found = {p.stem for p in (REPO / "bench").glob("*.py") if not p.stem.startswith("_")}
    assert set(BENCHES) == found
    assert sorted(name for group in GROUPS.values() for name in group) == sorted(BENCHES)
    here = REPO / "tests" / "bench"
    assert {p.stem for p in here.glob("test_*.py")} == set(GROUPS)


@pytest.mark.parametrize("name", params("test_bench_timers"))
def test_bench_quick_json(name: str) -> None:
    run_quick(name)
