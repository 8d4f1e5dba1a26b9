"""`bench.capacity`'s rig and measures: one dev server and one worker, what a drain costs the
server (its `/metrics`), pending timers, a burst beside them, job instances."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial

import httpx
from temporalio.client import Client

from bench._dev_stack import Drain, arrivals_of, cpu_of, drain, late_ms, say
from bench._jobs_app import idle_app
from bench.harness import HostProcess, Proc, commit, iso_ms, pool, rss_mb, schedule_set
from bench.harness.prometheus import label, samples, scrape, total
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
TICK_SAMPLE = 5
TICK_GRACE = 3.0
"""Seconds after the ticking window before the sampled instances are disabled."""
PENDING_DAYS = 30
PENDING_CHECKED = 100
"""Pending timers described by id at the end of the bursts: each must still be running."""

APP = idle_app(CONTEXT)
"""What `wow-temporal worker --app bench._capacity_rig:APP` runs beside the timers."""

Scraped = Mapping[tuple[str, str], float]
"""(metric, its operation or cache type) -> the sum over the other labels."""
WANTED = ("persistence_latency_sum", "visibility_persistence_latency_sum", "cache_miss")


def server_metrics(text: str) -> dict[tuple[str, str], float]:
    """What a drain costs the server and what it holds, from its `/metrics`: `WANTED`,
    `cache_usage` and `memory_heap` (the max: one Go heap, reported by each service)."""
    found: dict[tuple[str, str], float] = {}
    for name, labels, value in samples(text):
        if name in WANTED or name == "cache_usage":
            key = (name, label(labels, "cache_type" if name.startswith("cache_") else "operation"))
            found[key] = found.get(key, 0.0) + value
        elif name == "memory_heap":
            found[(name, "")] = max(found.get((name, ""), 0.0), value)
    return found


@dataclass
class ServerCost:
    """What the server spent on a drain, per timer delivered: persistence time (seconds, by
    operation), visibility persistence time, mutable-state cache misses."""

    persistence: dict[str, float]
    visibility: float
    misses: float

    @classmethod
    def of(cls, before: Scraped, after: Scraped, n: int) -> ServerCost:
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
    cached: float = float("nan")
    """The worker's workflow cache (`temporal_sticky_cache_size`, every task queue)."""
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
class Burst(Drain):
    pending: int = 0
    cost: ServerCost | None = None


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
    server_metrics: str
    """The server's `/metrics` URL."""
    http: httpx.AsyncClient = field(default_factory=lambda: httpx.AsyncClient(timeout=10))
    ingest_rate: float = 0.0
    seq: int = 0
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

    def cpu(self) -> dict[str, float]:
        return cpu_of(
            server=self.server.pid, worker=self.worker.pid, host=self.host.proc.pid, bench=None
        )

    async def scrape(self) -> dict[tuple[str, str], float]:
        return server_metrics(await scrape(self.http, self.server_metrics))

    def db_mb(self) -> float:
        path = self.server.db_path
        wal = path.with_name(f"{path.name}-wal")
        return sum(p.stat().st_size for p in (path, wal) if p.exists()) / 1e6

    async def sample(self, count: int, rate: float, into: list[Sample], what: str = "") -> Sample:
        """Both RSS and the database now (appended to `into` at once), then the caches; said
        on stderr as `count` `what`."""
        s = Sample(count, rate, rss_mb(self.worker.pid), rss_mb(self.server.pid), self.db_mb())
        s.worker_peak_mb, self.peak_mb = max(self.peak_mb, s.worker_mb), s.worker_mb
        cpu, (count_before, cpu_before) = self.cpu(), self.last
        if count > count_before and cpu_before:
            s.server_ms = 1000 * (cpu["server"] - cpu_before["server"]) / (count - count_before)
            s.bench_ms = 1000 * (cpu["bench"] - cpu_before["bench"]) / (count - count_before)
        self.last = (count, cpu)
        into.append(s)
        s.cached = total(await scrape(self.http, self.worker_metrics), "temporal_sticky_cache_size")
        scraped = await self.scrape()
        s.heap_mb = scraped.get(("memory_heap", ""), float("nan")) / 1e6
        s.states = scraped.get(("cache_usage", "mutablestate"), float("nan"))
        say(
            f"{count} {what}: {s.rate:.0f}/s, worker {s.worker_mb:.0f} MB (cache {s.cached:.0f}),"
            f" server {s.server_mb:.0f} MB, db {s.db_mb:.0f} MB"
        )
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
    due = int((time.time() + 3.0 + 2.0 * n / max(rig.ingest_rate, 10.0)) * 1000)
    seconds = await rig.ingest([timer(f"{tag}-{i}", due, tag) for i in range(n)])
    scraped: list[Scraped] = []

    async def usage() -> dict[str, float]:  # at the due time and at the last delivery
        cpu = rig.cpu()
        scraped.append(await rig.scrape())
        return cpu

    found = await drain(rig.host, tag, n, due / 1000, n / seconds, usage, 60 + n / 10)
    await asyncio.sleep(1.0)  # the last workflow tasks, before the next measure
    return Burst(**vars(found), pending=pending, cost=ServerCost.of(scraped[0], scraped[1], n))


async def bursts(rig: Rig, n: int, pending: int, rounds: int) -> list[Burst]:
    found = []
    for r in range(rounds):
        b = await burst(rig, n, pending)
        found.append(b)
        say(f"  burst round {r + 1} with {pending} pending: {b.handled}/{n} at {b.rate:.0f}/s")
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
        await rig.sample(done, rig.ingest_rate, samples, "pending")
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
            await rig.sample(count, rate, steps, "instances")

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
