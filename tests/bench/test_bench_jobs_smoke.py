"""The jobs benchmark still runs: `bench/jobs.py --quick` end to end (figures not checked)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.helpers.processes import run_script

BENCH = Path(__file__).resolve().parents[2] / "bench" / "jobs.py"
TINY = ("--seconds", "2", "--tenants", "20", "--idle", "100")  # it runs; its figures matter not


@pytest.mark.timeout(360)
def test_jobs_bench_quick_runs_and_prints_the_table() -> None:
    done = run_script(
        [sys.executable, str(BENCH), "--quick", *TINY],
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    for line in (
        "1. steady ticking",
        "lateness p99 wow/native",
        "actions per tick wow",
        "2. 20 instances due on the same second",
        "throughput wow",
        "3. worker memory with 100 enabled instances",
        "enabling rate",
    ):
        assert line in out, out
    assert "early 0" in out, out
    assert "ticks 0/" not in out, out
    # Every instance of the burst was handled (none lost, none left for next year).
    assert "20/20 in" in out, out
