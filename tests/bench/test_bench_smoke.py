"""The timers benchmark still runs: `bench/timers.py --quick` end to end (figures not checked)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.helpers.processes import run_script

BENCH = Path(__file__).resolve().parents[2] / "bench" / "timers.py"


@pytest.mark.timeout(360)
def test_timers_bench_quick_runs_and_prints_the_table() -> None:
    done = run_script(
        [sys.executable, str(BENCH), "--quick"],
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    for line in (
        "throughput  end to end",
        "lateness    at",
        "actions     one-shot",
        "ingest      wow",
    ):
        assert line in out, out
    assert "early 0" in out, out
    assert "missing 0" in out, out
    assert "one-shot 2.00 per command" in out, out
    # The telemetry section: its ratio line (the figure is not checked), and metrics really on.
    assert re.search(
        r"telemetry on/off throughput ratio: \d+\.\d\d \(target >= 0\.9\) (PASS|MISS)", out
    ), out
    delivered = re.search(r"wow_deliveries_total (\d+), .*\(of (\d+) commands\)", out)
    assert delivered is not None, out
    assert int(delivered[1]) >= int(delivered[2]), out
    assert "spans exported: on " in out and ", off 0" in out, out
