"""The scheduling model: refs, scope, rules, commands, the system events of a commit, the tick.

Everything here is a frozen pydantic model whose JSON is Wow's wire shape (camelCase), and every
validation happens at construction, so a bad rule or key fails where the user wrote it, never
later inside a workflow.

One module a concept: `refs` (who), `rules` (when), `events` (what a commit carries), `commit`
(the commit), `tick` (what a job handler is given); `_base` what they share.
"""

from wow_temporal.model._base import (
    CRON_FORMAT,
    MAX_COMMAND_BODY_BYTES,
    MAX_COMMAND_BODY_DEPTH,
    MAX_ID_LENGTH,
    NO_CONTROL,
    ZONE_FORMAT,
    CronText,
    InvalidCommitError,
    InvalidScheduleError,
    ScheduleKey,
    WireModel,
    ZoneName,
    explain,
    has_control,
    validate_cron,
    validate_key,
    validate_zone,
    zone_info,
)
from wow_temporal.model.commit import Commit
from wow_temporal.model.events import (
    AggregateDeleted,
    CommitEvent,
    ScheduleCancelled,
    ScheduledCommand,
    ScheduleEvent,
    ScheduleSet,
)
from wow_temporal.model.refs import AggregateRef, NamedAggregate, Scope
from wow_temporal.model.rules import (
    LATEST_INSTANT,
    LONGEST_DELAY,
    JobScope,
    Misfire,
    ScheduleRule,
    iso_duration,
)
from wow_temporal.model.tick import ScheduleTick

__all__ = [
    "CRON_FORMAT",
    "LATEST_INSTANT",
    "LONGEST_DELAY",
    "MAX_COMMAND_BODY_BYTES",
    "MAX_COMMAND_BODY_DEPTH",
    "MAX_ID_LENGTH",
    "NO_CONTROL",
    "ZONE_FORMAT",
    "AggregateDeleted",
    "AggregateRef",
    "Commit",
    "CommitEvent",
    "CronText",
    "InvalidCommitError",
    "InvalidScheduleError",
    "JobScope",
    "Misfire",
    "NamedAggregate",
    "ScheduleCancelled",
    "ScheduleEvent",
    "ScheduleKey",
    "ScheduleRule",
    "ScheduleSet",
    "ScheduleTick",
    "ScheduledCommand",
    "Scope",
    "WireModel",
    "ZoneName",
    "explain",
    "has_control",
    "iso_duration",
    "validate_cron",
    "validate_key",
    "validate_zone",
    "zone_info",
]
