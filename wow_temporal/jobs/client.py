"""Operate recurring job instances: enable, disable, reschedule, reset, retry, show, list them.

`JobClient` is the one code path behind the Python API, the control API's job routes, the CLI
and the worker (which brings every SYSTEM instance to its settings at start). Changes are
Temporal updates on the instance's workflow id (strongly consistent, validated, answered); an
instance that does not exist yet is started first, if the client knows the job's code. It
shows the timers' face: `list` and `page` take a `JobFilter` as `TimerClient`'s take a
`TimerFilter`, and `JobError`, `JobNotFoundError` are shaped as `TimerError`,
`TimerNotFoundError`.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import BaseModel, field_validator
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from wow_temporal.domain.app import App, Job
from wow_temporal.engine import history
from wow_temporal.engine.listing import FILTER_CONFIG, LIST_DEFAULT, quoted
from wow_temporal.engine.runs import describe_or_none
from wow_temporal.engine.text import Instant, shown_instants
from wow_temporal.errors import WowTemporalError
from wow_temporal.ids import InvalidIdError, job_workflow_id, parse_job_workflow_id
from wow_temporal.jobs import core
from wow_temporal.jobs.attributes import initial_search_attributes
from wow_temporal.jobs.core import (
    HostRule,
    JobRule,
    JobState,
    RuleChange,
    RuleField,
    RuleLayer,
    TickRecord,
)
from wow_temporal.jobs.directory import TenantDirectory, TenantsWorkflow, directory_id
from wow_temporal.jobs.tick import TickRequest
from wow_temporal.jobs.workflow import (
    DISABLE,
    ENABLE,
    HOST,
    JOB_WORKFLOW,
    RESCHEDULE,
    RESET,
    RETRY,
    JobInput,
)
from wow_temporal.model import JobScope, Misfire, WireModel, validate_key
from wow_temporal.search_attributes import SA_JOB, SA_STATUS, SA_TENANT
from wow_temporal.settings.delivery import DeliverySettings
from wow_temporal.updates import NotAccepted, NotAnswered, SentAsSignal, update_or_signal

__all__ = [
    "JobClient",
    "JobError",
    "JobFilter",
    "JobInfo",
    "JobNotAnsweredError",
    "JobNotFoundError",
    "JobPage",
    "NotParkedError",
    "job_task_queue",
    "static_summary",
]


def job_task_queue(context: str) -> str:
    """The task queue of a context's job instances: only a worker with that `App` polls it
    (a timers-only worker would take a tick it has no handler for)."""
    return f"wow-jobs-{context}"


log = logging.getLogger(__name__)

ANSWER_TIMEOUT = timedelta(seconds=10)
"""How long a change waits for a worker to accept it before it is sent as a signal instead."""

RESULT_TIMEOUT = timedelta(seconds=60)
"""How long an accepted change may take to answer (a disable waits for the tick in flight)."""

_MAX_ID_PART = 200

Source = Literal["code", "host", "tenant", "operator"]


NOT_ANSWERED = "no worker answered the query in time: only the listed status is known"
"""The note of an instance shown without its state (no worker answered), however it timed out."""


class JobError(WowTemporalError, ValueError):
    """A job operation refused (bad input, or not possible in the instance's state)."""


class JobNotFoundError(JobError, LookupError):
    """No such job, or no instance of it (for that tenant)."""


class JobNotAnsweredError(JobError):
    """No worker took the operation, or answered it, in time: not bad input (the API's 503
    `NoWorkerAnswered`, the CLI's exit 1), as a timer's operation with no worker."""


class NotParkedError(JobError):
    """A retry of an instance that is not parked (nothing to retry): a conflict with its
    state, as a timer's retry that is not parked is."""


ShownTick = Annotated[TickRecord, shown_instants(("due",), ("at",))]
"""A finished tick as the CLI and the control API answer it (the schema: `TickRecord`)."""


class JobInfo(BaseModel):
    """A job instance as operators see it (CLI, control API): camelCase in JSON, as the
    control API speaks it (`workflowId`, `nextDue`), snake_case in Python."""

    model_config = WireModel.model_config

    workflow_id: str
    context: str
    name: str
    tenant: str | None = None
    """The instance's tenant (`(0)` for a SYSTEM job's)."""
    partition: int | None = None
    status: str
    """`Enabled`, `Disabled` or `Parked`; a closed run's execution status (e.g. `Terminated`)."""
    expression: str | None = None
    zone: str | None = None
    misfire: Misfire | None = None
    sources: dict[str, Source] = {}
    """Where each field of the rule in force comes from: code, host, tenant (or operator)."""
    code: JobRule | None = None
    """The code's rule (`@on_schedule`), the lowest layer."""
    host: RuleLayer | None = None
    """The host's override (`wow.schedules.<name>.*`) as the instance last had it."""
    own: RuleLayer | None = None
    """The instance's own layer (a reschedule), the highest: `reset` removes it."""
    shadowed: list[str] = []
    """Each field of the host's override the instance's own layer hides, in words."""
    processor: str | None = None
    next_slot: int | None = None
    next_due: list[Instant] = []
    """The next due times (up to 5)."""
    parked: str | None = None
    """Why the pending tick is parked (retry it), if it is."""
    recent: list[ShownTick] = []
    """The last ticks, oldest first."""
    notices: list[str] = []
    note: str | None = None
    """Something the caller should know of this answer (e.g. sent as a signal)."""


class JobPage(BaseModel):
    """One listing's answer, shaped as a timers' listing is: the instances found and whether
    more matched than the limit let through."""

    model_config = WireModel.model_config

    items: list[JobInfo]
    truncated: bool = False
    """More instances match than `limit`: narrow the filters, or raise the limit."""
    limit: int


class JobFilter(BaseModel):
    """Which running job instances to list: each filter given narrows it (camelCase on the
    wire), as `TimerFilter` does timers."""

    model_config = FILTER_CONFIG

    context: str | None = None
    name: str | None = None
    """The job's name (`--job` of `schedule list`, `job` of `GET /schedules`)."""
    tenant: str | None = None
    status: core.JobStatus | None = None
    """`Enabled`, `Disabled` or `Parked`, in any case."""

    @field_validator("status", mode="before")
    @classmethod
    def _known_status(cls, value: object) -> object:
        if isinstance(value, str) and not isinstance(value, core.JobStatus):
            wanted = {s.value.lower(): s for s in core.JobStatus}.get(value.lower())
            if wanted is None:
                known = ", ".join(s.value for s in core.JobStatus)
                raise JobError(f"unknown status {value!r}: use one of {known}")
            return wanted
        return value

    def query(self) -> str:
        """The visibility query, as typed in the Web UI's search box."""
        clauses = ["WorkflowType = 'wow.Job'", "ExecutionStatus = 'Running'"]
        if self.context is not None:
            prefix = job_workflow_id(self.context, "x")[:-1]  # `wow-job:{context}:`
            clauses.append(f"WorkflowId STARTS_WITH {quoted(prefix)}")
        if self.name is not None:
            clauses.append(f"{SA_JOB.name} = {quoted(self.name)}")
        if self.tenant is not None:
            clauses.append(f"{SA_TENANT.name} = {quoted(self.tenant)}")
        if self.status is not None:
            clauses.append(f"{SA_STATUS.name} = {quoted(self.status.value)}")
        return " AND ".join(clauses)


def static_summary(state: JobState) -> str:
    """The run's fixed summary: which job of which context, for which tenant or partition."""
    return f"job {state.label} of {state.context}"


def _info(workflow_id: str, state: JobState, now: datetime, note: str | None = None) -> JobInfo:
    rule = state.rule
    pending = state.pending
    return JobInfo(
        workflow_id=workflow_id,
        context=state.context,
        name=state.job,
        tenant=state.tenant,
        partition=state.partition,
        status=state.status.value,
        expression=rule.expression,
        zone=rule.zone,
        misfire=rule.misfire,
        sources={field: state.source(field) for field in core.RULE_FIELDS},
        code=state.code,
        host=state.host,
        own=state.own,
        shadowed=core.shadowed(state),
        processor=state.processor or None,
        next_slot=state.next_slot,
        next_due=core.upcoming(state, now),
        parked=pending.reason if pending is not None and pending.parked else None,
        recent=list(state.recent),
        notices=list(state.notices),
        note=note,
    )


class JobClient:
    """Job instances on one Temporal namespace, for the jobs of `apps` (which may be none:
    existing instances are still enabled, disabled and rescheduled by id)."""

    def __init__(
        self,
        client: Client,
        apps: App | Iterable[App] = (),
        *,
        host_rules: dict[str, HostRule] | None = None,
        task_queue: str | None = None,
        delivery: DeliverySettings | None = None,
        clock_offset_ms: int = 0,
        answer_timeout: timedelta = ANSWER_TIMEOUT,
        continue_as_new_after: int | None = None,
        resume_closed: bool = True,
        clock: Callable[[], Awaitable[datetime]] | None = None,
    ) -> None:
        """`host_rules` maps a job name to the host's override (`wow.schedules.<name>`),
        given to instances this client starts; `task_queue` is `job_task_queue(context)` unless
        given; `clock_offset_ms` is `schedule_spec`'s. An instance started where an earlier
        run has closed (an operator terminated it) carries on its slots and own rule, unless
        `resume_closed` is False (`schedule_spec`: every spec starts afresh)."""
        self.client = client
        self.apps = {app.context: app for app in ([apps] if isinstance(apps, App) else apps)}
        self.host_rules = host_rules if host_rules is not None else {}
        self.task_queue = task_queue
        self.delivery = delivery or DeliverySettings()
        self.clock_offset_ms = clock_offset_ms
        self.answer_timeout = answer_timeout
        self.continue_as_new_after = continue_as_new_after
        self.resume_closed = resume_closed
        self.clock = clock

    # --- the operations -------------------------------------------------------------------

    async def enable(
        self, context: str, name: str, *, tenant: str | None = None, partition: int | None = None
    ) -> JobInfo:
        """Enable the instance (starting it first if it does not exist and the job is known)."""
        return await self._change(context, name, tenant, partition, ENABLE, None, create=True)

    async def disable(
        self, context: str, name: str, *, tenant: str | None = None, partition: int | None = None
    ) -> JobInfo:
        """Disable it: in force when this returns (a tick running is stopped first)."""
        return await self._change(context, name, tenant, partition, DISABLE, None)

    async def reschedule(
        self,
        context: str,
        name: str,
        rule: RuleLayer | RuleChange | dict[str, Any] | BaseModel,
        *,
        tenant: str | None = None,
        partition: int | None = None,
    ) -> JobInfo:
        """Give the instance its own rule: any of expression, zone, misfire. In a dict (or a
        model's fields set), a field given as None removes the instance's own (as `reset` of
        that field does); a `RuleLayer`'s None keeps it."""
        change = _change_of(rule)
        error = core.reschedule_refusal(change)
        if error is not None:
            raise JobError(error)
        return await self._change(context, name, tenant, partition, RESCHEDULE, change)

    async def reset(
        self,
        context: str,
        name: str,
        fields: Iterable[RuleField] | None = None,
        *,
        tenant: str | None = None,
        partition: int | None = None,
    ) -> JobInfo:
        """Remove the instance's own rule (`fields` of it, or all): the host's override, or
        the code's, is in force again, its next due time counted from now. Nothing to remove
        answers the instance as it is."""
        wanted = None if fields is None else list(fields)
        try:
            checked = core.read_fields(None if wanted is None else {"fields": wanted})
        except ValueError as error:
            raise JobError(str(error)) from None
        request = None if checked is None else {"fields": list(checked)}
        return await self._change(context, name, tenant, partition, RESET, request)

    async def retry(
        self, context: str, name: str, *, tenant: str | None = None, partition: int | None = None
    ) -> JobInfo:
        """Retry the parked tick (same request ids); later slots follow, by the policy.
        `NotParkedError` if it is not parked."""
        return await self._change(context, name, tenant, partition, RETRY, None)

    async def show(
        self, context: str, name: str, *, tenant: str | None = None, partition: int | None = None
    ) -> JobInfo:
        """The instance's whole state (queried: needs a worker)."""
        workflow_id = self._id(context, name, tenant, partition)
        handle = self.client.get_workflow_handle(workflow_id)
        description = await describe_or_none(self.client, workflow_id)
        if description is None:
            raise JobNotFoundError(self._no_instance(context, name, tenant, partition))
        if description.status != WorkflowExecutionStatus.RUNNING:
            status = description.status.name.title() if description.status else "Unknown"
            return JobInfo(
                workflow_id=workflow_id,
                context=context,
                name=name,
                tenant=tenant,
                partition=partition,
                status=status,
            )
        try:
            state: JobState = await handle.query(
                "state", result_type=JobState, rpc_timeout=self.answer_timeout
            )
        except WorkflowQueryFailedError as error:
            raise JobError(f"the instance could not answer: {error}") from None
        except ValueError as error:  # another version's state, which this client cannot read
            raise JobError(f"the instance's state cannot be read here: {error}") from None
        except RPCError as error:
            if error.status in (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED):
                raw = description.typed_search_attributes.get(SA_STATUS) or "Unknown"
                return JobInfo(
                    workflow_id=workflow_id,
                    context=context,
                    name=name,
                    tenant=tenant,
                    partition=partition,
                    status=raw,
                    note=NOT_ANSWERED,
                )
            raise
        return _info(workflow_id, state, self._now())

    async def list(
        self, where: JobFilter | None = None, *, limit: int = LIST_DEFAULT
    ) -> list[JobInfo]:
        """Running instances matching `where`, as visibility lists them (for display: it may
        lag a change by a second)."""
        query = (where or JobFilter()).query()
        found = []
        async for execution in self.client.list_workflows(query, limit=limit):
            try:
                ctx, job, inst_tenant, partition = parse_job_workflow_id(execution.id)
            except InvalidIdError:
                continue
            attributes = execution.typed_search_attributes
            found.append(
                JobInfo(
                    workflow_id=execution.id,
                    context=ctx,
                    name=job,
                    tenant=attributes.get(SA_TENANT) or inst_tenant,
                    partition=partition,
                    status=attributes.get(SA_STATUS) or "Unknown",
                )
            )
        return found

    async def page(self, where: JobFilter | None = None, *, limit: int = LIST_DEFAULT) -> JobPage:
        """`list`, saying whether more instances matched than `limit` (one more is asked for)."""
        found = await self.list(where, limit=limit + 1)
        return JobPage(items=found[:limit], truncated=len(found) > limit, limit=limit)

    async def bring_to_settings(self, app: App) -> builtins.list[JobInfo]:
        """What a worker does at start: every SYSTEM instance of `app` (each partition's, for
        a sharded job) gets the host's override, and is enabled unless the host says
        `enabled: false`; every tenant's instance of a TENANT job gets the override too, if it
        changed. An instance already enabled is never reset."""
        answers = []
        for job in app.jobs.values():
            rule = self.host_rules.get(job.name, HostRule())
            if job.definition.scope is JobScope.TENANT:
                await self._bring_tenants(app.context, job, rule)
                continue
            for partition in self._partitions(job):
                try:
                    answers.append(
                        await self._change(
                            app.context, job.name, None, partition, HOST, rule, create=True
                        )
                    )
                except (JobError, RPCError) as error:  # one instance must not stop the worker
                    log.warning(
                        "job %s partition %s: not brought to the settings: %s",
                        job.name,
                        partition,
                        error,
                    )
            if job.definition.sharded:
                answers.extend(await self._retire_partitions(app.context, job))
        for answer in answers:  # the worker's override is not in force there: say so at start
            for hidden in answer.shadowed:
                log.warning("job instance %s: %s", answer.workflow_id, hidden)
        return answers

    async def _retire_partitions(self, context: str, job: Job) -> builtins.list[JobInfo]:
        """Disable the instances of partitions the settings no longer have (`partitions`
        lowered): partitions run from 0 up, so they are found by id, one after the last."""
        retired: builtins.list[JobInfo] = []
        partition = self.partitions_of(job)
        while True:
            workflow_id = job_workflow_id(context, job.name, partition=partition)
            description = await describe_or_none(self.client, workflow_id)
            if description is None:
                return retired
            if description.status == WorkflowExecutionStatus.RUNNING:
                try:
                    retired.append(
                        await self._change(
                            context, job.name, None, partition, HOST, HostRule(enabled=False)
                        )
                    )
                    log.info(
                        "job %s partition %d: disabled (beyond partitions)", job.name, partition
                    )
                except (JobError, RPCError) as error:
                    log.warning("job %s partition %d: not disabled: %s", job.name, partition, error)
            partition += 1

    async def _bring_tenants(self, context: str, job: Job, rule: HostRule) -> int:
        """Bring every tenant's instance of `job` to the host's override, if it has changed
        since it was last brought; how many instances were updated."""
        handle = self.client.get_workflow_handle(directory_id(context, job.name))
        try:
            directory: TenantDirectory = await handle.query(
                "state", result_type=TenantDirectory, rpc_timeout=self.answer_timeout
            )
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                return 0  # no tenant has an instance yet
            raise
        wanted = HostRule(layer=rule.layer)  # `enabled` is for SYSTEM instances
        if directory.host == wanted:
            return 0
        gate = asyncio.Semaphore(32)

        failed: builtins.list[str] = []

        async def bring(tenant: str) -> None:
            async with gate:
                try:
                    await self._change(context, job.name, tenant, None, HOST, wanted)
                except JobNotFoundError:
                    pass  # terminated by an operator
                except (JobError, RPCError) as error:
                    failed.append(tenant)
                    log.warning(
                        "job %s tenant %s: not brought to the settings: %s", job.name, tenant, error
                    )

        await asyncio.gather(*(bring(tenant) for tenant in directory.tenants))
        if failed:
            return len(directory.tenants) - len(failed)  # tried again at the next start
        await handle.execute_update("host", wanted, result_type=TenantDirectory)
        log.info(
            "job %s: brought %d tenants' instances to the host's override",
            job.name,
            len(directory.tenants),
        )
        return len(directory.tenants)

    # --- plumbing ---------------------------------------------------------------------------

    def partitions_of(self, job: Job) -> int:
        """How many partitions a sharded job has (`wow.schedules.<name>.partitions`)."""
        rule = self.host_rules.get(job.name)
        return 1 if rule is None else rule.partitions

    def _partitions(self, job: Job) -> Sequence[int | None]:
        if not job.definition.sharded:
            return [None]
        return list(range(self.partitions_of(job)))

    def _now(self) -> datetime:
        return datetime.now(UTC) + timedelta(milliseconds=self.clock_offset_ms)

    async def _instant(self) -> datetime:
        """Now, as the instances' clock reads it (`clock`: `schedule_spec`'s virtual time)."""
        return await self.clock() if self.clock is not None else self._now()

    def _id(self, context: str, name: str, tenant: str | None, partition: int | None) -> str:
        validate_key(name, "job name")
        for what, value in (("context", context), ("tenant", tenant)):
            if value is None:
                continue
            if not value.strip() or len(value) > _MAX_ID_PART or not value.isprintable():
                raise JobError(
                    f"invalid {what} {value[:40]!r}: 1 to {_MAX_ID_PART} printable characters"
                )
        job = self._job(context, name)
        if job is not None:
            scope = job.definition.scope
            if scope is JobScope.TENANT and tenant is None:
                raise JobError(f"job {name} is a TENANT job: say which tenant's instance")
            if scope is JobScope.SYSTEM and tenant is not None and tenant != "(0)":
                raise JobError(f"job {name} is a SYSTEM job: it has no instance for a tenant")
            if job.definition.sharded and partition is None:
                partition = 0 if self.partitions_of(job) == 1 else None
                if partition is None:
                    raise JobError(f"job {name} is sharded: say which partition")
            if not job.definition.sharded and partition is not None:
                raise JobError(f"job {name} is not sharded: it has no partitions")
            if scope is JobScope.SYSTEM:
                tenant = None
        elif tenant == "(0)":
            tenant = None
        return job_workflow_id(context, name, tenant=tenant, partition=partition)

    def _job(self, context: str, name: str) -> Job | None:
        app = self.apps.get(context)
        return None if app is None else app.jobs.get(name)

    def _no_instance(
        self,
        context: str,
        name: str,
        tenant: str | None,
        partition: int | None,
        *,
        creating: bool = False,
    ) -> str:
        """Why there is no instance to act on, and what creates one: an enable by a client
        that has the job's App (the CLI's `schedule enable --app`, `wow-temporal api --app`),
        or, for a SYSTEM job, a worker of that App at its start."""
        which = f" for tenant {tenant}" if tenant is not None else ""
        which += f" partition {partition}" if partition is not None else ""
        if context in self.apps:
            if name not in self.apps[context].jobs:
                known = ", ".join(sorted(self.apps[context].jobs)) or "none"
                return f"no job {name} in context {context} (its jobs: {known})"
            return f"no instance of job {name}{which} in context {context} yet: enable it"
        missing = f"no instance of job {name}{which} in context {context}"
        if creating:
            return (
                f"{missing}, and this client has no App of context {context} to create it "
                f"(it has: {', '.join(sorted(self.apps)) or 'none'}): enable it with "
                "`wow-temporal schedule enable --app module:attr`, through a control API "
                "started with `--app module:attr`, or start a worker of that App (it creates "
                "its SYSTEM jobs' instances)"
            )
        return (
            f"{missing}: it is created when enabled (`wow-temporal schedule enable "
            f"{context} {name} --app module:attr`, or a worker of its App for a SYSTEM job)"
        )

    async def _change(
        self,
        context: str,
        name: str,
        tenant: str | None,
        partition: int | None,
        update: str,
        argument: Any,
        *,
        create: bool = False,
    ) -> JobInfo:
        workflow_id = self._id(context, name, tenant, partition)
        handle = self.client.get_workflow_handle(workflow_id)
        args: builtins.list[Any] = [] if argument is None else [argument]
        try:
            state = await self._update(handle, update, args)
        except RPCError as error:
            if error.status != RPCStatusCode.NOT_FOUND:
                raise
            job = self._job(context, name)
            if not create or job is None:
                raise JobNotFoundError(
                    self._no_instance(context, name, tenant, partition, creating=create)
                ) from None
            enable = update == ENABLE or (
                update == HOST and isinstance(argument, HostRule) and argument.enabled is not False
            )
            if update not in (ENABLE, HOST):
                missing = self._no_instance(context, name, tenant, partition)
                raise JobNotFoundError(missing) from None
            state = await self._start(workflow_id, context, job, tenant, partition, enable=enable)
        if isinstance(state, str):
            return JobInfo(
                workflow_id=workflow_id,
                context=context,
                name=name,
                tenant=tenant,
                partition=partition,
                status="Unknown",
                note=state,
            )
        return _info(workflow_id, state, self._now())

    async def _update(self, handle: Any, update: str, args: builtins.list[Any]) -> JobState | str:
        """Run `update` and wait for its answer. With no worker to accept it in time, send the
        signal of the same name instead (kept by the server, applied before anything else when
        a worker runs the instance); once accepted, wait for the answer however long it takes
        (a disable answers when the tick in flight has stopped), up to `RESULT_TIMEOUT`."""
        if update == ENABLE:  # as a signal: enabled as of now, not of when a worker comes
            at = await self._instant()
            payloads: builtins.list[Any] = [{"at": int(at.timestamp() * 1000)}]
        else:
            payloads = [_payload(a) for a in args]
            args = payloads
        try:
            state = await update_or_signal(
                handle,
                update,
                args,
                result_type=JobState,
                accept_within=self.answer_timeout,
                answer_within=RESULT_TIMEOUT,
                signal=payloads if update in (ENABLE, DISABLE, RESCHEDULE, RESET, HOST) else None,
            )
        except NotAccepted:
            raise JobNotAnsweredError(
                f"no worker answered within {self.answer_timeout.total_seconds():g}s: "
                "start one (wow-temporal worker --app …) and try again"
            ) from None
        except NotAnswered:
            raise JobNotAnsweredError(
                f"{update} was accepted but not answered within "
                f"{RESULT_TIMEOUT.total_seconds():g}s (a tick in flight is still stopping): "
                "show the instance to see when it is in force"
            ) from None
        except WorkflowUpdateFailedError as error:
            cause = error.cause
            if isinstance(cause, ApplicationError) and cause.type == "NotParked":
                raise NotParkedError(cause.message) from None
            raise JobError(_cause(error)) from None
        if isinstance(state, SentAsSignal):
            return (
                f"no worker answered within {self.answer_timeout.total_seconds():g}s: sent "
                f"as the {update} signal, applied before anything else when a worker runs it"
            )
        return state

    async def _closed_run(self, workflow_id: str) -> JobState | None:
        """The state a closed earlier run of this instance reached (terminated by an operator,
        say), if there is one: a new run carries its slot numbers and own rule on."""
        description = await describe_or_none(self.client, workflow_id)
        if description is None:
            return None
        if description.status == WorkflowExecutionStatus.RUNNING:
            return None
        try:  # a worker replays the closed run to answer: its whole state at the end
            state: JobState = await self.client.get_workflow_handle(workflow_id).query(
                "state", result_type=JobState, rpc_timeout=self.answer_timeout
            )
        except RPCError:
            return await _last_state(self.client, workflow_id)  # no worker: from its history
        return state

    async def _start(
        self,
        workflow_id: str,
        context: str,
        job: Job,
        tenant: str | None,
        partition: int | None,
        *,
        enable: bool,
    ) -> JobState:
        """Start the instance with the code's rule and the host's override, enabled by its
        first task if `enable`; a tenant's is entered in the job's tenant directory first (so
        none is ever missed). The state it starts with (as of now) is returned."""
        definition = job.definition
        if tenant is not None:
            await self._enter_tenant(context, job.name, tenant)
        host = self.host_rules.get(job.name, HostRule())
        state = core.initial(
            context,
            job.name,
            JobRule(expression=definition.cron, zone=definition.zone, misfire=definition.misfire),
            scope=definition.scope,
            tenant=tenant if tenant is not None else "(0)",
            partition=partition,
            processor=job.processor,
            host=host.layer,
        )
        now = await self._instant()
        earlier = await self._closed_run(workflow_id) if self.resume_closed else None
        if earlier is not None:
            state = state.model_copy(update={"next_slot": earlier.next_slot, "own": earlier.own})
        await self.client.start_workflow(
            JOB_WORKFLOW,
            JobInput(
                state=state,
                delivery=self.delivery,
                clock_offset_ms=self.clock_offset_ms,
                enabled_at=now if enable else None,
                **(
                    {"continue_as_new_after": self.continue_as_new_after}
                    if self.continue_as_new_after is not None
                    else {}
                ),
            ),
            id=workflow_id,
            task_queue=self.task_queue or job_task_queue(context),
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            search_attributes=initial_search_attributes(
                job.name,
                state.tenant,
                core.JobStatus.ENABLED.value if enable else core.JobStatus.DISABLED.value,
            ),
            static_summary=static_summary(state),
            static_details=_static_details(context, job),
        )
        return core.enable(state, now) if enable else state

    async def _enter_tenant(self, context: str, job_name: str, tenant: str) -> None:
        """Enter `tenant` in the job's tenant directory (started if it is the first)."""
        await self.client.start_workflow(
            TenantsWorkflow.run,
            TenantDirectory(),
            id=directory_id(context, job_name),
            task_queue=self.task_queue or job_task_queue(context),
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            start_signal="add",
            start_signal_args=[tenant],
            search_attributes=TypedSearchAttributes([SearchAttributePair(SA_JOB, job_name)]),
            static_summary=f"tenants of job {job_name} of {context}",
        )


def _static_details(context: str, job: Job) -> str:
    """The instance's fixed description in the Web UI: what it is and how to operate it."""
    return (
        f"Recurring job **{job.name}** of {context}, handled by {job.processor}. The "
        "rule in force, the next due times and the last ticks are in **Current "
        f"Details**. Send the signals {ENABLE}, {DISABLE}, {RESCHEDULE} "
        '(`{"expression": …, "zone": …, "misfire": …}`, null removes its own) or '
        f'{RESET} (nothing, or `{{"fields": ["expression"]}}`) to operate it.'
    )


async def _last_state(client: Client, workflow_id: str) -> JobState | None:
    """What a closed run of the instance had reached, read from its history: the state it
    started with, its slots past the last tick it scheduled (a new run never repeats a request
    id; changes made during the run, such as a reschedule, are not read)."""
    started: JobState | None = None
    last_slot = 0
    try:
        async for entry in history.entries(client, workflow_id):
            if entry.kind == "started":
                started = (await history.decoded(client, entry.payloads, JobInput)).state
            elif entry.kind == "activity" and entry.name == "wow.tick":
                request = await history.decoded(client, entry.payloads, TickRequest)
                last_slot = max(last_slot, request.slot)
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    if started is None:
        return None
    return started.model_copy(update={"next_slot": max(started.next_slot, last_slot + 1)})


def _cause(error: WorkflowUpdateFailedError) -> str:
    """What refused an update, in words (a validator's message, or the failure)."""
    cause = error.cause
    if isinstance(cause, ApplicationError):
        return cause.message
    return str(cause or error)


def _change_of(rule: RuleLayer | RuleChange | dict[str, Any] | BaseModel) -> RuleChange:
    """A reschedule as the client was given it: a `RuleLayer`'s None keeps a field; in a dict,
    or among a model's fields set, None removes the instance's own."""
    if isinstance(rule, RuleChange):
        return rule
    if isinstance(rule, RuleLayer):
        return RuleChange(layer=rule)
    if isinstance(rule, BaseModel):
        rule = rule.model_dump(exclude_unset=True)
    try:
        return core.read_change(rule)
    except ValueError as error:
        raise JobError(str(error)) from None


def _payload(argument: Any) -> Any:
    """What goes in an update or signal: a reschedule's fields set and those removed (null)
    only, so a field left out keeps the instance's own; a model's fields otherwise."""
    if isinstance(argument, RuleChange):
        given = argument.layer.model_dump(mode="json", exclude_none=True)
        return given | dict.fromkeys(argument.remove)
    if isinstance(argument, BaseModel):
        return argument.model_dump(mode="json")
    return argument
