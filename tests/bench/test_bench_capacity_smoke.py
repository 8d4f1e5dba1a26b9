"""The capacity benchmark still runs: `bench/capacity.py` at a tiny size end to end (the real
worker process, the dev server and the host; figures not checked)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.helpers.processes import run_script

BENCH = Path(__file__).resolve().parents[2] / "bench" / "capacity.py"
TINY = (
    *("--timers", "200", "--jobs", "20", "--burst", "40"),
    *("--rounds", "1", "--settle", "2", "--tick-seconds", "3"),
)


@pytest.mark.timeout(150)
def test_capacity_bench_tiny_runs_and_prints_the_figures() -> None:
    done = run_script([sys.executable, str(BENCH), *TINY], timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    for line in (
        "1. pending one-shot timers",
        "2. a burst of 40 due at one instant",
        "3. 20 enabled job instances",
        "host duplicates (redeliveries): 0",
    ):
        assert line in out, out
    # Every pending step was sampled, and both bursts were delivered in full.
    assert re.search(r"^ +200 +\d+ ", out, re.MULTILINE), out
    assert len(re.findall(r"^ +0 pending  40/40 in", out, re.MULTILINE)) == 1, out
    assert len(re.findall(r"^ +200 pending  40/40 in", out, re.MULTILINE)) == 1, out
    assert re.search(r"burst drain ratio \(200 pending / 0 pending\) \d+\.\d\d", out), out
    assert re.search(r"enabled at \d+/s", out), out
    ticks = re.search(r"over \d+s: (\d+)/(\d+)", out)
    assert ticks is not None and int(ticks[1]) > 0, out
