"""Wow's HTTP command wire, written once: the headers a command travels with to
`POST /wow/command/send`, Wow's error codes and their statuses, and Wow's `CommandResult`.

`command_headers(command)` is what a sender (the timers' delivery, the demo, the benchmarks)
puts on the request; `parse_command(headers, body)` is what a domain host reads back from it,
refusing what Wow would refuse (`WireError`). Both are pure: the host makes the ids a command
came without, the sender adds its trace context. `read_result` reads any host's answer.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol
from urllib.parse import quote, unquote

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr
from pydantic.alias_generators import to_camel

from wow_temporal.errors import WowTemporalError
from wow_temporal.model import AggregateRef

__all__ = [
    "AGGREGATE_CONTEXT_HEADER",
    "AGGREGATE_ID_HEADER",
    "AGGREGATE_NAME_HEADER",
    "AGGREGATE_VERSION_HEADER",
    "COMMAND_SEND_PATH",
    "COMMAND_TYPE_HEADER",
    "DEFAULT_TENANT",
    "DUPLICATE_REQUEST_ID",
    "ERROR_CODE_HEADER",
    "ERROR_STATUS",
    "MESSAGE_HEADER_PREFIX",
    "OK",
    "ORIGIN_HEADERS",
    "OWNER_ID_HEADER",
    "PROCESSED",
    "REQUEST_ID_HEADER",
    "REQUIRED_HEADERS",
    "REVISION_HEADER",
    "SPACE_ID_HEADER",
    "TENANT_ID_HEADER",
    "TRACEPARENT_HEADER",
    "WAIT_STAGES",
    "WAIT_STAGE_HEADER",
    "CommandResult",
    "CommandTarget",
    "FunctionInfo",
    "ReadResult",
    "SlotOrigin",
    "WireCommand",
    "WireError",
    "command_headers",
    "decode_header_value",
    "encode_header_value",
    "error_status",
    "origin_headers",
    "parse_command",
    "read_result",
    "require_headers",
]

COMMAND_SEND_PATH = "/wow/command/send"
"""Wow's generic command endpoint; the headers say which aggregate and command type."""

COMMAND_TYPE_HEADER = "Command-Type"
AGGREGATE_CONTEXT_HEADER = "Command-Aggregate-Context"
AGGREGATE_NAME_HEADER = "Command-Aggregate-Name"
AGGREGATE_ID_HEADER = "Command-Aggregate-Id"
TENANT_ID_HEADER = "Command-Tenant-Id"
AGGREGATE_VERSION_HEADER = "Command-Aggregate-Version"
REQUEST_ID_HEADER = "Command-Request-Id"
WAIT_STAGE_HEADER = "Command-Wait-Stage"
OWNER_ID_HEADER = "Command-Owner-Id"
SPACE_ID_HEADER = "Wow-Space-Id"
TRACEPARENT_HEADER = "traceparent"
MESSAGE_HEADER_PREFIX = "Command-Header-"
"""A message header `key` travels as `Command-Header-<key>` (keys are lower case: header names
are not)."""
REVISION_HEADER = "command_revision"
"""The message header (`Command-Header-command_revision`) a scheduled command's revision
travels in: the revision of its body's shape it was written with (absent: the first)."""
ERROR_CODE_HEADER = "Wow-Error-Code"
"""The answer's error code, as in its `CommandResult` body."""

REQUIRED_HEADERS = (COMMAND_TYPE_HEADER, AGGREGATE_CONTEXT_HEADER, AGGREGATE_NAME_HEADER)

DEFAULT_TENANT = "(0)"
"""Wow's default tenant id, for a command without `Command-Tenant-Id`."""

PROCESSED = "PROCESSED"
WAIT_STAGES = frozenset(
    {"SENT", PROCESSED, "SNAPSHOT", "PROJECTED", "EVENT_HANDLED", "SAGA_HANDLED"}
)
"""Wow's wait stages. The domain host answers every command once committed (PROCESSED): what
it scheduled is never part of its wait, nor the sagas and projections that follow the log."""

OK = "Ok"
DUPLICATE_REQUEST_ID = "DuplicateRequestId"
"""Wow's answer to a request id it has already processed: the command was already decided."""

ERROR_STATUS: dict[str, int] = {
    OK: 200,
    "NotFound": 404,
    "BadRequest": 400,
    "IllegalArgument": 400,
    "IllegalState": 400,
    "RequestTimeout": 408,
    "TooManyRequests": 429,
    DUPLICATE_REQUEST_ID: 400,
    "CommandValidation": 400,
    "EventVersionConflict": 409,
    "DuplicateAggregateId": 400,
    "CommandExpectVersionConflict": 409,
    "SourcingVersionConflict": 409,
    "IllegalAccessDeletedAggregate": 410,
    "IllegalAccessOwnerAggregate": 403,
    "InternalServerError": 500,
}
"""Wow's error codes and their HTTP statuses (Wow's `ErrorHttpStatusMapping`); others are 400."""

# Printable ASCII that may stay as-is inside a percent-encoded header value.
_HEADER_SAFE = "!#$&'()*+,/:;=?@[]^_`{|}~-."
_ID = re.compile(r"[^\x00-\x1f\x7f]{1,256}")
_OPTIONAL_ID = re.compile(r"[^\x00-\x1f\x7f]{0,256}")
"""An optional id may be empty (sent or not, the same: none); an empty aggregate id is a
creation's, which the host gives a new id."""
_PREFIX = MESSAGE_HEADER_PREFIX.lower()


def error_status(code: str) -> int:
    """The HTTP status Wow answers `code` with (400 for a code it does not map)."""
    return ERROR_STATUS.get(code, 400)


def encode_header_value(value: str) -> str:
    """`value` as a header value: verbatim if visible ASCII without `%`, else UTF-8
    percent-encoded.

    HTTP header values are ASCII; ids with other characters (or control characters, or
    surrounding spaces that parsers strip) are sent percent-encoded (RFC 3986), and a host
    decodes them (`parse_command`). A `%` is encoded too (`%25`), or an id such as `a%41`
    would arrive as `aA`.
    """
    if value.isascii() and value.isprintable() and value == value.strip() and "%" not in value:
        return value
    return quote(value, safe=_HEADER_SAFE)


def decode_header_value(name: str, value: str) -> str:
    """The value `encode_header_value` sent: percent-decoded as UTF-8.

    ASGI servers hand header bytes over decoded as Latin-1, so raw UTF-8 (`✓` sent unencoded)
    would read as `â\x9c\x93`: an id the sender never meant, whose own URL answers 404. Such a
    value is refused (`WireError` naming the header), as is an escape that is not UTF-8; a `%`
    not followed by two hex digits stays as it is.
    """
    if not value.isascii():
        raise WireError(
            "BadRequest",
            f"{name}: raw non-ASCII bytes in a header; send the value percent-encoded "
            "(UTF-8, RFC 3986: ✓ as %E2%9C%93)",
        )
    if "%" not in value:
        return value
    try:
        return unquote(value, errors="strict")
    except UnicodeDecodeError:
        raise WireError(
            "BadRequest", f"{name}: a percent-encoded value that is not UTF-8"
        ) from None


@dataclass(frozen=True, slots=True)
class WireCommand:
    """A command as it travels to `COMMAND_SEND_PATH`: the values of its headers and its body.

    An empty id (`aggregate_id`, `request_id`, `owner_id`, `space_id`) is not sent: Wow reads
    an absent one as empty. A plain dataclass, not a Pydantic model: `parse_command` checks it
    field by field on the host's hot path and says what is wrong as Wow does.
    """

    type: str
    context_name: str
    aggregate_name: str
    aggregate_id: str = ""
    """Empty: a creation's, the host gives the aggregate a new id."""
    tenant_id: str = DEFAULT_TENANT
    request_id: str = ""
    """Idempotency: the host decides a request id once. Empty: the host makes one."""
    owner_id: str = ""
    space_id: str = ""
    expected_version: int | None = None
    """The version the command expects its aggregate at, if any."""
    wait_stage: str | None = PROCESSED
    headers: Mapping[str, str] = field(default_factory=dict)
    """Message headers (lower-case keys), sent as `Command-Header-<key>`."""
    traceparent: str | None = None
    """W3C trace context the command continues, if any."""
    body: Mapping[str, Any] = field(default_factory=dict)
    """The JSON object the request carries."""

    @classmethod
    def to(cls, ref: AggregateRef, command_type: str, **fields: Any) -> WireCommand:
        """A command of `command_type` for the aggregate `ref` names; `fields` set the rest."""
        return cls(
            type=command_type,
            context_name=ref.context_name,
            aggregate_name=ref.aggregate_name,
            aggregate_id=ref.aggregate_id,
            tenant_id=ref.tenant_id,
            **fields,
        )


class WireError(WowTemporalError, ValueError):
    """A command request Wow refuses as it stands: `code` (`BadRequest`, `CommandValidation`)
    and a message saying what is wrong."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


_IDS = {
    COMMAND_TYPE_HEADER: True,
    AGGREGATE_CONTEXT_HEADER: True,
    AGGREGATE_NAME_HEADER: True,
    AGGREGATE_ID_HEADER: False,
    TENANT_ID_HEADER: False,
    REQUEST_ID_HEADER: False,
    OWNER_ID_HEADER: False,
    SPACE_ID_HEADER: False,
}
"""The id-like headers `parse_command` checks, in the order it checks them: required or not."""


def command_headers(command: WireCommand) -> dict[str, str]:
    """The HTTP headers of `command`'s request (its body is `command.body` as JSON); values
    that are not visible ASCII are percent-encoded (`encode_header_value`)."""
    raw = {
        COMMAND_TYPE_HEADER: command.type,
        AGGREGATE_CONTEXT_HEADER: command.context_name,
        AGGREGATE_NAME_HEADER: command.aggregate_name,
        AGGREGATE_ID_HEADER: command.aggregate_id,
        TENANT_ID_HEADER: command.tenant_id,
        OWNER_ID_HEADER: command.owner_id,
        SPACE_ID_HEADER: command.space_id,
        REQUEST_ID_HEADER: command.request_id,
    }
    if not raw[REQUEST_ID_HEADER]:  # the host makes one; the others go as Wow sends them
        del raw[REQUEST_ID_HEADER]
    if command.expected_version is not None:
        raw[AGGREGATE_VERSION_HEADER] = str(command.expected_version)
    if command.wait_stage is not None:
        raw[WAIT_STAGE_HEADER] = command.wait_stage
    for key, value in command.headers.items():
        raw[MESSAGE_HEADER_PREFIX + key] = value
    headers = {name: encode_header_value(value) for name, value in raw.items()}
    if command.traceparent is not None:
        headers[TRACEPARENT_HEADER] = command.traceparent
    return headers


ORIGIN_HEADERS = (
    "schedule_context",
    "schedule_aggregate",
    "schedule_tenant_id",
    "schedule_aggregate_id",
    "schedule_version",
    "schedule_event",
)
"""The message headers (`Command-Header-<name>`) that say which `wow.ScheduleSet` a command
came from: its aggregate (context, name, tenant, id), its commit's version and its event's id.
With `upstream_id` (the commit), `schedule_key` and `schedule_due` they are what the target
needs to judge the slot against its log."""


@dataclass(frozen=True, slots=True)
class SlotOrigin:
    """Where a delivered slot came from: the set's owner, commit, version, event, key, due."""

    owner: AggregateRef
    commit_id: str
    version: int
    event_id: str
    key: str
    due: int
    """When the slot was due, epoch milliseconds."""

    @classmethod
    def from_headers(cls, headers: Mapping[str, str]) -> SlotOrigin | None:
        """The origin a command's message headers name, or None when they do not name one
        whole (a command a timer did not send, or one from a version before the guard)."""
        try:
            version = int(headers["schedule_version"])
            due = int(headers["schedule_due"])
            owner = AggregateRef(
                context_name=headers["schedule_context"],
                aggregate_name=headers["schedule_aggregate"],
                tenant_id=headers["schedule_tenant_id"],
                aggregate_id=headers["schedule_aggregate_id"],
            )
            origin = cls(
                owner=owner,
                commit_id=headers["upstream_id"],
                version=version,
                event_id=headers["schedule_event"],
                key=headers["schedule_key"],
                due=due,
            )
        except (KeyError, ValueError):
            return None
        return origin if version >= 1 and origin.event_id and origin.commit_id else None


def origin_headers(owner: AggregateRef, version: int, event_id: str) -> dict[str, str]:
    """The `ORIGIN_HEADERS` of a slot whose `wow.ScheduleSet` is event `event_id` of `owner`'s
    commit at `version` (the sender's half of `SlotOrigin.from_headers`)."""
    values = (
        owner.context_name,
        owner.aggregate_name,
        owner.tenant_id,
        owner.aggregate_id,
        str(version),
        event_id,
    )
    return dict(zip(ORIGIN_HEADERS, values, strict=True))


def require_headers(headers: Mapping[str, str]) -> None:
    """Raise `WireError` naming the required headers (`REQUIRED_HEADERS`) `headers` lacks: a
    host can refuse such a request before it reads the body."""
    present = {name.lower() for name in headers}
    missing = [name for name in REQUIRED_HEADERS if name.lower() not in present]
    if missing:
        plural = "s" if len(missing) > 1 else ""
        raise WireError("BadRequest", f"missing header{plural} {', '.join(missing)}")


def parse_command(headers: Mapping[str, str], body: bytes) -> WireCommand:
    """The command a request to `COMMAND_SEND_PATH` carries, as a Wow host reads it; raises
    `WireError` for what Wow refuses: a missing or malformed header, a body that is not a JSON
    object. Header names are case-insensitive; the ids, the tenant and the message headers are
    percent-decoded (`decode_header_value`), so an id arrives as the aggregate's URL path names
    it."""
    found = _first_of_each(headers)
    require_headers(found)
    ids = {name: _checked_id(found, name) for name in _IDS}
    return WireCommand(
        type=ids[COMMAND_TYPE_HEADER],
        context_name=ids[AGGREGATE_CONTEXT_HEADER],
        aggregate_name=ids[AGGREGATE_NAME_HEADER],
        aggregate_id=ids[AGGREGATE_ID_HEADER],
        tenant_id=decode_header_value(
            TENANT_ID_HEADER, found.get(TENANT_ID_HEADER.lower(), DEFAULT_TENANT)
        ),
        request_id=ids[REQUEST_ID_HEADER],
        owner_id=ids[OWNER_ID_HEADER],
        space_id=ids[SPACE_ID_HEADER],
        expected_version=_version(found.get(AGGREGATE_VERSION_HEADER.lower())),
        wait_stage=_wait_stage(found.get(WAIT_STAGE_HEADER.lower())),
        headers={
            name[len(_PREFIX) :]: decode_header_value(name, value)
            for name, value in found.items()
            if name.startswith(_PREFIX)
        },
        traceparent=found.get(TRACEPARENT_HEADER),
        body=_body(body),
    )


def _first_of_each(headers: Mapping[str, str]) -> dict[str, str]:
    """Lower-case header names to the first value sent under each."""
    found: dict[str, str] = {}
    for name, value in headers.items():
        found.setdefault(name.lower(), value)
    return found


def _checked_id(found: Mapping[str, str], name: str) -> str:
    """The header's decoded value ("" if absent): 1 (required) or 0 to 256 printable
    characters."""
    sent = found.get(name.lower())
    required = _IDS[name]
    if sent is None:
        return ""
    value = decode_header_value(name, sent)
    if not (_ID if required else _OPTIONAL_ID).fullmatch(value):
        raise WireError("BadRequest", f"{name}: {int(required)} to 256 printable characters")
    return value


def _version(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise WireError(
            "BadRequest", f"{AGGREGATE_VERSION_HEADER} {value!r} is not a number"
        ) from None


def _wait_stage(value: str | None) -> str | None:
    if value is not None and value.upper() not in WAIT_STAGES:
        raise WireError(
            "BadRequest", f"{WAIT_STAGE_HEADER} {value!r}: one of {', '.join(sorted(WAIT_STAGES))}"
        )
    return value


def _body(raw: bytes) -> dict[str, Any]:
    """The body as a JSON object; an empty body is `{}`."""
    try:
        body: Any = json.loads(raw) if raw.strip() else {}
    except (ValueError, UnicodeDecodeError) as error:
        raise WireError("BadRequest", f"the body is not JSON: {error}") from None
    if not isinstance(body, dict):
        raise WireError(
            "CommandValidation", f"the body is a JSON object, not {type(body).__name__}"
        )
    return body


class CommandTarget(Protocol):
    """The aggregate a command is for, as the wire names it (an `AggregateRef`, a
    `WireCommand`)."""

    @property
    def context_name(self) -> str: ...
    @property
    def aggregate_name(self) -> str: ...
    @property
    def tenant_id(self) -> str: ...
    @property
    def aggregate_id(self) -> str: ...


class _Target(NamedTuple):
    context_name: str
    aggregate_name: str
    tenant_id: str
    aggregate_id: str


class _WowModel(BaseModel):
    """Strict, camelCase on the wire as Wow writes it, snake_case in Python."""

    model_config = ConfigDict(
        strict=True,
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )


class FunctionInfo(_WowModel):
    """Which function decided the command (Wow's `FunctionInfoData`)."""

    function_kind: str = "COMMAND"
    context_name: str = ""
    processor_name: str = ""
    name: str = ""


class CommandResult(_WowModel):
    """Wow's `CommandResult` JSON: `errorCode` is `Ok` or why not (also `Wow-Error-Code`)."""

    id: str
    wait_command_id: str
    stage: str = PROCESSED
    context_name: str
    aggregate_name: str
    tenant_id: str
    aggregate_id: str
    aggregate_version: int | None = None
    request_id: str
    command_id: str
    function: FunctionInfo = Field(default_factory=FunctionInfo)
    error_code: str = OK
    error_msg: str = ""
    binding_errors: list[dict[str, Any]] = Field(default_factory=list)
    result: dict[str, Any] = Field(default_factory=dict)
    signal_time: int = Field(default_factory=lambda: int(time.time() * 1000))
    _status: int | None = PrivateAttr(default=None)

    @classmethod
    def of(
        cls,
        ref: CommandTarget,
        *,
        command_id: str,
        request_id: str,
        code: str,
        message: str = "",
        version: int | None = None,
        function: str = "",
        status: int | None = None,
    ) -> CommandResult:
        """The answer to a command for `ref` (its request id, or the command's id when none);
        `status` overrides the one Wow gives `code` (a 413, the echo convention's 503)."""
        result = cls(
            id=command_id,
            wait_command_id=command_id,
            context_name=ref.context_name,
            aggregate_name=ref.aggregate_name,
            tenant_id=ref.tenant_id,
            aggregate_id=ref.aggregate_id,
            aggregate_version=version,
            request_id=request_id or command_id,
            command_id=command_id,
            function=FunctionInfo(
                context_name=ref.context_name, processor_name=ref.aggregate_name, name=function
            ),
            error_code=code,
            error_msg=message,
        )
        result._status = status
        return result

    @classmethod
    def refusing(
        cls,
        headers: Mapping[str, str],
        error: WireError,
        *,
        command_id: str,
        status: int | None = None,
    ) -> CommandResult:
        """The answer to a request refused as it stands (`error`), naming the aggregate and
        the request id its headers name, as far as they do."""
        return cls.answering(
            headers, code=error.code, message=error.message, command_id=command_id, status=status
        )

    @classmethod
    def answering(
        cls,
        headers: Mapping[str, str],
        *,
        code: str,
        message: str = "",
        command_id: str | None = None,
        status: int | None = None,
    ) -> CommandResult:
        """The answer `code` to the request these headers make, naming what they name as far
        as they do (the request id stands for the command's id unless one is given)."""
        found = _first_of_each(headers)
        target = _Target(
            found.get(AGGREGATE_CONTEXT_HEADER.lower(), ""),
            found.get(AGGREGATE_NAME_HEADER.lower(), ""),
            found.get(TENANT_ID_HEADER.lower(), DEFAULT_TENANT),
            found.get(AGGREGATE_ID_HEADER.lower(), ""),
        )
        request_id = found.get(REQUEST_ID_HEADER.lower(), "")
        return cls.of(
            target,
            command_id=request_id if command_id is None else command_id,
            request_id=request_id,
            code=code,
            message=message,
            status=status,
        )

    @property
    def status(self) -> int:
        """The HTTP status of this answer: Wow's for the code unless `of` was told another."""
        return self._status or error_status(self.error_code)

    @property
    def ok(self) -> bool:
        return self.error_code == OK


class ReadResult(NamedTuple):
    """What an answer to a command says, read leniently (any host, any body)."""

    body: dict[str, Any] | None
    """The JSON object answered, or None when the body is not one."""
    code: str | None
    """`errorCode` from the body, else the `Wow-Error-Code` header, else None."""
    message: str
    """`errorMsg` from the body, or empty."""


def read_result(content: bytes, error_code_header: str | None) -> ReadResult:
    """The answer's `CommandResult` fields that say how the command went, as far as it has
    them: `content` is the body, `error_code_header` the `Wow-Error-Code` header if any."""
    try:
        body = json.loads(content) if content else None
    except (ValueError, UnicodeDecodeError):
        body = None
    if not isinstance(body, dict):
        body = None
    code: str | None = None
    message = ""
    if body is not None:
        if isinstance(body.get("errorCode"), str) and body["errorCode"]:
            code = body["errorCode"]
        if isinstance(body.get("errorMsg"), str):
            message = body["errorMsg"]
    if code is None:
        code = error_code_header or None
    return ReadResult(body, code, message)
