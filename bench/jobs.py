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
import gc
import math
import sys
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial

import httpx
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleIntervalSpec,
    ScheduleSpec,
)
from temporalio.worker import PollerBehaviorAutoscaling, Worker

from bench._bare_jobs import Scheduled, Woken
from bench._jobs_app import (
    TARGET,
    YEARLY,
    IdleSaga,
    Tick,
    arrivals_of,
    late_ms,
    tick_command,
)
from bench.harness import (
    HostProcess,
    Verdicts,
    bench_main,
    cpu_seconds,
    parser,
    percentile,
    pool,
    ratio,
    rss_mb,
    scratch,
    sized,
    sleep_until,
    verdict,
)
from wow_temporal import App, Command, JobScope, SagaContext, ScheduleTick, on_schedule
from wow_temporal.delivery import CommandSender, DeliveryRequest, ScheduleDetails
from wow_temporal.dev.ports import free_port
from wow_temporal.dev.server import EmbeddedTemporal
from wow_temporal.ids import job_workflow_id
from wow_temporal.jobs.client import JobClient
from wow_temporal.jobs.core import HostRule, RuleLayer
from wow_temporal.model import ScheduledCommand, Scope
from wow_temporal.testing.wow_host import Arrival
from wow_temporal.worker import STICKY_TIMEOUT, job_worker

BARE_QUEUE = "bench-jobs-bare"
CONCURRENCY = 50  # enables / starts in flight
MAX_ACTIVITIES = 200  # job_worker's default, the baselines' worker alike
CACHE = 1000  # the SDK's max_cached_workflows default, which job_worker keeps
THROUGHPUT_TARGET = 0.8
ACTIONS_TARGET = 2.0
QUICK = {"instances": 3, "seconds": 2.0, "tenants": 20, "idle": 100, "rounds": 1}
FULL = {"instances": 20, "seconds": 30.0, "tenants": 1000, "idle": 10_000, "rounds": 2}
SCHEDULE_START_ACTIONS = 2
"""Temporal Cloud bills each execution of a Schedule three actions: two for the "Schedule
Start" and one for the workflow it starts (docs.temporal.io/cloud/actions, Schedules). The
workflow's start is in its history; the two are not, and are added here."""

# -- the jobs and the baselines' activity -----------------------------------------------------


class BenchSaga(IdleSaga):
    """The jobs (the yearly `idle` one is `IdleSaga`'s). The run a command belongs to is its
    app's context (one context per measure)."""

    @on_schedule(name="every-1s", cron="* * * * * *", sharded=True)
    def every_1s(self, tick: ScheduleTick, context: SagaContext) -> list[Command[Tick]]:
        return [tick_command(tick, context)]

    @on_schedule(name="every-2s", cron="*/2 * * * * *", sharded=True)
    def every_2s(self, tick: ScheduleTick, context: SagaContext) -> list[Command[Tick]]:
        return [tick_command(tick, context)]

    @on_schedule(name="burst", cron=YEARLY, scope=JobScope.TENANT)
    def burst(self, tick: ScheduleTick, context: SagaContext) -> list[Command[Tick]]:
        """Yearly in the code; each burst's host override makes it due on one second."""
        return [tick_command(tick, context)]


class BareSend:
    """The baselines' one activity: the same command, through the same sender, to the host."""

    def __init__(self, sender: CommandSender) -> None:
        self.sender = sender

    @activity.defn(name="bench.send")
    async def send(self, request_id: str, run: str, due_ms: int) -> None:
        command = ScheduledCommand(type="bench.Tick", body={"run": run, "due": due_ms})
        outcome = await self.sender.send(
            DeliveryRequest(
                command=command,
                target=TARGET.ref("(0)", "bare"),
                scope=Scope(tenant_id="(0)"),
                request_id=request_id,
                upstream_id=request_id,
                upstream_name="bench.schedule",
                schedule=ScheduleDetails(timer=request_id, key="bench", slot=1, due=due_ms),
            )
        )
        if outcome.status != "delivered":
            raise RuntimeError(f"host answered {outcome.error_code}")


# -- billable actions -------------------------------------------------------------------------

# Temporal Cloud's price list (docs.temporal.io/cloud/actions), event by event: one action each.
BILLED: dict[EventType.ValueType, str] = {
    # a workflow started, by a client, a Schedule, or continue-as-new (the new run's first event)
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED: "start",
    # a timer started, `wait_condition(timeout=…)`'s implicit one included
    EventType.EVENT_TYPE_TIMER_STARTED: "timer",
    # an activity started (its retries: `ActivityTaskStarted.attempt` - 1, below)
    EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED: "activity",
    # each `UpsertWorkflowSearchAttributes` command (attributes given at start are free)
    EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES: "upsert",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED: "signal",
    # an update received by the worker, accepted or rejected by its validator
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED: "update",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_REJECTED: "update",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_OPTIONS_UPDATED: "options",
    # local activities / mutable side effects (one per workflow task, really); none here
    EventType.EVENT_TYPE_MARKER_RECORDED: "marker",
    # a child workflow: two actions (its start and its execution)
    EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED: "child",
}
"""Not counted from histories because they leave no event: queries, activity heartbeats that
reach the server (the SDK sends the first at once, then throttles), the Schedule's own start
(`SCHEDULE_START_ACTIONS`). Heartbeats are read from the server's `action` metric instead.
Workflow tasks, timers firing and activities completing are free."""


def billed(events: Iterable[HistoryEvent]) -> list[tuple[int, str]]:
    """(index, kind) of each billable action in a history (two for a child, retries apart)."""
    found: list[tuple[int, str]] = []
    for index, event in enumerate(events):
        kind = BILLED.get(event.event_type)
        if kind is not None:
            found.extend([(index, kind)] * (2 if kind == "child" else 1))
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            retries = event.activity_task_started_event_attributes.attempt - 1
            found.extend([(index, "retry")] * max(retries, 0))
    return found


async def history(client: Client, workflow_id: str) -> list[HistoryEvent]:
    """Every run of `workflow_id`, oldest first (following continue-as-new back)."""
    runs: list[list[HistoryEvent]] = []
    run_id: str | None = None
    while True:
        handle = client.get_workflow_handle(workflow_id, run_id=run_id)
        events = [e async for e in handle.fetch_history_events()]
        runs.append(events)
        run_id = events[0].workflow_execution_started_event_attributes.continued_execution_run_id
        if not run_id:
            return [e for run in reversed(runs) for e in run]


@dataclass
class Actions:
    ticks: int = 0
    """Ticks (activities that completed) in the sampled histories."""
    steady: int = 0
    """Actions after the first tick's end up to the last's: the cost of `steady_ticks` ticks."""
    steady_ticks: int = 0
    whole: int = 0
    """Every action of the sampled histories (start, enable, disable included)."""
    kinds: dict[str, int] = field(default_factory=dict)
    """Steady-state actions by kind."""

    @property
    def per_tick(self) -> float:
        return self.steady / max(self.steady_ticks, 1)

    @property
    def whole_per_tick(self) -> float:
        return self.whole / max(self.ticks, 1)

    def describe(self) -> str:
        per = {k: v / max(self.steady_ticks, 1) for k, v in sorted(self.kinds.items())}
        return ", ".join(f"{k} {v:.2f}" for k, v in per.items()) or "none"


async def job_actions(client: Client, workflow_ids: list[str]) -> Actions:
    """Steady state of long-lived instances: the actions between one tick's end and the next
    (the timer until the next due time, the tick's activity, anything else), per tick."""
    result = Actions()
    for events in await asyncio.gather(*(history(client, i) for i in workflow_ids)):
        done = [
            i
            for i, e in enumerate(events)
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
        ]
        actions = billed(events)
        result.ticks += len(done)
        result.whole += len(actions)
        if len(done) < 2:
            continue
        result.steady_ticks += len(done) - 1
        for index, kind in actions:
            if done[0] < index <= done[-1]:
                result.steady += 1
                result.kinds[kind] = result.kinds.get(kind, 0) + 1
    return result


async def run_actions(client: Client, workflow_ids: list[str]) -> Actions:
    """One workflow per tick (what a Schedule starts): every action of each, per tick."""
    result = Actions()
    for events in await asyncio.gather(*(history(client, i) for i in workflow_ids)):
        actions = billed(events)
        ticks = sum(
            1 for e in events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
        )
        result.ticks += ticks
        result.steady_ticks += ticks
        result.whole += len(actions)
        result.steady += len(actions)
        for _, kind in actions:
            result.kinds[kind] = result.kinds.get(kind, 0) + 1
    return result


class Metrics:
    """The dev server's `action` counter (what a self-hosted server counts as billable), by
    `action_type`, for the namespace."""

    def __init__(self, port: int, namespace: str) -> None:
        self.url = f"http://127.0.0.1:{port}/metrics"
        self.namespace = namespace
        self.http = httpx.AsyncClient(timeout=10)

    async def snapshot(self) -> dict[str, float]:
        text = (await self.http.get(self.url)).text
        counts: dict[str, float] = {}
        for line in text.splitlines():
            if not line.startswith("action{") or f'namespace="{self.namespace}"' not in line:
                continue
            labels, _, value = line.rpartition(" ")
            kind = labels.split('action_type="', 1)[1].split('"', 1)[0]
            counts[kind] = counts.get(kind, 0.0) + float(value)
        return counts

    @staticmethod
    def delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
        kinds = set(before) | set(after)
        moved = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in kinds}
        return {k: v for k, v in sorted(moved.items()) if v}


def short_kind(kind: str) -> str:
    return kind.removeprefix("command_").removeprefix("grpc_")


def describe_metric(delta: dict[str, float], ticks: int) -> str:
    return ", ".join(f"{short_kind(k)} {v / max(ticks, 1):.2f}" for k, v in delta.items())


# -- helpers ----------------------------------------------------------------------------------


def cron_at(instant: float) -> str:
    """A six-field cron matching the UTC second of `instant` (once a year)."""
    at = datetime.fromtimestamp(instant, UTC)
    return f"{at.second} {at.minute} {at.hour} {at.day} {at.month} *"


@dataclass
class Rig:
    client: Client
    host: HostProcess
    sender: CommandSender
    metrics: Metrics
    saga: BenchSaga
    server_pid: int | None = None
    seq: int = 0
    enable_rate: float = 0.0
    """The slowest enables per second of a burst's pilot (sizes the bare side's lead time:
    a bare start is one RPC, an enable three)."""

    def cpu(self) -> dict[str, float]:
        """CPU seconds so far: the dev server, this process (the workers), the host."""
        return {
            "server": cpu_seconds(self.server_pid),
            "workers": cpu_seconds(None),
            "host": cpu_seconds(self.host.proc.pid),
        }

    def tag(self, prefix: str) -> str:
        self.seq += 1
        return f"{prefix}{self.seq}-{uuid.uuid4().hex[:4]}"


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


# -- main -------------------------------------------------------------------------------------


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


def cloud_per_tick(s: Steady) -> float:
    """Billable actions per tick by Temporal Cloud's rules: the histories' steady state, the
    heartbeats that reached the server, and a Schedule's own start (native side)."""
    heartbeats = s.metric_per_tick("grpc_RecordActivityTaskHeartbeat")
    schedule = SCHEDULE_START_ACTIONS if s.side == "native" else 0
    return s.history.per_tick + heartbeats + schedule


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
