"""Benchmark: the capacity of one dev server and one worker (`wow-temporal worker`): a burst
of one-shot timers drained with nothing pending and beside many pending ones, the memory and
ingest of those pending, and many enabled job instances. What each measures and how:
docs/benchmarks.md, "Capacity"."""

from __future__ import annotations

import argparse
import asyncio
import time
from dataclasses import dataclass

from bench._capacity_rig import (
    BATCH,
    CACHE,
    ENABLE_CONCURRENCY,
    PENDING_DAYS,
    Burst,
    Jobs,
    Rig,
    Sample,
    burst,
    bursts,
    jobs,
    pending_ids,
    pending_timers,
)
from bench._dev_stack import dev_stack, say
from bench.harness import (
    Proc,
    Verdicts,
    bench_main,
    parser,
    percentile,
    ratio,
    sized,
    still_running,
    verdict,
    worker_env,
)
from wow_temporal.dev.ports import free_port
from wow_temporal.timers.client import TimerClient

BURST_TARGET = 0.9
FLAT_MB = 2.0
"""Worker RSS growth per 1,000 instances past the cache that still counts as flat."""
QUICK = {"timers": 200, "jobs": 20, "burst": 40, "rounds": 1, "settle": 2.0, "tick_seconds": 3}
FULL = {
    "timers": 100_000,
    "jobs": 10_000,
    "burst": 1000,
    "rounds": 2,
    "settle": 10.0,
    "tick_seconds": 5,
}


# -- the report -------------------------------------------------------------------------------


def table(samples: list[Sample], what: str) -> None:
    """One line a sample: rate, the worker's RSS (and peak since the line before) and
    workflow cache, the server's RSS, Go heap and cached mutable states, the database, and
    the CPU ms per item of the server and of this process (the client)."""
    print(
        f"    {what:>10}  {'rate/s':>6}  {'worker MB (peak)':>16}  {'wf cache':>8}  "
        f"{'server MB':>9}  {'heap MB':>7}  {'states':>6}  {'db MB':>6}  {'CPU ms: server':>14}"
        "  client"
    )
    for s in samples:
        rate = f"{s.rate:6.0f}" if s.count else f"{'-':>6}"
        worker = f"{s.worker_mb:.0f} ({s.worker_peak_mb:.0f})"
        print(
            f"    {s.count:>10}  {rate}  {worker:>16}  {s.cached:8.0f}  {s.server_mb:9.0f}  "
            f"{s.heap_mb:7.0f}  {s.states:6.0f}  {s.db_mb:6.0f}  {s.server_ms:14.1f}  "
            f"{s.bench_ms:6.1f}"
        )


def best(rounds: list[Burst]) -> Burst | None:
    """The fastest round whose ingest ended before its due time (any, if none did)."""
    fair = [b for b in rounds if not b.overran] or rounds
    return max(fair, key=lambda b: b.rate) if fair else None


def cpu_per_timer(rounds: list[Burst]) -> float:
    """The CPU ms the server, the worker and the host spent per timer delivered, over the
    rounds (from each due time to its last delivery)."""
    spent = sum(b.cpu["server"] + b.cpu["worker"] + b.cpu["host"] for b in rounds)
    return 1000 * spent / max(sum(b.handled for b in rounds), 1)


def per_thousand(a: Sample, b: Sample) -> float:
    return (b.worker_mb - a.worker_mb) / max((b.count - a.count) / 1000, 1e-9)


def flat_past_cache(steps: list[Sample]) -> tuple[Sample, float] | None:
    """(the first step at or past twice the cache, when every cached workflow has been
    evicted once, and the worker MB per 1,000 from there to the last step), or None when no
    step is that far before the last."""
    past = [s for s in steps if s.count >= 2 * CACHE]
    if not past or past[0].count >= steps[-1].count:
        return None
    return past[0], per_thousand(past[0], steps[-1])


@dataclass
class Report:
    timers: int
    burst: int
    jobs: int
    zero: list[Burst]
    """The bursts with nothing pending."""
    loaded: list[Burst]
    """The bursts with `timers` pending."""
    pending: list[Sample]
    pending_checked: int
    """Pending timers described by id after the bursts beside them."""
    pending_running: int
    """Of those, the ones still running (each should be: due in `PENDING_DAYS` days)."""
    job: Jobs | None
    duplicates: int
    elapsed_s: float


def text(r: Report) -> None:
    print()
    print(
        f"=== capacity of one dev server and one worker: {r.timers} pending timers, "
        f"bursts of {r.burst}, {r.jobs} job instances; {r.elapsed_s:.0f}s in all ==="
    )
    text_pending(r.pending)
    print(f"    still running after the bursts: {r.pending_running} of {r.pending_checked} checked")
    text_bursts(r.burst, r.zero, r.loaded)
    if r.job is not None:
        text_jobs(r.job)
    print(f"host duplicates (redeliveries): {r.duplicates}")


def text_pending(pending: list[Sample]) -> None:
    print(f"1. pending one-shot timers (due in {PENDING_DAYS} days), handed over {BATCH} a call:")
    table(pending, "pending")
    if len(pending) > 2:
        zero_, first, end = pending[0], pending[1], pending[-1]
        tens = end.count / 10_000
        print(
            f"    ingest rate first step {first.rate:.0f}/s, last {end.rate:.0f}/s (ratio "
            f"{ratio(end.rate, first.rate):.2f}); per 10,000 pending: worker RSS "
            f"{(end.worker_mb - zero_.worker_mb) / tens:+.1f} MB, server "
            f"{(end.server_mb - zero_.server_mb) / tens:+.1f} MB"
        )


def text_bursts(n: int, zero: list[Burst], loaded: list[Burst]) -> None:
    best0, bestn = best(zero), best(loaded)
    print(f"2. a burst of {n} due at one instant (due -> the host has the last one):")
    for b in zero + loaded:
        per = {k: 1000 * v / max(b.handled, 1) for k, v in b.cpu.items()}
        print(
            f"    {b.pending:>7} pending  {b.handled}/{b.n} in {b.seconds:6.2f}s = "
            f"{b.rate:5.0f}/s  p50 {b.p50_ms:5.0f} ms{'  INGEST OVERRAN DUE' if b.overran else ''}"
            f"  CPU ms per timer: server {per['server']:.1f}, worker {per['worker']:.1f}"
        )
        if b.cost is not None:
            print(f"             server per timer: {b.cost.describe()}")
    if best0 is not None and bestn is not None:
        drain = ratio(bestn.rate, best0.rate)
        print(
            f"    burst drain ratio ({bestn.pending} pending / 0 pending) {drain:.2f} "
            f"(target >= {BURST_TARGET}) {verdict(drain >= BURST_TARGET)}  (best round each, "
            "one whose ingest overran its due time only if all did)"
        )
        cpu0, cpun = cpu_per_timer(zero), cpu_per_timer(loaded)
        print(
            f"    CPU ms per timer delivered (server + worker + host, mean of the rounds): "
            f"{cpu0:.1f} with 0 pending, {cpun:.1f} with {bestn.pending}: the ratio a drain "
            f"bound by CPU alone would show {ratio(cpu0, cpun):.2f} (wall clock on a shared "
            "machine is not)"
        )


def text_jobs(job: Jobs) -> None:
    print(f"3. {job.n} enabled job instances (TENANT, yearly), {ENABLE_CONCURRENCY} in flight:")
    table(job.steps, "instances")
    s = job.settled
    print(
        f"    enabled at {job.n / job.seconds:.0f}/s ({job.seconds:.0f}s); {job.settle:g}s "
        f"idle later: worker {s.worker_mb:.0f} MB (peak {s.worker_peak_mb:.0f}, cache "
        f"{s.cached:.0f}), server {s.server_mb:.0f} MB"
    )
    flat = flat_past_cache(job.steps)
    if flat is not None:
        start, growth = flat
        filling = next(x for x in job.steps if x.count >= CACHE)
        print(
            f"    worker RSS past the SDK's cache ({CACHE} workflows a worker): "
            f"{growth:+.1f} MB per 1,000 from {start.count} to {job.steps[-1].count} "
            f"(filling it, to {filling.count}: {per_thousand(job.steps[0], filling):+.1f} MB "
            f"per 1,000; to the idle sample: {per_thousand(start, s):+.1f})  (target flat, "
            f"< {FLAT_MB:g} MB per 1,000) {verdict(growth < FLAT_MB)}"
        )
    print(
        f"    ticks of {len(job.sampled)} instances ({', '.join(job.sampled)}) rescheduled "
        f"to every second, over {job.tick_seconds}s: {job.ticked}/{job.expected}  lateness p50 "
        f"{percentile(job.late, 0.5):.0f} ms  max {max(job.late, default=float('nan')):.0f} ms"
    )


async def run(args: argparse.Namespace) -> Report:
    began = time.perf_counter()
    async with dev_stack(args, "capacity", metrics=True) as stack:
        worker_port = free_port("127.0.0.1")
        env = worker_env(
            stack.server.address,
            stack.server.namespace,
            stack.host.url,
            WOW_WORKER_METRICS_PORT=str(worker_port),
            WOW_WORKER_SHUTDOWN_TIMEOUT="2s",
        )
        worker = Proc.worker(stack.tmp / "worker.log", env, "--app", "bench._capacity_rig:APP")
        rig = Rig(
            stack.client,
            TimerClient(stack.client),
            stack.host,
            worker,
            f"http://127.0.0.1:{worker_port}/metrics",
            stack.server,
            stack.metrics_url,
        )
        watching: asyncio.Task[None] | None = None
        try:
            await worker.start()
            watching = asyncio.create_task(rig.watch())
            report = await measure(rig, args, began)
            if not worker.running:
                raise RuntimeError("the worker exited")
            return report
        except BaseException:
            say(f"worker log tail:\n{worker.log.read_text(errors='replace')[-3000:]}")
            raise
        finally:
            if watching is not None:
                watching.cancel()
            await worker.stop(grace=15)
            await rig.http.aclose()


async def measure(rig: Rig, args: argparse.Namespace, began: float) -> Report:
    """A warm-up burst (unmeasured: imports, connections, caches; a first ingest rate), the
    bursts with nothing pending, the pending timers, the bursts beside them, the jobs."""
    timers, n_jobs, n, rounds = args.timers, args.jobs, args.burst, args.rounds
    say(
        f"dev server pid {rig.server.pid}, worker pid {rig.worker.pid} ready, host pid "
        f"{rig.host.proc.pid}; {timers} timers, {n_jobs} jobs, bursts of {n} x {rounds}"
    )
    warm = await burst(rig, max(10, min(n // 5, 50)), 0)
    rig.ingest_rate = warm.handover_rate
    zero = await bursts(rig, n, 0, rounds)
    pending = await pending_timers(rig, timers)
    loaded = await bursts(rig, n, timers, rounds) if timers else []
    checked = pending_ids(timers)
    running = len(await still_running(rig.client, checked))
    job = await jobs(rig, n_jobs, args.settle, args.tick_seconds) if n_jobs else None
    duplicates = await rig.host.duplicates()
    elapsed = time.perf_counter() - began
    return Report(
        timers, n, n_jobs, zero, loaded, pending, len(checked), running, job, duplicates, elapsed
    )


def verdicts(r: Report) -> Verdicts:
    """Every burst delivered in full, the pending timers checked still running, every pending
    step sampled, the job instances enabled and ticking; the drain ratio (pending / none);
    rates, CPU and redeliveries (at least once: a worker's timeout may legitimately
    redeliver) as figures."""
    best0, bestn = best(r.zero), best(r.loaded)
    positive: dict[str, float] = {"pending_steps": len(r.pending) - 1}
    ratios: dict[str, float] = {}
    figures: dict[str, float] = {}
    if best0 is not None and bestn is not None:
        ratios["burst_drain"] = ratio(bestn.rate, best0.rate)
        figures |= {"burst_per_s_0_pending": best0.rate, "burst_per_s_pending": bestn.rate}
        figures["cpu_ms_per_timer_0_pending"] = cpu_per_timer(r.zero)
        figures["cpu_ms_per_timer_pending"] = cpu_per_timer(r.loaded)
    if r.job is not None:
        positive |= {"job_ticks": r.job.ticked, "enable_rate": r.job.n / r.job.seconds}
        figures["job_ticks_missing"] = r.job.expected - r.job.ticked
        figures["worker_mb_per_1000"] = per_thousand(r.job.steps[0], r.job.settled)
    return Verdicts(
        must_be_zero={
            "burst_undelivered": sum(b.n - b.handled for b in r.zero + r.loaded),
            "pending_not_running": r.pending_checked - r.pending_running,
        },
        must_be_positive=positive,
        ratios=ratios,
        figures=figures | {"host_duplicates": r.duplicates},
    )


def main() -> int:
    p = parser(__doc__)
    p.add_argument("--timers", type=int, help="pending one-shot timers (100000, quick 200)")
    p.add_argument("--jobs", type=int, help="enabled job instances (10000, quick 20)")
    p.add_argument("--burst", type=int, help="timers due at one instant (1000, quick 40)")
    p.add_argument("--rounds", type=int, help="bursts on each side, best kept (2, quick 1)")
    p.add_argument("--settle", type=float, help="seconds idle after the enables (10, quick 2)")
    p.add_argument("--tick-seconds", type=int, help="seconds sampled instances tick (5, quick 3)")
    return bench_main(sized(p.parse_args(), QUICK, FULL), run, text, verdicts)


if __name__ == "__main__":
    raise SystemExit(main())
