"""The Python domain API: commands, saga contexts, `@on_schedule` jobs, and the `App` of them."""

from wow_temporal.domain.app import App, Job
from wow_temporal.domain.commands import Command, command_type
from wow_temporal.domain.jobs import JobDefinition, on_schedule
from wow_temporal.domain.saga import SagaContext

__all__ = ["App", "Command", "Job", "JobDefinition", "SagaContext", "command_type", "on_schedule"]
