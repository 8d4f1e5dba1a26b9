"""Benchmark: the domain host's commands a second over HTTP against its floors (bare SQLite, the
store's recorder, the pipeline in process, a raw ASGI app), the relay's lag to a real dev server,
and `wow-temporal host` replicas on PostgreSQL beside the SQLite host. What each part measures
and how to read it: docs/benchmarks.md, "The host bench".

Run: `.venv/bin/python -m bench.host [--quick] [--duration S] [--concurrency N] [--no-temporal]
[--no-replicas] [--rounds N] [--json] [--keep]`. Exits 0 unless a command failed or a path was
not taken; no rate or ratio is asserted (the machine is small and noisy). The default run takes
about four and a half minutes on two cores.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench._host_floors import Throughput, throughput
from bench._host_lag import RelayLag, relay_lag
from bench._host_load import CONCURRENCY, STARTED, serve_host
from bench._host_replicas import Scaling, replicas
from bench.harness import Verdicts, bench_main, cpu_seconds, parser, scratch, sized

QUICK = {"duration": 1.0, "lag_seconds": 1.5, "floor_seconds": 0.5, "lag_sample": 30, "rounds": 1}
FULL = {"duration": 10.0, "floor_seconds": 4.0, "lag_sample": 200, "rounds": 2}
"""Seconds per HTTP measure and per floor, of each lag load (full: 1.5x the duration), the
timers whose start time is read back, and the rounds of part 3."""


@dataclass
class Report:
    concurrency: int
    duration: float
    floor_seconds: float
    throughput: Throughput
    relay: RelayLag | None
    """Part 2 (None with --no-temporal)."""
    replicas: Scaling | None
    """Part 3 (None with --no-replicas)."""
    elapsed_s: float
    client_cpu_s: float
    """This process's (the client's) CPU seconds."""
    load: tuple[float, float]
    """The machine's 1-minute load average at the start and the end."""


def print_report(r: Report) -> None:
    print()
    print(
        f"=== domain host over HTTP vs bare SQLite: {r.concurrency} in flight, "
        f"{r.duration:g}s per HTTP measure ({r.floor_seconds:g}s per floor), one host process "
        f"(uvicorn, h11, asyncio); {r.elapsed_s:.0f}s in all, load average "
        f"{r.load[0]:.1f} -> {r.load[1]:.1f} ==="
    )
    r.throughput.print()
    if r.relay is None:
        print("2. relay lag: skipped (--no-temporal)")
    else:
        r.relay.print()
    if r.replicas is None:
        print("3. replicas: skipped (--no-replicas)")
    else:
        r.replicas.print()
    print(f"bench process (the client) CPU {r.client_cpu_s:.1f}s over {r.elapsed_s:.0f}s")


def verdicts(r: Report) -> Verdicts:
    """No command refused, anywhere; and each part's own verdicts."""
    runs = r.throughput.runs()
    runs += [lag.sent for lag in r.relay.lags] if r.relay else []
    runs += [c.run for c in r.replicas.configs] if r.replicas else []
    judged = Verdicts({"errors": sum(run.error_count for run in runs)})
    for part in (r.throughput, r.relay, r.replicas):
        judged |= part.verdicts() if part is not None else Verdicts()
    return judged


async def run(args: argparse.Namespace) -> Report:
    duration, concurrency = args.duration, args.concurrency
    floor_seconds = min(duration, args.floor_seconds)
    lag_seconds = 1.5 * duration if args.lag_seconds is None else args.lag_seconds
    cpu, load = cpu_seconds(), os.getloadavg()[0]
    print(
        f"{concurrency} in flight, {duration:g}s per HTTP measure, {floor_seconds:g}s per "
        f"floor, lag for {lag_seconds:g}s{' (skipped)' if args.no_temporal else ''}",
        file=sys.stderr,
    )
    relay = scaling = None
    with scratch(args, "host") as tmp:
        part_one, order = await throughput(tmp, floor_seconds, duration, concurrency)
        if not args.no_temporal:
            rate = part_one.rate("ConfirmOrderStock") / 2
            sample, quick = args.lag_sample, args.quick
            relay = await relay_lag(tmp, rate, lag_seconds, concurrency, sample, order, quick)
        if not args.no_replicas:
            scaling = await replicas(tmp, duration, concurrency, args.quick, args.rounds)
    return Report(
        concurrency=concurrency,
        duration=duration,
        floor_seconds=floor_seconds,
        throughput=part_one,
        relay=relay,
        replicas=scaling,
        elapsed_s=time.perf_counter() - STARTED,
        client_cpu_s=cpu_seconds() - cpu,
        load=(load, os.getloadavg()[0]),
    )


def main() -> int:
    p = parser(__doc__)
    p.add_argument("--duration", type=float, help="seconds per HTTP measure (10, quick 1)")
    p.add_argument("--lag-seconds", type=float, help="each lag load (1.5x --duration, quick 1.5)")
    p.add_argument("--concurrency", type=int, default=CONCURRENCY, help="commands in flight (32)")
    p.add_argument("--no-temporal", action="store_true", help="skip the relay lag (part 2)")
    p.add_argument("--no-replicas", action="store_true", help="skip the replicas (part 3)")
    p.add_argument("--rounds", type=int, help="rounds of part 3, the best kept (2, quick 1)")
    p.add_argument("--serve-host", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    p.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--temporal", help=argparse.SUPPRESS)
    p.add_argument("--namespace", default="default", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve_host:
        serve_host(args.port, args.db, args.temporal, args.namespace)
        return 0
    return bench_main(sized(args, QUICK, FULL), run, print_report, verdicts)


if __name__ == "__main__":
    raise SystemExit(main())
