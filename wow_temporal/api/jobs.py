"""The job routes: the spec's `POST /{context}/schedule/{id}/wow.schedule.enable|reschedule|disable`
(a tenant's instance as Wow routes it, `/{context}/tenant/{tenantId}/schedule/...`, or with the
`Command-Tenant-Id` header), plus showing, listing and retrying instances, over a `JobClient`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import APIRouter, Header, Query
from pydantic import BaseModel, ConfigDict, Field, GetJsonSchemaHandler, model_validator
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from wow_temporal.api.auth import Caller, CallerDep
from wow_temporal.api.errors import ApiError, responses
from wow_temporal.api.params import filter_query
from wow_temporal.jobs.client import JobClient, JobError, JobInfo, UnknownJobError
from wow_temporal.jobs.core import RuleLayer
from wow_temporal.schedule import CronText, InvalidScheduleError, Misfire, ZoneName, validate_key

__all__ = ["JobInfo", "RescheduleRequest", "job_routes"]


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

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        """Pydantic's schema, saying also that at least one field is given, not null."""
        schema = handler.resolve_ref_schema(handler(core))
        fields: dict[str, JsonSchemaValue] = schema["properties"]
        schema["anyOf"] = [
            {
                "required": [name],
                "properties": {
                    name: next(form for form in field["anyOf"] if form != {"type": "null"})
                },
            }
            for name, field in fields.items()
        ]
        return schema

    def layer(self) -> RuleLayer:
        return RuleLayer(expression=self.expression, zone=self.zone, misfire=self.misfire)


_TenantQuery = Annotated[
    str | None,
    Query(description="The TENANT job instance's tenant (a tenant's token: its own)"),
]
_TenantHeader = Annotated[
    str | None,
    Header(
        alias="Command-Tenant-Id",
        description="The instance's tenant, as Wow's command API takes it",
    ),
]
_PartitionQuery = Annotated[
    int | None, Query(ge=0, description="The partition of a sharded job's instance")
]

Operation = Callable[[str | None, int | None], Awaitable[JobInfo]]


def job_routes(jobs: JobClient) -> APIRouter:
    """The `wow.schedule.*` routes (and show, list, retry) over `jobs`."""
    router = APIRouter(tags=["jobs"], responses=responses(403, 404))

    def control(suffix: str, summary: str, make: Callable[[str, str], Operation]) -> None:
        async def system_route(
            context: str,
            id: str,
            caller: CallerDep,
            tenant: _TenantQuery = None,
            partition: _PartitionQuery = None,
            header_tenant: _TenantHeader = None,
        ) -> JobInfo:
            owner = _job_tenant(caller, _one_tenant(None, header_tenant, tenant))
            return await _job_call(id, lambda: make(context, id)(owner, partition))

        async def tenant_route(
            context: str,
            tenantId: str,
            id: str,
            caller: CallerDep,
            partition: _PartitionQuery = None,
            header_tenant: _TenantHeader = None,
        ) -> JobInfo:
            owner = _job_tenant(caller, _one_tenant(tenantId, header_tenant, None))
            return await _job_call(id, lambda: make(context, id)(owner, partition))

        system_route.__doc__ = tenant_route.__doc__ = summary
        router.add_api_route(
            f"/{{context}}/schedule/{{id}}{suffix}", system_route, methods=["POST"],
            name=f"job{suffix}", summary=summary,
        )
        router.add_api_route(
            f"/{{context}}/tenant/{{tenantId}}/schedule/{{id}}{suffix}", tenant_route,
            methods=["POST"], name=f"tenant_job{suffix}", summary=f"{summary} (a tenant's)",
        )

    control(
        "/wow.schedule.enable",
        "Enable a job instance (wow.schedule.enable); a TENANT job's is created",
        lambda context, name: lambda tenant, part: jobs.enable(
            context, name, tenant=tenant, partition=part
        ),
    )
    control(
        "/wow.schedule.disable",
        "Disable a job instance (wow.schedule.disable): in force when this answers",
        lambda context, name: lambda tenant, part: jobs.disable(
            context, name, tenant=tenant, partition=part
        ),
    )
    control(
        "/retry",
        "Retry a job instance's parked tick (same request ids)",
        lambda context, name: lambda tenant, part: jobs.retry(
            context, name, tenant=tenant, partition=part
        ),
    )

    @router.post("/{context}/schedule/{id}/wow.schedule.reschedule")
    async def reschedule_job(
        context: str,
        id: str,
        rule: RescheduleRequest,
        caller: CallerDep,
        tenant: _TenantQuery = None,
        partition: _PartitionQuery = None,
        header_tenant: _TenantHeader = None,
    ) -> JobInfo:
        """Give a job instance its own rule (`wow.schedule.reschedule`), any of expression,
        zone and misfire."""
        owner = _job_tenant(caller, _one_tenant(None, header_tenant, tenant))
        return await _job_call(
            id,
            lambda: jobs.reschedule(context, id, rule.layer(), tenant=owner, partition=partition),
        )

    @router.post("/{context}/tenant/{tenantId}/schedule/{id}/wow.schedule.reschedule")
    async def reschedule_tenant_job(
        context: str,
        tenantId: str,
        id: str,
        rule: RescheduleRequest,
        caller: CallerDep,
        partition: _PartitionQuery = None,
        header_tenant: _TenantHeader = None,
    ) -> JobInfo:
        """Give a tenant's job instance its own rule (`wow.schedule.reschedule`)."""
        owner = _job_tenant(caller, _one_tenant(tenantId, header_tenant, None))
        return await _job_call(
            id,
            lambda: jobs.reschedule(context, id, rule.layer(), tenant=owner, partition=partition),
        )

    @router.get("/{context}/schedule/{id}")
    async def show_job(
        context: str,
        id: str,
        caller: CallerDep,
        tenant: _TenantQuery = None,
        partition: _PartitionQuery = None,
        header_tenant: _TenantHeader = None,
    ) -> JobInfo:
        """A job instance: the rule in force and where it comes from, next due times, ticks."""
        owner = _job_tenant(caller, _one_tenant(None, header_tenant, tenant))
        return await _job_call(
            id, lambda: jobs.show(context, id, tenant=owner, partition=partition)
        )

    @router.get("/{context}/tenant/{tenantId}/schedule/{id}")
    async def show_tenant_job(
        context: str,
        tenantId: str,
        id: str,
        caller: CallerDep,
        partition: _PartitionQuery = None,
    ) -> JobInfo:
        """A tenant's job instance."""
        owner = _job_tenant(caller, tenantId)
        return await _job_call(
            id, lambda: jobs.show(context, id, tenant=owner, partition=partition)
        )

    @router.get("/schedules")
    async def list_jobs(
        caller: CallerDep,
        context: Annotated[str | None, filter_query("Only this context's jobs")] = None,
        job: Annotated[str | None, filter_query("Only this job")] = None,
        tenant: Annotated[
            str | None, filter_query("Only this tenant's (a tenant's token: its own)")
        ] = None,
        status: Annotated[str | None, filter_query("Enabled, Disabled or Parked")] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> list[JobInfo]:
        """Running job instances (as visibility lists them: it may lag a change by a second)."""
        owner = caller.tenant if caller.tenant is not None else tenant
        if caller.tenant is not None and tenant not in (None, caller.tenant):
            raise _other_tenant(caller, tenant)
        try:
            return await jobs.list(
                context=context, name=job, tenant=owner, status=status, limit=limit
            )
        except JobError as error:
            raise ApiError(400, "BadRequest", str(error)) from None

    return router


def _one_tenant(path: str | None, header: str | None, query: str | None) -> str | None:
    """The tenant the request names, by path, header or query; 400 if they disagree."""
    given = {value for value in (path, header, query) if value is not None}
    if len(given) > 1:
        raise ApiError(
            400, "BadRequest", f"the request names more than one tenant: {sorted(given)}"
        )
    return next(iter(given), None)


def _job_tenant(caller: Caller, tenant: str | None) -> str | None:
    """The instance's tenant: the caller's own, or any the operator names."""
    if caller.tenant is None:
        return tenant
    if tenant is not None and tenant != caller.tenant:
        raise _other_tenant(caller, tenant)
    return caller.tenant


def _other_tenant(caller: Caller, tenant: str) -> ApiError:
    return ApiError(
        403, "Forbidden", f"this token reaches only tenant {caller.tenant!r}, not {tenant!r}"
    )


async def _job_call(name: str, call: Callable[[], Awaitable[JobInfo]]) -> JobInfo:
    """Run a job operation after checking the name; map the client's errors to answers."""
    try:
        validate_key(name, "job name")
    except InvalidScheduleError as error:
        raise ApiError(400, "InvalidJobName", str(error)) from None
    try:
        return await call()
    except UnknownJobError as error:
        raise ApiError(404, "UnknownJob", str(error)) from None
    except JobError as error:
        raise ApiError(400, "BadRequest", str(error)) from None
