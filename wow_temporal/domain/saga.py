"""The context a saga's handler gets: builds the commands it returns."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

from wow_temporal.domain.commands import B, Command
from wow_temporal.schedule import AggregateRef

__all__ = ["SagaContext"]


@dataclass(frozen=True, slots=True)
class SagaContext:
    """Where a saga runs: its bounded context (and, for a job's tick, the job's name)."""

    context: str
    job: str | None = None

    def command(self, ref: AggregateRef, body: B) -> Command[B]:
        """A command carrying `body` to the aggregate `ref` names (its tenant included)."""
        if not isinstance(ref, AggregateRef):
            raise TypeError(f"a command's ref is an AggregateRef, not {type(ref).__name__}")
        if not isinstance(body, BaseModel):
            raise TypeError(f"a command's body is a pydantic model, not {type(body).__name__}")
        return Command(ref, body)
