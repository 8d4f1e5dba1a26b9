"""The Python domain API: aggregates and their decisions, sagas, `@on_schedule` jobs, and the
`App` of them."""

from wow_temporal.domain.aggregate import AggregateModel, aggregate, on_command, on_sourcing
from wow_temporal.domain.app import App, Job, load_app, load_apps
from wow_temporal.domain.commands import Command, command_type
from wow_temporal.domain.decision import DecideScope, Decision, UndeclaredError
from wow_temporal.domain.jobs import JobDefinition, on_schedule
from wow_temporal.domain.messages import CommandBody, ScheduleInfo, event_name
from wow_temporal.domain.rejection import CommandRejected, Rejection
from wow_temporal.domain.saga import Rejected, SagaContext, on_event, on_rejected
from wow_temporal.domain.system import CancelSchedule, DeleteAggregate, SetSchedule
from wow_temporal.domain.upcasting import Upcaster, UpcastError, upcaster

__all__ = [
    "AggregateModel",
    "App",
    "CancelSchedule",
    "Command",
    "CommandBody",
    "CommandRejected",
    "DecideScope",
    "Decision",
    "DeleteAggregate",
    "Job",
    "JobDefinition",
    "Rejected",
    "Rejection",
    "SagaContext",
    "ScheduleInfo",
    "SetSchedule",
    "UndeclaredError",
    "UpcastError",
    "Upcaster",
    "aggregate",
    "command_type",
    "event_name",
    "load_app",
    "load_apps",
    "on_command",
    "on_event",
    "on_rejected",
    "on_schedule",
    "on_sourcing",
    "upcaster",
]
