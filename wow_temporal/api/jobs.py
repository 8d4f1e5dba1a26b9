"""The job routes: enable, reschedule or disable a recurring job instance (the spec's
`POST /{context}/schedule/{id}/wow.schedule.*`), over whatever implements `JobControl`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated, Protocol

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field, model_validator

from wow_temporal.api.auth import Caller, CallerDep
from wow_temporal.api.errors import ApiError, responses
from wow_temporal.schedule import CronText, InvalidScheduleError, Misfire, ZoneName, validate_key


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


class NoJobs:
    """The job registry until jobs exist: every job is unknown."""

    async def enable(self, context: str, name: str, *, tenant: str | None) -> JobInfo:
        raise UnknownJobError(context, name)

    async def disable(self, context: str, name: str, *, tenant: str | None) -> JobInfo:
        raise UnknownJobError(context, name)

    async def reschedule(
        self, context: str, name: str, rule: RescheduleRequest, *, tenant: str | None
    ) -> JobInfo:
        raise UnknownJobError(context, name)


_TenantQuery = Annotated[
    str | None,
    Query(
        description="The TENANT job instance's tenant (a tenant's token: its own); "
        "none for a SYSTEM job"
    ),
]


def job_routes(jobs: JobControl) -> APIRouter:
    """The `wow.schedule.enable|reschedule|disable` routes over `jobs`."""
    router = APIRouter(tags=["jobs"], responses=responses(403, 404))

    @router.post("/{context}/schedule/{id}/wow.schedule.enable")
    async def enable_job(
        context: str,
        id: str,
        caller: CallerDep,
        tenant: _TenantQuery = None,
    ) -> JobInfo:
        """Enable a recurring job instance (`wow.schedule.enable`)."""
        owner = _job_tenant(caller, tenant)
        return await _job_call(context, id, lambda: jobs.enable(context, id, tenant=owner))

    @router.post("/{context}/schedule/{id}/wow.schedule.reschedule")
    async def reschedule_job(
        context: str,
        id: str,
        rule: RescheduleRequest,
        caller: CallerDep,
        tenant: _TenantQuery = None,
    ) -> JobInfo:
        """Give a recurring job instance a new cron rule (`wow.schedule.reschedule`)."""
        owner = _job_tenant(caller, tenant)
        return await _job_call(
            context, id, lambda: jobs.reschedule(context, id, rule, tenant=owner)
        )

    @router.post("/{context}/schedule/{id}/wow.schedule.disable")
    async def disable_job(
        context: str,
        id: str,
        caller: CallerDep,
        tenant: _TenantQuery = None,
    ) -> JobInfo:
        """Disable a recurring job instance (`wow.schedule.disable`)."""
        owner = _job_tenant(caller, tenant)
        return await _job_call(context, id, lambda: jobs.disable(context, id, tenant=owner))

    return router


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
