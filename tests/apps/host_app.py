"""A small domain for the domain host's tests (`tests/system/test_host.py`): one aggregate, `thing`,
whose commands each exercise one path of the host's pipeline (events, a schedule alone, a NoOp,
a bug, an undeclared schedule, a refusal), and a saga that asks a thing to schedule or cancel a
reminder for itself, recording the refusals it hears."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import BaseModel, Field

from wow_temporal import (
    App,
    Command,
    CommandBody,
    CommandRejected,
    DecideScope,
    Decision,
    NamedAggregate,
    Rejected,
    SagaContext,
    ScheduleRule,
    aggregate,
    on_command,
    on_event,
    on_rejected,
    on_sourcing,
)
from wow_temporal.domain import CancelSchedule, SetSchedule

CONTEXT = "host-test"
THING = NamedAggregate(CONTEXT, "thing")
REMIND = "hosttest.Remind"
REMINDER_DELAY = timedelta(minutes=5)
"""The rule of what `ScheduleOnly` schedules: `{"after": "PT5M"}`."""
ASKED_DELAY = timedelta(minutes=10)
"""The rule of what the saga asks a target to schedule: `{"after": "PT10M"}`."""


class CreateThing(CommandBody):
    __wow_type__ = "hosttest.CreateThing"
    name: str = Field(min_length=1)


class Touch(CommandBody):
    __wow_type__ = "hosttest.Touch"
    count: int = Field(ge=1)


class Remind(CommandBody):
    """What a thing schedules for itself."""

    __wow_type__ = REMIND
    note: str = ""


class ScheduleOnly(CommandBody):
    """Decide no event, only a schedule."""

    __wow_type__ = "hosttest.ScheduleOnly"
    key: str = "reminder"


class CancelOnly(CommandBody):
    __wow_type__ = "hosttest.CancelOnly"
    key: str = "reminder"


class DoNothing(CommandBody):
    __wow_type__ = "hosttest.DoNothing"


class Explode(CommandBody):
    """The domain code has a bug: it raises."""

    __wow_type__ = "hosttest.Explode"


class ScheduleUndeclared(CommandBody):
    """Schedule a command type the function does not declare."""

    __wow_type__ = "hosttest.ScheduleUndeclared"


class Refuse(CommandBody):
    __wow_type__ = "hosttest.Refuse"


class Ask(CommandBody):
    """Ask (through the saga) the thing `target_id` to schedule, or cancel, under `key`."""

    __wow_type__ = "hosttest.Ask"
    target_id: str = Field(min_length=1)
    key: str = "asked"
    cancel: bool = False


class ThingCreated(BaseModel):
    __wow_type__ = "hosttest.ThingCreated"
    name: str


class Touched(BaseModel):
    __wow_type__ = "hosttest.Touched"
    count: int


class Asked(BaseModel):
    __wow_type__ = "hosttest.Asked"
    target_id: str
    key: str
    cancel: bool


class ThingState:
    def __init__(self, thing_id: str) -> None:
        self.id = thing_id
        self.name = ""
        self.touches = 0

    @on_sourcing
    def created(self, event: ThingCreated) -> None:
        self.name = event.name

    @on_sourcing
    def touched(self, event: Touched) -> None:
        self.touches += event.count


@aggregate("thing")
class Thing:
    def __init__(self, state: ThingState) -> None:
        self.state = state

    @on_command(produces=[ThingCreated], create=True)
    def create(self, command: CreateThing) -> Decision:
        return Decision.events(ThingCreated(name=command.name))

    @on_command(produces=[Touched])
    def touch(self, command: Touch) -> Decision:
        return Decision.events(Touched(count=command.count))

    @on_command(schedules=[REMIND])
    def schedule_only(self, command: ScheduleOnly, scope: DecideScope) -> Decision:
        scope.schedule(command.key, ScheduleRule.after(REMINDER_DELAY), Remind(note="later"))
        return Decision.NoOp

    @on_command()
    def cancel_only(self, command: CancelOnly, scope: DecideScope) -> Decision:
        scope.cancel_schedule(command.key)
        return Decision.NoOp

    @on_command()
    def do_nothing(self, command: DoNothing) -> Decision:
        return Decision.NoOp

    @on_command()
    def explode(self, command: Explode) -> Decision:
        raise RuntimeError("the domain code has a bug")

    @on_command(schedules=[])
    def schedule_undeclared(self, command: ScheduleUndeclared, scope: DecideScope) -> Decision:
        scope.schedule("undeclared", ScheduleRule.after(REMINDER_DELAY), Remind())
        return Decision.NoOp

    @on_command()
    def refuse(self, command: Refuse) -> Decision:
        raise CommandRejected(f"thing {self.state.id} refuses")

    @on_command(produces=[Asked])
    def ask(self, command: Ask) -> Decision:
        return Decision.events(
            Asked(target_id=command.target_id, key=command.key, cancel=command.cancel)
        )


class SchedulerSaga:
    """Asks a thing to schedule a reminder for itself (or cancel it) when another was `Ask`ed;
    records the refusals it hears."""

    def __init__(self) -> None:
        self.rejected: list[Rejected] = []

    @on_event(Asked, schedules=[Remind])
    def on_asked(self, event: Asked, context: SagaContext) -> Command[Any]:
        assert context.source is not None
        target = THING.ref(context.source.tenant_id, event.target_id)
        if event.cancel:
            return context.cancel(event.key, target)
        remind = Remind(note=f"asked by {context.source.aggregate_id}")
        return context.schedule(event.key, ScheduleRule.after(ASKED_DELAY), target, remind)

    @on_rejected(SetSchedule, CancelSchedule)
    def on_refused(self, rejected: Rejected, context: SagaContext) -> None:
        self.rejected.append(rejected)


def make_app(saga: SchedulerSaga | None = None) -> App:
    """The test context's App, with `saga` if given."""
    return App(CONTEXT, aggregates=[Thing], sagas=[saga] if saga is not None else [])
