"""Chaos soak: thousands of aggregates' schedules under worker kills and a server restart, the
host's ledger judged against a model of what the spec promises (`bench.oracle.ledger`); with
`--catch-up`, a relay's catch-up after a Temporal outage instead (`bench._soak_catch_up`). What
each runs and checks: docs/benchmarks.md, "The chaos soak".

Run: `python -m bench.soak [--quick] [--aggregates N] [--duration S] [--json]` (or
`--catch-up [--outage S] [--unguarded]`); `--quick` (the smoke test's size): 240 aggregates
over 40 s, two workers each killed once and both together once, seed 11.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from dataclasses import dataclass, field

from bench._soak_catch_up import catch_up, catch_up_verdicts, print_catch_up
from bench._soak_plan import CHAOS_LEAD_S, CHAOS_RECOVERY_S, plan, ref, schedules_of
from bench._soak_rig import (
    Ingest,
    Run,
    chaos_plan,
    hand_over,
    measure_ingest,
    on_fresh_rig,
    settle,
)
from bench.harness import Chaos, Verdicts, bench_main, parser, sized, still_running
from bench.harness.chaos import print_tail, quiet_while_down
from bench.oracle.ledger import Deliveries, judge_deliveries, rows_of
from wow_temporal.ids import timer_workflow_id


@dataclass
class Report:
    """A soak's run: its size, its ingest, the chaos done, and its ledger judged."""

    aggregates: int
    commits: int
    schedules: int
    workers: int = 1
    chaos: Chaos = field(default_factory=Chaos)
    judged: Deliveries = field(default_factory=Deliveries)
    still_running: int = 0
    ingest: Ingest = field(default_factory=Ingest)


async def soak(args: argparse.Namespace) -> Report:
    return await on_fresh_rig(args, "soak", _soak)


async def _soak(rig: Run, args: argparse.Namespace, rng: random.Random, run: str) -> Report:
    """Hand the planned commits over under chaos, settle, and judge the ledger."""
    aggregates = plan(args.aggregates, args.duration, rng, run)
    commits = sum(len(a.commits) for a in aggregates)
    print(
        f"soak: {args.aggregates} aggregates, {commits} commits over {args.duration:.0f}s, "
        f"seed {args.seed}",
        file=sys.stderr,
    )
    rig.epoch = time.time()
    chaos = Chaos(lead=CHAOS_LEAD_S, recovery=CHAOS_RECOVERY_S)
    faults = chaos_plan(rig, args.duration, rng, args.kills, not args.no_server_restart)
    chaos.planned = sorted(f.what for f in faults)
    chaos_task = asyncio.ensure_future(chaos.run(faults, rig.clock))
    limit = asyncio.Semaphore(args.concurrency)
    applies: list[tuple[float, float]] = []
    await asyncio.gather(*(hand_over(rig, a, limit, applies) for a in aggregates))
    ingest_done = rig.clock()
    await chaos_task
    schedules = [s for a in aggregates for s in schedules_of(a, rig.epoch)]
    ending = await settle(rig, args, schedules)
    rows = rows_of(await rig.host.arrivals())
    every_timer = sorted({timer_workflow_id(ref(s.aggregate_id), s.key) for s in schedules})
    first_planned = min(at for a in aggregates for c in a.commits for at in c.handovers)
    return Report(
        args.aggregates,
        commits,
        len(schedules),
        workers=args.workers,
        chaos=chaos,
        judged=judge_deliveries(schedules, rows, rig.epoch, ending, chaos.inside),
        still_running=len(await still_running(rig.client, every_timer)),
        ingest=measure_ingest(applies, chaos.windows, first_planned, ingest_done),
    )


def print_report(report: Report) -> None:
    j, ingest = report.judged, report.ingest
    print(
        f"soak: {report.aggregates} aggregates, {report.commits} commits, "
        f"{report.schedules} schedules; {report.workers} workers"
    )
    print(verdicts(report).text())
    print(
        f"  expected {j.expected}, of them parked {j.parked_expected}; delivered once after "
        f"the retry {j.delivered_after_retry}; in flight at a change, not recalled "
        f"{j.sent_in_flight}"
    )
    print(
        f"  ingest inside worker chaos x{ingest.inside_ratio} of outside; apply p50 "
        f"{ingest.apply_p50_ms} ms, p99 inside {ingest.apply_p99_inside_ms} ms vs outside "
        f"{ingest.apply_p99_outside_ms} ms"
    )
    print(f"  lateness ms outside chaos {j.lateness_outside}")
    print(f"  lateness ms inside chaos  {j.lateness_inside}")
    print(f"  lateness ms to flaky and slow hosts {j.lateness_unhealthy}")
    latest = {"outside chaos": j.latest_outside, "inside chaos": j.latest_inside}
    print_tail(report.chaos, latest, j.problems)


QUICK = {"aggregates": 240, "duration": 40.0, "kills": 2, "workers": 2, "settle": 8.0, "seed": 11}
"""`--quick`: the smoke test's size (about a minute and a half)."""
FULL = {"aggregates": 3000, "duration": 300.0, "kills": 3, "workers": 3, "settle": 15.0, "seed": 7}


def verdicts(report: Report) -> Verdicts:
    """The judge's, no timer left running, the chaos as planned, and enough checked."""
    return report.judged.verdicts() | Verdicts(
        must_be_zero={
            "still_running": report.still_running,
            "chaos_kinds_missing": report.chaos.missing(),
        },
        must_be_positive={
            "expected_over_100": report.judged.expected - 100,
            "ingest_inside_per_s": report.ingest.inside_per_s,
            "ingest_outside_per_s": report.ingest.outside_per_s,
        },
        figures={"ingest_per_s": report.ingest.per_s, "apply_p99_ms": report.ingest.apply_p99_ms},
    )


def main() -> int:
    p = parser(__doc__)
    for name in ("aggregates", "kills"):
        p.add_argument(f"--{name}", type=int, help=f"default {FULL[name]} ({QUICK[name]} quick)")
    p.add_argument("--duration", type=float, help="seconds of commits (default 300, 40 quick)")
    p.add_argument("--workers", type=int, help="default 3 (2 quick); several: also all killed")
    p.add_argument("--settle", type=float, help="default 15 (8 quick)")
    p.add_argument("--no-server-restart", action="store_true")
    p.add_argument("--no-tracing", action="store_true", help="the worker without spans")
    p.add_argument("--concurrency", type=int, default=50, help="applies in flight")
    p.add_argument(
        "--settle-within",
        type=float,
        default=300.0,
        help="at most this long to wait for the one-shots to end or park, after --settle",
    )
    p.add_argument("--catch-up", action="store_true", help="a relay's catch-up after an outage")
    p.add_argument("--outage", type=float, default=180.0, help="with --catch-up (at least 10)")
    p.add_argument("--unguarded", action="store_true", help="with --catch-up: no guard")
    args = p.parse_args()
    if args.catch_up and args.outage < 10:
        p.error("--outage: at least 10 seconds (timers fall due and change within it)")
    sized(args, QUICK, FULL)
    quiet_while_down()
    if args.catch_up:
        return bench_main(args, catch_up, print_catch_up, catch_up_verdicts)
    return bench_main(args, soak, print_report, verdicts)


if __name__ == "__main__":
    raise SystemExit(main())
