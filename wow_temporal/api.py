"""The HTTP control API: hand over commits, list, show, retry and cancel timers, control jobs.

`create_app` builds the FastAPI app over a `TimerClient` (and, later, a `JobControl`); `serve`
runs it on uvicorn. Every route but `/health` and the OpenAPI docs needs a bearer token: the
operator's token reaches every tenant, a tenant's token only its own tenant's timers and jobs.
Bad input always answers a 4xx `{"error": ..., "message": ...}`, never a 500.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal, Protocol

import uvicorn
from fastapi import Depends, FastAPI, Query, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    model_validator,
)
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from temporalio.client import WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.service import RPCError, RPCStatusCode

from wow_temporal.schedule import (
    Commit,
    CronText,
    InvalidCommitError,
    InvalidScheduleError,
    Misfire,
    ScheduleSet,
    ZoneName,
    explain,
    validate_key,
)
from wow_temporal.settings import Settings
from wow_temporal.timers.client import (
    TIMER_ID_PREFIX,
    Applied,
    TimerClient,
    TimerError,
    TimerFilter,
    TimerInfo,
    TimerNotFoundError,
)
from wow_temporal.timers.core import TimerState

__all__ = [
    "ErrorBody",
    "JobControl",
    "JobInfo",
    "RescheduleRequest",
    "UnknownJobError",
    "create_app",
    "serve",
]

log = logging.getLogger(__name__)

_CALLER_KEY = "wow.caller"
_DESCRIPTION = """\
Control the durable scheduled commands of wow-temporal: hand over the
schedule events of commits (`POST /commits`), list, show, retry and cancel aggregate timers, and
enable, reschedule or disable recurring job instances (the spec's
`POST /{context}/schedule/{id}/wow.schedule.*` route).

Every route except `/health` and these docs needs `Authorization: Bearer <token>`. The
operator's token reaches every tenant; a tenant's token reaches only that tenant's timers and
jobs. Errors are JSON: `{"error": "<kind>", "message": "<what was wrong>"}`.
"""


# --- models -------------------------------------------------------------------------------


class ErrorBody(BaseModel):
    """Every error answer: a stable kind and a message naming what was wrong."""

    error: str
    message: str


class Health(BaseModel):
    """The liveness answer."""

    status: Literal["ok"] = "ok"


class RescheduleRequest(BaseModel):
    """A new rule for a job instance; a field left out (null) keeps what the instance has."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    expression: CronText | None = Field(
        default=None, description="Six-field Spring cron expression", examples=["0 0 6 * * *"]
    )
    zone: ZoneName | None = Field(
        default=None, description="IANA time zone the expression is read in", examples=["UTC"]
    )
    misfire: Misfire | None = Field(
        default=None, description="What to do with slots missed while nothing ran the job"
    )

    @model_validator(mode="after")
    def _at_least_one(self) -> RescheduleRequest:
        if self.expression is None and self.zone is None and self.misfire is None:
            raise ValueError("give at least one of 'expression', 'zone' or 'misfire'")
        return self


class JobInfo(BaseModel):
    """A recurring job instance as the control API shows it."""

    model_config = ConfigDict(frozen=True)

    context: str
    name: str
    tenant: str | None = None
    """The instance's tenant (TENANT jobs); None for a SYSTEM job's one instance."""
    status: str
    expression: str
    zone: str
    misfire: Misfire
    next_due: datetime | None = None


class UnknownJobError(LookupError):
    """No job of that name in that context (or no instance of it for that tenant)."""

    def __init__(self, context: str, name: str) -> None:
        super().__init__(f"no job {name} in context {context}")
        self.context = context
        self.name = name


class JobControl(Protocol):
    """What the job routes drive: the recurring job instances of the registered contexts.

    `tenant` is the instance's tenant (None: the SYSTEM instance). Raise `UnknownJobError` for
    a job not registered (404), `PermissionError` (403), `ValueError` for bad input (400).
    """

    async def enable(self, context: str, name: str, *, tenant: str | None) -> JobInfo:
        """Enable (or create, for a TENANT job) the instance."""
        ...

    async def disable(self, context: str, name: str, *, tenant: str | None) -> JobInfo:
        """Disable the instance: no more ticks until enabled again."""
        ...

    async def reschedule(
        self, context: str, name: str, rule: RescheduleRequest, *, tenant: str | None
    ) -> JobInfo:
        """Give the instance a new rule (fields left None keep theirs)."""
        ...


class _NoJobs:
    """The job registry until jobs exist: every job is unknown."""

    async def enable(self, context: str, name: str, *, tenant: str | None) -> JobInfo:
        raise UnknownJobError(context, name)

    async def disable(self, context: str, name: str, *, tenant: str | None) -> JobInfo:
        raise UnknownJobError(context, name)

    async def reschedule(
        self, context: str, name: str, rule: RescheduleRequest, *, tenant: str | None
    ) -> JobInfo:
        raise UnknownJobError(context, name)


# --- errors -------------------------------------------------------------------------------


class ApiError(Exception):
    """An answer other than 2xx, raised anywhere in a route."""

    def __init__(
        self, status: int, error: str, message: str, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message
        self.headers = dict(headers or {})


class _BodyTooLarge(StarletteHTTPException):
    """Raised from `receive` when a body without a Content-Length grows past the limit."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than {limit} bytes")


_KINDS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    413: "ContentTooLarge",
    415: "UnsupportedMediaType",
}


def _error(
    status: int, error: str, message: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(
        ErrorBody(error=error, message=message).model_dump(),
        status_code=status,
        headers=dict(headers or {}),
    )


def _validation_message(error: RequestValidationError) -> str:
    """`where: what` for the first problems of a request, as the caller wrote the names."""
    parts = []
    for item in list(error.errors())[:3]:
        loc = [str(p) for p in item.get("loc", ()) if p not in ("body", "query", "path")]
        message = str(item.get("msg", "invalid")).removeprefix("Value error, ")
        if item.get("type") == "json_invalid":
            message = f"not JSON: {item.get('ctx', {}).get('error', message)}"
            loc = []
        parts.append(f"{'.'.join(loc)}: {message}" if loc else message)
    return "; ".join(parts) or "invalid request"


def _rpc_error(error: RPCError) -> ApiError:
    """Temporal could not be asked (503) or refused the call (502)."""
    if error.status in (
        RPCStatusCode.UNAVAILABLE,
        RPCStatusCode.DEADLINE_EXCEEDED,
        RPCStatusCode.RESOURCE_EXHAUSTED,
        RPCStatusCode.CANCELLED,
    ):
        return ApiError(503, "TemporalUnavailable", f"Temporal is unavailable: {error.message}")
    return ApiError(502, "TemporalError", f"Temporal refused the call: {error.message}")


def _install_error_handlers(app: FastAPI) -> None:
    async def api_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return _error(exc.status, exc.error, exc.message, exc.headers)

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        kind = _KINDS.get(exc.status_code, "HttpError")
        return _error(exc.status_code, kind, str(exc.detail), exc.headers)

    async def invalid_request(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return _error(400, "InvalidRequest", _validation_message(exc))

    async def rpc_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RPCError)
        mapped = _rpc_error(exc)
        log.warning("%s %s: %s", request.method, request.url.path, mapped.message)
        return _error(mapped.status, mapped.error, mapped.message)

    async def update_timeout(request: Request, exc: Exception) -> JSONResponse:
        return _error(503, "TemporalUnavailable", "Temporal did not complete the update in time")

    async def runtime_error(request: Request, exc: Exception) -> JSONResponse:
        if "client connect" in str(exc):  # a lazy client that cannot reach Temporal
            message = f"Temporal is unavailable: {exc}"
            log.warning("%s %s: %s", request.method, request.url.path, message)
            return _error(503, "TemporalUnavailable", message)
        return await unexpected(request, exc)

    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("%s %s failed", request.method, request.url.path, exc_info=exc)
        return _error(500, "InternalError", f"internal error: {type(exc).__name__}")

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(RPCError, rpc_error)
    app.add_exception_handler(WorkflowUpdateRPCTimeoutOrCancelledError, update_timeout)
    app.add_exception_handler(RuntimeError, runtime_error)
    app.add_exception_handler(Exception, unexpected)


# --- auth and body limit ------------------------------------------------------------------


@dataclass(frozen=True)
class Caller:
    """Who is calling: `tenant` None reaches every tenant (the operator, or auth off)."""

    tenant: str | None


class _Tokens:
    """The accepted bearer tokens, compared in constant time."""

    def __init__(self, token: str | None, tenant_tokens: Mapping[str, str] | None) -> None:
        if token is not None and not token:
            raise ValueError("the operator token must not be empty (use None to turn auth off)")
        self._all: list[tuple[bytes, Caller]] = []
        if token is not None:
            self._all.append((token.encode(), Caller(tenant=None)))
        for tenant_token, tenant in (tenant_tokens or {}).items():
            if not tenant_token:
                raise ValueError(f"the token of tenant {tenant!r} must not be empty")
            if tenant_token == token:
                raise ValueError(f"tenant {tenant!r} has the operator's token")
            self._all.append((tenant_token.encode(), Caller(tenant=tenant)))

    @property
    def enabled(self) -> bool:
        return bool(self._all)

    def caller(self, presented: str) -> Caller | None:
        """The caller a token belongs to, or None; every token is compared (no early exit)."""
        found = None
        given = presented.encode()
        for token, caller in self._all:
            if hmac.compare_digest(given, token):
                found = caller
        return found


class _Guard:
    """ASGI middleware: bearer auth before anything else is read, then the body size limit."""

    def __init__(
        self, app: ASGIApp, *, tokens: _Tokens, public: frozenset[str], max_body_bytes: int
    ) -> None:
        self.app = app
        self.tokens = tokens
        self.public = public
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        path: str = scope["path"]
        root: str = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :] or "/"
        if path in self.public:
            caller: Caller | None = Caller(tenant=None)
        else:
            problem = self._authenticate(headers.get("authorization"))
            if isinstance(problem, JSONResponse):
                await problem(scope, receive, send)
                return
            caller = problem
        scope[_CALLER_KEY] = caller

        length = headers.get("content-length")
        if length is not None and length.strip().isdigit() and int(length) > self.max_body_bytes:
            too_large = _error(
                413,
                "ContentTooLarge",
                f"the request body is {int(length)} bytes, more than the "
                f"{self.max_body_bytes} allowed",
            )
            await too_large(scope, receive, send)
            return

        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    raise _BodyTooLarge(self.max_body_bytes)
            return message

        await self.app(scope, limited, send)

    def _authenticate(self, authorization: str | None) -> Caller | JSONResponse:
        if not self.tokens.enabled:
            return Caller(tenant=None)
        scheme, _, presented = (authorization or "").strip().partition(" ")
        if not authorization or scheme.lower() != "bearer" or not presented.strip():
            return _error(
                401,
                "Unauthorized",
                "this route needs 'Authorization: Bearer <token>'",
                {"WWW-Authenticate": "Bearer"},
            )
        caller = self.tokens.caller(presented.strip())
        if caller is None:
            return _error(
                401,
                "Unauthorized",
                "the bearer token is not valid",
                {"WWW-Authenticate": 'Bearer error="invalid_token"'},
            )
        return caller


_bearer = HTTPBearer(
    auto_error=False,
    description="The operator's token (WOW_API_TOKEN) or a tenant's token.",
)


def _caller(
    request: Request,
    _credentials: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)],
) -> Caller:
    """The caller the guard authenticated (the Security part declares the scheme in OpenAPI)."""
    caller = request.scope.get(_CALLER_KEY)
    if not isinstance(caller, Caller):
        raise ApiError(401, "Unauthorized", "not authenticated", {"WWW-Authenticate": "Bearer"})
    return caller


CallerDep = Annotated[Caller, Depends(_caller)]
TenantQuery = Annotated[
    str | None,
    Query(
        description="The TENANT job instance's tenant (a tenant's token: its own); "
        "none for a SYSTEM job"
    ),
]


# --- helpers ------------------------------------------------------------------------------


def _commits_of(raw: bytes) -> list[Commit]:
    """The commits of a `POST /commits` body: one commit object or a list of them."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as error:
        raise ApiError(400, "InvalidJson", f"the body is not JSON: {error}") from None
    items = data if isinstance(data, list) else [data]
    commits = []
    for index, item in enumerate(items):
        where = f"commit [{index}]: " if isinstance(data, list) else ""
        if not isinstance(item, dict):
            raise ApiError(
                400,
                "InvalidCommit",
                f"{where}a commit must be a JSON object, got {type(item).__name__}",
            )
        try:
            commits.append(Commit.parse(item))
        except (InvalidCommitError, ValueError, RecursionError) as error:
            raise ApiError(400, "InvalidCommit", f"{where}{error}") from None
    return commits


def _check_tenant(caller: Caller, commit: Commit) -> None:
    """A tenant's caller hands over only its own tenant's commits, targeting its own tenant."""
    if caller.tenant is None:
        return
    if commit.tenant_id != caller.tenant:
        raise ApiError(
            403,
            "Forbidden",
            f"commit {commit.id!r} belongs to tenant {commit.tenant_id!r}; "
            f"this token reaches only tenant {caller.tenant!r}",
        )
    for _, event in commit.schedule_events():
        if (
            isinstance(event, ScheduleSet)
            and event.target is not None
            and event.target.tenant_id != caller.tenant
        ):
            raise ApiError(
                403,
                "Forbidden",
                f"commit {commit.id!r} schedules a command for tenant "
                f"{event.target.tenant_id!r}; this token reaches only tenant {caller.tenant!r}",
            )


def _check_timer_id(workflow_id: str) -> None:
    if not workflow_id.startswith(TIMER_ID_PREFIX):
        raise ApiError(
            400,
            "InvalidTimerId",
            f"not a timer id: {workflow_id!r} (timer ids start with {TIMER_ID_PREFIX!r})",
        )


async def _operate(
    workflow_id: str, operation: Callable[[], Awaitable[TimerState]], verb: str
) -> TimerState:
    """Retry or cancel a timer, mapping why it cannot be done to 404 or 409."""
    _check_timer_id(workflow_id)
    try:
        return await operation()
    except TimerNotFoundError as error:
        raise ApiError(404, "TimerNotFound", str(error)) from None
    except TimerError as error:
        raise ApiError(409, "Conflict", str(error)) from None
    except WorkflowUpdateFailedError as error:
        raise ApiError(409, "Conflict", f"cannot {verb}: {error.cause or error}") from None
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            raise ApiError(409, "Conflict", f"timer {workflow_id!r} has ended") from None
        raise


def _job_tenant(caller: Caller, tenant: str | None) -> str | None:
    """The job instance's tenant: the caller's own, or any the operator names."""
    if caller.tenant is None:
        return tenant
    if tenant is not None and tenant != caller.tenant:
        raise ApiError(
            403, "Forbidden", f"this token reaches only tenant {caller.tenant!r}, not {tenant!r}"
        )
    return caller.tenant


async def _job_call(context: str, name: str, call: Callable[[], Awaitable[JobInfo]]) -> JobInfo:
    """Run a job operation after checking the name; map the registry's errors to answers."""
    try:
        validate_key(name, "job name")
    except InvalidScheduleError as error:
        raise ApiError(400, "InvalidJobName", str(error)) from None
    try:
        return await call()
    except UnknownJobError as error:
        raise ApiError(404, "UnknownJob", str(error)) from None
    except PermissionError as error:
        raise ApiError(403, "Forbidden", str(error)) from None
    except ValueError as error:
        raise ApiError(400, "BadRequest", str(error)) from None


# --- the app ------------------------------------------------------------------------------

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody, "description": text}
    for code, text in (
        (400, "Bad input; the message says what"),
        (401, "Missing or invalid bearer token"),
        (503, "Temporal is unavailable"),
    )
}


def _responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    texts = {
        403: "Another tenant's data",
        404: "Not found",
        409: "Not possible in the current state",
        413: "Body too large",
    }
    extra: dict[int | str, dict[str, Any]] = {
        code: {"model": ErrorBody, "description": texts[code]} for code in codes
    }
    return {**_ERRORS, **extra}


_COMMITS_BODY = TypeAdapter(Commit | list[Commit])


def _commit_schemas(existing: Mapping[str, Any]) -> dict[str, Any]:
    """OpenAPI components for the `POST /commits` body (`Commits`), in validation mode.

    A model FastAPI already documents differently (its output shape) gets an `-Input` name.
    """
    prefix = "#/components/schemas/"
    schema = _COMMITS_BODY.json_schema(ref_template=prefix + "{model}")
    defs: dict[str, Any] = schema.pop("$defs", {})
    renamed = {
        name: f"{name}-Input" for name in defs if existing.get(name, defs[name]) != defs[name]
    }
    text = json.dumps({"defs": defs, "root": schema})
    for name, new in renamed.items():
        text = text.replace(f'"{prefix}{name}"', f'"{prefix}{new}"')
    result = json.loads(text)
    found: dict[str, Any] = {
        renamed.get(name, name): value for name, value in result["defs"].items()
    }
    found["Commits"] = {"title": "Commits", **result["root"]}
    return found


def create_app(
    timers: TimerClient,
    *,
    token: str | None,
    tenant_tokens: Mapping[str, str] | None = None,
    max_body_bytes: int = 1_048_576,
    jobs: JobControl | None = None,
) -> FastAPI:
    """The control API over `timers` (and `jobs`; None: no job is registered yet).

    `token` is the operator's bearer token (every tenant); `tenant_tokens` maps a token to the
    one tenant it reaches. No token at all turns auth off, for development only.
    """
    if max_body_bytes < 1:
        raise ValueError(f"max_body_bytes must be at least 1, got {max_body_bytes}")
    tokens = _Tokens(token, tenant_tokens)
    job_control: JobControl = jobs if jobs is not None else _NoJobs()
    if not tokens.enabled:
        log.warning(
            "control API authentication is OFF: no WOW_API_TOKEN is set, anyone who can reach "
            "the port can control every tenant's timers (set one outside development)"
        )

    app = FastAPI(
        title="wow-temporal control API",
        description=_DESCRIPTION,
        version="0.1.0",
    )
    _install_error_handlers(app)
    public = frozenset(
        path
        for path in (
            "/health",
            app.openapi_url,
            app.docs_url,
            app.redoc_url,
            app.swagger_ui_oauth2_redirect_url,
        )
        if path
    )
    app.add_middleware(_Guard, tokens=tokens, public=public, max_body_bytes=max_body_bytes)

    @app.get("/health", tags=["health"])
    async def health() -> Health:
        """Liveness: the API process answers (it does not ask Temporal)."""
        return Health()

    @app.post(
        "/commits",
        tags=["timers"],
        responses=_responses(403, 413),
        openapi_extra={
            "requestBody": {
                "required": True,
                "description": "One commit (Wow DomainEventStream JSON) or a list of them.",
                "content": {
                    "application/json": {"schema": {"$ref": "#/components/schemas/Commits"}}
                },
            }
        },
    )
    async def post_commits(request: Request, caller: CallerDep) -> list[Applied]:
        """Apply the schedule events of one commit or a list of commits, in order.

        Idempotent and order-safe: a commit handed over twice, or an older one after a newer,
        changes nothing. Every commit is checked before any is applied.
        """
        commits = _commits_of(await request.body())
        for commit in commits:
            _check_tenant(caller, commit)
        applied: list[Applied] = []
        for commit in commits:
            applied.extend(await timers.apply(commit))
        return applied

    @app.get("/timers", tags=["timers"], responses=_responses())
    async def list_timers(
        caller: CallerDep,
        aggregate: Annotated[
            str | None, Query(description="`context.aggregate`, e.g. eshop-order.order")
        ] = None,
        aggregate_id: Annotated[str | None, Query(alias="aggregateId")] = None,
        tenant: str | None = None,
        key: str | None = None,
        status: Annotated[
            str | None,
            Query(description="Scheduled, Delivering, Parked, Delivered, Rejected, Cancelled"),
        ] = None,
        running: bool | None = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> list[TimerInfo]:
        """Timers matching the filters, newest first (a tenant's token sees its own only)."""
        if caller.tenant is not None:
            if tenant is not None and tenant != caller.tenant:
                return []
            tenant = caller.tenant
        try:
            where = TimerFilter(
                aggregate=aggregate,
                aggregate_id=aggregate_id,
                tenant=tenant,
                key=key,
                status=status,  # any case of a Status name
                running=running,
            )
        except ValidationError as error:  # an unknown status
            raise ApiError(400, "InvalidStatus", explain(error)) from None
        return await timers.list(where, limit=limit)

    @app.get("/timers/{workflow_id:path}", tags=["timers"], responses=_responses(404))
    async def show_timer(workflow_id: str, caller: CallerDep) -> TimerInfo:
        """One timer with its full state."""
        _check_timer_id(workflow_id)
        try:
            return await timers.show(workflow_id, tenant=caller.tenant)
        except TimerNotFoundError as error:
            raise ApiError(404, "TimerNotFound", str(error)) from None
        except TimerError as error:
            raise ApiError(400, "InvalidTimerId", str(error)) from None

    @app.post("/timers/{workflow_id:path}/retry", tags=["timers"], responses=_responses(404, 409))
    async def retry_timer(workflow_id: str, caller: CallerDep) -> TimerState:
        """Retry a parked timer's delivery now, with the same request id; the state after."""
        return await _operate(
            workflow_id, lambda: timers.retry(workflow_id, tenant=caller.tenant), "retry"
        )

    @app.post("/timers/{workflow_id:path}/cancel", tags=["timers"], responses=_responses(404, 409))
    async def cancel_timer(workflow_id: str, caller: CallerDep) -> TimerState:
        """Cancel a pending or parked timer (a command already sent is not recalled)."""
        return await _operate(
            workflow_id, lambda: timers.cancel(workflow_id, tenant=caller.tenant), "cancel"
        )

    job_responses = _responses(403, 404)

    @app.post(
        "/{context}/schedule/{id}/wow.schedule.enable", tags=["jobs"], responses=job_responses
    )
    async def enable_job(
        context: str,
        id: str,
        caller: CallerDep,
        tenant: TenantQuery = None,
    ) -> JobInfo:
        """Enable a recurring job instance (`wow.schedule.enable`)."""
        owner = _job_tenant(caller, tenant)
        return await _job_call(context, id, lambda: job_control.enable(context, id, tenant=owner))

    @app.post(
        "/{context}/schedule/{id}/wow.schedule.reschedule",
        tags=["jobs"],
        responses=job_responses,
    )
    async def reschedule_job(
        context: str,
        id: str,
        rule: RescheduleRequest,
        caller: CallerDep,
        tenant: TenantQuery = None,
    ) -> JobInfo:
        """Give a recurring job instance a new cron rule (`wow.schedule.reschedule`)."""
        owner = _job_tenant(caller, tenant)
        return await _job_call(
            context, id, lambda: job_control.reschedule(context, id, rule, tenant=owner)
        )

    @app.post(
        "/{context}/schedule/{id}/wow.schedule.disable", tags=["jobs"], responses=job_responses
    )
    async def disable_job(
        context: str,
        id: str,
        caller: CallerDep,
        tenant: TenantQuery = None,
    ) -> JobInfo:
        """Disable a recurring job instance (`wow.schedule.disable`)."""
        owner = _job_tenant(caller, tenant)
        return await _job_call(context, id, lambda: job_control.disable(context, id, tenant=owner))

    def openapi() -> dict[str, Any]:
        """FastAPI's schema plus the commit models that `POST /commits` reads by hand."""
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            components.update(_commit_schemas(components))
            # Invalid input answers 400 with an ErrorBody here, never FastAPI's 422.
            for operations in schema.get("paths", {}).values():
                for operation in operations.values():
                    operation.get("responses", {}).pop("422", None)
            components.pop("HTTPValidationError", None)
            components.pop("ValidationError", None)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


async def serve(
    settings: Settings,
    timers: TimerClient,
    *,
    host: str = "127.0.0.1",
    port: int | None = None,
    stop: asyncio.Event | None = None,
    tenant_tokens: Mapping[str, str] | None = None,
    jobs: JobControl | None = None,
) -> None:
    """Serve the control API on uvicorn until `stop` is set (or SIGINT/SIGTERM, or forever)."""
    app = create_app(timers, token=settings.api_token, tenant_tokens=tenant_tokens, jobs=jobs)
    listen = settings.api_port if port is None else port
    server = uvicorn.Server(
        uvicorn.Config(app, host=host, port=listen, log_config=None, lifespan="off")
    )
    log.info("control API on http://%s:%d (OpenAPI at /openapi.json)", host, listen)

    async def run() -> None:
        try:
            await server.serve()
        except SystemExit:  # uvicorn exits when it cannot start (the port is taken, ...)
            raise OSError(f"the control API could not listen on {host}:{listen}") from None

    running = asyncio.ensure_future(run())
    stopping = asyncio.ensure_future(stop.wait()) if stop is not None else None
    try:
        waiting = {running} if stopping is None else {running, stopping}
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if not running.done():
            server.should_exit = True
        await running
    finally:
        if stopping is not None:
            stopping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await stopping
        if not running.done():
            server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await running
