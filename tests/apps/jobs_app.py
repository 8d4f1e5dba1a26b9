"""Apps of recurring jobs for tests/system/test_jobs_faults.py, importable by a real worker process
(`wow-temporal worker --app tests.apps.jobs_app:bulk`).

The context names come from `JOBS_TEST_CONTEXT`, set here on first import when it is not set
yet (so a test process and the worker processes it starts, which inherit its environment,
name the same contexts, and each test run has contexts of its own on the shared dev server).
Each App is its own context, so a worker for one never enables the jobs of another.
"""

from __future__ import annotations

import os
import time
import uuid

from pydantic import BaseModel

from wow_temporal import (
    App,
    Command,
    Misfire,
    NamedAggregate,
    SagaContext,
    ScheduleTick,
    on_schedule,
)

__all__ = [
    "BULK_COMMANDS",
    "CONTEXT",
    "NEVER",
    "SLOW_COMMANDS",
    "Tick",
    "bulk",
    "misfire",
    "signals",
    "slow",
]

CONTEXT = os.environ.setdefault("JOBS_TEST_CONTEXT", f"jobs-faults-{uuid.uuid4().hex[:8]}")

BULK_COMMANDS = 2_000
SLOW_COMMANDS = 100
NEVER = "0 0 0 1 1 *"
"""Midnight on the first of January: a rule that never comes due during a test (tests set
the one they want with a reschedule)."""


class Tick(BaseModel):
    """A command body: which tick of which job derived it."""

    job: str
    slot: int
    due: int
    skipped: int
    index: int = 0


class BulkSaga:
    """One tick derives 2,000 commands, each to an aggregate of its own."""

    def __init__(self, context: str) -> None:
        self.context = context

    @on_schedule(name="bulk", cron=NEVER)
    def bulk(self, tick: ScheduleTick, context: SagaContext) -> list[Command[Tick]]:
        aggregate = NamedAggregate(self.context, "counter")
        return [
            context.command(
                aggregate.ref(tick.tenant_id, f"bulk-{tick.slot}-{i}"),
                Tick(job="bulk", slot=tick.slot, due=tick.due, skipped=tick.skipped, index=i),
            )
            for i in range(BULK_COMMANDS)
        ]


class MisfireSaga:
    """Two jobs due every second, one per misfire policy; each tick sends one command."""

    def __init__(self, context: str) -> None:
        self.context = context

    def _one(self, job: str, tick: ScheduleTick, context: SagaContext) -> list[Command[Tick]]:
        aggregate = NamedAggregate(self.context, "counter")
        body = Tick(job=job, slot=tick.slot, due=tick.due, skipped=tick.skipped)
        return [context.command(aggregate.ref(tick.tenant_id, f"{job}-{tick.slot}"), body)]

    @on_schedule(name="coalesce", cron="* * * * * *", misfire=Misfire.COALESCE)
    def coalesce(self, tick: ScheduleTick, context: SagaContext) -> list[Command[Tick]]:
        return self._one("coalesce", tick, context)

    @on_schedule(name="catch-up", cron="* * * * * *", misfire=Misfire.CATCH_UP)
    def catch_up(self, tick: ScheduleTick, context: SagaContext) -> list[Command[Tick]]:
        return self._one("catch-up", tick, context)


class SignalledSaga:
    """A job operated by `temporal workflow signal`; hourly, so it seldom ticks."""

    def __init__(self, context: str) -> None:
        self.context = context

    @on_schedule(name="signalled", cron="0 0 * * * *")
    def signalled(self, tick: ScheduleTick, context: SagaContext) -> list[Command[Tick]]:
        aggregate = NamedAggregate(self.context, "counter")
        body = Tick(job="signalled", slot=tick.slot, due=tick.due, skipped=tick.skipped)
        return [context.command(aggregate.ref(tick.tenant_id, f"signalled-{tick.slot}"), body)]


class SlowSaga:
    """A tick of many commands (the host is made slow), or a handler that sleeps first
    (`JOBS_TEST_SLEEP` seconds, read at each tick)."""

    def __init__(self, context: str) -> None:
        self.context = context

    @on_schedule(name="slow", cron="* * * * * *")
    def slow(self, tick: ScheduleTick, context: SagaContext) -> list[Command[Tick]]:
        time.sleep(float(os.environ.get("JOBS_TEST_SLEEP", "0")))
        aggregate = NamedAggregate(self.context, "counter")
        return [
            context.command(
                aggregate.ref(tick.tenant_id, f"slow-{tick.slot}-{i}"),
                Tick(job="slow", slot=tick.slot, due=tick.due, skipped=tick.skipped, index=i),
            )
            for i in range(SLOW_COMMANDS)
        ]


bulk = App(f"{CONTEXT}-bulk", sagas=[BulkSaga(f"{CONTEXT}-bulk")])
misfire = App(f"{CONTEXT}-misfire", sagas=[MisfireSaga(f"{CONTEXT}-misfire")])
signals = App(f"{CONTEXT}-signals", sagas=[SignalledSaga(f"{CONTEXT}-signals")])
slow = App(f"{CONTEXT}-slow", sagas=[SlowSaga(f"{CONTEXT}-slow")])
