"""The job routes: the spec's `POST /{context}/schedule/{id}/wow.schedule.enable|reschedule|disable`
(and `wow.schedule.reset`, which removes an instance's own rule)
(a tenant's instance as Wow routes it, `/{context}/tenant/{tenantId}/schedule/...`, or with the
`Command-Tenant-Id` header), plus showing, listing and retrying instances, over the app's
`JobClient` (`app.state.jobs`).

Each route takes the instance it acts on from a dependency that reads the request's address
(context, name, tenant, partition) and works out its tenant once, as a `TenantScope`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Annotated, Protocol

from fastapi import APIRouter, Body, Depends, Header, Query, Request
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    ValidationError,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from wow_temporal.api.auth import CallerDep, TenantScope
from wow_temporal.api.errors import ApiError, responses
from wow_temporal.api.params import WholeNumber, filter_query
from wow_temporal.engine.listing import LIST_DEFAULT, LIST_LIMIT
from wow_temporal.jobs.client import (
    NOT_ANSWERED,
    JobClient,
    JobError,
    JobFilter,
    JobInfo,
    JobNotAnsweredError,
    JobNotFoundError,
    JobPage,
    NotParkedError,
)
from wow_temporal.jobs.core import RuleChange, RuleField, RuleLayer, misfire_name
from wow_temporal.model import (
    CronText,
    InvalidScheduleError,
    Misfire,
    ZoneName,
    explain,
    validate_key,
)
from wow_temporal.model.rules import firing
from wow_temporal.wire import TENANT_ID_HEADER

__all__ = ["JobInfo", "RescheduleRequest", "ResetRequest", "job_router"]


FiringCron = Annotated[CronText, AfterValidator(firing)]
AnyCaseMisfire = Annotated[Misfire, BeforeValidator(misfire_name)]


class RescheduleRequest(BaseModel):
    """A new rule for a job instance: a field given sets the instance's own, one given as
    null removes it (the host's override, or the code's, then in force), one left out keeps
    what the instance has."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    expression: FiringCron | None = Field(
        default=None,
        description="Six-field Spring cron expression (one that fires); null removes the "
        "instance's own",
        examples=["0 0 6 * * *"],
    )
    zone: ZoneName | None = Field(
        default=None,
        description="IANA time zone the expression is read in; null removes the instance's own",
        examples=["UTC"],
    )
    misfire: AnyCaseMisfire | None = Field(
        default=None,
        description="What to do with slots missed while nothing ran the job (COALESCE or "
        "CATCH_UP, any case); null removes the instance's own",
    )

    @model_validator(mode="after")
    def _at_least_one(self) -> RescheduleRequest:
        if not self.model_fields_set:
            raise ValueError(
                "give at least one of 'expression', 'zone' or 'misfire' (null removes the "
                "instance's own)"
            )
        return self

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        """Pydantic's schema, saying also that at least one field is given."""
        schema = handler.resolve_ref_schema(handler(core))
        fields: dict[str, JsonSchemaValue] = schema["properties"]
        schema["anyOf"] = [{"required": [name]} for name in fields]
        return schema

    def change(self) -> RuleChange:
        """The fields given set, those given as null removed."""
        layer = RuleLayer(expression=self.expression, zone=self.zone, misfire=self.misfire)
        removed = tuple(
            name for name in ("expression", "zone", "misfire")
            if name in self.model_fields_set and getattr(self, name) is None
        )
        return RuleChange(layer=layer, remove=removed)


class ResetRequest(BaseModel):
    """Which fields of the instance's own rule a reset removes; none given: all of it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    fields: list[RuleField] | None = Field(
        default=None,
        description="Any of expression, zone and misfire; left out or null: the whole own rule",
        examples=[["expression"]],
    )


_TenantQuery = Annotated[
    str | None,
    Query(description="The TENANT job instance's tenant (a tenant's token: its own)"),
]
_TenantHeader = Annotated[
    str | None,
    Header(
        alias=TENANT_ID_HEADER,
        description="The instance's tenant, as Wow's command API takes it",
    ),
]
_PartitionQuery = Annotated[
    int | None, Query(ge=0, description="The partition of a sharded job's instance"), WholeNumber
]

SHOW_CONCURRENCY = 32
"""How many instances `GET /schedules` asks for their state at once."""


class _Operation(Protocol):
    """A `JobClient` operation on one instance (enable, disable, retry, show)."""

    def __call__(
        self, context: str, name: str, *, tenant: str | None, partition: int | None
    ) -> Awaitable[JobInfo]: ...


@dataclass(frozen=True)
class _Instance:
    """The job instance a request addresses, its tenant worked out (`TenantScope`)."""

    context: str
    name: str
    scope: TenantScope
    partition: int | None

    async def run(self, operation: _Operation) -> JobInfo:
        """Run `operation` on this instance after checking the name; the client's refusals
        as answers (404 for an unknown job or instance, 400 for the rest)."""
        try:
            validate_key(self.name, "job name")
        except InvalidScheduleError as error:
            raise ApiError(400, "InvalidJobName", str(error)) from None
        try:
            return await operation(
                self.context, self.name, tenant=self.scope.tenant, partition=self.partition
            )
        except JobNotFoundError as error:
            raise ApiError(404, "JobNotFound", str(error)) from None
        except NotParkedError as error:  # as a timer's retry answers one not parked
            raise ApiError(409, "Conflict", str(error)) from None
        except JobNotAnsweredError as error:  # as a timer's operation with no worker
            raise ApiError(503, "NoWorkerAnswered", str(error)) from None
        except JobError as error:
            raise ApiError(400, "InvalidRequest", str(error)) from None


async def _system_instance(
    context: str,
    id: str,
    caller: CallerDep,
    tenant: _TenantQuery = None,
    partition: _PartitionQuery = None,
    header_tenant: _TenantHeader = None,
) -> _Instance:
    """`/{context}/schedule/{id}`: a SYSTEM instance, or a tenant's named by header or query."""
    return _Instance(context, id, TenantScope.of(caller, header_tenant, tenant), partition)


async def _tenant_instance(
    context: str,
    tenantId: str,
    id: str,
    caller: CallerDep,
    partition: _PartitionQuery = None,
    header_tenant: _TenantHeader = None,
) -> _Instance:
    """`/{context}/tenant/{tenantId}/schedule/{id}`: a tenant's instance (the header, if
    given, must name the same tenant)."""
    return _Instance(context, id, TenantScope.of(caller, tenantId, header_tenant), partition)


async def _tenant_instance_shown(
    context: str, tenantId: str, id: str, caller: CallerDep, partition: _PartitionQuery = None
) -> _Instance:
    """A tenant's instance as `GET` addresses it: by path only."""
    return _Instance(context, id, TenantScope.of(caller, tenantId), partition)


async def _job_client(request: Request) -> JobClient:
    """The app's `JobClient`, which `create_app` keeps in `app.state.jobs`."""
    jobs: JobClient = request.app.state.jobs
    return jobs


SystemInstance = Annotated[_Instance, Depends(_system_instance)]
TenantInstance = Annotated[_Instance, Depends(_tenant_instance)]
Jobs = Annotated[JobClient, Depends(_job_client)]

job_router = APIRouter(tags=["jobs"], responses=responses(403, 404))
"""The `wow.schedule.*` routes (and show, list, retry), over `app.state.jobs`."""

_ENABLE = "Enable a job instance (wow.schedule.enable); a TENANT job's is created"
_DISABLE = "Disable a job instance (wow.schedule.disable): in force when this answers"
_RETRY = "Retry a job instance's parked tick (same request ids)"
_SYSTEM_PATH = "/{context}/schedule/{id}"
_TENANT_PATH = "/{context}/tenant/{tenantId}/schedule/{id}"


@job_router.post(
    f"{_SYSTEM_PATH}/wow.schedule.enable", name="job/wow.schedule.enable", summary=_ENABLE
)
async def enable_job(job: SystemInstance, jobs: Jobs) -> JobInfo:
    """Enable a job instance (wow.schedule.enable); a TENANT job's is created"""
    return await job.run(jobs.enable)


@job_router.post(
    f"{_TENANT_PATH}/wow.schedule.enable",
    name="tenant_job/wow.schedule.enable",
    summary=f"{_ENABLE} (a tenant's)",
)
async def enable_tenant_job(job: TenantInstance, jobs: Jobs) -> JobInfo:
    """Enable a job instance (wow.schedule.enable); a TENANT job's is created"""
    return await job.run(jobs.enable)


@job_router.post(
    f"{_SYSTEM_PATH}/wow.schedule.disable", name="job/wow.schedule.disable", summary=_DISABLE
)
async def disable_job(job: SystemInstance, jobs: Jobs) -> JobInfo:
    """Disable a job instance (wow.schedule.disable): in force when this answers"""
    return await job.run(jobs.disable)


@job_router.post(
    f"{_TENANT_PATH}/wow.schedule.disable",
    name="tenant_job/wow.schedule.disable",
    summary=f"{_DISABLE} (a tenant's)",
)
async def disable_tenant_job(job: TenantInstance, jobs: Jobs) -> JobInfo:
    """Disable a job instance (wow.schedule.disable): in force when this answers"""
    return await job.run(jobs.disable)


@job_router.post(
    f"{_SYSTEM_PATH}/retry", name="job/retry", summary=_RETRY, responses=responses(409)
)
async def retry_job(job: SystemInstance, jobs: Jobs) -> JobInfo:
    """Retry a job instance's parked tick (same request ids)"""
    return await job.run(jobs.retry)


@job_router.post(
    f"{_TENANT_PATH}/retry",
    name="tenant_job/retry",
    summary=f"{_RETRY} (a tenant's)",
    responses=responses(409),
)
async def retry_tenant_job(job: TenantInstance, jobs: Jobs) -> JobInfo:
    """Retry a job instance's parked tick (same request ids)"""
    return await job.run(jobs.retry)


def _rescheduling(jobs: JobClient, rule: RescheduleRequest) -> _Operation:
    """`jobs.reschedule` with `rule`, as an operation on one instance."""

    def operation(
        context: str, name: str, *, tenant: str | None, partition: int | None
    ) -> Awaitable[JobInfo]:
        return jobs.reschedule(context, name, rule.change(), tenant=tenant, partition=partition)

    return operation


@job_router.post(f"{_SYSTEM_PATH}/wow.schedule.reschedule")
async def reschedule_job(rule: RescheduleRequest, job: SystemInstance, jobs: Jobs) -> JobInfo:
    """Give a job instance its own rule (`wow.schedule.reschedule`), any of expression,
    zone and misfire; a field given as null removes the instance's own."""
    return await job.run(_rescheduling(jobs, rule))


@job_router.post(f"{_TENANT_PATH}/wow.schedule.reschedule")
async def reschedule_tenant_job(
    rule: RescheduleRequest, job: TenantInstance, jobs: Jobs
) -> JobInfo:
    """Give a tenant's job instance its own rule (`wow.schedule.reschedule`)."""
    return await job.run(_rescheduling(jobs, rule))


_ResetBody = Annotated[ResetRequest, Body(description="Optional: no body resets it all")]
_ALL = ResetRequest()


def _resetting(jobs: JobClient, request: ResetRequest) -> _Operation:
    """`jobs.reset` of `request`'s fields (all if none), as an operation on one instance."""
    fields = request.fields

    def operation(
        context: str, name: str, *, tenant: str | None, partition: int | None
    ) -> Awaitable[JobInfo]:
        return jobs.reset(context, name, fields, tenant=tenant, partition=partition)

    return operation


_RESET = (
    "Remove a job instance's own rule (wow.schedule.reset): the host's override, or the "
    "code's, in force again"
)


@job_router.post(
    f"{_SYSTEM_PATH}/wow.schedule.reset", name="job/wow.schedule.reset", summary=_RESET
)
async def reset_job(job: SystemInstance, jobs: Jobs, request: _ResetBody = _ALL) -> JobInfo:
    """Remove a job instance's own rule, all of it or `{"fields": ["expression", …]}`: the
    host's override, or the code's, is in force again, its next due time counted from now.
    Nothing to remove answers the instance as it is."""
    return await job.run(_resetting(jobs, request))


@job_router.post(
    f"{_TENANT_PATH}/wow.schedule.reset",
    name="tenant_job/wow.schedule.reset",
    summary=f"{_RESET} (a tenant's)",
)
async def reset_tenant_job(
    job: TenantInstance, jobs: Jobs, request: _ResetBody = _ALL
) -> JobInfo:
    """Remove a tenant's job instance's own rule (`wow.schedule.reset`)."""
    return await job.run(_resetting(jobs, request))


@job_router.get(_SYSTEM_PATH)
async def show_job(job: SystemInstance, jobs: Jobs) -> JobInfo:
    """A job instance: the rule in force and where it comes from, next due times, ticks."""
    return await job.run(jobs.show)


@job_router.get(_TENANT_PATH)
async def show_tenant_job(
    job: Annotated[_Instance, Depends(_tenant_instance_shown)], jobs: Jobs
) -> JobInfo:
    """A tenant's job instance."""
    return await job.run(jobs.show)


@dataclass(frozen=True)
class _Listing:
    """What `GET /schedules` asks for, its tenant worked out."""

    where: JobFilter
    limit: int


async def _listing(
    caller: CallerDep,
    context: Annotated[str | None, filter_query("Only this context's jobs")] = None,
    job: Annotated[str | None, filter_query("Only this job")] = None,
    tenant: Annotated[
        str | None, filter_query("Only this tenant's (a tenant's token: its own)")
    ] = None,
    status: Annotated[str | None, filter_query("Enabled, Disabled or Parked")] = None,
    limit: Annotated[
        int,
        Query(ge=1, le=LIST_LIMIT, description=f"At most this many (1 to {LIST_LIMIT:,})"),
        WholeNumber,
    ] = LIST_DEFAULT,
) -> _Listing:
    scope = TenantScope.of(caller, tenant)
    try:
        where = JobFilter(context=context, name=job, tenant=scope.tenant, status=status)
    except ValidationError as error:  # an unknown status: bad input, as any other parameter's
        raise ApiError(400, "InvalidRequest", explain(error)) from None
    return _Listing(where, limit)


@job_router.get("/schedules")
async def list_jobs(listing: Annotated[_Listing, Depends(_listing)], jobs: Jobs) -> JobPage:
    """Running job instances (as visibility lists them: it may lag a change by a second),
    each as `GET /{context}/schedule/{id}` shows it; `truncated` when more matched than
    `limit`."""
    page = await jobs.page(listing.where, limit=listing.limit)
    return page.model_copy(update={"items": await _in_full(jobs, page.items)})


async def _in_full(jobs: JobClient, found: list[JobInfo]) -> list[JobInfo]:
    """The listed instances as showing them answers (rule, processor, next due times, ticks),
    asked `SHOW_CONCURRENCY` at a time within one answer timeout for them all; an instance
    that cannot be shown in that time (no worker answers) or at all stays as listed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + jobs.answer_timeout.total_seconds()
    asking = asyncio.Semaphore(SHOW_CONCURRENCY)

    async def shown(listed: JobInfo) -> JobInfo:
        async with asking:
            try:
                return await asyncio.wait_for(
                    jobs.show(
                        listed.context,
                        listed.name,
                        tenant=listed.tenant,
                        partition=listed.partition,
                    ),
                    max(deadline - loop.time(), 0),
                )
            except TimeoutError:
                return listed.model_copy(update={"note": NOT_ANSWERED})
            except JobError:  # it ended since, or this client cannot address it
                return listed

    return list(await asyncio.gather(*(shown(listed) for listed in found)))

