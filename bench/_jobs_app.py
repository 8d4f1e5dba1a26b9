"""What the job benches (`bench.jobs`, `bench.capacity`) share: the `bench.Tick` command every
tick and timer sends (which run sent it, when its slot was due), the yearly TENANT job whose
instances sleep."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel

from wow_temporal import (
    App,
    Command,
    JobScope,
    NamedAggregate,
    SagaContext,
    ScheduleTick,
    on_schedule,
)

YEARLY = "0 0 0 1 1 *"
"""Midnight on the first of January: the idle job's rule (its instances sleep)."""


class Tick(BaseModel):
    """Every command of the benches: which run sent it, and when its slot was due (epoch ms)."""

    __wow_type__: ClassVar[str] = "bench.Tick"

    run: str
    due: int


TARGET = NamedAggregate("bench", "counter")


def tick_command(tick: ScheduleTick, context: SagaContext) -> Command[Tick]:
    """The tick's command: its run is the app's context (one context per measure)."""
    aggregate = f"p{tick.partition}" if tick.partition is not None else "t"
    return context.command(
        TARGET.ref(tick.tenant_id, aggregate), Tick(run=context.context, due=tick.due)
    )


class IdleSaga:
    """One yearly TENANT job: its instances sleep, unless rescheduled."""

    @on_schedule(name="idle", cron=YEARLY, scope=JobScope.TENANT)
    def idle(self, tick: ScheduleTick, context: SagaContext) -> list[Command[Tick]]:
        return [tick_command(tick, context)]


def idle_app(context: str) -> App:
    """An app of the idle job alone (no SYSTEM job a worker would enable at start)."""
    return App(context, sagas=[IdleSaga()])
