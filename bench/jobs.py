"""Benchmark: recurring jobs (`wow.Job` + `wow.tick`) on a dev server against native Temporal
side by side: steady ticking (lateness, billable actions per tick) against native Schedules, and
a burst of instances due on one second against bare sleeps. What each measures and how:
docs/benchmarks.md, "Jobs"."""

from __future__ import annotations

import argparse
import asyncio
import time
from dataclasses import dataclass

from bench._dev_stack import Drain, dev_stack, rounds, say
from bench._jobs_measures import (
    Steady,
    burst_bare,
    burst_wow,
    cloud_per_tick,
    print_bursts,
    print_steady,
    steady_native,
    steady_wow,
)
from bench._jobs_rig import BenchSaga, Metrics, Rig, bare_worker
from bench.harness import Verdicts, bench_main, parser, ratio, sized
from wow_temporal.delivery import CommandSender

QUICK = {"instances": 3, "seconds": 2.0, "tenants": 20, "rounds": 1}
FULL = {"instances": 20, "seconds": 30.0, "tenants": 1000, "rounds": 2}


@dataclass
class Report:
    steady: dict[str, Steady]
    bursts: dict[str, list[Drain]]
    duplicates: int
    elapsed_s: float
    every: int
    instances: int
    seconds: float


def print_report(r: Report) -> None:
    print()
    print(
        f"=== recurring jobs vs native Temporal: {r.instances} instances every {r.every}s for "
        f"{r.seconds:.0f}s; {r.elapsed_s:.0f}s in all ==="
    )
    print_steady(r.steady["wow"], r.steady["native"])
    if r.bursts["wow"]:
        print_bursts(r.bursts)
    print(f"host duplicates (redeliveries): {r.duplicates}")


async def run(args: argparse.Namespace) -> Report:
    started = time.perf_counter()
    async with dev_stack(args, "jobs", metrics=True) as stack:
        metrics = Metrics(stack.metrics_url, stack.server.namespace)
        async with CommandSender(stack.host.url) as sender, bare_worker(stack.client, sender):
            rig = Rig(stack.client, stack.host, sender, metrics, BenchSaga(), stack.server.pid)
            say(
                f"dev server up in {time.perf_counter() - started:.1f}s; {args.instances} "
                f"instances every {args.every}s for {args.seconds:.0f}s, {args.tenants} tenants "
                f"x {args.rounds} round(s)"
            )
            report = await measure(rig, args)
        await metrics.http.aclose()
    report.elapsed_s = time.perf_counter() - started
    return report


async def measure(rig: Rig, args: argparse.Namespace) -> Report:
    """Both measures, after an unmeasured warm-up of both sides (imports, connections,
    caches)."""
    n, every, seconds = args.instances, args.every, args.seconds
    await asyncio.gather(steady_wow(rig, 2, every, every), steady_native(rig, 2, every, every))
    steady: dict[str, Steady] = {}
    for side, measured in (("wow", steady_wow), ("native", steady_native)):
        s = steady[side] = await measured(rig, n, every, seconds)
        say(f"  1. {side:6} {s.ticks}/{s.expected} ticks  p50 {s.p50:.0f} ms  p99 {s.p99:.0f} ms")

    async def burst(side: str) -> Drain:
        found = await (burst_wow if side == "wow" else burst_bare)(rig, args.tenants)
        await asyncio.sleep(2.0)
        return found

    bursts = await rounds(
        args.rounds, ["wow", "bare"], burst, lambda b: f"{b.handled}/{b.n} in {b.seconds:.2f}s"
    )
    return Report(
        steady=steady,
        bursts=bursts,
        duplicates=await rig.host.duplicates(),
        elapsed_s=0.0,
        every=every,
        instances=n,
        seconds=seconds,
    )


def verdicts(r: Report) -> Verdicts:
    """Nothing early, every burst's instance handled, ticks on both sides; the ratios wow /
    baseline; lateness, actions per tick, throughput and redeliveries (at least once: a
    worker's timeout may legitimately redeliver) as figures."""
    wow, native = r.steady["wow"], r.steady["native"]
    ratios = {
        "lateness_p99": ratio(wow.p99, native.p99),
        "actions_per_tick": ratio(cloud_per_tick(wow), cloud_per_tick(native)),
    }
    figures: dict[str, float] = {}
    for side, s in r.steady.items():
        figures[f"{side}_lateness_p99_ms"] = s.p99
        figures[f"{side}_actions_per_tick"] = cloud_per_tick(s)
        figures[f"{side}_ticks_missing"] = s.expected - s.ticks
    best = {side: max(bs, key=lambda b: b.rate) for side, bs in r.bursts.items() if bs}
    if best:
        ratios["burst_throughput"] = ratio(best["wow"].rate, best["bare"].rate)
    for side, b in best.items():
        figures[f"{side}_burst_per_s"] = b.rate
    return Verdicts(
        must_be_zero={
            "early": sum(s.early for s in r.steady.values()),
            "burst_unhandled": sum(b.n - b.handled for bs in r.bursts.values() for b in bs),
        },
        must_be_positive={f"{side}_ticks": s.ticks for side, s in r.steady.items()},
        ratios=ratios,
        figures=figures | {"host_duplicates": r.duplicates},
    )


def main() -> int:
    p = parser(__doc__)
    p.add_argument("--instances", type=int, help="ticking instances (default 20, quick 3)")
    p.add_argument("--every", type=int, default=1, choices=(1, 2), help="period, seconds")
    p.add_argument("--seconds", type=float, help="ticking measured (default 30, quick 2)")
    p.add_argument("--tenants", type=int, help="instances due at once (1000, quick 20)")
    p.add_argument("--rounds", type=int, help="burst rounds (default 2, quick 1)")
    return bench_main(sized(p.parse_args(), QUICK, FULL), run, print_report, verdicts)


if __name__ == "__main__":
    raise SystemExit(main())
