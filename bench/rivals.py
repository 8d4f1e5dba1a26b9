"""Benchmark: wow-temporal against bare Temporal and DBOS Transact for keyed one-shot timers
that each deliver a command, one side after the other on one box, the same plan
(docs/benchmarks.md, "Against bare Temporal and DBOS Transact").

Run: `python -m bench.rivals [--quick] [--json] [--steady 1000] [--over 30] [--burst 1000]
[--in-flight 20] [--batch 1] [--lead S] [--settle 15] [--sides wow,bare,…] [--wow-env WOW_K=V …]`
(a full-size run takes ~11 minutes: run it in the background under `timeout`).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import math
import sys
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable

from bench._rival_sides import SIDES, Side, Timer
from bench._rivals_report import Report, Result, text, verdicts
from bench.harness import HostProcess, bench_main, parser, percentile, pool, scratch, sized

FULL = {"steady": 1000, "over": 30.0, "burst": 1000, "in_flight": 20, "batch": 1, "settle": 15.0}
QUICK = {**FULL, "steady": 30, "over": 2.0, "burst": 30, "lead": 2.0, "settle": 0.5}
START_FLOOR = 50.0  # starts a second the default lead allows for: every start before any due
LEAD_S = 2.0  # and this much more before the first steady timer is due
BURST_GAP_S = 3.0  # the burst is due this long after the last steady timer


def plan(prefix: str, steady: int, over: float, first_ms: int) -> list[Timer]:
    """The steady timers: due evenly over `over` seconds from `first_ms`."""
    step = over * 1000 / max(steady, 1)
    return [(f"{prefix}-s{i}", first_ms + round(i * step)) for i in range(steady)]


async def hand_all(
    rival: Side, timers: list[Timer], args: argparse.Namespace, handed: dict[str, int]
) -> float:
    """Hand the timers over in order, `--batch` a request, `--in-flight` at once, noting when
    each was handed (epoch ms); seconds."""

    async def hand(batch: list[Timer]) -> None:
        await rival.hand(batch)
        handed.update((key, int(time.time() * 1000)) for key, _ in batch)

    batches = [timers[i : i + args.batch] for i in range(0, len(timers), args.batch)]
    jobs: list[Callable[[], Awaitable[None]]] = [functools.partial(hand, b) for b in batches]
    return await pool(jobs, args.in_flight)


async def arrivals_by_key(host: HostProcess, prefix: str) -> dict[str, list[int]]:
    """Every arrival at the host of this side's timers: key -> arrival times (epoch ms)."""
    seen: dict[str, list[int]] = defaultdict(list)
    for a in await host.arrivals():
        if a.aggregate_id.startswith(prefix + "-"):
            seen[a.aggregate_id].append(a.received_ms)
    return seen


async def wait_all(host: HostProcess, prefix: str, count: int, within: float) -> None:
    """Until `count` keys of this side have arrived, or `within` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if len(await arrivals_by_key(host, prefix)) >= count:
            return
        await asyncio.sleep(0.2)


async def measure(rival: Side, host: HostProcess, args: argparse.Namespace) -> Result:
    """Run the plan on one side (started already) and read what arrived."""
    prefix = rival.name.replace("-", "")
    total = args.steady + args.burst
    began, cpu0, counted0 = time.perf_counter(), rival.cpu(), await rival.counters()
    first_ms = int((time.time() + args.lead) * 1000)
    steady = plan(prefix, args.steady, args.over, first_ms)
    due = first_ms + int((args.over + BURST_GAP_S) * 1000)
    burst = [(f"{prefix}-b{i}", due) for i in range(args.burst)]
    handed: dict[str, int] = {}
    start_s = await hand_all(rival, steady + burst, args, handed)
    await wait_all(host, prefix, total, due / 1000 - time.time() + 60 + args.burst / 2)
    cpu1, counted1 = rival.cpu(), await rival.counters()
    await asyncio.sleep(args.settle)  # a repeat (an attempt whose answer was lost) comes later
    seen = await arrivals_by_key(host, prefix)
    dues = dict(steady + burst)
    steady_late = [min(seen[k]) - d for k, d in steady if k in seen]
    burst_late = [min(seen[k]) - d for k, d in burst if k in seen]
    drain_s = max(burst_late) / 1000 if burst_late else math.nan
    per_1000 = 1000 / total
    return Result(
        side=rival.name,
        timers=total,
        start_rate=total / start_s,
        steady_p50_ms=percentile(steady_late, 0.5),
        steady_p99_ms=percentile(steady_late, 0.99),
        burst_p50_ms=percentile(burst_late, 0.5),
        burst_p99_ms=percentile(burst_late, 0.99),
        drain_rate=len(burst_late) / max(drain_s, 1e-3),
        started_after_due=sum(1 for k, d in dues.items() if handed.get(k, 0) > d),
        cpu_per_1000={k: (cpu1[k] - cpu0[k]) * per_1000 for k in cpu0},
        server_per_1000={k: (v - counted0.get(k, 0.0)) * per_1000 for k, v in counted1.items()},
        delivered=sum(1 for k in dues if k in seen),
        early=sum(1 for k, d in dues.items() if any(t < d for t in seen.get(k, ()))),
        twice=sum(len(v) - 1 for v in seen.values()),
        missing=sum(1 for k in dues if k not in seen),
        seconds=time.perf_counter() - began,
    )


def _settings(given: list[str]) -> dict[str, str]:
    pairs = [item.partition("=") for item in given]  # `--wow-env WOW_KEY=VALUE` items
    bad = [key for key, sep, _ in pairs if not sep or not key.startswith("WOW_")]
    if bad:
        raise SystemExit(f"--wow-env: WOW_KEY=VALUE, got {bad[0]!r}")
    return {key: value for key, _, value in pairs}


async def run(args: argparse.Namespace) -> Report:
    """Each side in turn on a quiet box: its processes up, the plan, its processes down."""
    names = [s.strip() for s in args.sides.split(",") if s.strip()]
    unknown = set(names) - set(SIDES)
    if unknown:
        raise SystemExit(f"unknown sides {sorted(unknown)}; choose from {', '.join(SIDES)}")
    began, results = time.perf_counter(), []
    with scratch(args, "rivals") as tmp:
        host = HostProcess(tmp / "host.log")
        await host.start()
        try:
            for name in names:
                rival = Side(name, tmp / name, host.url, _settings(args.wow_env))
                try:
                    await rival.start()
                    print(f"{name} up; measuring", file=sys.stderr)
                    results.append(await measure(rival, host, args))
                finally:
                    await rival.stop()
        finally:
            await host.stop()
    fields = (args.steady, args.over, args.burst, args.in_flight, args.batch, args.lead)
    return Report(*fields, results, time.perf_counter() - began)


def main() -> int:
    p = parser(__doc__)
    p.add_argument("--steady", type=int, help="timers due evenly over --over (default 1000)")
    p.add_argument("--over", type=float, help="seconds the steady timers are due over (30)")
    p.add_argument("--burst", type=int, help="timers due at one instant (default 1000)")
    p.add_argument("--in-flight", type=int, help="start requests in flight (default 20)")
    p.add_argument("--batch", type=int, help="timers a start request (default 1)")
    p.add_argument("--lead", type=float, help="seconds to the first due (default: 50/s + 2)")
    p.add_argument("--settle", type=float, help="seconds arrivals are watched for repeats (15)")
    p.add_argument("--sides", default=",".join(SIDES), help="which sides, in order")
    p.add_argument("--wow-env", action="append", default=[], help="WOW_KEY=VALUE of the wow sides")
    args = sized(p.parse_args(), QUICK, FULL)
    if args.lead is None:
        args.lead = (args.steady + args.burst) / START_FLOOR + LEAD_S
    return bench_main(args, run, text, verdicts)


if __name__ == "__main__":
    raise SystemExit(main())
