"""Benchmark: wow_temporal.cron next() against croniter's get_next, side by side, on chained
sequences (ours: next() on its previous result; croniter: one iterator, get_next() repeated),
in interleaved rounds, the best of each kept (docs/benchmarks.md).

Run: `python -m bench.cron [--quick] [--json]` (2,000 calls x 5 rounds; quick 200 x 2).
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from croniter import croniter

from bench.harness import Verdicts, bench_main, parser, percentile, ratio, sized
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
FULL = {"calls": 2000, "rounds": 5}
QUICK = {"calls": 200, "rounds": 2}
"""The smoke test's size: the figures are noisier, not different."""


@dataclass(frozen=True)
class Case:
    """One expression's best rates, both engines."""

    expression: str
    zone: str
    ours_per_s: float
    croniter_per_s: float
    ratio: float
    differs: bool
    """Our sequence of next() differs from croniter's over the calls made."""


@dataclass(frozen=True)
class CronReport:
    calls: int
    rounds: int
    cases: list[Case]

    @property
    def ratios(self) -> list[float]:
        return [case.ratio for case in self.cases]

    @property
    def median(self) -> float:
        """The median ratio (the lower middle of an even count); NaN when there are none."""
        return percentile(self.ratios, 0.5)


def run_ours(expr: str, start: datetime, calls: int) -> float:
    """Seconds for `calls` chained next() calls."""
    e = CronExpression.parse(expr)
    t0 = time.perf_counter()
    current: datetime | None = start
    for _ in range(calls):
        assert current is not None
        current = e.next(current)
    return time.perf_counter() - t0


def run_croniter(expr: str, start: datetime, calls: int) -> float:
    """Seconds for `calls` get_next() calls on one iterator."""
    it = _croniter(expr, start)
    t0 = time.perf_counter()
    for _ in range(calls):
        it.get_next(datetime)
    return time.perf_counter() - t0


def _croniter(expr: str, start: datetime) -> croniter:
    """croniter read as ours reads an expression: seconds first, day-of-month and -week both."""
    return croniter(expr, start, second_at_beginning=True, day_or=False)


def differs(expr: str, start: datetime, calls: int) -> bool:
    """Whether our chained next() and croniter's get_next() part ways within `calls` (untimed)."""
    e, it = CronExpression.parse(expr), _croniter(expr, start)
    current: datetime | None = start
    for _ in range(calls):
        assert current is not None
        current = e.next(current)
        if current != it.get_next(datetime):
            return True
    return False


async def run(args: argparse.Namespace) -> CronReport:
    """Every case, interleaved rounds, best kept; then each case's sequences compared."""
    calls, rounds = args.calls, args.rounds
    cases = []
    for expr, start in CASES:
        ours, theirs = [], []
        for _ in range(rounds):
            ours.append(run_ours(expr, start, calls))
            theirs.append(run_croniter(expr, start, calls))
        ours_rate, theirs_rate = calls / min(ours), calls / min(theirs)
        case = (ours_rate, theirs_rate, ratio(ours_rate, theirs_rate))
        cases.append(Case(expr, str(start.tzinfo), *case, differs(expr, start, calls)))
    return CronReport(calls, rounds, cases)


def text(report: CronReport) -> None:
    print(
        f"chained sequences: {report.calls} calls per round, {report.rounds} interleaved rounds, "
        "best kept"
    )
    print("(ours: next() on the previous result; croniter: one iterator, get_next() repeated)")
    print(f"{'expression':36} {'zone':18} {'ours/s':>10} {'croniter/s':>11} {'ratio':>6}")
    for c in report.cases:
        print(
            f"{c.expression:36} {c.zone:18} {c.ours_per_s:10.0f} "
            f"{c.croniter_per_s:11.0f} {c.ratio:5.1f}x"
            + ("  DIFFERS from croniter" if c.differs else "")
        )
    ratios = report.ratios
    print(
        f"median ratio ours/croniter: {report.median:.1f}x "
        f"(min {min(ratios, default=math.nan):.1f}x, max {max(ratios, default=math.nan):.1f}x)"
    )


def verdicts(report: CronReport) -> Verdicts:
    """Each case's sequence the same as croniter's; every rate measured (finite, above 0);
    the median ratio."""
    rates = [r for c in report.cases for r in (c.ours_per_s, c.croniter_per_s)]
    ratios = report.ratios
    return Verdicts(
        must_be_zero={
            "next_differs": sum(c.differs for c in report.cases),
            "rates_not_finite": sum(not (math.isfinite(r) and r > 0) for r in rates),
        },
        must_be_positive={"cases": len(report.cases)},
        ratios={"median": report.median},
        figures={
            "min_ratio": min(ratios, default=math.nan),
            "max_ratio": max(ratios, default=math.nan),
        },
    )


def main() -> int:
    """Print calls/second per expression and the ratio (`--json`: one JSON object); exit 0."""
    return bench_main(sized(parser(__doc__).parse_args(), QUICK, FULL), run, text, verdicts)


if __name__ == "__main__":
    raise SystemExit(main())
