"""wow-temporal: Wow-style scheduled commands, run durably on Temporal.

The public API is re-exported here; see the README for a tour.
"""

from wow_temporal.cron import CronExpression, CronSyntaxError
from wow_temporal.domain import App, Command, SagaContext, on_schedule
from wow_temporal.schedule import (
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
from wow_temporal.worker import connect, run_worker

__all__ = [
    "AggregateDeleted",
    "AggregateRef",
    "App",
    "Command",
    "Commit",
    "CronExpression",
    "CronSyntaxError",
    "InvalidCommitError",
    "InvalidScheduleError",
    "JobScope",
    "Misfire",
    "NamedAggregate",
    "SagaContext",
    "ScheduleCancelled",
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
    "connect",
    "load_settings",
    "on_schedule",
    "run_worker",
]
