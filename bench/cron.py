"""Benchmark: wow_temporal.cron next() against croniter's get_next, side by side.

Both engines walk chained sequences: croniter's iterator is built once per expression and
get_next() is called repeatedly; ours calls next() on its own previous result. Rounds are
interleaved (ours, croniter, ours, ...) and the best round of each is kept, to damp noise.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from croniter import croniter

from wow_temporal.cron import CronExpression

CASES: list[tuple[str, datetime]] = [
    ("*/5 * * * * *", datetime(2024, 1, 1, 0, 0, 3, tzinfo=UTC)),
    ("0 */15 * * * *", datetime(2024, 1, 1, 0, 7, tzinfo=UTC)),
    ("0 0 * * * *", datetime(2024, 3, 1, 10, 30, tzinfo=UTC)),
    ("0 0 9 * * MON-FRI", datetime(2024, 1, 5, 12, tzinfo=UTC)),
    ("0 30 2 * * *", datetime(2024, 6, 1, tzinfo=ZoneInfo("Europe/Amsterdam"))),
    ("0 0 9 * * *", datetime(2024, 6, 1, tzinfo=ZoneInfo("America/New_York"))),
    ("0 0 0 1 * *", datetime(2024, 1, 15, tzinfo=UTC)),
    ("0 0 0 1 1 *", datetime(2024, 5, 5, tzinfo=UTC)),
    ("0 0 12 13 * 5", datetime(2024, 1, 1, tzinfo=UTC)),
    ("15,45 10-20/2 8-18 * 3,6,9,12 *", datetime(2024, 2, 1, tzinfo=UTC)),
    ("0 0 0 L * *", datetime(2024, 3, 1, tzinfo=UTC)),
]
CALLS = 2000
ROUNDS = 5
QUICK = (200, 2)
"""Calls and rounds of `--quick`, for the smoke test: the figures are noisier, not different."""


def run_ours(expr: str, start: datetime, calls: int = CALLS) -> float:
    """Seconds for `calls` chained next() calls."""
    e = CronExpression.parse(expr)
    t0 = time.perf_counter()
    current: datetime | None = start
    for _ in range(calls):
        assert current is not None
        current = e.next(current)
    return time.perf_counter() - t0


def run_croniter(expr: str, start: datetime, calls: int = CALLS) -> float:
    """Seconds for `calls` get_next() calls on one iterator."""
    it = croniter(expr, start, second_at_beginning=True, day_or=False)
    t0 = time.perf_counter()
    for _ in range(calls):
        it.get_next(datetime)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    """Print calls/second per expression and the ratio (`--json`: one JSON object); exit 0."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="200 calls, 2 rounds (smoke test)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    args = parser.parse_args(argv)
    calls, rounds = QUICK if args.quick else (CALLS, ROUNDS)
    rows = []
    for expr, start in CASES:
        ours, theirs = [], []
        for _ in range(rounds):
            ours.append(run_ours(expr, start, calls))
            theirs.append(run_croniter(expr, start, calls))
        ours_rate, theirs_rate = calls / min(ours), calls / min(theirs)
        rows.append(
            {"expression": expr, "zone": str(start.tzinfo), "ours_per_s": ours_rate,
             "croniter_per_s": theirs_rate, "ratio": ours_rate / theirs_rate}
        )  # fmt: skip
    ratios = [row["ratio"] for row in rows]
    if args.json:
        print(json.dumps({"calls": calls, "rounds": rounds, "cases": rows,
                          "median_ratio": statistics.median(ratios)}))  # fmt: skip
        return 0
    print(f"chained sequences: {calls} calls per round, {rounds} interleaved rounds, best kept")
    print("(ours: next() on the previous result; croniter: one iterator, get_next() repeated)")
    print(f"{'expression':36} {'zone':18} {'ours/s':>10} {'croniter/s':>11} {'ratio':>6}")
    for row in rows:
        print(
            f"{row['expression']:36} {row['zone']:18} {row['ours_per_s']:10.0f} "
            f"{row['croniter_per_s']:11.0f} {row['ratio']:5.1f}x"
        )
    print(
        f"median ratio ours/croniter: {statistics.median(ratios):.1f}x "
        f"(min {min(ratios):.1f}x, max {max(ratios):.1f}x)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
