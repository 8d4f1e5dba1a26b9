"""`bench.jobs`' measures: steady ticking against a native Schedule, a burst due on one second
against bare sleeps; and their report."""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass
from datetime import timedelta
from functools import partial

from temporalio.client import (
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleIntervalSpec,
    ScheduleSpec,
)

from bench._dev_stack import Drain, arrivals_of, drain, late_ms
from bench._jobs_rig import (
    BARE_QUEUE,
    CONCURRENCY,
    SCHEDULE_START_ACTIONS,
    Actions,
    Metrics,
    Rig,
    cron_at,
    describe_metric,
    tick_actions,
)
from bench.harness import percentile, pool, ratio, sleep_until, verdict
from wow_temporal import App
from wow_temporal.ids import job_workflow_id
from wow_temporal.jobs.client import JobClient
from wow_temporal.jobs.core import HostRule, RuleLayer
from wow_temporal.testing.wow_host import Arrival
from wow_temporal.worker import job_worker

THROUGHPUT_TARGET = 0.8
ACTIONS_TARGET = 2.0
LABELS = {"wow": "wow.Job + wow.tick", "native": "native Schedule + 1 activity"}


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


Span = tuple[float, float, dict[str, float]]
"""A measuring window's edges (epoch seconds) and the server's `action` counts over it."""


async def measured(rig: Rig, every: int, seconds: float) -> Span:
    """Wait out a measuring window, reading the `action` counts: from half a period after a
    due time (ticks are between its edges) at least a period from now, lasting a whole number
    of periods."""
    start = math.ceil(time.time() / every) * every + every + every / 2
    end = start + every * max(1, math.ceil(seconds / every))
    await sleep_until(start)
    before = await rig.metrics.snapshot()
    await sleep_until(end)
    return start, end, Metrics.delta(before, await rig.metrics.snapshot())


async def in_window(rig: Rig, run: str, span: Span) -> list[Arrival]:
    """The commands of `run` whose slot was due inside the window."""
    start, end, _ = span
    return [a for a in await arrivals_of(rig.host, run) if start < a.body["due"] / 1000 < end]


async def steady_wow(rig: Rig, n: int, every: int, seconds: float) -> Steady:
    """`n` partitions of the sharded job ticking every `every` seconds."""
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
    actions = await tick_actions(rig.client, ids, long_lived=True)
    return await steady_report(rig, "wow", tag, n, every, span, actions, setup)


async def steady_native(rig: Rig, n: int, every: int, seconds: float) -> Steady:
    """`n` native Schedules (interval spec) each starting a workflow of one activity."""
    tag = rig.tag("native")
    ids = [f"{tag}-{i}" for i in range(n)]
    spec = ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(seconds=every))])

    async def create(schedule_id: str) -> None:
        start = ScheduleActionStartWorkflow(
            "bench.Scheduled", args=[tag], id=schedule_id, task_queue=BARE_QUEUE
        )
        await rig.client.create_schedule(schedule_id, Schedule(action=start, spec=spec))

    began = time.perf_counter()
    await pool((partial(create, i) for i in ids), CONCURRENCY)
    setup = time.perf_counter() - began
    span = await measured(rig, every, seconds)
    await pool((rig.client.get_schedule_handle(i).delete for i in ids), CONCURRENCY)
    await asyncio.sleep(every + 1.0)  # the last runs end
    sample = [a.request_id for a in (await in_window(rig, tag, span))[:100]]
    actions = await tick_actions(rig.client, sample, long_lived=False)
    return await steady_report(rig, "native", tag, n, every, span, actions, setup)


async def steady_report(
    rig: Rig, side: str, run: str, n: int, every: int, span: Span, actions: Actions, setup: float
) -> Steady:
    start, end, metric = span
    late = [late_ms(a) for a in await in_window(rig, run, span)]
    return Steady(
        side=side,
        ticks=len(late),
        expected=n * round((end - start) / every),
        p50=percentile(late, 0.5),
        p99=percentile(late, 0.99),
        max=max(late, default=float("nan")),
        early=sum(1 for x in late if x < 0),
        history=actions,
        metric=metric,
        setup_s=setup,
    )


async def burst_wow(rig: Rig, n: int) -> Drain:
    """`n` TENANT instances of the `burst` job, its host rule making it due on one second."""
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
        result = await drain(rig.host, tag, n, due, n / seconds, rig.cpu, 60 + n / 20)
        await asyncio.sleep(1.0)  # the ticks' last workflow tasks, before the worker stops
    return result


async def burst_bare(rig: Rig, n: int) -> Drain:
    """`n` bare workflows sleeping until one second, then running one activity."""
    tag = rig.tag("woken")
    due = math.ceil(time.time() + 3 + 1.5 * n / (rig.enable_rate or 20.0))

    async def start(i: int) -> None:
        await rig.client.start_workflow(
            "bench.Woken", args=[tag, due * 1000], id=f"{tag}-{i}", task_queue=BARE_QUEUE
        )

    seconds = await pool((partial(start, i) for i in range(n)), CONCURRENCY)
    return await drain(rig.host, tag, n, due, n / seconds, rig.cpu, 60 + n / 20)


def cloud_per_tick(s: Steady) -> float:
    """Billable actions per tick by Temporal Cloud's rules: the histories' steady state, the
    heartbeats that reached the server, and a Schedule's own start (native side)."""
    heartbeats = s.metric_per_tick("grpc_RecordActivityTaskHeartbeat")
    schedule = SCHEDULE_START_ACTIONS if s.side == "native" else 0
    return s.history.per_tick + heartbeats + schedule


def print_steady(wow: Steady, native: Steady) -> None:
    print("1. steady ticking (host receive - slot due):")
    for s in (wow, native):
        print(
            f"  {LABELS[s.side]:30} ticks {s.ticks}/{s.expected}  p50 {s.p50:4.0f} ms  "
            f"p99 {s.p99:4.0f} ms  max {s.max:4.0f} ms  early {s.early}  "
            f"(set up in {s.setup_s:.2f}s)"
        )
    print(
        f"  lateness p99 wow/native {ratio(wow.p99, native.p99):.2f} (target <= 1)  "
        f"{verdict(wow.p99 <= native.p99 and wow.early == 0)}"
    )
    print("  billable actions per tick, steady state:")
    for s in (wow, native):
        heartbeats = s.metric_per_tick("grpc_RecordActivityTaskHeartbeat")
        extra = f" + schedule start {SCHEDULE_START_ACTIONS}" if s.side == "native" else ""
        print(
            f"    {s.side:6} {cloud_per_tick(s):.2f} = history {s.history.per_tick:.2f} "
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
        f"{verdict(wow_cost <= ACTIONS_TARGET)}  (the native metric counts the server's own "
        f"scheduler workflow, which Cloud bills as {SCHEDULE_START_ACTIONS} per start instead)"
    )


def print_bursts(bursts: dict[str, list[Drain]]) -> None:
    best = {side: max(bs, key=lambda b: b.rate) for side, bs in bursts.items()}
    print(f"2. {best['wow'].n} instances due on the same second (due -> the host has every one):")
    for side, found in bursts.items():
        label = "wow TENANT instances" if side == "wow" else "bare sleep + 1 activity"
        handed = "enabled" if side == "wow" else "started"
        for i, b in enumerate(found):
            cpu = ", ".join(f"{k} {v:.1f}" for k, v in b.cpu.items())
            print(
                f"  round {i + 1} {label:26} {b.handled}/{b.n} in {b.seconds:5.2f}s = "
                f"{b.rate:5.0f}/s  p50 {b.p50_ms:5.0f} ms  ({handed} at {b.handover_rate:.0f}/s"
                f"{', HANDOVER OVERRAN DUE' if b.overran else ''}); "
                f"CPU s from due to the last: {cpu}"
            )
    throughput = ratio(best["wow"].rate, best["bare"].rate)
    print(
        f"  throughput wow {best['wow'].rate:.0f}/s  bare {best['bare'].rate:.0f}/s  "
        f"ratio {throughput:.2f} (target >= {THROUGHPUT_TARGET})  "
        f"{verdict(throughput >= THROUGHPUT_TARGET)}  (best round each)"
    )
