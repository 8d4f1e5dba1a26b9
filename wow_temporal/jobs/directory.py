"""The tenants of a TENANT job: one small workflow per job, `wow-job:{context}:{name}:tenants`.

Visibility lists instances only eventually; this record is read by workflow id, so a worker
that starts with a changed host override finds every tenant's instance to bring to it (and
knows, from the override it last brought, whether there is anything to do).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from wow_temporal.engine import CONTINUE_AS_NEW_AFTER_EVENTS
    from wow_temporal.engine.waiting import history_is_long
    from wow_temporal.ids import job_workflow_id
    from wow_temporal.jobs.core import HostRule

__all__ = ["CONTINUE_AS_NEW_AFTER_EVENTS", "TenantDirectory", "TenantsWorkflow", "directory_id"]


class TenantDirectory(BaseModel):
    """The tenants with an instance of the job, and the host override last brought to them."""

    model_config = ConfigDict(frozen=True)

    tenants: tuple[str, ...] = ()
    host: HostRule | None = None


def directory_id(context: str, name: str) -> str:
    """`wow-job:{context}:{name}:tenants` (never an instance id: those have 2 or 4 parts)."""
    return f"{job_workflow_id(context, name)}:tenants"


@workflow.defn(name="wow.JobTenants")
class TenantsWorkflow:
    """Idles forever, keeping the directory; continues as new before its history grows."""

    @workflow.init
    def __init__(self, directory: TenantDirectory) -> None:
        self._directory = directory

    @workflow.run
    async def run(self, directory: TenantDirectory) -> None:
        await workflow.wait_condition(lambda: history_is_long(CONTINUE_AS_NEW_AFTER_EVENTS))
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(self._directory)

    @workflow.signal(name="add")
    def add(self, tenant: str) -> None:
        """A tenant's instance was created."""
        if tenant not in self._directory.tenants:
            tenants = (*self._directory.tenants, tenant)
            self._directory = self._directory.model_copy(update={"tenants": tenants})

    @workflow.update(name="host")
    def host(self, rule: HostRule) -> TenantDirectory:
        """Every tenant's instance has been brought to `rule`."""
        self._directory = self._directory.model_copy(update={"host": rule})
        return self._directory

    @workflow.query(name="state")
    def state(self) -> TenantDirectory:
        return self._directory
