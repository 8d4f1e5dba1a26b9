"""Benchmark: the capacity of one dev server and one worker: many pending one-shot timers, a
burst drained beside them, and many enabled job instances.

One fresh headless dev server (EmbeddedTemporal, its Prometheus `/metrics` on), the fake Wow
host in its own process (`bench.harness.HostProcess`: `Ok` once per request id, each arrival
recorded; the due time is in the command's body) and the real worker, `wow-temporal worker
--app bench.capacity:APP` (the timers and the idle job of `bench._jobs_app`, production settings
but its own metrics port). RSS is read from /proc (VmRSS), the worker's workflow cache from its
`/metrics`, the server's Go heap and mutable-state cache from its own. This process hands commits
over with `TimerClient.apply_many` and enables instances with `JobClient.enable`. Measured:

1. A burst: `--burst` one-shot timers due at one instant a few seconds ahead, drained with
   nothing pending: deliveries per second = n / (due -> the host has the last one); the CPU
   each process spent per timer and the server's persistence time per timer, by operation.
2. Pending: `--timers` one-shot timers due in 30 days (so they stay pending), handed over in
   ten steps; at each the ingest rate, both RSS, the server's heap and cached mutable states,
   the database's size (with its WAL).
3. The same burst with those pending, beside 1: the ratio of the two drain rates (best of
   `--rounds` each). Target >= 0.9.
4. Jobs: `--jobs` TENANT instances of a yearly job enabled (50 in flight), in ten steps, as
   in 2; then a few instances rescheduled to tick every second, their ticks counted with their
   lateness, and disabled again. Target: the worker's RSS flat past the SDK's workflow cache
   (1,000 a worker): it grows less than `FLAT_MB` per 1,000 instances from twice the cache to
   the last enable.

Run: `.venv/bin/python -m bench.capacity [--quick] [--timers 100000] [--jobs 10000]
[--burst 1000] [--rounds 2] [--settle 10] [--tick-seconds 5] [--json] [--keep]`. Exits 0;
targets are printed as PASS/MISS, never asserted (the machine is small and noisy). The run's
length is mostly the ingest of the pending timers and the enables (tens to a couple of hundred
a second on two cores).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import sys
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import httpx
from temporalio.client import Client

from bench._jobs_app import arrivals_of, idle_app, late_ms
from bench.harness import (
    HostProcess,
    Proc,
    Verdicts,
    bench_main,
    commit,
    cpu_seconds,
    iso_ms,
    parser,
    percentile,
    pool,
    ratio,
    rss_mb,
    schedule_set,
    scratch,
    sized,
    still_running,
    verdict,
    worker_env,
)
from wow_temporal.dev.ports import free_port
from wow_temporal.dev.server import EmbeddedTemporal
from wow_temporal.ids import timer_workflow_id
from wow_temporal.jobs.client import JobClient
from wow_temporal.model import Commit
from wow_temporal.timers.client import TimerClient

CONTEXT = "bench-capacity"
JOB = "idle"

CACHE = 1000
"""The SDK's `max_cached_workflows` default, which the worker keeps (one cache per worker)."""
BATCH = 200  # commits per `apply_many`, as a relay hands them over
ENABLE_CONCURRENCY = 50
BURST_TARGET = 0.9
FLAT_MB = 2.0
"""Worker RSS growth per 1,000 instances past the cache that still counts as flat."""
TICK_SAMPLE = 5
TICK_GRACE = 3.0
"""Seconds after the ticking window before the sampled instances are disabled."""
PENDING_DAYS = 30
PENDING_CHECKED = 100
"""Pending timers described by id at the end of the bursts: each must still be running."""
QUICK = {"timers": 200, "jobs": 20, "burst": 40, "rounds": 1, "settle": 2.0, "tick_seconds": 3}
FULL = {
    "timers": 100_000,
    "jobs": 10_000,
    "burst": 1000,
    "rounds": 2,
    "settle": 10.0,
    "tick_seconds": 5,
}


APP = idle_app(CONTEXT)
"""What `wow-temporal worker --app bench.capacity:APP` runs beside the timers."""


class ServerMetrics:
    """The dev server's Prometheus `/metrics` (`--metrics-port`): what a drain costs it."""

    WANTED = frozenset(
        {
            "persistence_latency_sum",
            "visibility_persistence_latency_sum",
            "cache_miss",
            "cache_usage",
            "memory_heap",
        }
    )

    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}/metrics"
        self.http = httpx.AsyncClient(timeout=10)

    async def scrape(self) -> dict[tuple[str, str], float]:
        """(metric, its operation or cache type) -> the sum over the other labels (the max
        for `memory_heap`: one Go heap, reported by each service); empty if unreachable."""
        found: dict[tuple[str, str], float] = {}
        with contextlib.suppress(httpx.HTTPError):
            text = (await self.http.get(self.url)).text
            for line in text.splitlines():
                head, _, value = line.rpartition(" ")
                name, _, labels = head.partition("{")
                if name not in self.WANTED:
                    continue
                label = "cache_type" if name.startswith("cache_") else "operation"
                tag = labels.split(f'{label}="', 1)[-1].split('"', 1)[0] if label in labels else ""
                key = (name, tag)
                if name == "memory_heap":
                    found[key] = max(found.get(key, 0.0), float(value))
                else:
                    found[key] = found.get(key, 0.0) + float(value)
        return found

    async def close(self) -> None:
        await self.http.aclose()


@dataclass
class ServerCost:
    """What the server spent on a drain, per timer delivered: persistence time (seconds, by
    operation), visibility persistence time, mutable-state cache misses."""

    persistence: dict[str, float]
    visibility: float
    misses: float

    @classmethod
    def of(
        cls, before: dict[tuple[str, str], float], after: dict[tuple[str, str], float], n: int
    ) -> ServerCost:
        def moved(name: str) -> dict[str, float]:
            return {
                tag: (value - before.get((metric, tag), 0.0)) / max(n, 1)
                for (metric, tag), value in after.items()
                if metric == name
            }

        return cls(
            persistence=moved("persistence_latency_sum"),
            visibility=sum(moved("visibility_persistence_latency_sum").values()),
            misses=moved("cache_miss").get("mutablestate", 0.0),
        )

    def describe(self) -> str:
        top = sorted(self.persistence.items(), key=lambda kv: -kv[1])[:3]
        return (
            f"persistence {1000 * sum(self.persistence.values()):.1f} ms ("
            + ", ".join(f"{op} {1000 * v:.1f}" for op, v in top)
            + f"), visibility {1000 * self.visibility:.1f} ms, mutable-state cache misses "
            f"{self.misses:.2f}"
        )


# -- commits and measures ----------------------------------------------------------------------


def timer(aggregate_id: str, due_ms: int, run: str) -> Commit:
    """A one-commit `wow.ScheduleSet` of `aggregate_id`: a one-shot timer due at `due_ms` whose
    command's body names `run`."""
    rule = {"at": iso_ms(due_ms)}
    body = {"run": run, "due": due_ms}
    return Commit.parse(commit(aggregate_id, schedule_set(rule, "grace", "bench.Tick", body)))


@dataclass
class Sample:
    """One step: how many there were, the rate of the step, both RSS, the database."""

    count: int
    rate: float
    worker_mb: float
    server_mb: float
    db_mb: float
    cached: float
    worker_peak_mb: float = float("nan")
    """The worker's highest RSS since the sample before (read every half second)."""
    heap_mb: float = float("nan")
    """The server's Go heap."""
    states: float = float("nan")
    """Mutable states in the server's cache."""
    server_ms: float = float("nan")
    """Server CPU ms per item of the step (a commit handed over, an instance enabled)."""
    bench_ms: float = float("nan")
    """This process's CPU ms per item of the step (the client's side)."""


@dataclass
class Burst:
    pending: int
    n: int
    handled: int
    seconds: float
    """Due -> the host has the last command."""
    p50_ms: float
    ingest_rate: float
    overran: bool
    cpu: dict[str, float] = field(default_factory=dict)
    """CPU seconds each process spent from the due time to the last delivery."""
    cost: ServerCost | None = None

    @property
    def rate(self) -> float:
        return self.handled / max(self.seconds, 1e-3)


@dataclass
class Jobs:
    n: int
    seconds: float
    steps: list[Sample]
    settled: Sample
    settle: float
    tick_seconds: int
    ticked: int
    expected: int
    late: list[float]
    sampled: list[str]


@dataclass
class Rig:
    client: Client
    timers: TimerClient
    host: HostProcess
    worker: Proc
    worker_metrics: str
    """The worker's `/metrics` URL."""
    server: EmbeddedTemporal
    metrics: ServerMetrics
    ingest_rate: float = 0.0
    seq: int = 0
    began: float = field(default_factory=time.perf_counter)
    peak_mb: float = 0.0
    """The worker's highest RSS since the last sample (`watch`)."""
    last: tuple[int, dict[str, float]] = (0, {})
    """The count and the CPU seconds at the last sample."""

    async def watch(self) -> None:
        """Keep `peak_mb` to the worker's RSS, every half second, until cancelled."""
        while True:
            self.peak_mb = max(self.peak_mb, rss_mb(self.worker.pid))
            await asyncio.sleep(0.5)

    def tag(self, prefix: str) -> str:
        self.seq += 1
        return f"{prefix}{self.seq}"

    def say(self, text: str) -> None:
        print(f"  [{time.perf_counter() - self.began:6.1f}s] {text}", file=sys.stderr, flush=True)

    def cpu(self) -> dict[str, float]:
        return {
            "server": cpu_seconds(self.server.pid),
            "worker": cpu_seconds(self.worker.pid),
            "host": cpu_seconds(self.host.proc.pid),
            "bench": cpu_seconds(None),
        }

    def db_mb(self) -> float:
        path = self.server.db_path
        sizes = [p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists()]
        return sum(sizes) / 1e6

    async def cached(self) -> float:
        """The worker's workflow cache (`temporal_sticky_cache_size`, every task queue)."""
        found = 0.0
        with contextlib.suppress(httpx.HTTPError):
            text = (await self.metrics.http.get(self.worker_metrics)).text
            for line in text.splitlines():
                if line.startswith("temporal_sticky_cache_size{"):
                    found += float(line.rpartition(" ")[2])
        return found

    async def sample(self, count: int, rate: float, into: list[Sample]) -> Sample:
        """Both RSS and the database now (appended to `into` at once), then the cache."""
        s = Sample(count, rate, rss_mb(self.worker.pid), rss_mb(self.server.pid), self.db_mb(), 0.0)
        s.worker_peak_mb, self.peak_mb = max(self.peak_mb, s.worker_mb), s.worker_mb
        cpu, (count_before, cpu_before) = self.cpu(), self.last
        if count > count_before and cpu_before:
            s.server_ms = 1000 * (cpu["server"] - cpu_before["server"]) / (count - count_before)
            s.bench_ms = 1000 * (cpu["bench"] - cpu_before["bench"]) / (count - count_before)
        self.last = (count, cpu)
        into.append(s)
        s.cached = await self.cached()
        scraped = await self.metrics.scrape()
        s.heap_mb = scraped.get(("memory_heap", ""), float("nan")) / 1e6
        s.states = scraped.get(("cache_usage", "mutablestate"), float("nan"))
        return s

    async def ingest(self, commits: list[Commit]) -> float:
        """Hand `commits` over in batches of `BATCH`; seconds taken."""
        began = time.perf_counter()
        for i in range(0, len(commits), BATCH):
            await self.timers.apply_many(commits[i : i + BATCH])
        return time.perf_counter() - began


async def burst(rig: Rig, n: int, pending: int) -> Burst:
    """`n` timers due at one instant a few seconds ahead: due -> the host has the last one."""
    tag = rig.tag("burst")
    # Twice the time the last ingest rate needs: on a shared machine it halves at times.
    lead = 3.0 + 2.0 * n / max(rig.ingest_rate, 10.0)
    due = int((time.time() + lead) * 1000)
    commits = [timer(f"{tag}-{i}", due, tag) for i in range(n)]
    seconds = await rig.ingest(commits)
    overran = time.time() * 1000 > due
    await asyncio.sleep(max(0.0, due / 1000 - time.time()))
    before, scraped = rig.cpu(), await rig.metrics.scrape()
    arrivals = await arrivals_of(rig.host, tag, n, within=60 + n / 10)
    after, cost = rig.cpu(), ServerCost.of(scraped, await rig.metrics.scrape(), n)
    if len(arrivals) < n:
        print(f"  ! {tag}: only {len(arrivals)}/{n} delivered", file=sys.stderr)
    late = [late_ms(a) for a in arrivals]
    await asyncio.sleep(1.0)  # the last workflow tasks, before the next measure
    return Burst(
        pending=pending,
        n=n,
        handled=len(late),
        seconds=max(late, default=float("inf")) / 1000,
        p50_ms=percentile(late, 0.5),
        ingest_rate=n / seconds,
        overran=overran,
        cpu={k: after[k] - before[k] for k in after},
        cost=cost,
    )


def print_burst(rig: Rig, b: Burst, round_: int) -> None:
    rig.say(
        f"burst round {round_} with {b.pending} pending: {b.handled}/{b.n} in {b.seconds:.2f}s"
        f" = {b.rate:.0f}/s  p50 {b.p50_ms:.0f} ms after due  (ingested at "
        f"{b.ingest_rate:.0f}/s{', INGEST OVERRAN DUE' if b.overran else ''}); CPU s during "
        "the drain: " + ", ".join(f"{k} {v:.1f}" for k, v in b.cpu.items())
    )
    if b.cost is not None:
        rig.say(f"  server per timer: {b.cost.describe()}")


async def bursts(rig: Rig, n: int, pending: int, rounds: int) -> list[Burst]:
    found = []
    for r in range(rounds):
        found.append(await burst(rig, n, pending))
        print_burst(rig, found[-1], r + 1)
    return found


def spread(total: int, k: int) -> list[int]:
    """Up to `k` indexes of `range(total)`, spread evenly from the first to the last."""
    k = min(k, total)
    return sorted({(i * (total - 1)) // max(k - 1, 1) for i in range(k)})


def pending_ids(total: int) -> list[str]:
    """The workflow ids of up to `PENDING_CHECKED` of the `total` pending timers."""
    of = [timer(f"pending-{i}", 0, "pending").aggregate for i in spread(total, PENDING_CHECKED)]
    return [timer_workflow_id(aggregate, "grace") for aggregate in of]


async def pending_timers(rig: Rig, total: int) -> list[Sample]:
    """Hand over `total` timers due in `PENDING_DAYS` days, in ten steps; a sample each."""
    far = int((time.time() + PENDING_DAYS * 86400) * 1000)
    step = max(1, math.ceil(total / 10))
    samples: list[Sample] = []
    await rig.sample(0, 0.0, samples)
    done = 0
    while done < total:
        size = min(step, total - done)
        commits = [timer(f"pending-{i}", far, "pending") for i in range(done, done + size)]
        seconds = await rig.ingest(commits)
        done += size
        rig.ingest_rate = size / seconds
        s = await rig.sample(done, rig.ingest_rate, samples)
        rig.say(
            f"{done} pending: {s.rate:.0f}/s, worker {s.worker_mb:.0f} MB, server "
            f"{s.server_mb:.0f} MB, db {s.db_mb:.0f} MB"
        )
    return samples


async def jobs(rig: Rig, n: int, settle: float, tick_seconds: int) -> Jobs:
    """Enable `n` TENANT instances in ten steps (a sample each), settle, then reschedule a few
    to tick every second for `tick_seconds`, count their ticks, and disable them again;
    `settle`: seconds idle before the settled sample."""
    client = JobClient(rig.client, APP)
    step = max(1, math.ceil(n / 10))
    steps: list[Sample] = []
    await rig.sample(0, 0.0, steps)
    enabled = 0
    last = time.perf_counter()

    async def counted() -> None:
        nonlocal enabled, last
        enabled += 1
        if enabled % step == 0 or enabled == n:
            count, now = enabled, time.perf_counter()
            rate = (count - steps[-1].count) / (now - last)
            last = now
            s = await rig.sample(count, rate, steps)
            rig.say(
                f"{count} instances: {s.rate:.0f}/s, worker {s.worker_mb:.0f} MB "
                f"(cache {s.cached:.0f}), server {s.server_mb:.0f} MB"
            )

    enable = partial(client.enable, CONTEXT, JOB)
    seconds = await pool(
        (partial(enable, tenant=f"t{i}") for i in range(n)), ENABLE_CONCURRENCY, counted
    )
    await asyncio.sleep(settle)
    settled = await rig.sample(n, n / seconds, [])
    # A few instances across the range (evicted from the worker's cache by now) tick.
    sampled = [f"t{i}" for i in spread(n, TICK_SAMPLE)]
    rule = {"expression": "* * * * * *"}
    await asyncio.gather(*(client.reschedule(CONTEXT, JOB, rule, tenant=t) for t in sampled))
    start = math.ceil(time.time()) + 1.0
    end = start + tick_seconds
    # A disable stops a tick in flight: give the window's last ticks time to arrive first
    # (the ticks due after the window are not counted).
    await asyncio.sleep(end - time.time() + TICK_GRACE)
    await asyncio.gather(*(client.disable(CONTEXT, JOB, tenant=t) for t in sampled))
    ticks = [a for a in await arrivals_of(rig.host, CONTEXT) if start <= a.body["due"] / 1000 < end]
    return Jobs(
        n=n,
        seconds=seconds,
        steps=steps,
        settled=settled,
        settle=settle,
        tick_seconds=tick_seconds,
        ticked=len(ticks),
        expected=len(sampled) * tick_seconds,
        late=[late_ms(a) for a in ticks],
        sampled=sampled,
    )


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
    with scratch(args, "capacity") as tmp:
        metrics_port = free_port("127.0.0.1")
        server = EmbeddedTemporal(
            tmp / "temporal", headless=True, extra_args=["--metrics-port", str(metrics_port)]
        )
        metrics = ServerMetrics(metrics_port)
        host = HostProcess(tmp / "host.log")
        worker: Proc | None = None
        watching: asyncio.Task[None] | None = None
        try:
            began = time.perf_counter()
            await asyncio.gather(server.start(), host.start())
            worker_port = free_port("127.0.0.1")
            env = worker_env(
                server.address,
                server.namespace,
                host.url,
                WOW_WORKER_METRICS_PORT=str(worker_port),
                WOW_WORKER_SHUTDOWN_TIMEOUT="2s",
            )
            worker = Proc.worker(tmp / "worker.log", env, "--app", "bench.capacity:APP")
            await worker.start()
            client = await server.connect()
            rig = Rig(
                client,
                TimerClient(client),
                host,
                worker,
                f"http://127.0.0.1:{worker_port}/metrics",
                server,
                metrics,
                began=began,
            )
            watching = asyncio.create_task(rig.watch())
            report = await measure(rig, args)
            if not worker.running:
                raise RuntimeError("the worker exited")
            return report
        except BaseException:
            if worker is not None:
                tail = worker.log.read_text(errors="replace")[-3000:]
                print(f"worker log tail:\n{tail}", file=sys.stderr)
            raise
        finally:
            if watching is not None:
                watching.cancel()
            if worker is not None:
                await worker.stop(grace=15)
            await asyncio.gather(server.stop(), host.stop(), metrics.close())


async def measure(rig: Rig, args: argparse.Namespace) -> Report:
    """A warm-up burst (unmeasured: imports, connections, caches; a first ingest rate), the
    bursts with nothing pending, the pending timers, the bursts beside them, the jobs."""
    timers, n_jobs, n, rounds = args.timers, args.jobs, args.burst, args.rounds
    rig.say(
        f"dev server pid {rig.server.pid}, worker pid {rig.worker.pid} ready, host pid "
        f"{rig.host.proc.pid}; {timers} timers, {n_jobs} jobs, bursts of {n} x {rounds}"
    )
    warm = await burst(rig, max(10, min(n // 5, 50)), 0)
    rig.ingest_rate = warm.ingest_rate
    zero = await bursts(rig, n, 0, rounds)
    pending = await pending_timers(rig, timers)
    loaded = await bursts(rig, n, timers, rounds) if timers else []
    checked = pending_ids(timers)
    running = len(await still_running(rig.client, checked))
    job = await jobs(rig, n_jobs, args.settle, args.tick_seconds) if n_jobs else None
    duplicates = await rig.host.duplicates()
    elapsed = time.perf_counter() - rig.began
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
