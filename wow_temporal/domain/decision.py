"""What a command function decides: `Decision.events(...)` or `Decision.NoOp`, and through its
`DecideScope` the schedules to set or cancel, committed with those events."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import ClassVar

from pydantic import BaseModel

from wow_temporal.domain.messages import type_name
from wow_temporal.domain.upcasting import revision_of
from wow_temporal.errors import WowTemporalError
from wow_temporal.model import (
    AggregateRef,
    ScheduleCancelled,
    ScheduledCommand,
    ScheduleRule,
    ScheduleSet,
    validate_key,
)

__all__ = ["DecideScope", "Decision", "UndeclaredError"]


class UndeclaredError(WowTemporalError, TypeError):
    """A function produced an event or scheduled a command type it did not declare."""


@dataclass(frozen=True, slots=True)
class Decision:
    """The events a command function decided, in order; `Decision.NoOp` decides none."""

    produced: tuple[BaseModel, ...] = ()
    NoOp: ClassVar[Decision]

    @classmethod
    def events(cls, *events: BaseModel) -> Decision:
        """Decide these events (pydantic models), committed in this order."""
        for event in events:
            if not isinstance(event, BaseModel):
                raise TypeError(
                    f"Decision.events takes pydantic models, not {type(event).__name__}"
                )
        return cls(tuple(events))

    @property
    def is_noop(self) -> bool:
        return not self.produced


Decision.NoOp = Decision()


@dataclass(slots=True)
class DecideScope:
    """What a command function can do beside deciding events: set and cancel schedules, which are
    committed with its events (`wow.ScheduleSet` / `wow.ScheduleCancelled`), or not at all."""

    aggregate: AggregateRef
    function: str
    declared: frozenset[str]
    changes: list[ScheduleSet | ScheduleCancelled] = field(default_factory=list)

    def schedule(
        self,
        key: str,
        rule: ScheduleRule,
        command: BaseModel,
        target: AggregateRef | None = None,
    ) -> None:
        """Send `command` to `target` (this aggregate when None) each time `rule` is due; setting
        `key` again replaces it. The command's type must be in the function's `schedules`."""
        if target is not None and not isinstance(target, AggregateRef):
            raise TypeError(f"schedule {key}: the target is an AggregateRef or None")
        scheduled = scheduled_command(
            key, rule, command, self.declared, self.function, "@on_command(schedules=[...])"
        )
        self.changes.append(ScheduleSet(key=key, rule=rule, command=scheduled, target=target))

    def cancel_schedule(self, key: str) -> None:
        """Cancel the schedule under `key`; a command it already sent is not recalled."""
        validate_key(key)
        self.changes.append(ScheduleCancelled(key=key))


def scheduled_command(
    key: str,
    rule: ScheduleRule,
    command: BaseModel,
    declared: frozenset[str],
    function: str,
    declare_in: str,
) -> ScheduledCommand:
    """`command` as a schedule carries it, once `key`, `rule` and its declared type are
    checked; `UndeclaredError` names the function, the type and where to declare it."""
    validate_key(key)
    if not isinstance(rule, ScheduleRule):
        raise TypeError(f"schedule {key}: the rule is a ScheduleRule, not {type(rule).__name__}")
    if not isinstance(command, BaseModel):
        raise TypeError(
            f"schedule {key}: the command is a pydantic model, not {type(command).__name__}"
        )
    kind = type_name(command)
    if kind not in declared:
        shown = ", ".join(sorted(declared)) or "none"
        raise UndeclaredError(
            f"{function} scheduled {kind}, which it does not declare: add it to {declare_in} "
            f"(declared: {shown})"
        )
    return ScheduledCommand(
        type=kind,
        body=command.model_dump(mode="json", by_alias=True),
        revision=revision_of(type(command)),
    )


def declared_types(types: Iterable[type[BaseModel] | str], what: str) -> tuple[str, ...]:
    """Full type names of `produces=` / `schedules=` entries (classes or names)."""
    names = []
    for entry in types:
        if isinstance(entry, str) and entry:
            names.append(entry)
        elif isinstance(entry, type) and issubclass(entry, BaseModel):
            names.append(type_name(entry))
        else:
            raise TypeError(f"{what} lists pydantic model classes or type names, not {entry!r}")
    return tuple(names)
