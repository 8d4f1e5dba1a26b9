"""The schedule events a commit carries (set, cancelled, aggregate deleted) and the command
each schedules."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from pydantic import (
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    field_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from wow_temporal.model._base import (
    MAX_COMMAND_BODY_BYTES,
    MAX_COMMAND_BODY_DEPTH,
    MAX_ID_LENGTH,
    InvalidScheduleError,
    ScheduleKey,
    WireModel,
    _schema_ref,
)
from wow_temporal.model.refs import AggregateRef
from wow_temporal.model.rules import ScheduleRule

__all__ = [
    "AggregateDeleted",
    "CommitEvent",
    "ScheduleCancelled",
    "ScheduleEvent",
    "ScheduleSet",
    "ScheduledCommand",
]


def _no_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)


class ScheduledCommand(WireModel):
    """A command to send later: its full type name and its JSON object body."""

    model_config = ConfigDict(extra="forbid")

    type: str = Field(
        min_length=1,
        max_length=256,
        pattern=r"^[A-Za-z_$][\w$.-]*$",
        description="The command's full type name",
        examples=["eshop.order.CancelOrder"],
    )
    body: dict[str, Any] = Field(
        default_factory=dict,
        description="The command's body: a JSON object of at most 256 KiB "
        f"({MAX_COMMAND_BODY_BYTES} bytes as compact UTF-8 JSON)",
        examples=[{"reason": "PAYMENT_TIMEOUT"}],
    )

    revision: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9_.:-]+$",
        exclude_if=lambda value: value is None,
        description="The revision of the body's shape it was written with, when its class "
        "declares one (absent: the first); the target upcasts it to the revision it reads",
        examples=["2"],
        # Absent, not null, on the wire: the schema read and the one written are the same.
        json_schema_extra=_no_default,
    )

    @field_validator("revision", mode="before")
    @classmethod
    def _revision_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("body", mode="before")
    @classmethod
    def _json_object(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            raise InvalidScheduleError(
                f"a command body must be a JSON object, got {type(value).__name__}"
            )
        depth = _depth(value)
        if depth > MAX_COMMAND_BODY_DEPTH:
            raise InvalidScheduleError(
                f"a command body nests {depth} levels deep, more than the "
                f"{MAX_COMMAND_BODY_DEPTH} allowed"
            )
        try:
            text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as error:
            raise InvalidScheduleError(
                f"a command body must be JSON (no NaN or Infinity): {error}"
            ) from None
        size = len(text.encode())
        if size > MAX_COMMAND_BODY_BYTES:
            raise InvalidScheduleError(
                f"a command body is {size} bytes as JSON, more than the "
                f"{MAX_COMMAND_BODY_BYTES} bytes (256 KiB) allowed"
            )
        return value

    @property
    def simple_name(self) -> str:
        """The type's last segment, `CancelOrder` for `eshop.order.CancelOrder`."""
        return self.type.rsplit(".", 1)[-1]


def _depth(value: Any) -> int:
    """How deep JSON arrays and objects nest in `value` (a scalar: 0), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children = list(item.values())
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in children)
    return deepest


class ScheduleSet(WireModel):
    """`wow.ScheduleSet`: schedule `command` for `target` (None: itself) under `key`."""

    model_config = ConfigDict(extra="forbid")
    NAME: ClassVar[str] = "wow.ScheduleSet"
    key: ScheduleKey = Field(description="The schedule's key: one timer per aggregate and key")
    rule: ScheduleRule
    command: ScheduledCommand
    target: AggregateRef | None = Field(
        default=None,
        description="The aggregate the command is sent to; null: the aggregate that committed it",
    )


class ScheduleCancelled(WireModel):
    """`wow.ScheduleCancelled`: cancel the schedule under `key`, if any."""

    model_config = ConfigDict(extra="forbid")
    NAME: ClassVar[str] = "wow.ScheduleCancelled"
    key: ScheduleKey = Field(description="The key of the schedule to cancel")


class AggregateDeleted(WireModel):
    """`wow.AggregateDeleted`: the aggregate is gone, and so are its pending schedules."""

    NAME: ClassVar[str] = "wow.AggregateDeleted"


ScheduleEvent = ScheduleSet | ScheduleCancelled | AggregateDeleted

_SYSTEM_EVENTS: dict[str, type[ScheduleSet] | type[ScheduleCancelled] | type[AggregateDeleted]] = {
    cls.NAME: cls for cls in (ScheduleSet, ScheduleCancelled, AggregateDeleted)
}


_EVENT_DESCRIPTIONS = {
    ScheduleSet.NAME: "Schedule `command` under `key`, sent to `target` (null: the aggregate "
    "itself) when `rule` is due; it replaces what the key had.",
    ScheduleCancelled.NAME: "Cancel the schedule under `key`, if there is one.",
    AggregateDeleted.NAME: "The aggregate is gone, and so are its pending schedules; the body "
    "is empty.",
}


class CommitEvent(WireModel):
    """One event of a commit, as Wow's `DomainEventStream` holds it; other fields are kept."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(max_length=MAX_ID_LENGTH)
    name: str = Field(min_length=1)
    body: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        """One form per schedule event, its body by its name, and any other (domain) event."""
        event_id = {"type": "string", "description": "The event's id", "examples": ["e-1"]}
        forms: list[JsonSchemaValue] = [
            {
                "title": kind.NAME,
                "description": _EVENT_DESCRIPTIONS[kind.NAME],
                "type": "object",
                "properties": {
                    "id": event_id,
                    "name": {"const": kind.NAME},
                    "body": _schema_ref(handler, kind.__pydantic_core_schema__),
                },
                "required": ["id", "name"] if kind is AggregateDeleted else ["id", "name", "body"],
                "additionalProperties": True,
            }
            for kind in _SYSTEM_EVENTS.values()
        ]
        forms.append(
            {
                "title": "domain event",
                "description": "Any other event of the commit: the timers ignore it.",
                "type": "object",
                "properties": {
                    "id": event_id,
                    "name": {
                        "type": "string",
                        "minLength": 1,
                        "not": {"pattern": "^wow\\."},
                        "description": "The event's name; names starting with `wow.` are "
                        "Wow's system events, and only the three above are known",
                        "examples": ["eshop.order.OrderCreated"],
                    },
                    "body": {
                        "type": "object",
                        "additionalProperties": True,
                        "description": "The event's own JSON object",
                    },
                },
                "required": ["id", "name"],
                "additionalProperties": True,
            }
        )
        return {
            "title": "CommitEvent",
            "description": "One event of a commit; its `name` says what its `body` holds.",
            "oneOf": forms,
        }

    @classmethod
    def of(cls, event: ScheduleEvent, event_id: str) -> CommitEvent:
        """The commit event carrying a schedule event."""
        return cls(id=event_id, name=event.NAME, body=event.model_dump(mode="json"))

    def schedule_event(self) -> ScheduleEvent | None:
        """The schedule event this is, or None for a domain event (the timers ignore those)."""
        kind = _SYSTEM_EVENTS.get(self.name)
        if kind is None:
            return None
        return kind.model_validate(self.body)
