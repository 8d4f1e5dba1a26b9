"""The scheduling model: refs, scope, rules, commands, the system events of a commit, the tick.

Everything here is a frozen pydantic model whose JSON is Wow's wire shape (camelCase), and every
validation happens at construction, so a bad rule or key fails where the user wrote it, never
later inside a workflow.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from importlib import resources
from typing import Annotated, Any, ClassVar, Literal, Self
from zoneinfo import ZoneInfo

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic.config import JsonDict
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

from wow_temporal.engine import parsed_cron

__all__ = [
    "MAX_COMMAND_BODY_BYTES",
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
    "ScheduleRule",
    "ScheduleSet",
    "ScheduleTick",
    "ScheduledCommand",
    "Scope",
    "WireModel",
    "ZoneName",
    "explain",
    "validate_cron",
    "validate_key",
    "validate_zone",
]

MAX_COMMAND_BODY_BYTES = 256 * 1024
"""A scheduled command's JSON body may not be larger than this (it travels in workflow history)."""
MAX_ID_LENGTH = 256
"""The longest commit, event, request or command id taken: a commit's and an event's id make
the request id each delivery sends as a header (Wow's ids are some 24 characters)."""
MAX_COMMAND_BODY_DEPTH = 64
"""How deep a command body's arrays and objects may nest: the data converter cannot read a
payload nested a few hundred levels deep, and no command needs more than a few."""

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class InvalidScheduleError(ValueError):
    """A key, name, zone, rule or command that cannot be scheduled; the message says which."""


class InvalidCommitError(ValueError):
    """A commit whose schedule events are unknown or malformed; the message says which event."""


def validate_key(value: str, what: str = "key") -> str:
    """A schedule key or job name: 1-64 letters, digits, `_` and `-`."""
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise InvalidScheduleError(
            f"invalid {what} {value!r}: use 1 to 64 letters, digits, '_' and '-'"
        )
    return value


def validate_zone(value: str) -> str:
    """An IANA time zone name, such as `Europe/Amsterdam`, from the list every machine agrees on.

    The list is the one the `tzdata` package ships, not this machine's zone files, so a rule
    means the same on every worker: `localtime`, `Factory`, `posixrules` and the `posix/` and
    `right/` copies are refused, with the reason.
    """
    if not isinstance(value, str) or value not in _zones():
        raise InvalidScheduleError(f"unknown time zone {value!r}{_why_unknown(value)}")
    return value


@functools.lru_cache(maxsize=512)
def zone_info(name: str) -> ZoneInfo:
    """The zone `name` (checked by `validate_zone`) with the `tzdata` package's rules, not this
    machine's zone files: every worker computes the same due times, and replays agree."""
    validate_zone(name)
    with resources.files("tzdata.zoneinfo").joinpath(*name.split("/")).open("rb") as data:
        return ZoneInfo.from_file(data, key=name)


@functools.cache
def _zones() -> frozenset[str]:
    """The IANA zone names of the `tzdata` package's list, less its placeholder `Factory`."""
    listed = resources.files("tzdata").joinpath("zones").read_text(encoding="utf-8")
    return frozenset(name.strip() for name in listed.splitlines() if name.strip()) - {"Factory"}


_USE_IANA = "use an IANA zone such as Europe/Amsterdam"


def _why_unknown(value: object) -> str:
    """Why a name some machines know is still not a zone here (empty for other names)."""
    if not isinstance(value, str):
        return ""
    if value == "localtime":
        return f": {value!r} depends on the machine; {_USE_IANA}"
    if value == "Factory":
        return f": {value!r} is tzdata's placeholder for a machine with no zone set; {_USE_IANA}"
    if value == "posixrules":
        return f": {value!r} is a template of the machine's zone files, not a zone; {_USE_IANA}"
    tree, _, name = value.partition("/")
    if tree in ("posix", "right") and name:
        instead = f"use {name}" if name in _zones() else _USE_IANA
        return f": the {tree}/ copies of the zones depend on the machine's zone files; {instead}"
    return ""


def validate_cron(text: str) -> str:
    """A six-field Spring cron expression; raises `CronSyntaxError` naming the field and why."""
    parsed_cron(text)
    return text


# The JSON schemas of the checked strings, for the OpenAPI document: what the validators check,
# said in the description where JSON Schema cannot say it.
_KEY_SCHEMA: JsonSchemaValue = {
    "type": "string",
    "pattern": f"^{_NAME.pattern}$",
    "description": "1 to 64 letters, digits, '_' and '-'",
    "examples": ["payment-grace-period"],
}
ZONE_FORMAT = "iana-time-zone"
CRON_FORMAT = "spring-cron"
"""The OpenAPI `format`s naming these strings, for clients and fuzzers that know them."""

_ZONE_SCHEMA: JsonSchemaValue = {
    "type": "string",
    "format": ZONE_FORMAT,
    "description": "An IANA time zone name from the tzdata list, such as Europe/Amsterdam or "
    "UTC (not localtime, Factory, posixrules or a posix/ or right/ name: they depend on the "
    "machine)",
    "examples": ["UTC", "Europe/Amsterdam"],
}
_CRON_SCHEMA: JsonSchemaValue = {
    "type": "string",
    "format": CRON_FORMAT,
    "description": "A Spring cron expression of six fields: second, minute, hour, day of month, "
    "month, day of week (`*`, lists, ranges, steps, names such as MON-FRI, `?`, `L`, `W`, `#`; "
    "or a macro such as @daily)",
    "examples": ["0 0 6 * * *", "0 */15 9-17 * * MON-FRI"],
}

ScheduleKey = Annotated[str, AfterValidator(validate_key), WithJsonSchema(_KEY_SCHEMA)]
ZoneName = Annotated[str, AfterValidator(validate_zone), WithJsonSchema(_ZONE_SCHEMA)]
CronText = Annotated[str, AfterValidator(validate_cron), WithJsonSchema(_CRON_SCHEMA)]


def _schema_ref(handler: GetJsonSchemaHandler, core: CoreSchema) -> JsonSchemaValue:
    """A `$ref` to `core`'s schema, registered in the document's definitions.

    A hook's handler inlines the schema it is handed; the items of a list are referenced.
    """
    ref: JsonSchemaValue = handler(core_schema.list_schema(core))["items"]
    return ref


class WireModel(BaseModel):
    """Frozen, camelCase on the wire (as Wow writes it), snake_case in Python."""

    model_config = ConfigDict(
        frozen=True,
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )


class Misfire(StrEnum):
    """What a cron schedule does with the slots it missed while nothing ran it."""

    COALESCE = "COALESCE"
    """Only the latest missed slot runs; the tick's `skipped` counts the others."""
    CATCH_UP = "CATCH_UP"
    """Every missed slot runs, in order."""


class JobScope(StrEnum):
    """How many instances a recurring job has."""

    SYSTEM = "SYSTEM"
    """One instance (or one per partition when sharded), enabled by the host at startup."""
    TENANT = "TENANT"
    """One instance per tenant, created by `wow.schedule.Enable` in that tenant."""


class AggregateRef(WireModel):
    """One aggregate instance: context, aggregate name, tenant and id."""

    context_name: str = Field(min_length=1)
    aggregate_name: str = Field(min_length=1)
    tenant_id: str
    aggregate_id: str = Field(min_length=1)

    @property
    def named(self) -> NamedAggregate:
        return NamedAggregate(self.context_name, self.aggregate_name)

    def __str__(self) -> str:
        return f"{self.context_name}.{self.aggregate_name} {self.aggregate_id}"


class NamedAggregate(WireModel):
    """An aggregate type in its bounded context, as in `NamedAggregate("eshop-order", "order")`."""

    context_name: str = Field(min_length=1)
    aggregate_name: str = Field(min_length=1)

    def __init__(self, context: str | None = None, aggregate: str | None = None, /, **data: Any):
        if context is not None:
            data["context_name"] = context
        if aggregate is not None:
            data["aggregate_name"] = aggregate
        super().__init__(**data)

    def ref(self, tenant_id: str, aggregate_id: str) -> AggregateRef:
        """The instance of this aggregate with that id in that tenant."""
        return AggregateRef(
            context_name=self.context_name,
            aggregate_name=self.aggregate_name,
            tenant_id=tenant_id,
            aggregate_id=aggregate_id,
        )

    def __str__(self) -> str:
        return f"{self.context_name}.{self.aggregate_name}"


class Scope(WireModel):
    """Who a commit (and so every command it schedules) belongs to."""

    tenant_id: str = ""
    owner_id: str = ""
    space_id: str = ""


RuleKind = Literal["at", "after", "cron"]

LONGEST_DELAY = timedelta(days=36_525)
"""The longest `after` delay: 100 years, which no real schedule meets (and whatever is
accepted must round-trip through Temporal's data converter)."""
EARLIEST_INSTANT = datetime(1970, 1, 1, tzinfo=UTC)
LATEST_INSTANT = datetime(9999, 12, 30, tzinfo=UTC)
"""The range of `at` instants and commit times (a day short of the calendar's end, so that
every zone can still show it)."""
_ISO_INSTANT = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?([Zz]|[+-]\d{2}:?\d{2})?"
)
"""An instant as ISO-8601 text (one without an offset is refused next, saying so); `2026` or
`1796000000` is no instant."""
_ISO_DURATION = re.compile(
    r"(?P<sign>[+-])?P(?=\d|T\d)(?:(?P<W>\d+)W)?(?:(?P<D>\d+)D)?"
    r"(?:T(?=\d)(?:(?P<H>\d+)H)?(?:(?P<M>\d+)M)?(?:(?P<S>\d+)(?:\.(?P<F>\d{1,9}))?S)?)?",
    re.IGNORECASE,
)
"""A delay as Java's `Duration` writes and parses it (weeks and days, hours, minutes, seconds);
not `30:00` or `1 day`, and no months or years (a month has no fixed length)."""
_DURATIONS_TAKEN = (
    "an ISO-8601 duration of weeks, days, hours, minutes and seconds, such as PT30M, PT36H, "
    "P1DT12H or PT0.5S (no months or years: they have no fixed length)"
)
_MICROS = {"W": 604_800_000_000, "D": 86_400_000_000, "H": 3_600_000_000, "M": 60_000_000}


def _delay_of(value: object) -> timedelta:
    """The delay an `after` text gives, or `InvalidScheduleError` saying what was given and
    what is taken (a number, `30 minutes`, a negative, zero or a delay over 100 years)."""
    found = _ISO_DURATION.fullmatch(value) if isinstance(value, str) else None
    if found is None:
        raise InvalidScheduleError(f"ScheduleRule.after is {_DURATIONS_TAKEN}, got {value!r}")
    micros = sum(int(found[unit] or 0) * size for unit, size in _MICROS.items())
    micros += int(found["S"] or 0) * 1_000_000 + int((found["F"] or "").ljust(6, "0")[:6])
    if micros == 0 or found["sign"] == "-":
        raise InvalidScheduleError(
            f"ScheduleRule.after needs a positive duration such as PT30M, got {value!r}"
            + ("" if micros or not found["F"] else " (less than the microsecond kept)")
        )
    if micros > LONGEST_DELAY // timedelta(microseconds=1):
        raise InvalidScheduleError(
            f"ScheduleRule.after is at most 100 years (PT876600H), got {value!r}"
        )
    return timedelta(microseconds=micros)


NO_CONTROL = r"^[^\x00-\x1f\x7f]*$"
"""Text without C0 control characters or DEL: what an id or name on the wire may hold
(Temporal's visibility cannot search for a NUL; the domain host refuses them in ids too)."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def has_control(text: str) -> bool:
    """Whether `text` holds a character `NO_CONTROL` refuses."""
    return _CONTROL.search(text) is not None


_NAME_SCHEMA: JsonDict = {"pattern": NO_CONTROL}
"""Documented for a commit's names: the control API refuses a control character in them."""


SECONDS_NOT_MILLIS = 1_000_000_000_000
"""A `createTime` below this (2001-09-09 in milliseconds) is a time in seconds, mistaken."""
LATEST_CREATE_TIME = int((LATEST_INSTANT - LONGEST_DELAY).timestamp() * 1000)
"""The latest `createTime` (in 9899): the longest delay from it is still a date."""


_AT_FORM: JsonSchemaValue = {
    "title": "at",
    "description": "Due once, at an instant.",
    "type": "object",
    "properties": {
        "at": {
            "type": "string",
            "format": "date-time",
            "description": "An ISO-8601 instant with its offset (`Z` or `+01:00`), "
            "from 1970-01-01T00:00Z to 9999-12-30T00:00Z",
            "examples": ["2026-12-01T10:30:00Z"],
        }
    },
    "required": ["at"],
    "additionalProperties": False,
    "examples": [{"at": "2026-12-01T10:30:00Z"}],
}
"""The `at` wire form of a rule, for the OpenAPI document."""

_AFTER_FORM: JsonSchemaValue = {
    "title": "after",
    "description": "Due once, a delay after the commit's `createTime`.",
    "type": "object",
    "properties": {
        "after": {
            "type": "string",
            "description": "A positive ISO-8601 duration, as Java's "
            "`Duration.toString()` writes it (fractions of a second too, which "
            "RFC 3339's `duration` format has not), of at most 100 years (36525 "
            "days)",
            "examples": ["PT30M", "PT36H", "PT0.5S"],
        }
    },
    "required": ["after"],
    "additionalProperties": False,
    "examples": [{"after": "PT30M"}],
}
"""The `after` wire form of a rule, for the OpenAPI document."""


class ScheduleRule(WireModel):
    """When a schedule is due: at an instant, after a delay from its commit, or by cron.

    Build one with `ScheduleRule.at`, `.after` or `.cron`. The JSON is one of `{"at": instant}`,
    `{"after": "PT30M"}` or `{"cron": "0 0 6 * * *", "zone": "UTC", "misfire": "COALESCE"}`,
    and so is its JSON schema (a `oneOf` of the three, in validation and serialization alike).
    """

    model_config = ConfigDict(extra="forbid")

    at_instant: datetime | None = Field(default=None, alias="at")
    after_delay: timedelta | None = Field(default=None, alias="after")
    cron_expression: CronText | None = Field(default=None, alias="cron")
    zone: ZoneName = "UTC"
    misfire: Misfire = Misfire.COALESCE

    @classmethod
    def at(cls, instant: datetime) -> ScheduleRule:
        """Due once, at `instant` (timezone-aware)."""
        return cls._build(dict(at=instant))

    @classmethod
    def after(cls, delay: timedelta) -> ScheduleRule:
        """Due once, `delay` after the commit that sets it."""
        return cls._build(dict(after=delay))

    @classmethod
    def cron(
        cls, expression: str, zone: str = "UTC", misfire: Misfire = Misfire.COALESCE
    ) -> ScheduleRule:
        """Due each time the six-field Spring cron `expression` matches, read in `zone`."""
        return cls._build(dict(cron=expression, zone=zone, misfire=misfire))

    @classmethod
    def _build(cls, fields: dict[str, Any]) -> ScheduleRule:
        try:
            return cls(**fields)
        except ValidationError as error:
            raise InvalidScheduleError(explain(error)) from None

    @property
    def kind(self) -> RuleKind:
        if self.at_instant is not None:
            return "at"
        if self.after_delay is not None:
            return "after"
        return "cron"

    @field_validator("at_instant", "after_delay", mode="before")
    @classmethod
    def _iso_text(cls, value: object, info: ValidationInfo) -> object:
        """On the wire an instant or a delay is the ISO-8601 text the spec shows: a number
        (seconds? milliseconds?) is the kind of mistake that schedules for centuries."""
        if info.field_name == "after_delay":
            return value if isinstance(value, timedelta) else _delay_of(value)
        if isinstance(value, datetime) or (
            isinstance(value, str) and _ISO_INSTANT.fullmatch(value)
        ):
            return value
        raise InvalidScheduleError(
            f"ScheduleRule.at is an ISO-8601 instant such as 2026-12-01T10:30:00Z, got {value!r}"
        )

    @field_validator("at_instant")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and (value.tzinfo is None or value.utcoffset() is None):
            raise InvalidScheduleError(
                f"ScheduleRule.at needs a timezone-aware instant, got naive {value.isoformat()}"
            )
        if value is not None and not EARLIEST_INSTANT <= value <= LATEST_INSTANT:
            raise InvalidScheduleError(
                f"ScheduleRule.at is between 1970-01-01T00:00Z and 9999-12-30T00:00Z, got "
                f"{value.isoformat()}"
            )
        return value

    @field_validator("after_delay")
    @classmethod
    def _positive(cls, value: timedelta | None) -> timedelta | None:
        if value is not None and value <= timedelta(0):
            raise InvalidScheduleError(
                f"ScheduleRule.after needs a positive duration such as PT30M, got "
                f"{'-' if value < timedelta(0) else ''}{_iso_duration(abs(value))}"
            )
        if value is not None and value > LONGEST_DELAY:
            raise InvalidScheduleError(
                f"ScheduleRule.after is at most 100 years (PT876600H), got {_iso_duration(value)}"
            )
        return value

    @model_validator(mode="after")
    def _exactly_one(self) -> Self:
        given = [
            name
            for name, value in (
                ("at", self.at_instant),
                ("after", self.after_delay),
                ("cron", self.cron_expression),
            )
            if value is not None
        ]
        if len(given) != 1:
            raise InvalidScheduleError(
                "a schedule rule is exactly one of 'at', 'after' or 'cron'"
                + (f", got {' and '.join(given)}" if given else "")
            )
        return self

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        """The three wire forms, for the OpenAPI document (not the five fields of the model)."""
        misfire = {
            **_schema_ref(handler, TypeAdapter(Misfire).core_schema),
            "default": Misfire.COALESCE.value,
            "description": "What happens to the slots missed while nothing ran the timer: "
            "COALESCE runs only the latest, CATCH_UP runs each in order",
        }
        forms: list[JsonSchemaValue] = [
            copy.deepcopy(_AT_FORM),  # a schema generator may change what it is handed
            copy.deepcopy(_AFTER_FORM),
            {
                "title": "cron",
                "description": "Due each time a six-field Spring cron expression matches, read in "
                "`zone`.",
                "type": "object",
                "properties": {
                    "cron": _CRON_SCHEMA,
                    "zone": {**_ZONE_SCHEMA, "default": "UTC"},
                    "misfire": misfire,
                },
                "required": ["cron"],
                "additionalProperties": False,
                "examples": [
                    {"cron": "0 0 6 * * *", "zone": "Europe/Amsterdam", "misfire": "COALESCE"}
                ],
            },
        ]
        return {
            "title": "ScheduleRule",
            "description": "When a schedule is due: exactly one of `at`, `after` or `cron`.",
            "oneOf": forms,
        }

    @model_serializer(mode="plain")
    def _to_wire(self) -> dict[str, Any]:
        if self.at_instant is not None:
            instant = self.at_instant.astimezone(UTC)
            return {"at": instant.isoformat().replace("+00:00", "Z")}
        if self.after_delay is not None:
            return {"after": _iso_duration(self.after_delay)}
        return {"cron": self.cron_expression, "zone": self.zone, "misfire": self.misfire.value}

    def first_due(self, committed: datetime) -> datetime | None:
        """The first due instant of a schedule committed at `committed`, or None if never."""
        if self.at_instant is not None:
            return self.at_instant
        if self.after_delay is not None:
            return committed + self.after_delay
        return self.next_cron(committed)

    def next_cron(self, after: datetime) -> datetime | None:
        """The next cron slot strictly after `after`, in UTC, or None if it never matches."""
        assert self.cron_expression is not None
        local = after.astimezone(zone_info(self.zone))
        found = parsed_cron(self.cron_expression).next(local)
        return None if found is None else found.astimezone(UTC)

    def describe(self) -> str:
        """A short human description, for summaries in the Web UI."""
        if self.at_instant is not None:
            return f"at {self.at_instant.isoformat()}"
        if self.after_delay is not None:
            return f"after {_iso_duration(self.after_delay)}"
        return f"cron {self.cron_expression} ({self.zone}, {self.misfire.value})"


def _iso_duration(delay: timedelta) -> str:
    """ISO-8601 duration as Java's `Duration.toString()` writes it (`PT30M`, `PT36H`, `PT0.5S`)."""
    total_us = delay.days * 86_400_000_000 + delay.seconds * 1_000_000 + delay.microseconds
    hours, rest = divmod(total_us, 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    seconds, micros = divmod(rest, 1_000_000)
    text = "PT"
    if hours:
        text += f"{hours}H"
    if minutes:
        text += f"{minutes}M"
    if seconds or micros or text == "PT":
        text += f"{seconds}.{micros:06d}".rstrip("0").rstrip(".") + "S"
    return text


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


def explain(error: ValidationError) -> str:
    """One readable line from a pydantic error: where, then what (for messages at the edge).

    Every missing field is named, all at once (a caller should not learn them one request at a
    time); of the other problems, the first three, and how many more there are.
    """
    missing: list[str] = []
    others: list[str] = []
    for item in error.errors(include_url=False):
        where = ".".join(str(p) for p in item["loc"])
        if item["type"] == "missing" and where:
            missing.append(where)
            continue
        message = str(item["msg"]).removeprefix("Value error, ")
        others.append(f"{where}: {message}" if where else message)
    parts = []
    if len(missing) == 1:
        parts.append(f"{missing[0]}: Field required")
    elif missing:
        parts.append(f"missing required fields: {', '.join(missing)}")
    parts.extend(others[:3])
    if len(others) > 3:
        parts.append(f"and {len(others) - 3} more")
    return "; ".join(parts)


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
