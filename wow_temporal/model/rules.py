"""When a command is due: the schedule rule (at, after, cron) and how missed slots are run."""

from __future__ import annotations

import copy
import re
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Literal, Self

from pydantic import (
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from wow_temporal.engine import parsed_cron
from wow_temporal.model._base import (
    _CRON_SCHEMA,
    _ZONE_SCHEMA,
    CronText,
    InvalidScheduleError,
    WireModel,
    ZoneName,
    _schema_ref,
    explain,
    zone_info,
)

__all__ = ["LATEST_INSTANT", "LONGEST_DELAY", "JobScope", "Misfire", "ScheduleRule", "iso_duration"]


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
        """Due each time the six-field Spring cron `expression` matches, read in `zone`.

        An expression no time ever matches (`0 0 0 30 2 *`: no February has a 30th) is refused
        with `InvalidScheduleError` saying so: a timer of it would never be due, finish at once
        and look delivered without a delivery."""
        rule = cls._build(dict(cron=expression, zone=zone, misfire=misfire))
        rule.check_fires()
        return rule

    @classmethod
    def _build(cls, fields: dict[str, Any]) -> ScheduleRule:
        try:
            return cls(**fields)
        except ValidationError as error:
            raise InvalidScheduleError(explain(error)) from None

    def check_fires(self) -> None:
        """Raise `InvalidScheduleError` if this is a cron rule that no time ever matches,
        naming the expression; return quietly otherwise (an `at` or `after` rule is due once).

        This is asked at the edges where a new rule comes in (`ScheduleRule.cron` and the
        admission of a commit, so `POST /commits` answers 400 and `wow-temporal apply` exits
        2), not in the model's validator: the same model reads the inputs of timers already
        started and the commits a host has stored, and a timer started with such a rule
        before this check must still read its input and replay (its first due is None, and
        it ends at once, as it always did)."""
        expression = self.cron_expression
        problem = None if expression is None else fires_problem(expression, self.zone)
        if problem is not None:
            raise InvalidScheduleError(problem)

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
                f"{'-' if value < timedelta(0) else ''}{iso_duration(abs(value))}"
            )
        if value is not None and value > LONGEST_DELAY:
            raise InvalidScheduleError(
                f"ScheduleRule.after is at most 100 years (PT876600H), got {iso_duration(value)}"
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
            return {"after": iso_duration(self.after_delay)}
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
            return f"after {iso_duration(self.after_delay)}"
        return f"cron {self.cron_expression} ({self.zone}, {self.misfire.value})"


def never_fires(expression: str) -> str:
    """Why a cron `expression` that matches no time is refused, for the error it raises."""
    return (
        f"cron {expression!r} never fires: no time ever matches it (no date of the calendar "
        "has its day-of-month, month and day-of-week), so it would never be due"
    )


def fires_problem(expression: str, zone: str | None = None) -> str | None:
    """Why a cron rule would never be due, or None: no time matches `expression` at all, or
    (with `zone`) every time that matches from now on is one the zone's clocks skip (`0 30 2 ?
    3 SUNL` in Europe/Berlin: 02:30 on the last Sunday of March is always in the DST gap). One
    answer for every edge a rule comes in by (timers, jobs, settings, the `cron` command)."""
    parsed = parsed_cron(expression)
    if not parsed.ever_matches():
        return never_fires(expression)
    if zone is not None and parsed.next(datetime.now(zone_info(zone))) is None:
        return (
            f"cron {expression!r} never fires in {zone}: every time it matches from now on is "
            "one the zone's clocks skip (a DST gap), so it would never be due"
        )
    return None


def firing(expression: str) -> str:
    """`expression`, or `ValueError` saying why it would never be due: a pydantic validator for
    the edges that take a job's expression alone (the API's reschedule, the settings)."""
    problem = fires_problem(expression)
    if problem is not None:
        raise ValueError(problem)
    return expression


def iso_duration(delay: timedelta) -> str:
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
