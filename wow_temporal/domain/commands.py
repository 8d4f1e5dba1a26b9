"""Commands a handler derives: a body (any pydantic model) for a full aggregate ref."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from wow_temporal.domain.messages import type_name
from wow_temporal.domain.upcasting import revision_of
from wow_temporal.model import AggregateRef, ScheduledCommand

__all__ = ["Command", "command_type"]

B = TypeVar("B", bound=BaseModel)


def command_type(body: BaseModel | type[BaseModel]) -> str:
    """The command's full type name (`Command-Type`): the class's `__wow_type__` if it sets one
    (a Java Wow host's class name), else its full Python name, `module.QualName`."""
    return type_name(body)


@dataclass(frozen=True, slots=True)
class Command(Generic[B]):
    """A command for one aggregate: `ref` names it in full (tenant included), `body` is what it
    carries. Built with `SagaContext.command(ref, body)`."""

    ref: AggregateRef
    body: B

    @property
    def type(self) -> str:
        return command_type(self.body)

    def scheduled(self) -> ScheduledCommand:
        """The command as the wire carries it: its type name, JSON body (validated) and the
        revision its class declares, so the target reads it as written."""
        payload: Any = self.body.model_dump(mode="json", by_alias=True)
        return ScheduledCommand(
            type=self.type, body=payload, revision=revision_of(type(self.body))
        )
