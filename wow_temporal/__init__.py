"""wow-temporal: Wow-style scheduled commands, run durably on Temporal.

The public API is re-exported here (listed in docs/api.md); the README and docs/ give the tour.
"""

from wow_temporal.connect import connect, connect_timers
from wow_temporal.cron import CronExpression, CronSyntaxError
from wow_temporal.domain import (
    App,
    Command,
    CommandBody,
    CommandRejected,
    DecideScope,
    Decision,
    Rejected,
    SagaContext,
    ScheduleInfo,
    aggregate,
    on_command,
    on_event,
    on_rejected,
    on_schedule,
    on_sourcing,
)
from wow_temporal.model import (
    AggregateDeleted,
    AggregateRef,
    Commit,
    InvalidCommitError,
    InvalidScheduleError,
    JobScope,
    Misfire,
    NamedAggregate,
    ScheduleCancelled,
    ScheduledCommand,
    ScheduleRule,
    ScheduleSet,
    ScheduleTick,
    Scope,
)
from wow_temporal.settings import Settings, SettingsError, load_settings
from wow_temporal.timers.client import (
    TimerClient,
    TimerError,
    TimerFilter,
    TimerInfo,
    TimerNotFoundError,
)
from wow_temporal.worker import run_worker

__all__ = [
    "AggregateDeleted",
    "AggregateRef",
    "App",
    "Command",
    "CommandBody",
    "CommandRejected",
    "Commit",
    "CronExpression",
    "CronSyntaxError",
    "DecideScope",
    "Decision",
    "InvalidCommitError",
    "InvalidScheduleError",
    "JobScope",
    "Misfire",
    "NamedAggregate",
    "Rejected",
    "SagaContext",
    "ScheduleCancelled",
    "ScheduleInfo",
    "ScheduleRule",
    "ScheduleSet",
    "ScheduleTick",
    "ScheduledCommand",
    "Scope",
    "Settings",
    "SettingsError",
    "TimerClient",
    "TimerError",
    "TimerFilter",
    "TimerInfo",
    "TimerNotFoundError",
    "aggregate",
    "connect",
    "connect_timers",
    "load_settings",
    "on_command",
    "on_event",
    "on_rejected",
    "on_schedule",
    "on_sourcing",
    "run_worker",
]
