"""What every part of the wire model shares: limits, errors, validation of keys, zones and
cron, and the strict base model."""

from __future__ import annotations

import functools
import re
from importlib import resources
from typing import Annotated
from zoneinfo import ZoneInfo

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    GetJsonSchemaHandler,
    ValidationError,
    WithJsonSchema,
)
from pydantic.alias_generators import to_camel
from pydantic.config import JsonDict
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

from wow_temporal.engine import parsed_cron
from wow_temporal.errors import WowTemporalError

__all__ = [
    "CRON_FORMAT",
    "MAX_COMMAND_BODY_BYTES",
    "MAX_COMMAND_BODY_DEPTH",
    "MAX_ID_LENGTH",
    "NO_CONTROL",
    "ZONE_FORMAT",
    "CronText",
    "InvalidCommitError",
    "InvalidScheduleError",
    "ScheduleKey",
    "WireModel",
    "ZoneName",
    "explain",
    "has_control",
    "validate_cron",
    "validate_key",
    "validate_zone",
    "zone_info",
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


class InvalidScheduleError(WowTemporalError, ValueError):
    """A key, name, zone, rule or command that cannot be scheduled; the message says which."""


class InvalidCommitError(WowTemporalError, ValueError):
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


NO_CONTROL = r"^[^\x00-\x1f\x7f]*$"
"""Text without C0 control characters or DEL: what an id or name on the wire may hold
(Temporal's visibility cannot search for a NUL; the domain host refuses them in ids too)."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def has_control(text: str) -> bool:
    """Whether `text` holds a character `NO_CONTROL` refuses."""
    return _CONTROL.search(text) is not None


_NAME_SCHEMA: JsonDict = {"pattern": NO_CONTROL}
"""Documented for a commit's names: the control API refuses a control character in them."""


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
