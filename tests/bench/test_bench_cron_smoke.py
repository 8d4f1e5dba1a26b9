"""The cron benchmark still runs: `bench/cron.py --quick --json`, every case measured on both
sides with a finite, positive ratio; their size is not checked."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from bench.cron import CASES
from tests.helpers.processes import run_script

BENCH = Path(__file__).resolve().parents[2] / "bench" / "cron.py"


def test_cron_bench_quick_prints_one_json_object_with_every_case() -> None:
    done = run_script([sys.executable, str(BENCH), "--quick", "--json"], timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert (report["calls"], report["rounds"]) == (200, 2)
    assert [case["expression"] for case in report["cases"]] == [expr for expr, _ in CASES]
    for case in report["cases"]:
        for key in ("ours_per_s", "croniter_per_s", "ratio"):
            assert math.isfinite(case[key]) and case[key] > 0, case
    assert math.isfinite(report["median_ratio"]) and report["median_ratio"] > 0
