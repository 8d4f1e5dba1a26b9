"""Ingest and operate aggregate timers: apply commits, list, show, retry and cancel timers.

`TimerClient.apply(commit)` is the one code path behind the Python API, the control API's
`POST /commits` and the CLI. It never waits for a timer to fire.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, field_validator
from pydantic.alias_generators import to_camel
from temporalio.client import (
    Client,
    WorkflowExecution,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from wow_temporal.schedule import AggregateRef, Commit
from wow_temporal.timers import core
from wow_temporal.timers.changes import AggregateChange, KeyChange, changes_of
from wow_temporal.timers.core import Status, TimerChange, TimerState
from wow_temporal.timers.workflow import (
    SA_AGGREGATE,
    SA_AGGREGATE_ID,
    SA_DUE,
    SA_KEY,
    SA_STATUS,
    SA_TENANT,
    DeliverySettings,
    TimerInput,
    TimerWorkflow,
    initial_search_attributes,
)

__all__ = [
    "TIMER_ID_PREFIX",
    "TIMER_TASK_QUEUE",
    "Applied",
    "TimerClient",
    "TimerError",
    "TimerFilter",
    "TimerInfo",
    "TimerNotFoundError",
]

TIMER_TASK_QUEUE = "wow-timers"
TIMER_ID_PREFIX = "wow-timer:"
"""Every timer workflow id starts with this (see `core.timer_workflow_id`)."""

Outcome = Literal["started", "signalled", "ignored"]


class TimerError(ValueError):
    """An operation on a timer that cannot be done; the message says why."""


class TimerNotFoundError(TimerError, LookupError):
    """No timer has that workflow id."""


class Applied(BaseModel):
    """What applying one schedule event did to one timer."""

    model_config = ConfigDict(frozen=True)

    workflow_id: str
    kind: Literal["set", "cancel", "delete"]
    outcome: Outcome


class TimerInfo(BaseModel):
    """A timer as the CLI and the control API show it."""

    model_config = ConfigDict(frozen=True)

    workflow_id: str
    run_id: str | None = None
    status: str
    running: bool
    aggregate: str = ""
    aggregate_id: str = ""
    tenant: str = ""
    key: str = ""
    due: datetime | None = None
    state: TimerState | None = None


class TimerFilter(BaseModel):
    """Which timers to list: each filter given narrows it (camelCase on the wire)."""

    model_config = ConfigDict(
        frozen=True, alias_generator=to_camel, validate_by_name=True, validate_by_alias=True
    )

    aggregate: str | None = None
    """`context.aggregate`, e.g. `eshop-order.order`."""
    aggregate_id: str | None = None
    tenant: str | None = None
    key: str | None = None
    status: Status | None = None
    """Scheduled, Delivering, Parked, Delivered, Rejected or Cancelled (any case)."""
    running: bool | None = None

    @field_validator("status", mode="before")
    @classmethod
    def _known_status(cls, value: object) -> object:
        if isinstance(value, str) and not isinstance(value, Status):
            for known in Status:
                if known.value.lower() == value.lower():
                    return known
            raise TimerError(
                f"unknown timer status {value!r}; one of {', '.join(s.value for s in Status)}"
            )
        return value

    def query(self) -> str:
        """The visibility query, as typed in the Web UI's search box."""
        clauses = ['WorkflowType = "wow.Timer"']
        for attribute, value in (
            ("WowAggregate", self.aggregate),
            ("WowAggregateId", self.aggregate_id),
            ("WowTenant", self.tenant),
            ("WowKey", self.key),
        ):
            if value is not None:
                clauses.append(f"{attribute} = {_quote(value)}")
        if self.status is Status.DELIVERED:
            # A delivered timer completes without an upsert (it saves an action): see workflow.
            clauses.append(
                'ExecutionStatus = "Completed" AND WowStatus IN ("Scheduled", "Delivered")'
            )
        elif self.status is Status.SCHEDULED:
            clauses.append('WowStatus = "Scheduled" AND ExecutionStatus = "Running"')
        elif self.status is not None:
            clauses.append(f"WowStatus = {_quote(self.status.value)}")
        if self.running is not None:
            clauses.append(f'ExecutionStatus {"=" if self.running else "!="} "Running"')
        return " AND ".join(clauses)


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class TimerClient:
    """The timers of one Temporal namespace, driven through a connected `Client`."""

    def __init__(
        self,
        client: Client,
        *,
        task_queue: str = TIMER_TASK_QUEUE,
        delivery: DeliverySettings | None = None,
        start_delay: bool = True,
    ) -> None:
        """`start_delay=False` starts timers at once to sleep in the workflow instead (one
        more action each); the time-skipping test server does not skip start delays."""
        self.client = client
        self.task_queue = task_queue
        self.delivery = delivery or DeliverySettings()
        self.start_delay = start_delay

    async def apply(self, commit: Commit | dict[str, Any] | str | bytes) -> list[Applied]:
        """Apply a commit's schedule events, in order; idempotent and order-safe."""
        if not isinstance(commit, Commit):
            commit = Commit.parse(commit)
        applied: list[Applied] = []
        touched: list[str] = []
        for item in changes_of(commit):
            if isinstance(item, KeyChange):
                workflow_id = core.timer_workflow_id(commit.aggregate, item.key)
                touched.append(item.key)
                outcome = await self._apply_key(commit.aggregate, item.key, item.change)
                applied.append(
                    Applied(workflow_id=workflow_id, kind=item.change.kind, outcome=outcome)
                )
            else:
                applied.extend(await self._apply_aggregate(commit, item, touched))
        return applied

    async def _apply_key(self, owner: AggregateRef, key: str, change: TimerChange) -> Outcome:
        workflow_id = core.timer_workflow_id(owner, key)
        if change.kind != "set":
            return await self._signal(owner, key, change)
        for _ in range(5):
            try:
                await self._start(owner, key, change, WorkflowIDReusePolicy.REJECT_DUPLICATE)
                return "started"
            except WorkflowAlreadyStartedError:
                pass
            outcome = await self._signal(owner, key, change)
            if outcome == "signalled":
                return outcome
            last = await self._closed_state(workflow_id)
            if last is not None and change.order <= last.applied:
                return "ignored"
            try:
                await self._start(owner, key, change, WorkflowIDReusePolicy.ALLOW_DUPLICATE)
                return "started"
            except WorkflowAlreadyStartedError:
                continue  # another ingest started it meanwhile: signal that one
        raise TimerError(f"could not apply a schedule to {workflow_id}: it keeps changing")

    async def _start(
        self,
        owner: AggregateRef,
        key: str,
        change: TimerChange,
        reuse: WorkflowIDReusePolicy,
    ) -> None:
        """Start the timer a `set` change makes, sleeping out its start delay until due."""
        state = core.initial(change)
        spec = state.spec
        assert spec is not None
        due = state.next_due
        delay = None
        if due is not None and self.start_delay:
            wait = due - datetime.now(UTC)
            delay = wait if wait > timedelta(0) else None
        await self.client.start_workflow(
            TimerWorkflow.run,
            TimerInput(state=state, delivery=self.delivery),
            id=core.timer_workflow_id(owner, key),
            task_queue=self.task_queue,
            id_reuse_policy=reuse,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            start_delay=delay,
            search_attributes=initial_search_attributes(owner, key, state),
            static_summary=core.summary(spec, due),
            static_details=(
                f"{spec.rule.describe()}\n\nset by commit {spec.upstream_id} "
                f"(version {change.version}) of {spec.owner}, key {spec.key}"
            ),
        )

    async def _signal(self, owner: AggregateRef, key: str, change: TimerChange) -> Outcome:
        """Hand `change` to the running timer, ending its start delay if it is in one.

        A plain signal would wait out the start delay; signal-with-start does not. When no run
        exists at all, this starts one from the change alone: a cancel then leaves a cancelled
        timer behind, so a set older than it that arrives later changes nothing.
        """
        state = core.apply(TimerState(), change)
        try:
            await self.client.start_workflow(
                TimerWorkflow.run,
                TimerInput(state=state, delivery=self.delivery),
                id=core.timer_workflow_id(owner, key),
                task_queue=self.task_queue,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                start_signal="apply",
                start_signal_args=[change],
                search_attributes=initial_search_attributes(owner, key, state),
            )
        except WorkflowAlreadyStartedError:
            return "ignored"  # it has ended: nothing to change
        return "signalled"

    async def _closed_state(self, workflow_id: str) -> TimerState | None:
        """The final state of the latest closed run, if it completed."""
        handle = self.client.get_workflow_handle(workflow_id, result_type=TimerState)
        try:
            state: TimerState = await handle.result(follow_runs=False)
        except (WorkflowFailureError, RPCError):
            return None
        return state

    async def _apply_aggregate(
        self, commit: Commit, item: AggregateChange, touched: Sequence[str]
    ) -> list[Applied]:
        owner = commit.aggregate
        query = TimerFilter(
            aggregate=f"{owner.context_name}.{owner.aggregate_name}",
            aggregate_id=owner.aggregate_id,
            tenant=owner.tenant_id,
            running=True,
        ).query()
        listed = [
            execution.typed_search_attributes.get(SA_KEY) or ""
            async for execution in self.client.list_workflows(query)
        ]
        results = []
        for key in dict.fromkeys([*touched, *listed]):
            if not key:
                continue
            outcome = await self._signal(owner, key, item.change)
            workflow_id = core.timer_workflow_id(owner, key)
            results.append(Applied(workflow_id=workflow_id, kind="delete", outcome=outcome))
        return results

    async def list(self, where: TimerFilter | None = None, *, limit: int = 100) -> list[TimerInfo]:
        """Timers matching `where`, newest first (the same query the Web UI takes)."""
        query = (where or TimerFilter()).query()
        found = self.client.list_workflows(query, limit=limit)
        return [_info(execution) async for execution in found]

    async def show(self, workflow_id: str, *, tenant: str | None = None) -> TimerInfo:
        """One timer with its full state (queried if running, its result if closed)."""
        handle = self.client.get_workflow_handle(workflow_id, result_type=TimerState)
        info, description = await self._describe(workflow_id, tenant)
        state: TimerState | None
        if description.status == WorkflowExecutionStatus.RUNNING:
            state = await self._running_state(handle, description)
        else:
            state = await self._closed_state(workflow_id)
        return info.model_copy(update={"state": state})

    async def _describe(
        self, workflow_id: str, tenant: str | None
    ) -> tuple[TimerInfo, WorkflowExecutionDescription]:
        """The timer as its search attributes show it (no query: queries are billed actions)."""
        _check_id(workflow_id)
        try:
            description = await self.client.get_workflow_handle(workflow_id).describe()
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                raise TimerNotFoundError(f"no timer {workflow_id!r}") from None
            raise
        info = _info(description)
        if tenant is not None and info.tenant != tenant:
            raise TimerNotFoundError(f"no timer {workflow_id!r}")
        return info, description

    async def _running_state(
        self, handle: WorkflowHandle[Any, TimerState], description: WorkflowExecutionDescription
    ) -> TimerState:
        """The running timer's state: queried, or while it waits out its start delay (when it
        cannot answer a query), the state it started with."""
        start = description.execution_time
        if start is None or start <= datetime.now(UTC):
            return await handle.query(TimerWorkflow.state)
        initial: TimerState | None = None
        async for event in handle.fetch_history_events():
            if event.HasField("workflow_execution_started_event_attributes"):
                payloads = event.workflow_execution_started_event_attributes.input.payloads
                (decoded,) = await self.client.data_converter.decode(payloads, [TimerInput])
                initial = cast(TimerInput, decoded).state
            elif event.HasField("workflow_task_completed_event_attributes"):
                # A signal ended the delay early: the workflow runs and answers queries.
                return await handle.query(TimerWorkflow.state)
        if initial is None:
            raise TimerNotFoundError(f"no history for timer {handle.id!r}")
        return initial

    async def retry(self, workflow_id: str, *, tenant: str | None = None) -> TimerState:
        """Retry a parked timer's slot now, with the same request id."""
        info = await self._running(workflow_id, tenant)
        if info.status != Status.PARKED.value:
            raise TimerError(
                f"only a parked timer can be retried; {workflow_id!r} is {info.status}"
            )
        handle = self.client.get_workflow_handle(workflow_id)
        try:
            return await handle.execute_update(TimerWorkflow.retry)
        except WorkflowUpdateFailedError as error:
            raise TimerError(str(error.cause or error)) from None

    async def cancel(self, workflow_id: str, *, tenant: str | None = None) -> TimerState:
        """Cancel a pending or parked timer; a command already sent is not recalled."""
        await self._running(workflow_id, tenant)
        handle = self.client.get_workflow_handle(workflow_id)
        return await handle.execute_update(TimerWorkflow.cancel)

    async def _running(self, workflow_id: str, tenant: str | None) -> TimerInfo:
        info, _ = await self._describe(workflow_id, tenant)
        if not info.running:
            raise TimerError(f"timer {workflow_id!r} has ended ({info.status})")
        return info


def _check_id(workflow_id: str) -> None:
    if not workflow_id.startswith(TIMER_ID_PREFIX):
        raise TimerError(
            f"not a timer id: {workflow_id!r} (timer ids start with {TIMER_ID_PREFIX!r})"
        )


def _info(execution: WorkflowExecution) -> TimerInfo:
    attributes = execution.typed_search_attributes
    shown = attributes.get(SA_STATUS) or ""
    running = execution.status == WorkflowExecutionStatus.RUNNING
    if running or shown in (Status.REJECTED.value, Status.CANCELLED.value):
        status = shown
    elif execution.status == WorkflowExecutionStatus.COMPLETED:
        status = Status.DELIVERED.value
    else:
        status = execution.status.name.replace("_", " ").title() if execution.status else ""
    return TimerInfo(
        workflow_id=execution.id,
        run_id=execution.run_id,
        status=status,
        running=running,
        aggregate=attributes.get(SA_AGGREGATE) or "",
        aggregate_id=attributes.get(SA_AGGREGATE_ID) or "",
        tenant=attributes.get(SA_TENANT) or "",
        key=attributes.get(SA_KEY) or "",
        due=attributes.get(SA_DUE),
    )
