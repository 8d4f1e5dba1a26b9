"""A domain that does not guard itself: a reminder rings whenever its command arrives, armed
or not (deleted with Wow's `wow.DeleteAggregate`). Only the host's guard (the log's last word,
`host.guard`) keeps a disarmed one silent."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, Field

from wow_temporal import (
    App,
    CommandBody,
    DecideScope,
    Decision,
    NamedAggregate,
    ScheduleRule,
    aggregate,
    on_command,
    on_sourcing,
)

REMINDER = NamedAggregate("reminders", "reminder")
RING = "reminders.Ring"
KEY = "ring"


class Arm(CommandBody):
    __wow_type__ = "reminders.Arm"
    millis: int = Field(ge=1)


class Rearm(CommandBody):
    """Set the reminder anew: it replaces the one armed."""

    __wow_type__ = "reminders.Rearm"
    millis: int = Field(ge=1)


class Disarm(CommandBody):
    __wow_type__ = "reminders.Disarm"


class Ring(CommandBody):
    __wow_type__ = RING


class Armed(BaseModel):
    __wow_type__ = "reminders.Armed"


class Disarmed(BaseModel):
    __wow_type__ = "reminders.Disarmed"


class Rang(BaseModel):
    __wow_type__ = "reminders.Rang"


class ReminderState:
    def __init__(self, reminder_id: str) -> None:
        self.id = reminder_id
        self.rang = 0

    @on_sourcing
    def rang_once(self, event: Rang) -> None:
        self.rang += 1


@aggregate("reminder")
class Reminder:
    def __init__(self, state: ReminderState) -> None:
        self.state = state

    @on_command(produces=[Armed], schedules=[RING], create=True)
    def arm(self, command: Arm, scope: DecideScope) -> Decision:
        scope.schedule(KEY, ScheduleRule.after(timedelta(milliseconds=command.millis)), Ring())
        return Decision.events(Armed())

    @on_command(produces=[Armed], schedules=[RING])
    def rearm(self, command: Rearm, scope: DecideScope) -> Decision:
        scope.schedule(KEY, ScheduleRule.after(timedelta(milliseconds=command.millis)), Ring())
        return Decision.events(Armed())

    @on_command(produces=[Disarmed])
    def disarm(self, command: Disarm, scope: DecideScope) -> Decision:
        scope.cancel_schedule(KEY)
        return Decision.events(Disarmed())

    @on_command(produces=[Rang])
    def ring(self, command: Ring) -> Decision:
        return Decision.events(Rang())


reminders_app = App(REMINDER.context_name, aggregates=[Reminder])
