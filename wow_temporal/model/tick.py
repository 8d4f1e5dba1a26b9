"""What a recurring job's handler is given for each slot."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import (
    Field,
)

from wow_temporal.model._base import WireModel

__all__ = ["ScheduleTick"]


class ScheduleTick(WireModel):
    """One due slot of a recurring job, handed to its `@on_schedule` handler."""

    tenant_id: str
    slot: int = Field(ge=1)
    due: int = Field(ge=0, description="epoch milliseconds")
    skipped: int = Field(default=0, ge=0)
    partition: int | None = None

    @property
    def due_at(self) -> datetime:
        return datetime.fromtimestamp(self.due / 1000, UTC)
