"""Sagas: `@on_event` handlers that react to committed events with commands, `@on_rejected`
handlers that hear when a command they sent was refused, and the `SagaContext` both get."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel

from wow_temporal.domain._marks import marked
from wow_temporal.domain.commands import B, Command
from wow_temporal.domain.decision import declared_types, scheduled_command
from wow_temporal.domain.messages import event_name
from wow_temporal.domain.system import CancelSchedule, SetSchedule
from wow_temporal.model import AggregateRef, ScheduleRule, validate_key

__all__ = [
    "EventHandler",
    "Rejected",
    "RejectedHandler",
    "SagaContext",
    "event_handlers",
    "on_event",
    "on_rejected",
    "rejected_handlers",
]

F = TypeVar("F", bound=Callable[..., Any])

_EVENT = "__wow_on_event__"
_REJECTED = "__wow_on_rejected__"


@dataclass(frozen=True, slots=True)
class SagaContext:
    """Where a saga runs: its bounded context, the job whose tick it handles (if any), and for an
    event the aggregate that committed it (`source`)."""

    context: str
    job: str | None = None
    source: AggregateRef | None = None
    function: str = ""
    schedules: frozenset[str] = field(default_factory=frozenset)

    def command(self, ref: AggregateRef, body: B) -> Command[B]:
        """A command carrying `body` to the aggregate `ref` names (its tenant included)."""
        if not isinstance(ref, AggregateRef):
            raise TypeError(f"a command's ref is an AggregateRef, not {type(ref).__name__}")
        if not isinstance(body, BaseModel):
            raise TypeError(f"a command's body is a pydantic model, not {type(body).__name__}")
        return Command(ref, body)

    def schedule(
        self, key: str, rule: ScheduleRule, target: AggregateRef, command: BaseModel
    ) -> Command[SetSchedule]:
        """The system command `wow.schedule.Set` asking `target` to schedule `command` for itself
        under `key`: return it from the handler. A target that does not exist rejects it (the
        saga's `@on_rejected` hears). `command`'s type must be in `@on_event(schedules=[...])`."""
        scheduled = scheduled_command(
            key,
            rule,
            command,
            self.schedules,
            self.function or "the saga",
            "@on_event(..., schedules=[...])",
        )
        return self.command(target, SetSchedule(key=key, rule=rule, command=scheduled))

    def cancel(self, key: str, target: AggregateRef) -> Command[CancelSchedule]:
        """The system command `wow.schedule.Cancel` asking `target` to cancel its `key`."""
        validate_key(key)
        return self.command(target, CancelSchedule(key=key))


@dataclass(frozen=True, slots=True)
class Rejected:
    """A command a saga sent that its target refused, as the saga's `@on_rejected` gets it."""

    command_type: str
    ref: AggregateRef
    body: dict[str, Any]
    error_code: str
    error_msg: str
    request_id: str


@dataclass(frozen=True, slots=True)
class EventHandler:
    """One `@on_event` function of a saga instance."""

    processor: str
    attribute: str
    event: type[BaseModel]
    event_name: str
    schedules: tuple[str, ...]
    handler: Callable[..., Any]

    @property
    def name(self) -> str:
        return f"{self.processor}.{self.attribute}"


@dataclass(frozen=True, slots=True)
class RejectedHandler:
    """One `@on_rejected` function of a saga instance: for these command types (all if empty)."""

    processor: str
    attribute: str
    command_types: tuple[str, ...]
    handler: Callable[..., Any]

    @property
    def name(self) -> str:
        return f"{self.processor}.{self.attribute}"

    def wants(self, command_type: str) -> bool:
        return not self.command_types or command_type in self.command_types


def on_event(
    *events: type[BaseModel], schedules: Iterable[type[BaseModel] | str] = ()
) -> Callable[[F], F]:
    """Declare a saga method `(self, event, context)` that handles `events` (or the type its
    `event` parameter is annotated with) and returns the commands it derives (a `Command`, a
    list of them, or None). `schedules` lists the command types it asks targets to schedule."""
    declared = declared_types(schedules, "schedules")
    for event in events:
        if not (isinstance(event, type) and issubclass(event, BaseModel)):
            raise TypeError(f"@on_event takes event classes (pydantic models), not {event!r}")

    def decorate(function: F) -> F:
        setattr(function, _EVENT, (tuple(events), declared))
        return function

    return decorate


def on_rejected(*command_types: type[BaseModel] | str) -> Callable[[F], F]:
    """Declare a saga method `(self, rejected, context)` that hears when a command this saga sent
    was refused (`Rejected`): of these types, or of any when none is given. Its target's
    refusal of a scheduled command, sent later by a timer, reaches no `@on_rejected`."""
    declared = declared_types(command_types, "@on_rejected")

    def decorate(function: F) -> F:
        setattr(function, _REJECTED, declared)
        return function

    return decorate


def _marked(saga: object, marker: str) -> list[tuple[str, Any, Callable[..., Any]]]:
    """`(attribute, mark, bound method)` of the saga's methods marked with `marker`."""
    return [
        (attribute, mark, getattr(saga, attribute))
        for attribute, mark, _ in marked(type(saga), marker)
    ]


def event_handlers(saga: object) -> list[EventHandler]:
    """The saga instance's `@on_event` handlers, one per event type; `ValueError` if one cannot
    tell its event type."""
    processor = type(saga).__name__
    found = []
    for attribute, (events, schedules), handler in _marked(saga, _EVENT):
        types = events or (_annotated_event(type(saga), attribute, handler),)
        for event in types:
            found.append(
                EventHandler(processor, attribute, event, event_name(event), schedules, handler)
            )
    return found


def rejected_handlers(saga: object) -> list[RejectedHandler]:
    processor = type(saga).__name__
    return [
        RejectedHandler(processor, attribute, types, handler)
        for attribute, types, handler in _marked(saga, _REJECTED)
    ]


def _annotated_event(cls: type, attribute: str, handler: Callable[..., Any]) -> type[BaseModel]:
    parameters = [
        p
        for p in inspect.signature(handler).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    try:
        hints = typing.get_type_hints(handler)
    except Exception:
        hints = {}
    annotation = hints.get(parameters[0].name) if parameters else None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    raise ValueError(
        f"{cls.__name__}.{attribute}: say which event it handles, @on_event(OrderCreated), or "
        "annotate its event parameter"
    )
