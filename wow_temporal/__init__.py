"""wow-temporal: Wow-style scheduled commands, run durably on Temporal.

The public API is re-exported here (listed in docs/api.md); the README and docs/ give the tour.
Each name is imported when first used (PEP 562), so the command line starts without loading
Temporal, FastAPI and the domain for a `--help`, and a Ctrl+C while it starts is quiet.
"""

import importlib as _importlib
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

if _TYPE_CHECKING:
    from wow_temporal.connection import connect, connect_timers
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
        upcaster,
    )
    from wow_temporal.errors import WowTemporalError
    from wow_temporal.jobs.client import (
        JobClient,
        JobError,
        JobFilter,
        JobInfo,
        JobNotFoundError,
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

_EXPORTS = {
    "AggregateDeleted": "wow_temporal.model",
    "AggregateRef": "wow_temporal.model",
    "App": "wow_temporal.domain",
    "Command": "wow_temporal.domain",
    "CommandBody": "wow_temporal.domain",
    "CommandRejected": "wow_temporal.domain",
    "Commit": "wow_temporal.model",
    "CronExpression": "wow_temporal.cron",
    "CronSyntaxError": "wow_temporal.cron",
    "DecideScope": "wow_temporal.domain",
    "Decision": "wow_temporal.domain",
    "InvalidCommitError": "wow_temporal.model",
    "InvalidScheduleError": "wow_temporal.model",
    "JobClient": "wow_temporal.jobs.client",
    "JobError": "wow_temporal.jobs.client",
    "JobFilter": "wow_temporal.jobs.client",
    "JobInfo": "wow_temporal.jobs.client",
    "JobNotFoundError": "wow_temporal.jobs.client",
    "JobScope": "wow_temporal.model",
    "Misfire": "wow_temporal.model",
    "NamedAggregate": "wow_temporal.model",
    "Rejected": "wow_temporal.domain",
    "SagaContext": "wow_temporal.domain",
    "ScheduleCancelled": "wow_temporal.model",
    "ScheduleInfo": "wow_temporal.domain",
    "ScheduleRule": "wow_temporal.model",
    "ScheduleSet": "wow_temporal.model",
    "ScheduleTick": "wow_temporal.model",
    "ScheduledCommand": "wow_temporal.model",
    "Scope": "wow_temporal.model",
    "Settings": "wow_temporal.settings",
    "SettingsError": "wow_temporal.settings",
    "TimerClient": "wow_temporal.timers.client",
    "TimerError": "wow_temporal.timers.client",
    "TimerFilter": "wow_temporal.timers.client",
    "TimerInfo": "wow_temporal.timers.client",
    "TimerNotFoundError": "wow_temporal.timers.client",
    "WowTemporalError": "wow_temporal.errors",
    "aggregate": "wow_temporal.domain",
    "connect": "wow_temporal.connection",
    "connect_timers": "wow_temporal.connection",
    "load_settings": "wow_temporal.settings",
    "on_command": "wow_temporal.domain",
    "on_event": "wow_temporal.domain",
    "on_rejected": "wow_temporal.domain",
    "on_schedule": "wow_temporal.domain",
    "on_sourcing": "wow_temporal.domain",
    "run_worker": "wow_temporal.worker",
    "upcaster": "wow_temporal.domain",
}
"""Where each public name lives."""

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
    "JobClient",
    "JobError",
    "JobFilter",
    "JobInfo",
    "JobNotFoundError",
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
    "WowTemporalError",
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
    "upcaster",
]


def __getattr__(name: str) -> _Any:
    """The public name `name`, imported from its module on first use."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'wow_temporal' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
