"""Wow's commit as it arrives at ingest: an aggregate's version and its events, strictly read."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Self

from pydantic import (
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from wow_temporal.model._base import (
    _NAME_SCHEMA,
    MAX_ID_LENGTH,
    InvalidCommitError,
    WireModel,
    explain,
)
from wow_temporal.model.events import (
    _SYSTEM_EVENTS,
    CommitEvent,
    ScheduleEvent,
)
from wow_temporal.model.refs import AggregateRef, Scope
from wow_temporal.model.rules import LATEST_INSTANT, LONGEST_DELAY

__all__ = ["Commit"]


SECONDS_NOT_MILLIS = 1_000_000_000_000
"""A `createTime` below this (2001-09-09 in milliseconds) is a time in seconds, mistaken."""
LATEST_CREATE_TIME = int((LATEST_INSTANT - LONGEST_DELAY).timestamp() * 1000)
"""The latest `createTime` (in 9899): the longest delay from it is still a date."""


_EXAMPLE_COMMIT: dict[str, Any] = {
    "id": "commit-7",
    "contextName": "eshop-order",
    "aggregateName": "order",
    "tenantId": "t1",
    "aggregateId": "42",
    "version": 3,
    "createTime": 1764470000000,
    "body": [
        {"id": "e-1", "name": "eshop.order.OrderCreated", "body": {"items": 2}},
        {
            "id": "e-2",
            "name": "wow.ScheduleSet",
            "body": {
                "key": "payment-grace-period",
                "rule": {"after": "PT30M"},
                "command": {
                    "type": "eshop.order.CancelOrder",
                    "body": {"reason": "PAYMENT_TIMEOUT"},
                },
                "target": None,
            },
        },
        {"id": "e-3", "name": "wow.ScheduleCancelled", "body": {"key": "reminder"}},
    ],
}


class Commit(WireModel):
    """A commit handed to the timers, in the shape of Wow's `DomainEventStream` JSON."""

    model_config = ConfigDict(extra="allow", json_schema_extra={"examples": [_EXAMPLE_COMMIT]})

    id: str = Field(
        min_length=1,
        max_length=MAX_ID_LENGTH,
        description="The commit's id; with an event's id, it makes the request id of each "
        "command delivered",
    )
    context_name: str = Field(min_length=1, json_schema_extra=_NAME_SCHEMA)
    aggregate_name: str = Field(min_length=1, json_schema_extra=_NAME_SCHEMA)
    tenant_id: str = Field(json_schema_extra=_NAME_SCHEMA)
    aggregate_id: str = Field(min_length=1, json_schema_extra=_NAME_SCHEMA)
    owner_id: str = Field(default="", max_length=MAX_ID_LENGTH)
    space_id: str = Field(default="", max_length=MAX_ID_LENGTH)
    version: int = Field(
        ge=1,
        le=2**63 - 1,  # Wow's version is a Java long
        strict=True,
        description="The aggregate's version after this commit: it orders a key's schedule "
        "events (an event from a version not newer than one a timer applied changes nothing)",
    )
    create_time: int = Field(
        strict=True,
        description="Epoch milliseconds (not seconds); an `after` rule counts from it",
        json_schema_extra={"minimum": SECONDS_NOT_MILLIS, "maximum": LATEST_CREATE_TIME},
    )
    request_id: str = Field(default="", max_length=MAX_ID_LENGTH)
    command_id: str = Field(default="", max_length=MAX_ID_LENGTH)
    header: dict[str, str] = Field(
        default_factory=dict, description="Message headers, such as trace_id, passed on"
    )
    body: list[CommitEvent] = Field(
        default_factory=list,
        description="The commit's events in order; the timers read wow.ScheduleSet, "
        "wow.ScheduleCancelled and wow.AggregateDeleted and ignore the others",
    )

    @field_validator("create_time")
    @classmethod
    def _milliseconds(cls, value: int) -> int:
        latest = LATEST_CREATE_TIME
        if SECONDS_NOT_MILLIS // 1000 <= value < SECONDS_NOT_MILLIS:
            as_seconds = (
                f" for {datetime.fromtimestamp(value, UTC):%Y-%m-%dT%H:%M:%SZ}"
                if value * 1000 <= LATEST_CREATE_TIME
                else ""
            )
            raise InvalidCommitError(
                f"createTime is epoch milliseconds; {value} reads as a time in seconds "
                f"(in milliseconds it is {datetime.fromtimestamp(value / 1000, UTC):%Y-%m-%d}): "
                f"send {value * 1000}{as_seconds}"
            )
        if not SECONDS_NOT_MILLIS <= value <= latest:
            raise InvalidCommitError(
                f"createTime {value} is out of range: epoch milliseconds between "
                f"{SECONDS_NOT_MILLIS} (2001-09-09) and {latest} (9899)"
            )
        return value

    @model_validator(mode="after")
    def _schedule_events_valid(self) -> Self:
        for index, event in enumerate(self.body):
            if event.name.startswith("wow.") and event.name not in _SYSTEM_EVENTS:
                raise InvalidCommitError(
                    f"commit {self.id!r}, event {index} ({event.id!r}): unknown system event "
                    f"{event.name!r}; known: {', '.join(sorted(_SYSTEM_EVENTS))}"
                )
            try:
                event.schedule_event()
            except ValidationError as error:
                raise InvalidCommitError(
                    f"commit {self.id!r}, event {index} ({event.id!r}, {event.name}): "
                    + explain(error)
                ) from None
        return self

    @classmethod
    def parse(cls, data: str | bytes | dict[str, Any]) -> Commit:
        """Parse a commit from JSON text or a decoded dict; raises `InvalidCommitError`."""
        try:
            if isinstance(data, dict):
                return cls.model_validate(data)
            return cls.model_validate_json(data)
        except ValidationError as error:
            raise InvalidCommitError(f"invalid commit: {explain(error)}") from None

    @property
    def aggregate(self) -> AggregateRef:
        return AggregateRef(
            context_name=self.context_name,
            aggregate_name=self.aggregate_name,
            tenant_id=self.tenant_id,
            aggregate_id=self.aggregate_id,
        )

    @property
    def scope(self) -> Scope:
        return Scope(tenant_id=self.tenant_id, owner_id=self.owner_id, space_id=self.space_id)

    @property
    def created_at(self) -> datetime:
        return datetime.fromtimestamp(self.create_time / 1000, UTC)

    @property
    def has_schedule_events(self) -> bool:
        """Whether any event is a schedule event (by name: validating the commit checked them)."""
        return any(event.name in _SYSTEM_EVENTS for event in self.body)

    def schedule_events(self) -> list[tuple[CommitEvent, ScheduleEvent]]:
        """The commit's schedule events in order, each with its envelope; domain events skipped."""
        found: list[tuple[CommitEvent, ScheduleEvent]] = []
        for event in self.body:
            parsed = event.schedule_event()
            if parsed is not None:
                found.append((event, parsed))
        return found
