"""Aggregates: a class over its state, with `@on_command` functions that decide events (and
schedules) and a state class whose `@on_sourcing` methods rebuild it from those events.

`AggregateModel.handle` is the pure core shared by the domain host and `aggregate_spec`: given
the aggregate as it stands and a command, it answers the events to commit or a `Rejection`.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from wow_temporal.domain._marks import marked
from wow_temporal.domain.decision import DecideScope, Decision, UndeclaredError, declared_types
from wow_temporal.domain.messages import CommandBody, ScheduleInfo, event_name, type_name
from wow_temporal.domain.rejection import CommandRejected, Rejection
from wow_temporal.domain.system import (
    DELETE_AGGREGATE,
    SCHEDULE_CANCEL,
    SCHEDULE_SET,
    SYSTEM_COMMANDS,
    CancelSchedule,
    SetSchedule,
)
from wow_temporal.model import (
    AggregateDeleted,
    AggregateRef,
    InvalidScheduleError,
    NamedAggregate,
    ScheduleCancelled,
    ScheduleSet,
    explain,
)

__all__ = [
    "AggregateModel",
    "CommandFunction",
    "Current",
    "Decided",
    "aggregate",
    "on_command",
    "on_sourcing",
]

F = TypeVar("F", bound=Callable[..., Any])
C = TypeVar("C", bound=type)

_COMMAND = "__wow_command__"
_SOURCING = "__wow_sourcing__"
_AGGREGATE = "__wow_aggregate__"


@dataclass(frozen=True, slots=True)
class _CommandDeclaration:
    produces: tuple[str, ...]
    schedules: tuple[str, ...]
    create: bool
    allow_create: bool


def on_command(
    *,
    produces: Iterable[type[BaseModel] | str] = (),
    schedules: Iterable[type[BaseModel] | str] = (),
    create: bool = False,
    allow_create: bool = False,
) -> Callable[[F], F]:
    """Declare an aggregate method `(self, command, ...)` as the function for its command's type.

    `produces` lists the events it may decide and `schedules` the command types it may schedule
    (classes or full type names); deciding or scheduling another raises at decision time.
    `create=True` makes it the aggregate's creation (refused on an existing one);
    `allow_create=True` lets it create the aggregate or change an existing one. Parameters after
    the command are filled by type: the `DecideScope`, or a service registered with the `App`.
    """
    declaration = _CommandDeclaration(
        declared_types(produces, "produces"),
        declared_types(schedules, "schedules"),
        bool(create),
        bool(allow_create),
    )
    if create and allow_create:
        raise ValueError("@on_command: create=True and allow_create=True exclude each other")

    def decorate(function: F) -> F:
        setattr(function, _COMMAND, declaration)
        return function

    return decorate


def on_sourcing(function: F) -> F:
    """Declare a state method `(self, event)` that applies one event type (read from the
    parameter's annotation) to the state, as the aggregate is rebuilt from its events."""
    setattr(function, _SOURCING, True)
    return function


def aggregate(name: str) -> Callable[[C], C]:
    """Name an aggregate class (`@aggregate("order")`); its `__init__(self, state: OrderState)`
    annotation gives its state class. Its context is the `App`'s."""
    if (
        not isinstance(name, str)
        or not name
        or not name.replace("-", "").replace("_", "").isalnum()
    ):
        raise ValueError(f"@aggregate: invalid name {name!r}: use letters, digits, '_' and '-'")

    def decorate(cls: C) -> C:
        setattr(cls, _AGGREGATE, name)
        return cls

    return decorate


@dataclass(frozen=True, slots=True)
class CommandFunction:
    """One `@on_command` function, as the manifest lists it."""

    aggregate: str
    attribute: str
    command: type[BaseModel]
    command_type: str
    produces: tuple[str, ...]
    schedules: tuple[str, ...]
    create: bool
    allow_create: bool
    extras: tuple[Any, ...]
    """The annotations of the parameters after the command (`DecideScope` or a service type)."""

    @property
    def name(self) -> str:
        return f"{self.aggregate}.{self.attribute}"


@dataclass(slots=True)
class Current:
    """An aggregate as it stands: its state, its version (0: never created) and if deleted."""

    state: Any
    version: int = 0
    deleted: bool = False


@dataclass(frozen=True, slots=True)
class Decided:
    """What a command decided: the events to commit, in order (`(name, JSON body)`), domain
    events first, then the schedule events. Empty: nothing to commit."""

    events: tuple[tuple[str, dict[str, Any]], ...] = ()
    function: str = ""

    @property
    def schedule_changes(self) -> list[ScheduleSet | ScheduleCancelled]:
        changes: list[ScheduleSet | ScheduleCancelled] = []
        for name, body in self.events:
            if name == ScheduleSet.NAME:
                changes.append(ScheduleSet.model_validate(body))
            elif name == ScheduleCancelled.NAME:
                changes.append(ScheduleCancelled.model_validate(body))
        return changes


@dataclass
class AggregateModel:
    """An aggregate class read once: its commands, its state class and the events that build it."""

    named: NamedAggregate
    cls: type
    state_cls: type
    functions: dict[str, CommandFunction]
    sourcing: dict[str, tuple[type[BaseModel], str]]
    _state_takes_id: bool = field(default=False, repr=False)

    @classmethod
    def of(cls, aggregate_cls: type, context: str) -> AggregateModel:
        """Read `aggregate_cls`; a missing name or state, or a bad function, raises `ValueError`."""
        if not isinstance(aggregate_cls, type):
            raise ValueError(
                f"aggregates are classes, not {type(aggregate_cls).__name__} instances"
            )
        name = aggregate_cls.__dict__.get(_AGGREGATE)
        if not isinstance(name, str):
            raise ValueError(f'{aggregate_cls.__name__}: name the aggregate with @aggregate("...")')
        state_cls = _state_class(aggregate_cls)
        functions: dict[str, CommandFunction] = {}
        for attribute, declaration, function in marked(aggregate_cls, _COMMAND):
            command, extras = _command_parameters(aggregate_cls, attribute, function)
            kind = type_name(command)
            if kind in functions or kind in SYSTEM_COMMANDS:
                where = functions[kind].name if kind in functions else "the system"
                raise ValueError(
                    f"{aggregate_cls.__name__}.{attribute}: command {kind} is already handled by "
                    f"{where}"
                )
            functions[kind] = CommandFunction(
                aggregate_cls.__name__,
                attribute,
                command,
                kind,
                declaration.produces,
                declaration.schedules,
                declaration.create,
                declaration.allow_create,
                extras,
            )
        if not any(f.create or f.allow_create for f in functions.values()):
            raise ValueError(
                f"{aggregate_cls.__name__}: no command creates it: mark one "
                "@on_command(create=True)"
            )
        sourcing: dict[str, tuple[type[BaseModel], str]] = {}
        for attribute, _, function in marked(state_cls, _SOURCING):
            event = _first_parameter_type(state_cls, attribute, function, "event")
            sourcing[event_name(event)] = (event, attribute)
        takes_id = _takes_one_argument(state_cls)
        return cls(
            NamedAggregate(context, name), aggregate_cls, state_cls, functions, sourcing, takes_id
        )

    def new(self, aggregate_id: str) -> Current:
        """The aggregate before its first event."""
        state = self.state_cls(aggregate_id) if self._state_takes_id else self.state_cls()
        return Current(state)

    def source(
        self, current: Current, version: int, events: Sequence[tuple[str, Mapping[str, Any]]]
    ) -> None:
        """Apply one commit's events to `current` (unknown and system events change no state)."""
        for name, body in events:
            if name == AggregateDeleted.NAME:
                current.deleted = True
                continue
            handler = self.sourcing.get(name)
            if handler is not None:
                event_cls, attribute = handler
                getattr(current.state, attribute)(event_cls.model_validate(body))
        current.version = version

    def bind(self, services: Iterable[object]) -> dict[str, tuple[Any, ...]]:
        """For each function, the services it takes (by type); a missing one raises
        `ValueError` naming it, so an `App` is refused at start, not at the first command."""
        registered = tuple(services)
        bound: dict[str, tuple[Any, ...]] = {}
        for kind, function in self.functions.items():
            filled: list[Any] = []
            for annotation in function.extras:
                if annotation is DecideScope:
                    filled.append(DecideScope)
                    continue
                match = next((s for s in registered if _provides(s, annotation, function)), None)
                if match is None:
                    shown = getattr(annotation, "__name__", repr(annotation))
                    raise ValueError(
                        f"{function.name} takes a {shown}: register one with App(services=[...])"
                    )
                filled.append(match)
            bound[kind] = tuple(filled)
        return bound

    def handle(
        self,
        current: Current,
        ref: AggregateRef,
        command_type: str,
        body: Mapping[str, Any],
        services: Mapping[str, tuple[Any, ...]],
        schedule: ScheduleInfo | None = None,
        expected_version: int | None = None,
    ) -> Decided | Rejection:
        """Decide `command_type` with `body` on `current`: the events to commit, or why not.
        `expected_version` is the version the sender expects the aggregate at, if any; a
        deleted aggregate refuses every command before that is looked at.

        A bug in a function (any exception but `CommandRejected` and `ValueError`) is raised,
        not answered: it is a technical failure, and the sender retries.
        """
        admitted = self._admit(current, ref, command_type, body, expected_version)
        if isinstance(admitted, Rejection):
            return admitted
        function, parsed = admitted
        if function is None:
            return _system(command_type, parsed)
        if isinstance(parsed, CommandBody):
            parsed.sent_by(schedule)
        scope = DecideScope(ref, function.name, frozenset(function.schedules))
        arguments = [scope if s is DecideScope else s for s in services.get(command_type, ())]
        instance = self.cls(current.state)
        try:
            decision = getattr(instance, function.attribute)(parsed, *arguments)
        except CommandRejected as refused:
            return refused.rejection
        except (ValidationError, InvalidScheduleError):
            raise  # the function built a bad event or schedule: a bug, not the command's fault
        except ValueError as error:
            return Rejection("IllegalArgument", str(error) or type(error).__name__)
        events = _events_of(function, decision, scope)
        if current.version == 0 and not events:
            raise TypeError(f"{function.name} creates {self.named} but decided no event")
        return Decided(tuple(events), function.name)

    def _admit(
        self,
        current: Current,
        ref: AggregateRef,
        command_type: str,
        body: Mapping[str, Any],
        expected_version: int | None,
    ) -> tuple[CommandFunction | None, BaseModel] | Rejection:
        """The function a command goes to (None for a system command) and its parsed body, or
        why the aggregate refuses it before any function runs."""
        if current.deleted:
            return _deleted(ref, current.version)
        if expected_version is not None and expected_version != current.version:
            return Rejection(
                "CommandExpectVersionConflict",
                f"{ref} is at version {current.version}, the command expects {expected_version}",
            )
        system = SYSTEM_COMMANDS.get(command_type)
        function = self.functions.get(command_type)
        if system is None and function is None:
            known = ", ".join(sorted(self.functions)) or "none"
            return Rejection(
                "BadRequest", f"{self.named} has no command {command_type} (commands: {known})"
            )
        model_cls = system if system is not None else function.command  # type: ignore[union-attr]
        parsed = _parse(model_cls, body, command_type)
        if isinstance(parsed, Rejection):
            return parsed
        creating = function is not None and (function.create or function.allow_create)
        if current.version == 0 and not creating:
            return Rejection("NotFound", f"{ref} (tenant {ref.tenant_id}) does not exist")
        if current.version > 0 and function is not None and function.create:
            return Rejection(
                "DuplicateAggregateId",
                f"{ref} (tenant {ref.tenant_id}) already exists (version {current.version})",
            )
        return (None if system is not None else function), parsed


def _events_of(
    function: CommandFunction, decision: object, scope: DecideScope
) -> list[tuple[str, dict[str, Any]]]:
    """The (name, body) events a function's decision commits: its declared events, then the
    schedule changes it made through its scope. A wrong return or an undeclared event is a bug."""
    if not isinstance(decision, Decision):
        raise TypeError(
            f"{function.name} returned {type(decision).__name__}: return "
            "Decision.events(...) or Decision.NoOp"
        )
    events: list[tuple[str, dict[str, Any]]] = []
    for event in decision.produced:
        name = event_name(event)
        if function.produces and name not in function.produces:
            raise UndeclaredError(
                f"{function.name} decided {name}, which it does not declare: add it to "
                f"@on_command(produces=[...]) (declared: {', '.join(function.produces)})"
            )
        events.append((name, event.model_dump(mode="json", by_alias=True)))
    events.extend((change.NAME, change.model_dump(mode="json")) for change in scope.changes)
    return events


def _provides(service: object, annotation: Any, function: CommandFunction) -> bool:
    """Whether `service` is what a parameter annotated `annotation` takes."""
    if not isinstance(annotation, type):
        return False
    try:
        return isinstance(service, annotation)
    except TypeError:  # a Protocol that is not @runtime_checkable
        raise ValueError(
            f"{function.name} takes a {annotation.__name__}, a Protocol: mark it "
            "@typing.runtime_checkable so the registered service can be matched to it"
        ) from None


def _deleted(ref: AggregateRef, version: int) -> Rejection:
    """The refusal of every command to a deleted aggregate."""
    return Rejection(
        "IllegalAccessDeletedAggregate",
        f"{ref} (tenant {ref.tenant_id}) was deleted at version {version}",
    )


def _system(command_type: str, parsed: BaseModel) -> Decided:
    """The commit of a system command: the schedule event it asks for, or the deletion."""
    if command_type == SCHEDULE_SET:
        assert isinstance(parsed, SetSchedule)
        change = ScheduleSet(key=parsed.key, rule=parsed.rule, command=parsed.command)
        return Decided(((change.NAME, change.model_dump(mode="json")),), SCHEDULE_SET)
    if command_type == SCHEDULE_CANCEL:
        assert isinstance(parsed, CancelSchedule)
        cancelled = ScheduleCancelled(key=parsed.key)
        return Decided(((cancelled.NAME, cancelled.model_dump(mode="json")),), SCHEDULE_CANCEL)
    assert command_type == DELETE_AGGREGATE
    return Decided(((AggregateDeleted.NAME, {}),), DELETE_AGGREGATE)


def _parse(
    cls: type[BaseModel], body: Mapping[str, Any], command_type: str
) -> BaseModel | Rejection:
    try:
        return cls.model_validate(dict(body))
    except ValidationError as error:
        return Rejection("CommandValidation", f"{command_type}: {explain(error)}")
    except ValueError as error:
        return Rejection("CommandValidation", f"{command_type}: {error}")


def _hints(owner: type, function: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(function)
    except Exception as error:
        raise ValueError(
            f"{owner.__name__}.{function.__name__}: cannot read its annotations: {error}"
        ) from None


def _positional(function: Callable[..., Any]) -> list[inspect.Parameter]:
    return [
        p
        for p in inspect.signature(function).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ][1:]  # after self


def _first_parameter_type(
    owner: type, attribute: str, function: Callable[..., Any], what: str
) -> type[BaseModel]:
    parameters = _positional(function)
    hints = _hints(owner, function)
    annotation = hints.get(parameters[0].name) if parameters else None
    if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        raise ValueError(
            f"{owner.__name__}.{attribute}: annotate its {what} parameter with a pydantic model "
            f"class, as in (self, {what}: OrderCreated)"
        )
    return annotation


def _command_parameters(
    owner: type, attribute: str, function: Callable[..., Any]
) -> tuple[type[BaseModel], tuple[Any, ...]]:
    command = _first_parameter_type(owner, attribute, function, "command")
    hints = _hints(owner, function)
    extras = []
    for parameter in _positional(function)[1:]:
        if parameter.name not in hints:
            raise ValueError(
                f"{owner.__name__}.{attribute}: annotate {parameter.name} with its type "
                "(DecideScope or a service class) so it can be filled"
            )
        extras.append(hints[parameter.name])
    return command, tuple(extras)


def _state_class(aggregate_cls: type) -> type:
    hints = _hints(aggregate_cls, aggregate_cls.__init__)  # type: ignore[misc]
    parameters = _positional(aggregate_cls.__init__)  # type: ignore[misc]
    state = hints.get(parameters[0].name) if parameters else None
    if not isinstance(state, type):
        raise ValueError(
            f"{aggregate_cls.__name__}: its __init__ takes the state, annotated with the state "
            f"class, as in def __init__(self, state: {aggregate_cls.__name__}State)"
        )
    return state


def _takes_one_argument(state_cls: type) -> bool:
    try:
        parameters = _positional(state_cls.__init__)  # type: ignore[misc]
    except (TypeError, ValueError):
        return False
    return bool(parameters) and parameters[0].default is inspect.Parameter.empty
