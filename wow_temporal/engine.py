"""What timers and jobs share, pure (no Temporal, no I/O): frozen state models, the one cache
of parsed cron expressions, how long a run's history grows before it continues as new, and how
an instant is shown to a person.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict

from wow_temporal.cron import CronExpression

__all__ = ["CONTINUE_AS_NEW_AFTER_EVENTS", "Frozen", "parsed_cron", "short_instant"]

CONTINUE_AS_NEW_AFTER_EVENTS = 2_000
"""History events after which a timer, a job instance or the tenant directory continues as
new (well under Temporal's 10,240-event warning; each run replays quickly)."""


class Frozen(BaseModel):
    """An immutable state model: the cores return new states, never change one."""

    model_config = ConfigDict(frozen=True)


@functools.lru_cache(maxsize=1024)
def parsed_cron(expression: str) -> CronExpression:
    """A six-field Spring cron expression, parsed once per process (raises `CronSyntaxError`)."""
    return CronExpression.parse(expression)


def short_instant(instant: datetime) -> str:
    """An instant in UTC as a person reads it: `2026-12-01T10:30Z`, seconds and milliseconds
    only if any."""
    instant = instant.astimezone(UTC)
    text = instant.strftime("%Y-%m-%dT%H:%M")
    if instant.second or instant.microsecond:
        text += instant.strftime(":%S")
        if instant.microsecond:
            text += f".{instant.microsecond // 1000:03d}"
    return text + "Z"
