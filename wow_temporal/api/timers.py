"""The timer routes: hand over commits (`POST /commits`), list, show, retry and cancel timers,
over the app's `TimerClient` (`app.state.timers`).

A tenant's caller hands over and reaches only its own tenant's commits and timers.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import ValidationError
from temporalio.client import WorkflowUpdateFailedError
from temporalio.service import RPCError, RPCStatusCode

from wow_temporal.api.auth import CallerDep, CallerScope, TenantScope
from wow_temporal.api.errors import ApiError, responses
from wow_temporal.api.params import WholeNumber, filter_query
from wow_temporal.model import Commit, InvalidCommitError, ScheduleSet, explain
from wow_temporal.timers.admission import Admission, admit
from wow_temporal.timers.client import (
    LIST_DEFAULT,
    LIST_LIMIT,
    Applied,
    ShownState,
    TimerClient,
    TimerError,
    TimerFilter,
    TimerInfo,
    TimerNotAnsweredError,
    TimerNotFoundError,
    TimerPage,
    check_timer_id,
)
from wow_temporal.timers.core import TimerState
from wow_temporal.tracing import within_request_trace

COMMITS_SCHEMA = "Commits"
"""The OpenAPI component naming the `POST /commits` body (read by hand, so declared by name)."""


async def _timer_client(request: Request) -> TimerClient:
    """The app's `TimerClient`, which `create_app` keeps in `app.state.timers`."""
    timers: TimerClient = request.app.state.timers
    return timers


Timers = Annotated[TimerClient, Depends(_timer_client)]
"""A route parameter that is the app's `TimerClient`."""

timer_router = APIRouter(tags=["timers"])
"""The commit and timer routes, over `app.state.timers`."""

_COMMITS_OPENAPI: dict[str, Any] = {
    "parameters": [
        {
            "name": "traceparent",
            "in": "header",
            "required": False,
            "schema": {"type": "string"},
            "description": "W3C trace context: the timers' deliveries continue this "
            "trace, unless a commit's `header` carries a `traceparent` of its own.",
        }
    ],
    "requestBody": {
        "required": True,
        "description": "One commit (Wow DomainEventStream JSON) or a list of them.",
        "content": {
            "application/json": {"schema": {"$ref": f"#/components/schemas/{COMMITS_SCHEMA}"}}
        },
    },
}
"""What OpenAPI says of `POST /commits`, whose body the route reads by hand."""


@timer_router.post("/commits", responses=responses(403), openapi_extra=_COMMITS_OPENAPI)
async def post_commits(request: Request, scope: CallerScope, timers: Timers) -> list[Applied]:
    """Apply the schedule events of one commit or a list of commits, in order.

    One aggregate's commits are applied in the order given; different aggregates' at
    once, so a batch is much faster than as many requests.

    Idempotent and order-safe: a commit handed over twice, or an older one after a newer,
    changes nothing. Every commit is checked before any is applied.
    """
    commits = _commits_of(await request.body())
    for commit in commits.commits:
        _check_tenant(scope, commit)
    applied: list[Applied] = []
    # A commit continues its own header's trace, else the request's `traceparent`.
    with within_request_trace(request.headers.get("traceparent")):
        for answers in await timers.apply_many(commits):
            applied.extend(answers)
    return applied


@dataclass(frozen=True)
class _Listing:
    """What `GET /timers` asks for, its tenant worked out."""

    where: TimerFilter
    limit: int


async def _listing(
    caller: CallerDep,
    aggregate: Annotated[
        str | None, filter_query("`context.aggregate`, e.g. eshop-order.order")
    ] = None,
    aggregate_id: Annotated[
        str | None, filter_query("The aggregate's id", alias="aggregateId")
    ] = None,
    tenant: Annotated[str | None, filter_query("The tenant (a tenant's token: its own)")] = None,
    key: Annotated[str | None, filter_query("The schedule's key")] = None,
    status: Annotated[
        str | None,
        filter_query(
            "Scheduled, Delivering, Parked, Delivered, Rejected, Cancelled, NeverDue, …"
        ),
    ] = None,
    running: bool | None = None,
    limit: Annotated[
        int,
        Query(ge=1, le=LIST_LIMIT, description=f"At most this many (1 to {LIST_LIMIT:,})"),
        WholeNumber,
    ] = LIST_DEFAULT,
) -> _Listing:
    scope = TenantScope.of(caller, tenant)
    try:
        where = TimerFilter(
            aggregate=aggregate,
            aggregate_id=aggregate_id,
            tenant=scope.tenant,
            key=key,
            status=status,  # any case of a Status name
            running=running,
        )
    except ValidationError as error:  # an unknown status: bad input, as any other parameter's
        raise ApiError(400, "InvalidRequest", explain(error)) from None
    return _Listing(where, limit)


@timer_router.get("/timers", responses=responses(403))
async def list_timers(
    listing: Annotated[_Listing, Depends(_listing)], timers: Timers
) -> TimerPage:
    """Timers matching the filters, newest first, in `items`; `truncated` is true when more
    matched than `limit` (a tenant's token sees its own only, and naming another tenant is
    refused, as `GET /schedules` refuses it)."""
    return await timers.page(listing.where, limit=listing.limit)


WorkflowId = Annotated[str, Path(alias="workflowId", description="The timer's workflow id")]
"""The timer a route addresses, named as the answers name it (`workflowId`)."""


@timer_router.get("/timers/{workflowId:path}", responses=responses(404))
async def show_timer(workflow_id: WorkflowId, scope: CallerScope, timers: Timers) -> TimerInfo:
    """One timer with its full state."""
    _check_timer_id(workflow_id)
    try:
        return await timers.show(workflow_id, tenant=scope.tenant)
    except TimerNotFoundError as error:
        raise ApiError(404, "TimerNotFound", str(error)) from None
    except TimerError as error:
        raise ApiError(400, "InvalidTimerId", str(error)) from None


@timer_router.post("/timers/{workflowId:path}/retry", responses=responses(404, 409))
async def retry_timer(workflow_id: WorkflowId, scope: CallerScope, timers: Timers) -> ShownState:
    """Retry a parked timer's delivery now, with the same request id; the state after."""
    return await _operate(
        workflow_id, lambda: timers.retry(workflow_id, tenant=scope.tenant), "retry"
    )


@timer_router.post("/timers/{workflowId:path}/cancel", responses=responses(404, 409))
async def cancel_timer(workflow_id: WorkflowId, scope: CallerScope, timers: Timers) -> ShownState:
    """Cancel a pending or parked timer (a command already sent is not recalled)."""
    return await _operate(
        workflow_id, lambda: timers.cancel(workflow_id, tenant=scope.tenant), "cancel"
    )


def _commits_of(raw: bytes) -> Admission:
    """The commits of a `POST /commits` body (one commit object or a list of them), admitted:
    a commit the timers cannot hold is refused before any of the request's is applied."""
    try:
        data = json.loads(raw, parse_constant=_not_json)
    except (ValueError, RecursionError) as error:
        raise ApiError(400, "InvalidJson", f"the body is not JSON: {error}") from None
    try:
        return admit(data if isinstance(data, list) else [data])
    except InvalidCommitError as error:
        raise ApiError(400, "InvalidCommit", str(error)) from None


def _not_json(constant: str) -> Any:
    """Python's JSON reader takes NaN and Infinity; JSON has no such numbers."""
    raise ValueError(f"{constant} is not a JSON number")


def _check_tenant(scope: TenantScope, commit: Commit) -> None:
    """A tenant's caller hands over only its own tenant's commits, targeting its own tenant."""
    if not scope.reaches(commit.tenant_id):
        raise ApiError(
            403,
            "Forbidden",
            f"commit {commit.id!r} belongs to tenant {commit.tenant_id!r}; "
            f"this token reaches only tenant {scope.tenant!r}",
        )
    for _, event in commit.schedule_events():
        if (
            isinstance(event, ScheduleSet)
            and event.target is not None
            and not scope.reaches(event.target.tenant_id)
        ):
            raise ApiError(
                403,
                "Forbidden",
                f"commit {commit.id!r} schedules a command for tenant "
                f"{event.target.tenant_id!r}; this token reaches only tenant {scope.tenant!r}",
            )


def _check_timer_id(workflow_id: str) -> None:
    """400 unless `workflow_id` is one the timers could have made (retry and cancel would
    otherwise answer a malformed id with 409, as if the timer were in the wrong state)."""
    try:
        check_timer_id(workflow_id)
    except TimerError as error:
        raise ApiError(400, "InvalidTimerId", str(error)) from None


async def _operate(
    workflow_id: str, operation: Callable[[], Awaitable[TimerState]], verb: str
) -> TimerState:
    """Retry or cancel a timer, mapping why it cannot be done to 404 or 409."""
    _check_timer_id(workflow_id)
    try:
        return await operation()
    except TimerNotFoundError as error:
        raise ApiError(404, "TimerNotFound", str(error)) from None
    except TimerNotAnsweredError as error:  # what happens to the request is in the message
        raise ApiError(503, "NoWorkerAnswered", str(error)) from None
    except TimerError as error:
        raise ApiError(409, "Conflict", str(error)) from None
    except WorkflowUpdateFailedError as error:
        raise ApiError(409, "Conflict", f"cannot {verb}: {error.cause or error}") from None
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            raise ApiError(409, "Conflict", f"timer {workflow_id!r} has ended") from None
        if error.status == RPCStatusCode.FAILED_PRECONDITION:  # its workflow task is failing
            raise ApiError(
                409,
                "Conflict",
                f"cannot {verb} timer {workflow_id!r} now: {error.message} (its history in the "
                "Web UI says why; `temporal workflow terminate` ends it)",
            ) from None
        raise
