"""The system commands every aggregate takes, beside its own: a saga's request to schedule
(`wow.schedule.Set`) or cancel (`wow.schedule.Cancel`), and `wow.DeleteAggregate`."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from wow_temporal.model import ScheduledCommand, ScheduleKey, ScheduleRule

__all__ = [
    "DELETE_AGGREGATE",
    "SCHEDULE_CANCEL",
    "SCHEDULE_SET",
    "SYSTEM_COMMANDS",
    "CancelSchedule",
    "DeleteAggregate",
    "SetSchedule",
]

SCHEDULE_SET = "wow.schedule.Set"
SCHEDULE_CANCEL = "wow.schedule.Cancel"
DELETE_AGGREGATE = "wow.DeleteAggregate"


class SetSchedule(BaseModel):
    """`wow.schedule.Set`: the target schedules `command` for itself under `key`; it commits
    `wow.ScheduleSet`, or rejects the request when it does not exist."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    __wow_type__ = SCHEDULE_SET
    key: ScheduleKey
    rule: ScheduleRule
    command: ScheduledCommand


class CancelSchedule(BaseModel):
    """`wow.schedule.Cancel`: the target cancels its schedule under `key`
    (`wow.ScheduleCancelled`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    __wow_type__ = SCHEDULE_CANCEL
    key: ScheduleKey = Field(description="The key of the schedule to cancel")


class DeleteAggregate(BaseModel):
    """`wow.DeleteAggregate`: the aggregate commits `wow.AggregateDeleted`; its pending schedules
    are cancelled and every later command is refused (410 `IllegalAccessDeletedAggregate`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    __wow_type__ = DELETE_AGGREGATE


SYSTEM_COMMANDS: dict[str, type[BaseModel]] = {
    SCHEDULE_SET: SetSchedule,
    SCHEDULE_CANCEL: CancelSchedule,
    DELETE_AGGREGATE: DeleteAggregate,
}
