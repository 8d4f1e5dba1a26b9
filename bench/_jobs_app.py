"""What the job benches (`bench.jobs`, `bench.capacity`) share: the `bench.Tick` command every
tick and timer sends, the yearly TENANT job whose instances sleep, and reading the fake host's
arrivals by the body's `run` and `due`."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel

from bench.harness import HostProcess
from wow_temporal import (
    App,
    Command,
    JobScope,
    NamedAggregate,
    SagaContext,
    ScheduleTick,
    on_schedule,
)
from wow_temporal.testing.wow_host import Arrival

__all__ = [
    "TARGET",
    "YEARLY",
    "IdleSaga",
    "Tick",
    "arrivals_of",
    "idle_app",
    "late_ms",
    "tick_command",
]

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


def late_ms(arrival: Arrival) -> float:
    """Host receive time - the slot's due time (the body's `due`), ms."""
    return float(arrival.received_ms - int(arrival.body["due"]))


async def arrivals_of(
    host: HostProcess, run: str, n: int = 0, within: float = 0.0
) -> list[Arrival]:
    """The commands of `run` (the body's) the host decided `Ok`, in arrival order; with `n`,
    once there are `n` of them or `within` seconds have passed."""
    return await host.delivered_matching(lambda a: _run(a) == run, n, within)


def _run(arrival: Arrival) -> str:
    body = arrival.body
    return str(body.get("run", "")) if isinstance(body, dict) else ""
