"""`bench.jobs`' rig: the jobs measured (`BenchSaga`), the baselines' activity and worker, the
actions in histories and the dev server's `action` counter."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime

import httpx
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Worker

from bench._bare_workflows import Scheduled, Woken
from bench._dev_stack import baseline_worker, cpu_of
from bench._jobs_app import TARGET, YEARLY, IdleSaga, Tick, tick_command
from bench.harness import HostProcess
from bench.harness.actions import billed, history
from bench.harness.prometheus import label, samples, scrape
from wow_temporal import Command, JobScope, SagaContext, ScheduleTick, on_schedule
from wow_temporal.delivery import CommandSender, DeliveryRequest, ScheduleDetails
from wow_temporal.model import ScheduledCommand, Scope

BARE_QUEUE = "bench-jobs-bare"
CONCURRENCY = 50  # enables / starts in flight
MAX_ACTIVITIES = 200  # job_worker's default, the baselines' worker alike
SCHEDULE_START_ACTIONS = 2
"""Temporal Cloud bills each execution of a Schedule three actions: two for the "Schedule
Start" and one for the workflow it starts (docs.temporal.io/cloud/actions, Schedules). The
workflow's start is in its history; the two are not, and are added here."""


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


def bare_worker(client: Client, sender: CommandSender) -> Worker:
    send = BareSend(sender).send
    return baseline_worker(client, BARE_QUEUE, [Scheduled, Woken], [send], MAX_ACTIVITIES)


@dataclass
class Actions:
    ticks: int = 0
    """Ticks (activities that completed) in the sampled histories."""
    steady: int = 0
    """Actions of `steady_ticks` ticks (see `tick_actions`)."""
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


async def tick_actions(client: Client, workflow_ids: list[str], *, long_lived: bool) -> Actions:
    """The actions per tick of `workflow_ids`. `long_lived` (a job's instances): the steady
    state, between one tick's end and the last's (the timer until the next due time, the
    tick's activity, anything else); else (one workflow a tick) every action."""
    result, kinds = Actions(), Counter[str]()
    for events in await asyncio.gather(*(history(client, i) for i in workflow_ids)):
        done = EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
        ticks = [i for i, e in enumerate(events) if e.event_type == done]
        actions = billed(events)
        result.ticks += len(ticks)
        result.whole += len(actions)
        if long_lived and len(ticks) >= 2:
            result.steady_ticks += len(ticks) - 1
            kinds.update(kind for i, kind in actions if ticks[0] < i <= ticks[-1])
        elif not long_lived:
            result.steady_ticks += len(ticks)
            kinds.update(kind for _, kind in actions)
    result.steady, result.kinds = kinds.total(), dict(kinds)
    return result


class Metrics:
    """The dev server's `action` counter (what a self-hosted server counts as billable), by
    `action_type`, for the namespace."""

    def __init__(self, url: str, namespace: str) -> None:
        self.url = url
        self.namespace = f'namespace="{namespace}"'
        self.http = httpx.AsyncClient(timeout=10)

    async def snapshot(self) -> dict[str, float]:
        counts: dict[str, float] = {}
        for name, labels, value in samples(await scrape(self.http, self.url)):
            if name == "action" and self.namespace in labels:
                kind = label(labels, "action_type")
                counts[kind] = counts.get(kind, 0.0) + value
        return counts

    @staticmethod
    def delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
        moved = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in set(before) | set(after)}
        return {k: v for k, v in sorted(moved.items()) if v}


def describe_metric(delta: dict[str, float], ticks: int) -> str:
    short = {k.removeprefix("command_").removeprefix("grpc_"): v for k, v in delta.items()}
    return ", ".join(f"{k} {v / max(ticks, 1):.2f}" for k, v in short.items())


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

    async def cpu(self) -> dict[str, float]:
        """CPU seconds so far: the dev server, this process (the workers), the host."""
        return cpu_of(server=self.server_pid, workers=None, host=self.host.proc.pid)

    def tag(self, prefix: str) -> str:
        self.seq += 1
        return f"{prefix}{self.seq}-{uuid.uuid4().hex[:4]}"
