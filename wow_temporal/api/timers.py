"""The timer routes: hand over commits (`POST /commits`), list, show, retry and cancel timers.

A tenant's caller hands over and reaches only its own tenant's commits and timers.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import APIRouter, Query, Request
from pydantic import ValidationError
from temporalio.client import WorkflowUpdateFailedError
from temporalio.service import RPCError, RPCStatusCode

from wow_temporal.api.auth import Caller, CallerDep
from wow_temporal.api.errors import ApiError, responses
from wow_temporal.schedule import Commit, InvalidCommitError, ScheduleSet, explain
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
from wow_temporal.tracing import within_request_trace

COMMITS_SCHEMA = "Commits"
"""The OpenAPI component naming the `POST /commits` body (read by hand, so declared by name)."""


def timer_routes(timers: TimerClient) -> APIRouter:
    """The commit and timer routes over `timers`."""
    router = APIRouter(tags=["timers"])

    @router.post(
        "/commits",
        responses=responses(403, 413),
        openapi_extra={
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
                    "application/json": {
                        "schema": {"$ref": f"#/components/schemas/{COMMITS_SCHEMA}"}
                    }
                },
            }
        },
    )
    async def post_commits(request: Request, caller: CallerDep) -> list[Applied]:
        """Apply the schedule events of one commit or a list of commits, in order.

        One aggregate's commits are applied in the order given; different aggregates' at
        once, so a batch is much faster than as many requests.

        Idempotent and order-safe: a commit handed over twice, or an older one after a newer,
        changes nothing. Every commit is checked before any is applied.
        """
        commits = _commits_of(await request.body())
        for commit in commits:
            _check_tenant(caller, commit)
        applied: list[Applied] = []
        # A commit continues its own header's trace, else the request's `traceparent`.
        with within_request_trace(request.headers.get("traceparent")):
            for answers in await timers.apply_many(commits):
                applied.extend(answers)
        return applied

    @router.get("/timers", responses=responses())
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

    @router.get("/timers/{workflow_id:path}", responses=responses(404))
    async def show_timer(workflow_id: str, caller: CallerDep) -> TimerInfo:
        """One timer with its full state."""
        _check_timer_id(workflow_id)
        try:
            return await timers.show(workflow_id, tenant=caller.tenant)
        except TimerNotFoundError as error:
            raise ApiError(404, "TimerNotFound", str(error)) from None
        except TimerError as error:
            raise ApiError(400, "InvalidTimerId", str(error)) from None

    @router.post("/timers/{workflow_id:path}/retry", responses=responses(404, 409))
    async def retry_timer(workflow_id: str, caller: CallerDep) -> TimerState:
        """Retry a parked timer's delivery now, with the same request id; the state after."""
        return await _operate(
            workflow_id, lambda: timers.retry(workflow_id, tenant=caller.tenant), "retry"
        )

    @router.post("/timers/{workflow_id:path}/cancel", responses=responses(404, 409))
    async def cancel_timer(workflow_id: str, caller: CallerDep) -> TimerState:
        """Cancel a pending or parked timer (a command already sent is not recalled)."""
        return await _operate(
            workflow_id, lambda: timers.cancel(workflow_id, tenant=caller.tenant), "cancel"
        )

    return router


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
