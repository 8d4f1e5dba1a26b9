"""The domain host over HTTP: Wow's command API (`POST /wow/command/send`) for an app's
aggregates, and a read of one aggregate (`GET /wow/aggregate/...`) to see what it decided."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from starlette.requests import ClientDisconnect

from wow_temporal.domain.rejection import ERROR_STATUS, Rejection
from wow_temporal.host.service import CommandMessage, CommandResult, DomainHost
from wow_temporal.schedule import MAX_COMMAND_BODY_BYTES, AggregateRef, Commit
from wow_temporal.tracing import current_traceparent

if TYPE_CHECKING:
    from wow_temporal.host.follower import Follower

__all__ = [
    "DEFAULT_TENANT",
    "WAIT_STAGES",
    "AggregateView",
    "ErrorInfo",
    "FollowerView",
    "create_host_app",
]

DEFAULT_TENANT = "(0)"
"""Wow's default tenant id, for a command without `Command-Tenant-Id`."""

WAIT_STAGES = frozenset(
    {"SENT", "PROCESSED", "SNAPSHOT", "PROJECTED", "EVENT_HANDLED", "SAGA_HANDLED"}
)
"""Wow's wait stages. Every command is answered once committed (PROCESSED): what it scheduled
is never part of its wait, and neither are the sagas and projections that follow the log."""

_HEADER_PREFIX = "command-header-"
_ID = re.compile(r"[^\x00-\x1f\x7f]{1,256}")
_OPTIONAL_ID = re.compile(r"[^\x00-\x1f\x7f]{0,256}")
"""An optional id may be empty (a commit without an owner or space is delivered with empty
`Command-Owner-Id` and `Wow-Space-Id`); an empty aggregate id gets a new one."""

_HEADERS_DOC = {
    "Command-Type": "The command's full type name, e.g. eshop.order.CreateOrder",
    "Command-Aggregate-Context": "The bounded context, e.g. eshop-order",
    "Command-Aggregate-Name": "The aggregate, e.g. order",
    "Command-Aggregate-Id": "The aggregate's id; a creation without one gets a new id",
    "Command-Tenant-Id": "The tenant, (0) when not given",
    "Command-Aggregate-Version": "The version the command expects the aggregate at",
    "Command-Request-Id": "Idempotency: a second command with it is DuplicateRequestId",
    "Command-Wait-Stage": "Accepted for Wow's clients; every command is answered when committed",
    "Command-Owner-Id": "The owner, kept in the commit's scope and passed to what it schedules",
    "Wow-Space-Id": "The space, kept in the commit's scope and passed to what it schedules",
    "traceparent": "W3C trace context: the commit, what it schedules and the commands its "
    "sagas send continue this trace",
}


_REQUIRED_HEADERS = frozenset(
    {"Command-Type", "Command-Aggregate-Context", "Command-Aggregate-Name"}
)

_HEADER_PARAMETERS = [
    {
        "name": name,
        "in": "header",
        "required": name in _REQUIRED_HEADERS,
        "description": description,
        "schema": {"type": "string"},
    }
    for name, description in _HEADERS_DOC.items()
]


class _Camel(BaseModel):
    """camelCase on the wire, as Wow writes it."""

    model_config = ConfigDict(
        alias_generator=to_camel, validate_by_name=True, serialize_by_alias=True
    )


class ErrorInfo(_Camel):
    """Wow's `ErrorInfo`: why a read was refused (also in the `Wow-Error-Code` header)."""

    error_code: str
    error_msg: str


class AggregateView(_Camel):
    """One aggregate as the host has it: its version, its state and its commits, in order."""

    aggregate: str = Field(description="`context.aggregate`")
    tenant_id: str
    aggregate_id: str
    version: int
    deleted: bool
    state: dict[str, Any] = Field(description="The state object's public fields")
    commits: list[Commit]


class FollowerView(_Camel):
    """Where one follower of the log is (the relay to the timers, each saga)."""

    name: str
    position: int
    behind: int = Field(description="How many commits of the log it has yet to handle")
    failing_since: float | None = Field(
        description="Since when it fails (a monotonic clock reading), or null"
    )
    last_error: str | None


def _status_responses(model: type[BaseModel], extra: dict[int, str]) -> dict[int | str, Any]:
    """Every status an answer with Wow's error codes can have (`ERROR_STATUS`; other codes are
    400), each naming its codes, plus `extra`."""
    codes: dict[int, list[str]] = {400: []}
    for code, status in ERROR_STATUS.items():
        if status != 200:
            codes.setdefault(status, []).append(code)
    found: dict[int | str, Any] = {
        status: {
            "model": model,
            "description": ", ".join(names + (["any other code"] if status == 400 else [])),
        }
        for status, names in sorted(codes.items())
    }
    for status, text in extra.items():
        found[status] = {"model": model, "description": text}
    return found


def _result_response(result: CommandResult, status: int | None = None) -> JSONResponse:
    return JSONResponse(
        result.model_dump(mode="json"),
        status_code=status or result.status,
        headers={"Wow-Error-Code": result.error_code},
    )


def create_host_app(
    host: DomainHost,
    *,
    followers: Sequence[Follower] = (),
    title: str = "wow-temporal domain host",
) -> FastAPI:
    """The host's ASGI app over `host` (which the caller starts and closes); `followers` are
    shown at `/wow/followers`."""
    contexts = ", ".join(sorted(host.apps)) or "none"
    app = FastAPI(
        title=title,
        description=f"Wow's command API for the contexts {contexts}. A command is answered "
        "with Wow's CommandResult once its events (and the schedules it set) are committed.",
        docs_url="/docs",
        redoc_url=None,
    )

    def refused(
        request: Request, code: str, message: str, status: int | None = None
    ) -> JSONResponse:
        headers = request.headers
        ref = AggregateRef.model_construct(
            context_name=headers.get("command-aggregate-context", ""),
            aggregate_name=headers.get("command-aggregate-name", ""),
            tenant_id=headers.get("command-tenant-id", DEFAULT_TENANT),
            aggregate_id=headers.get("command-aggregate-id", ""),
        )
        result = CommandResult.of(
            ref,
            command_id=uuid.uuid4().hex,
            request_id=headers.get("command-request-id", ""),
            code=code,
            message=message,
        )
        return _result_response(result, status)

    @app.post(
        "/wow/command/send",
        summary="Send a command",
        response_model=CommandResult,
        # Domain code may refuse with any of Wow's codes: each status one can have is declared.
        responses=_status_responses(CommandResult, {413: "BadRequest: the body is over 256 KiB"}),
        openapi_extra={
            "parameters": _HEADER_PARAMETERS,
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": {"type": "object"}}},
                "description": "The command's body, a JSON object",
            },
        },
    )
    async def send(request: Request) -> JSONResponse:
        # Headers are read directly, not as FastAPI parameters: validating ten of them per
        # request was an eighth of the host's CPU. The OpenAPI lists them (`_HEADER_PARAMETERS`).
        headers = request.headers
        command_type = headers.get("command-type")
        context = headers.get("command-aggregate-context")
        aggregate = headers.get("command-aggregate-name")
        aggregate_id = headers.get("command-aggregate-id")
        tenant_id = headers.get("command-tenant-id")
        version = headers.get("command-aggregate-version")
        request_id = headers.get("command-request-id")
        owner_id = headers.get("command-owner-id")
        space_id = headers.get("wow-space-id")
        wait_stage = headers.get("command-wait-stage")
        missing = [
            name
            for name, value in (
                ("Command-Type", command_type),
                ("Command-Aggregate-Context", context),
                ("Command-Aggregate-Name", aggregate),
            )
            if value is None
        ]
        if missing:
            plural = "s" if len(missing) > 1 else ""
            return refused(request, "BadRequest", f"missing header{plural} {', '.join(missing)}")
        assert command_type is not None and context is not None and aggregate is not None
        raw = await _read_capped(request)
        if raw is None:
            return refused(
                request,
                "BadRequest",
                f"the body is more than the {MAX_COMMAND_BODY_BYTES} bytes (256 KiB) allowed",
                413,
            )
        for name, value, pattern, shown in (
            ("Command-Type", command_type, _ID, "1"),
            ("Command-Aggregate-Context", context, _ID, "1"),
            ("Command-Aggregate-Name", aggregate, _ID, "1"),
            ("Command-Aggregate-Id", aggregate_id, _OPTIONAL_ID, "0"),
            ("Command-Tenant-Id", tenant_id, _OPTIONAL_ID, "0"),
            ("Command-Request-Id", request_id, _OPTIONAL_ID, "0"),
            ("Command-Owner-Id", owner_id, _OPTIONAL_ID, "0"),
            ("Wow-Space-Id", space_id, _OPTIONAL_ID, "0"),
        ):
            if value is not None and not pattern.fullmatch(value):
                return refused(
                    request, "BadRequest", f"{name}: {shown} to 256 printable characters"
                )
        expected: int | None = None
        if version is not None:
            try:
                expected = int(version)
            except ValueError:
                return refused(
                    request, "BadRequest", f"Command-Aggregate-Version {version!r} is not a number"
                )
        if wait_stage is not None and wait_stage.upper() not in WAIT_STAGES:
            return refused(
                request,
                "BadRequest",
                f"Command-Wait-Stage {wait_stage!r}: one of {', '.join(sorted(WAIT_STAGES))}",
            )
        try:
            body: Any = json.loads(raw) if raw.strip() else {}
        except (ValueError, UnicodeDecodeError) as error:
            return refused(request, "BadRequest", f"the body is not JSON: {error}")
        if not isinstance(body, dict):
            return refused(
                request,
                "CommandValidation",
                f"the body is a JSON object, not {type(body).__name__}",
            )
        message_headers = {
            name[len(_HEADER_PREFIX) :]: value
            for name, value in headers.items()
            if name.startswith(_HEADER_PREFIX)
        }
        # The commit continues the request's trace: from this server's span if one is active
        # (FastAPI's, with a tracer provider installed), else from the caller's.
        traceparent = current_traceparent() or headers.get("traceparent")
        if traceparent:
            message_headers["traceparent"] = traceparent
        message = CommandMessage(
            type=command_type,
            ref=AggregateRef(
                context_name=context,
                aggregate_name=aggregate,
                tenant_id=tenant_id if tenant_id is not None else DEFAULT_TENANT,
                aggregate_id=aggregate_id or uuid.uuid4().hex[:16],
            ),
            body=body,
            request_id=request_id or "",
            owner_id=owner_id or "",
            space_id=space_id or "",
            expected_version=expected,
            headers=message_headers,
        )
        return _result_response(await host.send(message))

    @app.get(
        "/wow/aggregate/{context}/{aggregate}/{tenant_id}/{aggregate_id}",
        summary="Read an aggregate: its version, state and commits",
        response_model=AggregateView,
        responses={404: {"model": ErrorInfo, "description": "NotFound"}},
    )
    async def read(
        context: str, aggregate: str, tenant_id: str, aggregate_id: str
    ) -> AggregateView | JSONResponse:
        ref = AggregateRef(
            context_name=context,
            aggregate_name=aggregate,
            tenant_id=tenant_id,
            aggregate_id=aggregate_id,
        )
        found = await host.current(ref)
        if isinstance(found, Rejection):
            return _error(found)
        _, current = found
        if current.version == 0:
            return _error(Rejection("NotFound", f"{ref} (tenant {tenant_id}) does not exist"))
        return AggregateView(
            aggregate=str(ref.named),
            tenant_id=tenant_id,
            aggregate_id=aggregate_id,
            version=current.version,
            deleted=current.deleted,
            state=jsonable_encoder(_public(vars(current.state))),
            commits=await host.commits(ref),
        )

    @app.get(
        "/wow/followers",
        summary="The log's followers (the relay to the timers, the sagas): where each is",
    )
    async def followers_status() -> list[FollowerView]:
        shown = []
        for follower in followers:
            status = await follower.status()
            shown.append(
                FollowerView(
                    name=status.name,
                    position=status.position,
                    behind=status.behind,
                    failing_since=status.failing_since,
                    last_error=status.last_error,
                )
            )
        return shown

    @app.get("/health", summary="The host is up")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    return app


def _error(rejection: Rejection) -> JSONResponse:
    return JSONResponse(
        ErrorInfo(error_code=rejection.code, error_msg=rejection.message).model_dump(),
        status_code=rejection.status,
        headers={"Wow-Error-Code": rejection.code},
    )


async def _read_capped(request: Request) -> bytes | None:
    """The body, or None once it is over the limit (refused before it is read whole)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_COMMAND_BODY_BYTES:
        return None
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_COMMAND_BODY_BYTES:
                return None
            chunks.append(chunk)
    except ClientDisconnect:
        return b""  # the sender is gone and reads no answer; it will send again
    return b"".join(chunks)


def _public(values: dict[str, Any]) -> dict[str, Any]:
    return {
        key: sorted(value) if isinstance(value, set) else value
        for key, value in values.items()
        if not key.startswith("_")
    }
