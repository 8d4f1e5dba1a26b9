"""`bench.jobs`' measures: steady ticking against a native Schedule, a burst due on one second
against bare sleeps, a worker's memory with many sleeping instances; and their report."""

from __future__ import annotations

import asyncio
import gc
import math
import sys
import time
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial

from temporalio.client import (
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleIntervalSpec,
    ScheduleSpec,
)

from bench._jobs_app import (
    arrivals_of,
    late_ms,
)
from bench._jobs_rig import (
    ACTIONS_TARGET,
    BARE_QUEUE,
    CACHE,
    CONCURRENCY,
    SCHEDULE_START_ACTIONS,
    THROUGHPUT_TARGET,
    Actions,
    Metrics,
    Rig,
    cron_at,
    describe_metric,
    job_actions,
    run_actions,
)
from bench.harness import (
    percentile,
    pool,
    ratio,
    rss_mb,
    sleep_until,
    verdict,
)
from wow_temporal import App
from wow_temporal.ids import job_workflow_id
from wow_temporal.jobs.client import JobClient
from wow_temporal.jobs.core import HostRule, RuleLayer
from wow_temporal.testing.wow_host import Arrival
from wow_temporal.worker import job_worker

# -- 1. steady ticking ------------------------------------------------------------------------


@dataclass
class Steady:
    side: str
    ticks: int
    expected: int
    p50: float
    p99: float
    max: float
    early: int
    history: Actions
    metric: dict[str, float]
    setup_s: float

    def metric_per_tick(self, kind: str) -> float:
        return self.metric.get(kind, 0.0) / max(self.ticks, 1)


def window(every: int, seconds: float, ready: float) -> tuple[float, float]:
    """A measuring window from half a period after a due time (ticks are between its edges)
    at least a period after `ready`, lasting a whole number of periods."""
    start = math.ceil(ready / every) * every + every + every / 2
    return start, start + every * max(1, math.ceil(seconds / every))


async def steady_wow(rig: Rig, n: int, every: int, seconds: float) -> Steady:
    tag = rig.tag("sys")
    app = App(tag, sagas=[rig.saga])
    job = f"every-{every}s"
    rules = {job: HostRule(partitions=n)}
    jobs = JobClient(rig.client, app, host_rules=rules)
    async with job_worker(rig.client, app, rig.sender, host=rules):
        began = time.perf_counter()
        await pool((partial(jobs.enable, tag, job, partition=p) for p in range(n)), CONCURRENCY)
        setup = time.perf_counter() - began
        span = await measured(rig, every, seconds)
        await pool((partial(jobs.disable, tag, job, partition=p) for p in range(n)), CONCURRENCY)
    ids = [job_workflow_id(tag, job, partition=p) for p in range(n)]
    actions = await job_actions(rig.client, ids)
    return await steady_report(rig, "wow", tag, n, every, span, actions, setup)


async def steady_native(rig: Rig, n: int, every: int, seconds: float) -> Steady:
    tag = rig.tag("native")
    ids = [f"{tag}-{i}" for i in range(n)]

    async def create(schedule_id: str) -> None:
        await rig.client.create_schedule(
            schedule_id,
            Schedule(
                action=ScheduleActionStartWorkflow(
                    "bench.Scheduled", args=[tag], id=schedule_id, task_queue=BARE_QUEUE
                ),
                spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(seconds=every))]),
            ),
        )

    began = time.perf_counter()
    await pool((partial(create, i) for i in ids), CONCURRENCY)
    setup = time.perf_counter() - began
    span = await measured(rig, every, seconds)
    await pool((rig.client.get_schedule_handle(i).delete for i in ids), CONCURRENCY)
    await asyncio.sleep(every + 1.0)  # the last runs end
    sample = [a.request_id for a in (await in_window(rig, tag, span))[:100]]
    actions = await run_actions(rig.client, sample)
    return await steady_report(rig, "native", tag, n, every, span, actions, setup)


Span = tuple[float, float, dict[str, float]]
"""A measuring window's edges (epoch seconds) and the server's `action` counts over it."""


async def measured(rig: Rig, every: int, seconds: float) -> Span:
    """Wait out a measuring window (`window`, from now), reading the `action` counts."""
    start, end = window(every, seconds, time.time())
    await sleep_until(start)
    before = await rig.metrics.snapshot()
    await sleep_until(end)
    return start, end, Metrics.delta(before, await rig.metrics.snapshot())


async def in_window(rig: Rig, run: str, span: Span) -> list[Arrival]:
    """The commands of `run` whose slot was due inside the window."""
    start, end, _ = span
    return [a for a in await arrivals_of(rig.host, run) if start < a.body["due"] / 1000 < end]


async def steady_report(
    rig: Rig, side: str, run: str, n: int, every: int, span: Span, actions: Actions, setup: float
) -> Steady:
    start, end, metric = span
    arrivals = await in_window(rig, run, span)
    late = [late_ms(a) for a in arrivals]
    return Steady(
        side=side,
        ticks=len(arrivals),
        expected=n * round((end - start) / every),
        p50=percentile(late, 0.5),
        p99=percentile(late, 0.99),
        max=max(late, default=float("nan")),
        early=sum(1 for x in late if x < 0),
        history=actions,
        metric=metric,
        setup_s=setup,
    )


# -- 2. a burst due on one second -------------------------------------------------------------


@dataclass
class Burst:
    side: str
    n: int
    handled: int
    seconds: float
    """Due -> the host has the last command."""
    p50: float
    handover_rate: float
    """Enables (wow) or starts (bare) per second, ahead of the due time."""
    overran: bool
    """Handing over ended after the due time (the measure is off)."""
    cpu: dict[str, float] = field(default_factory=dict)
    """CPU seconds each process spent from the due time to the last command."""

    @property
    def rate(self) -> float:
        return self.handled / max(self.seconds, 1e-3)


async def burst_wow(rig: Rig, n: int) -> Burst:
    tag = rig.tag("burst")
    app = App(tag, sagas=[rig.saga])
    rules: dict[str, HostRule] = {}
    jobs = JobClient(rig.client, app, host_rules=rules)
    async with job_worker(rig.client, app, rig.sender, host=rules):
        # A pilot sizes the lead time: a tenth of the burst's instances of the yearly job.
        pilot = max(10, n // 10)
        rate = pilot / await pool(
            (partial(jobs.enable, tag, "idle", tenant=f"t{i}") for i in range(pilot)), CONCURRENCY
        )
        rig.enable_rate = min(rig.enable_rate, rate) if rig.enable_rate else rate
        due = math.ceil(time.time() + 3 + 1.5 * n / rate)
        rules["burst"] = HostRule(layer=RuleLayer(expression=cron_at(due)))
        jobs = JobClient(rig.client, app, host_rules=rules)  # (it copies an empty mapping)
        seconds = await pool(
            (partial(jobs.enable, tag, "burst", tenant=f"t{i}") for i in range(n)), CONCURRENCY
        )
        overran = time.time() > due
        result = await burst_report(rig, "wow", tag, n, due, n / seconds, overran)
        await asyncio.sleep(1.0)  # the ticks' last workflow tasks, before the worker stops
    return result


async def burst_bare(rig: Rig, n: int) -> Burst:
    tag = rig.tag("woken")
    due = math.ceil(time.time() + 3 + 1.5 * n / (rig.enable_rate or 20.0))

    async def start(i: int) -> None:
        await rig.client.start_workflow(
            "bench.Woken", args=[tag, due * 1000], id=f"{tag}-{i}", task_queue=BARE_QUEUE
        )

    seconds = await pool((partial(start, i) for i in range(n)), CONCURRENCY)
    overran = time.time() > due
    return await burst_report(rig, "bare", tag, n, due, n / seconds, overran)


async def burst_report(
    rig: Rig, side: str, run: str, n: int, due: float, rate: float, overran: bool
) -> Burst:
    await sleep_until(due)
    before = rig.cpu()
    arrivals = await arrivals_of(rig.host, run, n, within=60 + n / 20)
    after = rig.cpu()
    late = [late_ms(a) for a in arrivals]
    return Burst(
        side=side,
        n=n,
        handled=len(late),
        seconds=max(late, default=float("inf")) / 1000,
        p50=percentile(late, 0.5),
        handover_rate=rate,
        overran=overran,
        cpu={k: after[k] - before[k] for k in after},
    )


# -- 3. worker memory with many sleeping instances --------------------------------------------


@dataclass
class Memory:
    n: int
    before_mb: float
    after_mb: float
    settled_mb: float
    """After the enables, gc, a few seconds idle (the worker still running)."""
    stopped_mb: float
    """After the worker stopped."""
    curve: list[tuple[int, float]]
    """(instances enabled, RSS MB) every 1,000."""
    enable_rate: float
    cpu: dict[str, float] = field(default_factory=dict)
    """CPU seconds each process spent enabling."""

    @property
    def per_thousand(self) -> float:
        return (self.settled_mb - self.before_mb) / max(self.n / 1000, 1e-9)

    @property
    def beyond_cache(self) -> tuple[int, float] | None:
        """(from, MB per 1,000) past the worker's workflow cache: the growth from the first
        sample at or above `CACHE` instances to the settled RSS."""
        past = [(k, v) for k, v in self.curve if k >= CACHE]
        if not past or past[0][0] >= self.n:
            return None
        first, rss = past[0]
        return first, (self.settled_mb - rss) / ((self.n - first) / 1000)


async def memory(rig: Rig, n: int) -> Memory:
    tag = rig.tag("idle")
    app = App(tag, sagas=[rig.saga])
    jobs = JobClient(rig.client, app)
    curve: list[tuple[int, float]] = []
    enabled = 0
    step = 1000 if n >= 2000 else max(1, n // 4)

    def count() -> None:
        nonlocal enabled
        enabled += 1
        if enabled % step == 0:
            curve.append((enabled, rss_mb()))

    async with job_worker(rig.client, app, rig.sender):
        gc.collect()
        before = rss_mb()
        cpu_before = rig.cpu()
        seconds = await pool(
            (partial(jobs.enable, tag, "idle", tenant=f"t{i}") for i in range(n)),
            CONCURRENCY,
            done=count,
        )
        after = rss_mb()
        cpu_after = rig.cpu()
        await asyncio.sleep(5)
        gc.collect()
        settled = rss_mb()
    gc.collect()
    stopped = rss_mb()
    cpu = {k: cpu_after[k] - cpu_before[k] for k in cpu_after}
    return Memory(n, before, after, settled, stopped, curve, n / seconds, cpu)


def cloud_per_tick(s: Steady) -> float:
    """Billable actions per tick by Temporal Cloud's rules: the histories' steady state, the
    heartbeats that reached the server, and a Schedule's own start (native side)."""
    heartbeats = s.metric_per_tick("grpc_RecordActivityTaskHeartbeat")
    schedule = SCHEDULE_START_ACTIONS if s.side == "native" else 0
    return s.history.per_tick + heartbeats + schedule


def print_steady(wow: Steady, native: Steady) -> None:
    print("1. steady ticking (host receive - slot due):")
    for s in (wow, native):
        label = "wow.Job + wow.tick" if s.side == "wow" else "native Schedule + 1 activity"
        print(
            f"  {label:30} ticks {s.ticks}/{s.expected}  p50 {s.p50:4.0f} ms  "
            f"p99 {s.p99:4.0f} ms  max {s.max:4.0f} ms  early {s.early}  "
            f"(set up in {s.setup_s:.2f}s)"
        )
    print(
        f"  lateness p99 wow/native {ratio(wow.p99, native.p99):.2f} (target <= 1)  "
        f"{verdict(wow.p99 <= native.p99 and wow.early == 0)}"
    )
    print("  billable actions per tick, steady state:")
    for s in (wow, native):
        label = "wow" if s.side == "wow" else "native"
        heartbeats = s.metric_per_tick("grpc_RecordActivityTaskHeartbeat")
        extra = f" + schedule start {SCHEDULE_START_ACTIONS}" if s.side == "native" else ""
        print(
            f"    {label:6} {cloud_per_tick(s):.2f} = history {s.history.per_tick:.2f} "
            f"({s.history.describe()}) + heartbeats {heartbeats:.2f}{extra}; "
            f"whole life incl. start/enable/disable {s.history.whole_per_tick:.2f} over "
            f"{s.history.ticks} ticks"
        )
        print(
            f"           server `action` metric over the window, per tick: "
            f"{sum(s.metric.values()) / max(s.ticks, 1):.2f} "
            f"({describe_metric(s.metric, s.ticks)})"
        )
    wow_cost, native_cost = cloud_per_tick(wow), cloud_per_tick(native)
    print(
        f"  actions per tick wow {wow_cost:.2f}  native {native_cost:.2f}  ratio "
        f"{ratio(wow_cost, native_cost):.2f}  (target wow <= {ACTIONS_TARGET:.0f})  "
        f"{verdict(wow_cost <= ACTIONS_TARGET)}"
    )
    print(
        "  (the native metric counts the server's own scheduler workflow, which Cloud "
        f"bills as {SCHEDULE_START_ACTIONS} per start instead)"
    )


def best_rounds(bursts: dict[str, list[Burst]]) -> dict[str, Burst]:
    """Each side's fastest round."""
    return {side: max(bs, key=lambda b: b.rate) for side, bs in bursts.items() if bs}


def print_bursts(bursts: dict[str, list[Burst]]) -> None:
    best = best_rounds(bursts)
    n = next(iter(best.values())).n
    print(f"2. {n} instances due on the same second (due -> the host has every command):")
    for side, rounds in bursts.items():
        for i, b in enumerate(rounds):
            label = "wow TENANT instances" if side == "wow" else "bare sleep + 1 activity"
            print(
                f"  round {i + 1} {label:26} {b.handled}/{b.n} in {b.seconds:5.2f}s = "
                f"{b.rate:5.0f}/s  p50 {b.p50:5.0f} ms  "
                f"({'enabled' if side == 'wow' else 'started'} at {b.handover_rate:.0f}/s"
                f"{', HANDOVER OVERRAN DUE' if b.overran else ''})"
            )
            print(
                "          CPU s from due to the last: "
                + ", ".join(f"{k} {v:.1f}" for k, v in b.cpu.items())
            )
    if "wow" in best and "bare" in best:
        throughput = ratio(best["wow"].rate, best["bare"].rate)
        print(
            f"  throughput wow {best['wow'].rate:.0f}/s  bare {best['bare'].rate:.0f}/s  "
            f"ratio {throughput:.2f} (target >= {THROUGHPUT_TARGET})  "
            f"{verdict(throughput >= THROUGHPUT_TARGET)}  (best round each)"
        )


def print_memory(m: Memory) -> None:
    print(f"3. worker memory with {m.n} enabled instances (yearly cron, asleep):")
    print(
        f"  RSS before {m.before_mb:.0f} MB  after enabling {m.after_mb:.0f} MB  settled "
        f"{m.settled_mb:.0f} MB  worker stopped {m.stopped_mb:.0f} MB  -> "
        f"{m.per_thousand:.1f} MB per 1,000 instances"
    )
    print("  RSS while enabling: " + ", ".join(f"{k} {v:.0f}" for k, v in m.curve))
    beyond = m.beyond_cache
    if beyond is not None:
        print(
            f"  past the worker's workflow cache ({CACHE} instances): "
            f"{beyond[1]:.1f} MB per 1,000 from {beyond[0]} to {m.n}; the first {CACHE}: "
            f"{(m.curve[0][1] - m.before_mb) / (m.curve[0][0] / 1000):.1f} MB per 1,000"
        )
    print(
        f"  enabling rate {m.enable_rate:.0f} instances/s ({CONCURRENCY} in flight); CPU s "
        "enabling: " + ", ".join(f"{k} {v:.1f}" for k, v in m.cpu.items())
    )


def say(text: str) -> None:
    """Progress, on stderr (stdout is the report)."""
    print(text, file=sys.stderr, flush=True)
