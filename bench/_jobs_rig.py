"""`bench.jobs`' rig: the jobs measured (`BenchSaga`) and the baselines' activity, the dev
server's `action` counter and the actions in histories, and one dev server with its workers."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime

import httpx
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    Client,
)

from bench._jobs_app import (
    TARGET,
    YEARLY,
    IdleSaga,
    Tick,
    tick_command,
)
from bench.harness import (
    HostProcess,
    cpu_seconds,
)
from bench.harness.actions import billed, history
from wow_temporal import Command, JobScope, SagaContext, ScheduleTick, on_schedule
from wow_temporal.delivery import CommandSender, DeliveryRequest, ScheduleDetails
from wow_temporal.model import ScheduledCommand, Scope

BARE_QUEUE = "bench-jobs-bare"
CONCURRENCY = 50  # enables / starts in flight
MAX_ACTIVITIES = 200  # job_worker's default, the baselines' worker alike
CACHE = 1000  # the SDK's max_cached_workflows default, which job_worker keeps
THROUGHPUT_TARGET = 0.8
ACTIONS_TARGET = 2.0
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
