"""The domain host over HTTP: Wow's command API (`POST /wow/command/send`) for an app's
aggregates, and a read of one aggregate (`GET /wow/aggregate/...`) to see what it decided."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from starlette.requests import ClientDisconnect

from wow_temporal.api.docs import install_docs
from wow_temporal.domain.rejection import Rejection
from wow_temporal.host.service import CommandMessage, DomainHost
from wow_temporal.model import MAX_COMMAND_BODY_BYTES, AggregateRef, Commit
from wow_temporal.tracing import current_traceparent
from wow_temporal.wire import (
    AGGREGATE_CONTEXT_HEADER,
    AGGREGATE_ID_HEADER,
    AGGREGATE_NAME_HEADER,
    AGGREGATE_VERSION_HEADER,
    COMMAND_SEND_PATH,
    COMMAND_TYPE_HEADER,
    DEFAULT_TENANT,
    ERROR_CODE_HEADER,
    ERROR_STATUS,
    OWNER_ID_HEADER,
    REQUEST_ID_HEADER,
    REQUIRED_HEADERS,
    SPACE_ID_HEADER,
    TENANT_ID_HEADER,
    TRACEPARENT_HEADER,
    WAIT_STAGE_HEADER,
    WAIT_STAGES,
    CommandResult,
    WireCommand,
    WireError,
    parse_command,
    require_headers,
)

if TYPE_CHECKING:
    from wow_temporal.host.follower import Follower
    from wow_temporal.host.lease import LeaseKeeper

__all__ = [
    "DEFAULT_TENANT",  # re-exported from wow_temporal.wire, where the wire is written
    "WAIT_STAGES",
    "AggregateView",
    "ErrorInfo",
    "FollowerView",
    "create_host_app",
]

_HEADERS_DOC = {
    COMMAND_TYPE_HEADER: "The command's full type name, e.g. eshop.order.CreateOrder",
    AGGREGATE_CONTEXT_HEADER: "The bounded context, e.g. eshop-order",
    AGGREGATE_NAME_HEADER: "The aggregate, e.g. order",
    AGGREGATE_ID_HEADER: "The aggregate's id; a creation without one gets a new id",
    TENANT_ID_HEADER: f"The tenant, {DEFAULT_TENANT} when not given",
    AGGREGATE_VERSION_HEADER: "The version the command expects the aggregate at",
    REQUEST_ID_HEADER: "Idempotency: a second command with it is DuplicateRequestId; without "
    "one, the host makes one (answered as requestId, kept with the commit)",
    WAIT_STAGE_HEADER: "Accepted for Wow's clients; every command is answered when committed",
    OWNER_ID_HEADER: "The owner, kept in the commit's scope and passed to what it schedules",
    SPACE_ID_HEADER: "The space, kept in the commit's scope and passed to what it schedules",
    TRACEPARENT_HEADER: "W3C trace context: the commit, what it schedules and the commands its "
    "sagas send continue this trace",
}


_HEADER_PARAMETERS = [
    {
        "name": name,
        "in": "header",
        "required": name in REQUIRED_HEADERS,
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


class SetAsideView(_Camel):
    """An aggregate a follower set aside: its commits wait, retried on their own."""

    aggregate: str = Field(description="`context.aggregate`")
    tenant_id: str
    aggregate_id: str
    commits: int = Field(description="How many of its commits wait")
    reason: str = Field(description="Why the last attempt failed")
    since: float = Field(description="Since when (seconds since the epoch)")
    attempts: int


class RefusedView(_Camel):
    """A commit of the log a follower passed over for good: it can never be handled."""

    position: int
    commit_id: str
    aggregate: str = Field(description="`context.aggregate`")
    tenant_id: str
    aggregate_id: str
    reason: str


class FollowerView(_Camel):
    """Where one follower of the log is (the relay to the timers, each saga)."""

    name: str
    position: int
    behind: int = Field(description="How many commits of the log it has yet to handle")
    failing_since: float | None = Field(
        description="Since when it fails (seconds since the epoch), or null"
    )
    last_error: str | None
    holder: str | None = Field(
        description="The host replica running it (its lease holder); null while none does"
    )
    here: bool = Field(description="Whether the replica answering runs it")
    set_aside: list[SetAsideView] = Field(
        default_factory=list,
        description="Aggregates it could not hand over, each retried on its own while the rest "
        "of the log goes on (the relay only)",
    )
    recorded: int | None = Field(
        default=None,
        description="The position recorded in the store, where a restart resumes (behind "
        "`position` while commits wait set aside); null on a replica not running it",
    )
    refused: list[RefusedView] = Field(
        default_factory=list,
        description="The latest commits it passed over for good, since it started: admission "
        "refuses them, so no retry can hand them over (the relay only)",
    )


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


_routes = APIRouter()


def _host(request: Request) -> DomainHost:
    host: DomainHost = request.app.state.host
    return host


@_routes.post(
    COMMAND_SEND_PATH,
    summary="Send a command",
    response_model=CommandResult,
    # Domain code may refuse with any of Wow's codes: each status one can have is declared.
    responses=_status_responses(
        CommandResult,
        {
            413: "BadRequest: the body is over 256 KiB",
            503: "InternalServerError, a technical failure to retry: the dev stack answers it "
            "for fail-… and flaky-… ids of contexts it does not serve (the echo convention)",
        },
    ),
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
    """Read the command from the request (`parse_command`), decide it, answer Wow's result."""
    # Headers are read directly, not as FastAPI parameters: validating ten of them per
    # request was an eighth of the host's CPU. The OpenAPI lists them (`_HEADER_PARAMETERS`).
    headers = request.headers
    try:
        require_headers(headers)  # refused before the body is read
        raw = await _read_capped(request)
        if raw is None:
            return _refused(headers, _TOO_BIG, 413)
        command = parse_command(headers, raw)
    except WireError as error:
        return _refused(headers, error)
    return _result_response(await _host(request).send(_message(command)))


_TOO_BIG = WireError(
    "BadRequest", f"the body is more than the {MAX_COMMAND_BODY_BYTES} bytes (256 KiB) allowed"
)


def _refused(
    headers: Mapping[str, str], error: WireError, status: int | None = None
) -> JSONResponse:
    """Wow's answer to a request refused as it stands, naming the aggregate it was for."""
    command_id = uuid.uuid4().hex
    return _result_response(
        CommandResult.refusing(headers, error, command_id=command_id, status=status)
    )


def _message(command: WireCommand) -> CommandMessage:
    """The host's message for `command`, with the ids it came without made here: a new
    aggregate id for a creation, and a request id (answered, and stored with its commit)."""
    headers = dict(command.headers)
    # The commit continues the request's trace: from this server's span if one is active
    # (FastAPI's, with a tracer provider installed), else from the caller's.
    traceparent = current_traceparent() or command.traceparent
    if traceparent:
        headers[TRACEPARENT_HEADER] = traceparent
    return CommandMessage(
        type=command.type,
        ref=AggregateRef(
            context_name=command.context_name,
            aggregate_name=command.aggregate_name,
            tenant_id=command.tenant_id,
            aggregate_id=command.aggregate_id or uuid.uuid4().hex[:16],
        ),
        body=command.body,
        request_id=command.request_id or uuid.uuid4().hex,
        owner_id=command.owner_id,
        space_id=command.space_id,
        expected_version=command.expected_version,
        headers=headers,
    )


def _result_response(result: CommandResult) -> JSONResponse:
    return JSONResponse(
        result.model_dump(mode="json"),
        status_code=result.status,
        headers={ERROR_CODE_HEADER: result.error_code},
    )


@_routes.get(
    "/wow/aggregate/{context}/{aggregate}/{tenant_id}/{aggregate_id}",
    summary="Read an aggregate: its version, state and commits",
    response_model=AggregateView,
    responses={
        404: {
            "model": ErrorInfo,
            "description": "NotFound: no such context or aggregate type here, or no aggregate "
            "with this id in this tenant",
        }
    },
)
async def read(
    request: Request, context: str, aggregate: str, tenant_id: str, aggregate_id: str
) -> AggregateView | JSONResponse:
    """The aggregate as the host has it, or 404 `NotFound`."""
    host = _host(request)
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


@_routes.get(
    "/wow/followers",
    summary="The log's followers (the relay to the timers, the sagas): where each is",
    response_model=list[FollowerView],
    responses={503: {"model": ErrorInfo, "description": "The store cannot be read now"}},
)
async def followers_status(request: Request) -> list[FollowerView] | JSONResponse:
    """Where each follower of the log is, which replica runs it, and whether it fails."""
    followers: list[Follower] = request.app.state.followers
    leases: LeaseKeeper | None = request.app.state.leases
    try:
        holders = await leases.holders() if leases is not None else {}
        statuses = [await follower.status(holders) for follower in followers]
    except Exception as error:  # what is not known now is not shown as if it were
        return JSONResponse(
            ErrorInfo(
                error_code="ServiceUnavailable",
                error_msg=f"cannot read the store: {type(error).__name__}: {error}",
            ).model_dump(),
            status_code=503,
        )
    return [
        FollowerView(
            name=status.name,
            position=status.position,
            behind=status.behind,
            failing_since=status.failing_since,
            last_error=status.last_error,
            holder=status.holder,
            here=status.here,
            set_aside=[
                SetAsideView(
                    aggregate=str(aside.aggregate.named),
                    tenant_id=aside.aggregate.tenant_id,
                    aggregate_id=aside.aggregate.aggregate_id,
                    commits=aside.commits,
                    reason=aside.reason,
                    since=aside.since,
                    attempts=aside.attempts,
                )
                for aside in status.set_aside
            ],
            recorded=status.recorded,
            refused=[
                RefusedView(
                    position=refused.position,
                    commit_id=refused.commit_id,
                    aggregate=str(refused.aggregate.named),
                    tenant_id=refused.aggregate.tenant_id,
                    aggregate_id=refused.aggregate.aggregate_id,
                    reason=refused.reason,
                )
                for refused in status.refused
            ],
        )
        for status in statuses
    ]


@_routes.get("/health", summary="The host is up")
async def health() -> dict[str, str]:
    return {"status": "ok"}


def _error(rejection: Rejection) -> JSONResponse:
    return JSONResponse(
        ErrorInfo(error_code=rejection.code, error_msg=rejection.message).model_dump(),
        status_code=rejection.status,
        headers={ERROR_CODE_HEADER: rejection.code},
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


def create_host_app(
    host: DomainHost,
    *,
    followers: Sequence[Follower] = (),
    leases: LeaseKeeper | None = None,
    title: str = "wow-temporal domain host",
) -> FastAPI:
    """The host's ASGI app over `host` (which the caller starts and closes); `followers` are
    shown at `/wow/followers`. Swagger UI at `/docs` is served from the app's own files."""
    contexts = ", ".join(sorted(host.apps)) or "none"
    app = FastAPI(
        title=title,
        description=f"Wow's command API for the contexts {contexts}. A command is answered "
        "with Wow's CommandResult once its events (and the schedules it set) are committed.",
        docs_url=None,  # served by install_docs, from the app's own files
        redoc_url=None,
    )
    app.state.host = host
    app.state.followers = list(followers)
    app.state.leases = leases
    install_docs(app)
    app.include_router(_routes)
    return app
