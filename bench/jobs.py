"""Benchmark: recurring jobs (`wow.Job` + `wow.tick`) on a real dev server, against native
Temporal side by side.

One fresh headless `temporal server start-dev` (EmbeddedTemporal, timer precision 10 ms, its
Prometheus `/metrics` on), the fake Wow host in its own process (`bench.harness.HostProcess`:
answers `Ok` once per request id and records when each command arrived; the due time is in its
body), and this process running every worker: the job workers (`worker.job_worker`, one per
context) and the baselines' worker on a task queue of its own, polling alike. Every command,
wow's or a baseline's, is the same `bench.Tick` body (`{"run", "due"}`) sent by the same
`CommandSender` to the same host. Measured:

1. Steady ticking: `--instances` SYSTEM instances (the partitions of a sharded job) ticking every
   `--every` seconds for `--seconds`, then as many native Temporal Schedules (interval spec, the
   same period) each starting a workflow that runs one activity sending the same command. Tick
   lateness (host receive time - the slot's due time) p50/p99/max, and billable actions per tick:
   from the histories (the event types in `BILLED`), plus what never shows in a history (activity
   heartbeats, the Schedule's own start) from the server's `action` metric and Temporal Cloud's
   price list. Targets: wow p99 <= the Schedule's, <= 2 actions per tick in steady state.
2. A burst: `--tenants` TENANT instances all due on the same second; the time until the host has
   every tick's command, against as many bare workflows that `workflow.sleep` until the same
   instant and run one activity sending the command. Target: wow >= 0.8x the bare throughput.
3. Worker memory: `--idle` instances enabled (a yearly cron: they sleep), the RSS of this process
   (it runs the worker) before, every 1,000 and after; and the enabling rate.

Each burst's lead time is sized by a pilot (a tenth as many instances of a yearly job enabled
first); part 3 runs last, so the bursts meet a fresh server.

Run: `.venv/bin/python -m bench.jobs [--quick] [--instances N] [--every S] [--seconds S]
[--tenants N] [--idle N] [--rounds R] [--json] [--keep]`. Exits 0; targets are printed as
PASS/MISS, never asserted (the machine is small and noisy). At the default sizes a run takes
about ten minutes on two cores, half of it enabling the 10,000 sleeping instances (35-45 a second
here); `--idle 2000` makes it about five.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from dataclasses import dataclass

from temporalio.worker import PollerBehaviorAutoscaling, Worker

from bench._bare_jobs import Scheduled, Woken
from bench._jobs_measures import (
    Burst,
    Memory,
    Steady,
    best_rounds,
    burst_bare,
    burst_wow,
    cloud_per_tick,
    memory,
    print_bursts,
    print_memory,
    print_steady,
    say,
    steady_native,
    steady_wow,
)
from bench._jobs_rig import (
    BARE_QUEUE,
    MAX_ACTIVITIES,
    BareSend,
    BenchSaga,
    Metrics,
    Rig,
)
from bench.harness import (
    HostProcess,
    Verdicts,
    bench_main,
    parser,
    ratio,
    scratch,
    sized,
)
from wow_temporal.delivery import CommandSender
from wow_temporal.dev.ports import free_port
from wow_temporal.dev.server import EmbeddedTemporal
from wow_temporal.worker import STICKY_TIMEOUT

QUICK = {"instances": 3, "seconds": 2.0, "tenants": 20, "idle": 100, "rounds": 1}
FULL = {"instances": 20, "seconds": 30.0, "tenants": 1000, "idle": 10_000, "rounds": 2}


@dataclass
class Report:
    steady: dict[str, Steady]
    bursts: dict[str, list[Burst]]
    memory: Memory | None
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
    wow, native = r.steady.get("wow"), r.steady.get("native")
    if wow is not None and native is not None:
        print_steady(wow, native)
    if r.bursts:
        print_bursts(r.bursts)
    if r.memory is not None:
        print_memory(r.memory)
    print(f"host duplicates (redeliveries): {r.duplicates}")


async def run(args: argparse.Namespace) -> Report:
    n, seconds, tenants, idle, rounds = (
        args.instances,
        args.seconds,
        args.tenants,
        args.idle,
        args.rounds,
    )
    every = args.every
    started = time.perf_counter()
    with scratch(args, "jobs") as tmp:
        metrics_port = free_port("127.0.0.1")
        server = EmbeddedTemporal(
            tmp / "temporal", headless=True, extra_args=["--metrics-port", str(metrics_port)]
        )
        host = HostProcess(tmp / "host.log")
        try:
            await asyncio.gather(server.start(), host.start())
            client = await server.connect()
            metrics = Metrics(metrics_port, server.namespace)
            async with (
                CommandSender(host.url) as sender,
                Worker(
                    client,
                    task_queue=BARE_QUEUE,
                    workflows=[Scheduled, Woken],  # a tiny module: the sandbox re-imports it
                    activities=[BareSend(sender).send],
                    max_concurrent_activities=MAX_ACTIVITIES,
                    # The job worker's pollers: compare the designs, not the tuning.
                    workflow_task_poller_behavior=PollerBehaviorAutoscaling(),
                    activity_task_poller_behavior=PollerBehaviorAutoscaling(),
                    sticky_queue_schedule_to_start_timeout=STICKY_TIMEOUT,
                ),
            ):
                rig = Rig(client, host, sender, metrics, BenchSaga(), server.pid)
                say(
                    f"dev server up in {time.perf_counter() - started:.1f}s; {n} instances every "
                    f"{every}s for {seconds:.0f}s, {tenants} tenants x {rounds} round(s), "
                    f"{idle} idle instances"
                )
                report = await measure(rig, n, every, seconds, tenants, idle, rounds)
            await metrics.http.aclose()
        finally:
            await asyncio.gather(server.stop(), host.stop())
    report.elapsed_s = time.perf_counter() - started
    return report


async def measure(
    rig: Rig, n: int, every: int, seconds: float, tenants: int, idle: int, rounds: int
) -> Report:
    """The three measures, after an unmeasured warm-up of both sides (imports, connections,
    caches)."""
    await asyncio.gather(steady_wow(rig, 2, every, every), steady_native(rig, 2, every, every))
    steady: dict[str, Steady] = {}
    for side, measured in (("wow", steady_wow), ("native", steady_native)):
        s = steady[side] = await measured(rig, n, every, seconds)
        say(f"  1. {side:6} {s.ticks}/{s.expected} ticks  p50 {s.p50:.0f} ms  p99 {s.p99:.0f} ms")
    bursts: dict[str, list[Burst]] = {"wow": [], "bare": []}
    for r in range(rounds):
        for side in ("wow", "bare") if r % 2 == 0 else ("bare", "wow"):
            b = await (burst_wow if side == "wow" else burst_bare)(rig, tenants)
            bursts[side].append(b)
            say(f"  2. round {r + 1} {side:4} {b.handled}/{b.n} in {b.seconds:.2f}s")
            await asyncio.sleep(2.0)
    mem = await memory(rig, idle) if idle else None
    if mem is not None:
        say(
            f"  3. {idle} enabled at {mem.enable_rate:.0f}/s, RSS {mem.before_mb:.0f}"
            f" -> {mem.settled_mb:.0f} MB"
        )
    return Report(
        steady=steady,
        bursts=bursts,
        memory=mem,
        duplicates=await rig.host.duplicates(),
        elapsed_s=0.0,
        every=every,
        instances=n,
        seconds=seconds,
    )


def verdicts(r: Report) -> Verdicts:
    """Nothing early, every burst's instance handled, ticks on both sides; the ratios wow /
    baseline; lateness, actions per tick, throughput, enabling rate and redeliveries (at least
    once: a worker's timeout may legitimately redeliver) as figures."""
    best = best_rounds(r.bursts)
    ratios: dict[str, float] = {}
    figures: dict[str, float] = {}
    positive: dict[str, float] = {}
    wow, native = r.steady.get("wow"), r.steady.get("native")
    if wow is not None and native is not None:
        ratios["lateness_p99"] = ratio(wow.p99, native.p99)
        ratios["actions_per_tick"] = ratio(cloud_per_tick(wow), cloud_per_tick(native))
    for side, s in r.steady.items():
        positive[f"{side}_ticks"] = s.ticks
        figures[f"{side}_lateness_p99_ms"] = s.p99
        figures[f"{side}_actions_per_tick"] = cloud_per_tick(s)
        figures[f"{side}_ticks_missing"] = s.expected - s.ticks
    if "wow" in best and "bare" in best:
        ratios["burst_throughput"] = ratio(best["wow"].rate, best["bare"].rate)
    for side, b in best.items():
        figures[f"{side}_burst_per_s"] = b.rate
    if r.memory is not None:
        figures["enable_per_s"] = r.memory.enable_rate
        figures["worker_mb_per_1000"] = r.memory.per_thousand
    return Verdicts(
        must_be_zero={
            "early": sum(s.early for s in r.steady.values()),
            "burst_unhandled": sum(b.n - b.handled for bs in r.bursts.values() for b in bs),
        },
        must_be_positive=positive,
        ratios=ratios,
        figures=figures | {"host_duplicates": r.duplicates},
    )


def main() -> int:
    p = parser(__doc__)
    p.add_argument("--instances", type=int, help="ticking instances (default 20, quick 3)")
    p.add_argument("--every", type=int, default=1, choices=(1, 2), help="period, seconds")
    p.add_argument("--seconds", type=float, help="ticking measured (default 30, quick 2)")
    p.add_argument("--tenants", type=int, help="instances due at once (1000, quick 20)")
    p.add_argument("--idle", type=int, help="sleeping instances (10000, quick 100; 0: skip)")
    p.add_argument("--rounds", type=int, help="burst rounds (default 2, quick 1)")
    return bench_main(sized(p.parse_args(), QUICK, FULL), run, print_report, verdicts)


if __name__ == "__main__":
    raise SystemExit(main())
