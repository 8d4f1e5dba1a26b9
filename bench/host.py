"""Benchmark: the domain host's commands per second over HTTP, against bare SQLite side by side,
the relay's lag from a commit to its timer on a real dev server, and the host's replicas on
PostgreSQL beside the SQLite host.

The host is the e-shop's (`workers.eshop`: the order and the stock aggregates; the inventory saga
left out, so only the commands sent here are decided, and the payment grace period an hour, so
no timer comes due), served as `wow-temporal host` serves it: a `HostRuntime` over a SQLite file
(WAL), its FastAPI app on uvicorn (h11, asyncio, as installed), one process of its own, logging a
line per command to a file. This process is the client (httpx, `--concurrency` commands in
flight, each with its own request id). Measured:

1. Commands per second, side by side in the same run, for a command that commits one event
   (`ReceiveStock` on a pool of products, their aggregates in memory) and for the e-shop's
   `ConfirmOrderStock` that commits two events and a `wow.ScheduleSet` (each on an order created
   before, over HTTP: `CreateOrder`'s rate, one event on a new aggregate, is printed too):
   - sqlite3 in WAL mode (the store's `synchronous`), one row of the commit's size per
     transaction: the floor of the file;
   - the eventsourcing recorder the store uses, the commit and its request id per transaction,
     as `EventStore.append` writes them: the floor of the store;
   - the host's pipeline in this process (`DomainHost.send`, no HTTP), the followers running;
   - a raw ASGI app answering Wow's `Ok` on uvicorn, to the same client: the floor of HTTP;
   - the host over HTTP: commands/s, the ratio to each floor, request p50/p99, and the host
     process's CPU per command.
   In part 1 the host's relay hands schedules to a no-op (no Temporal runs): the figures are the
   host's own.
2. The relay's lag on a fresh host handing to a real `TimerClient` on a fresh headless
   `temporal server start-dev` (no timer worker: nothing is delivered): orders confirmed at half
   the part-1 `ConfirmOrderStock` rate (a token bucket) for a fixed time, each commit carrying a
   `wow.ScheduleSet`. Lag = the commit's `createTime` -> `apply_many` returned for it
   (`Relay.on_handed`, in the host), p50/p99/max; and -> the timer workflow's start time (read
   by workflow id) for a sample.
3. Replicas: the same client and ReceiveStock load (a `--duration` each, after each product's
   first command), its connections to the replicas in turn (as a TCP balancer deals them: each
   command to any replica, so a replica's aggregate in memory is often stale and is decided
   again), on real `wow-temporal host` processes (Temporal at a port nothing serves: ReceiveStock
   sets no schedule): the SQLite host, then 1, 2 and 3 replicas on one PostgreSQL database each
   (`bench.harness.postgres`, fsync on, as a real server commits), in `--rounds` rounds on fresh
   stores, the best round of each kept. Per configuration: commands/s, the ratio to PG x1 and to
   the SQLite host, p50/p99, CPU a command in the hosts (summed), in PostgreSQL (postmaster and
   backends) and in the client, the cores those and the whole machine kept busy; PostgreSQL's
   transactions and WAL fsyncs a command, and its backends' states sampled over the load
   (holding the events table's commit lock, waiting for a lock, for the WAL, for their host
   mid-transaction, running). Target: PG x2 >= 1.3 x PG x1, informational where the cores ran
   out (>= 90% busy): then the CPU a command says how it scales with more cores. `--quick`: PG
   x1 and x2 only, one round.

Run: `.venv/bin/python -m bench.host [--quick] [--duration S] [--concurrency N] [--no-temporal]
[--no-replicas] [--rounds N] [--json] [--keep]`. Exits 0 unless a command failed or a path was
not taken; no rate or ratio is asserted (the machine is small and noisy). The default run takes
about four and a half minutes on two cores.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench._host_floors import (
    SYNCHRONOUS,
    Kind,
    floors,
    in_process,
    over_http,
)
from bench._host_lag import (
    Lag,
    relay_lag,
)
from bench._host_load import (
    CONCURRENCY,
    STARTED,
    Run,
    progress,
    serve_host,
)
from bench._host_replicas import (
    Replicas,
    print_replicas,
    replica_verdicts,
    replicas,
    scaling,
)
from bench.harness import (
    Verdicts,
    bench_main,
    cpu_seconds,
    parser,
    scratch,
    sized,
)

QUICK = {"duration": 1.0, "lag_seconds": 1.5, "floor_seconds": 0.5, "lag_sample": 30, "rounds": 1}
FULL = {"duration": 10.0, "floor_seconds": 4.0, "lag_sample": 200, "rounds": 2}
"""Seconds per HTTP measure and per floor, of each lag load (full: 1.5x the duration), the
timers whose start time is read back, and the rounds of part 3."""


# -- the report -------------------------------------------------------------------------------


@dataclass
class Report:
    concurrency: int
    duration: float
    floor_seconds: float
    synchronous: str
    kinds: list[Kind]
    created: Run
    created_in_process: Run
    floor: Run
    lags: list[Lag]
    temporal_startup_s: float | None
    timers_ingest: float | None
    """`TimerClient.apply_many` alone, commits a second (part 2)."""
    timers_ingest_batch: int | None
    elapsed_s: float
    client_cpu_s: float
    """This process's (the client's) CPU seconds."""
    load: tuple[float, float]
    """The machine's 1-minute load average at the start and the end."""
    replicas: list[Replicas]
    """Part 3 (empty with --no-replicas)."""
    scaling: tuple[float, str] | None
    """PG x2 over PG x1, and its verdict."""


def fmt_run(run: Run | None) -> str:
    if run is None:
        return "      -"
    return f"{run.rate:6.0f}/s  p50 {run.p50_ms:6.2f} ms  p99 {run.p99_ms:6.2f} ms"


ROW = 44  # the width of a row's label


def host_row(run: Run) -> str:
    return (
        f"    {'host over HTTP':{ROW}} {fmt_run(run)}  errors {run.error_count}  "
        f"host CPU {run.cpu_ms:.2f} ms/command ({100 * run.cpu_share:.0f}% of a core)"
    )


def print_report(r: Report) -> None:
    print()
    print(
        f"=== domain host over HTTP vs bare SQLite: {r.concurrency} in flight, "
        f"{r.duration:g}s per HTTP measure ({r.floor_seconds:g}s per floor), one host process "
        f"(uvicorn, h11, asyncio); {r.elapsed_s:.0f}s in all, load average "
        f"{r.load[0]:.1f} -> {r.load[1]:.1f} ==="
    )
    print(f"1. commands per second (SQLite file, WAL, synchronous={r.synchronous}):")
    for kind in r.kinds:
        assert kind.http is not None
        print(f"  {kind.name} ({kind.events}, commit {kind.commit_bytes} B):")
        rows = (
            (f"sqlite3, one {kind.commit_bytes} B row per transaction", kind.sqlite),
            ("eventsourcing recorder, commit + request id", kind.recorder),
            ("host pipeline in process, no HTTP", kind.pipeline),
        )
        for label, run in rows:
            print(f"    {label:{ROW}} {fmt_run(run)}")
        print(host_row(kind.http))
        print(
            f"    ratio http/sqlite3 {kind.ratio(kind.sqlite):.3f}  "
            f"http/recorder {kind.ratio(kind.recorder):.3f}  "
            f"http/in-process {kind.ratio(kind.pipeline):.3f}"
            + ("  (ran out of orders)" if kind.http.exhausted else "")
        )
    f = r.floor
    print("  CreateOrder (1 event, a new aggregate each):")
    print(f"    {'host pipeline in process, no HTTP':{ROW}} {fmt_run(r.created_in_process)}")
    print(host_row(r.created))
    print(
        f"  HTTP floor, a raw ASGI app answering Ok on uvicorn, same client:\n"
        f"    {'raw ASGI over HTTP':{ROW}} {fmt_run(f)}  server CPU {f.cpu_ms:.2f} ms/request "
        f"({100 * f.cpu_share:.0f}% of a core)"
    )
    print_lags(r)
    print_replicas(r.replicas, r.scaling, r.concurrency, r.duration)
    print(f"bench process (the client) CPU {r.client_cpu_s:.1f}s over {r.elapsed_s:.0f}s")


def print_lags(r: Report) -> None:
    if not r.lags:
        print("2. relay lag: skipped (--no-temporal)")
        return
    print(
        f"2. relay lag, a real dev server (up in {r.temporal_startup_s or 0:.1f}s), "
        "no timer worker, each commit a wow.ScheduleSet:"
    )
    for lag in r.lags:
        s = lag.sent
        print(f"  at {lag.rate:.0f}/s ({lag.label}) for {lag.seconds:g}s:")
        ms, starts, handed = lag.lag_ms, lag.timer_start_ms, int(lag.lag_ms["n"])
        print(
            f"    commit -> apply_many returned (Relay.on_handed) p50 {ms['p50']:.1f} ms  "
            f"p99 {ms['p99']:.1f} ms  max {ms['max']:.1f} ms  handed {handed}/{s.n}"
        )
        print(
            f"    p50 over the first third {lag.thirds_p50_ms[0]:.1f} ms, last third "
            f"{lag.thirds_p50_ms[1]:.1f} ms (a p50 that grows means not keeping up)"
            + ("  BEHIND" if lag.behind else "")
        )
        print(
            f"    relay handed over at {lag.relay_rate:.0f}/s in {lag.batches} batches "
            f"({handed / max(lag.batches, 1):.1f} commits each); drained "
            f"{lag.drain_s:.2f}s after the last"
        )
        print(
            f"    commit -> timer workflow start time ({starts['n']:.0f} read by id) "
            f"p50 {starts['p50']:.1f} ms  p99 {starts['p99']:.1f} ms"
        )
        print(
            f"    confirms sent at {s.rate:.0f}/s  p50 {s.p50_ms:.2f} ms  p99 {s.p99_ms:.2f} ms  "
            f"errors {s.error_count}  host CPU {s.cpu_ms:.2f} ms/command "
            f"({100 * s.cpu_share:.0f}% of a core, the relay's Temporal client included); "
            f"dev server CPU {100 * lag.server_cpu_share:.0f}% of a core"
        )
    print(
        f"  TimerClient.apply_many alone (this process, batches of {r.timers_ingest_batch}, "
        f"same server): {r.timers_ingest or 0:.0f} commits/s"
    )


def verdicts(r: Report) -> Verdicts:
    """Nothing refused, every commit handed to the timers; every rate, the servers' CPU, the
    relay's lag and the timers read above 0; the host over HTTP against each floor; the HTTP
    latencies, the relay's and the timers' as figures."""
    http = {"create_order_http": r.created, "http_floor": r.floor}
    positive = {"create_order_in_process_rate": r.created_in_process.rate}
    ratios: dict[str, float] = {}
    figures: dict[str, float] = {}
    for kind in r.kinds:
        key = "receive_stock" if kind.name == "ReceiveStock" else "confirm_order_stock"
        assert kind.http is not None
        http[f"{key}_http"] = kind.http
        sides = {"sqlite": kind.sqlite, "recorder": kind.recorder, "in_process": kind.pipeline}
        for side, run in sides.items():
            positive[f"{key}_{side}_rate"] = run.rate if run else math.nan
            ratios[f"{key}_http_per_{side}"] = kind.ratio(run)
    for key, run in http.items():
        positive |= {f"{key}_rate": run.rate, f"{key}_cpu_ms": run.cpu_ms}
        figures |= {f"{key}_p50_ms": run.p50_ms, f"{key}_p99_ms": run.p99_ms}
    sent = [lag.sent for lag in r.lags]
    if r.lags:
        lags, starts = [lag.lag_ms for lag in r.lags], [lag.timer_start_ms for lag in r.lags]
        positive |= {
            "relay_sent_rate": min(s.rate for s in sent),
            "relay_handed": min(lag["n"] for lag in lags),
            "relay_lag_p50_ms": min(lag["p50"] for lag in lags),
            "timer_starts_read": min(start["n"] for start in starts),
            "timers_ingest": r.timers_ingest or math.nan,
        }
        figures |= {f"relay_lag_{q}_ms": lags[0][q] for q in ("p99", "max")}
        figures |= {f"timer_start_{q}_ms": starts[0][q] for q in ("p50", "p99")}
    replicas = replica_verdicts(r.replicas)
    runs = [*http.values(), *sent, *(c.run for c in r.replicas)]
    return Verdicts(
        must_be_zero={
            "errors": sum(run.error_count for run in runs),
            "relay_unhanded": sum(lag.sent.n - int(lag.lag_ms["n"]) for lag in r.lags),
        },
        must_be_positive=positive | replicas.must_be_positive,
        ratios=ratios | replicas.ratios,
        figures=figures | replicas.figures,
    )


# -- main -------------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> Report:
    quick, duration = args.quick, args.duration
    floor_seconds = min(duration, args.floor_seconds)
    lag_seconds = 1.5 * duration if args.lag_seconds is None else args.lag_seconds
    concurrency = args.concurrency
    cpu, load = cpu_seconds(), os.getloadavg()[0]
    print(
        f"{concurrency} in flight, {duration:g}s per HTTP measure, {floor_seconds:g}s per "
        f"floor, lag for {lag_seconds:g}s{' (skipped)' if args.no_temporal else ''}",
        file=sys.stderr,
    )
    with scratch(args, "host") as tmp:
        receive_kind, confirm_kind, created_in_process, shapes = await in_process(
            tmp, floor_seconds, concurrency
        )
        kinds = [receive_kind, confirm_kind]
        for kind in kinds:
            assert kind.pipeline is not None
            progress(f"in process {kind.name:17} {kind.pipeline.rate:6.0f}/s")
        synchronous = await floors(tmp, kinds, shapes, floor_seconds)
        for kind in kinds:
            assert kind.sqlite is not None and kind.recorder is not None
            progress(
                f"floors {kind.name:21} sqlite3 {kind.sqlite.rate:6.0f}/s  "
                f"recorder {kind.recorder.rate:6.0f}/s"
            )
        floor, created = await over_http(tmp, receive_kind, confirm_kind, duration, concurrency)
        lags: list[Lag] = []
        startup = ingest = batch = None
        if not args.no_temporal:
            assert confirm_kind.http is not None
            rate, sample = confirm_kind.http.rate / 2, args.lag_sample
            lags, startup, ingest, batch = await relay_lag(
                tmp, rate, lag_seconds, concurrency, sample, shapes[1].commit, quick
            )
        configs = []
        if not args.no_replicas:
            configs = await replicas(tmp, duration, concurrency, quick, args.rounds)
    return Report(
        concurrency=concurrency,
        duration=duration,
        floor_seconds=floor_seconds,
        synchronous=SYNCHRONOUS.get(synchronous, str(synchronous)),
        kinds=kinds,
        created=created,
        created_in_process=created_in_process,
        floor=floor,
        lags=lags,
        temporal_startup_s=startup,
        timers_ingest=ingest,
        timers_ingest_batch=batch,
        elapsed_s=time.perf_counter() - STARTED,
        client_cpu_s=cpu_seconds() - cpu,
        load=(load, os.getloadavg()[0]),
        replicas=configs,
        scaling=scaling(configs) if configs else None,
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
