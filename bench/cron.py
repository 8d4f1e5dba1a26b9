"""Benchmark: wow_temporal.cron next() against croniter's get_next, side by side.

Both engines walk chained sequences: croniter's iterator is built once per expression and
get_next() is called repeatedly; ours calls next() on its own previous result. Rounds are
interleaved (ours, croniter, ours, ...) and the best round of each is kept, to damp noise.
"""

from __future__ import annotations

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


def run_ours(expr: str, start: datetime) -> float:
    """Seconds for CALLS chained next() calls."""
    e = CronExpression.parse(expr)
    t0 = time.perf_counter()
    current: datetime | None = start
    for _ in range(CALLS):
        assert current is not None
        current = e.next(current)
    return time.perf_counter() - t0


def run_croniter(expr: str, start: datetime) -> float:
    """Seconds for CALLS get_next() calls on one iterator."""
    it = croniter(expr, start, second_at_beginning=True, day_or=False)
    t0 = time.perf_counter()
    for _ in range(CALLS):
        it.get_next(datetime)
    return time.perf_counter() - t0


def main() -> int:
    """Print calls/second per expression and the ratio; exit 0."""
    print(f"chained sequences: {CALLS} calls per round, {ROUNDS} interleaved rounds, best kept")
    print("(ours: next() on the previous result; croniter: one iterator, get_next() repeated)")
    print(f"{'expression':36} {'zone':18} {'ours/s':>10} {'croniter/s':>11} {'ratio':>6}")
    ratios = []
    for expr, start in CASES:
        ours, theirs = [], []
        for _ in range(ROUNDS):
            ours.append(run_ours(expr, start))
            theirs.append(run_croniter(expr, start))
        ours_rate = CALLS / min(ours)
        theirs_rate = CALLS / min(theirs)
        ratio = ours_rate / theirs_rate
        ratios.append(ratio)
        zone = str(start.tzinfo)
        print(f"{expr:36} {zone:18} {ours_rate:10.0f} {theirs_rate:11.0f} {ratio:5.1f}x")
    print(
        f"median ratio ours/croniter: {statistics.median(ratios):.1f}x "
        f"(min {min(ratios):.1f}x, max {max(ratios):.1f}x)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
