"""Ingest and operate aggregate timers: apply commits, list, show, retry and cancel timers.

`TimerClient.apply(commit)` is the one code path behind the Python API, the control API's
`POST /commits` and the CLI. It never waits for a timer to fire.
"""

from __future__ import annotations

import asyncio
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
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from wow_temporal.ids import TIMER_ID_PREFIX, InvalidIdError, parse_timer_workflow_id
from wow_temporal.ids import timer_workflow_id as _timer_id
from wow_temporal.metrics import IngestMetrics, client_meter
from wow_temporal.schedule import AggregateRef, Commit
from wow_temporal.timers import core
from wow_temporal.timers.attributes import (
    SA_AGGREGATE,
    SA_AGGREGATE_ID,
    SA_DUE,
    SA_KEY,
    SA_STATUS,
    SA_TENANT,
    initial_search_attributes,
)
from wow_temporal.timers.changes import AggregateChange, KeyChange, changes_of
from wow_temporal.timers.core import TimerChange, TimerState, Verdict, VerdictOutcome
from wow_temporal.timers.deletion import DeletionRecord, DeletionRecords
from wow_temporal.timers.status import Status, parse_status, status_clause, status_of
from wow_temporal.timers.workflow import DeliverySettings, TimerInput, TimerWorkflow
from wow_temporal.tracing import continued_span, current_traceparent

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
APPLY_CONCURRENCY = 32
"""Aggregates whose commits `apply_many` hands over at once."""

Outcome = VerdictOutcome

ANSWER_TIMEOUT = timedelta(seconds=10)
"""How long a query or an operator's update waits for a worker to answer."""

_EXECUTION_STATUS = {
    WorkflowExecutionStatus.RUNNING: "Running",
    WorkflowExecutionStatus.COMPLETED: "Completed",
    WorkflowExecutionStatus.FAILED: "Failed",
    WorkflowExecutionStatus.CANCELED: "Canceled",
    WorkflowExecutionStatus.TERMINATED: "Terminated",
    WorkflowExecutionStatus.CONTINUED_AS_NEW: "ContinuedAsNew",
    WorkflowExecutionStatus.TIMED_OUT: "TimedOut",
}
"""Temporal's execution statuses as its visibility queries spell them."""


class TimerError(ValueError):
    """An operation on a timer that cannot be done; the message says why."""


class TimerNotFoundError(TimerError, LookupError):
    """No timer has that workflow id."""


class Applied(BaseModel):
    """What applying one schedule event did to one timer, and why."""

    model_config = ConfigDict(frozen=True)

    workflow_id: str
    kind: Literal["set", "cancel", "delete"]
    outcome: Outcome
    """`started` a timer (or `cancelled`: a cancel with nothing pending starts one that keeps
    it), `handed-over` to the running timer (applied when a worker runs it), or `ignored`."""
    reason: str = ""
    """Why, in words: `due 2026-12-01T10:30Z`, `stale: version 1 ≤ applied 1`, …"""


class TimerInfo(BaseModel):
    """A timer as the CLI and the control API show it."""

    model_config = ConfigDict(frozen=True)

    workflow_id: str
    run_id: str | None = None
    status: str
    """One of `Status` (see `timers.status` for what each means and how it is read)."""
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
    """Any `Status` name, in any case (`Canceled` too)."""
    running: bool | None = None

    @field_validator("status", mode="before")
    @classmethod
    def _known_status(cls, value: object) -> object:
        if isinstance(value, str) and not isinstance(value, Status):
            try:
                return parse_status(value)
            except ValueError as error:
                raise TimerError(str(error)) from None
        return value

    def query(self, now: datetime | None = None) -> str:
        """The visibility query, as typed in the Web UI's search box (`now` for Scheduled and
        Delivering, which tell apart by `WowDue`)."""
        clauses = ['WorkflowType = "wow.Timer"', 'ExecutionStatus != "ContinuedAsNew"']
        for attribute, value in (
            ("WowAggregate", self.aggregate),
            ("WowAggregateId", self.aggregate_id),
            ("WowTenant", self.tenant),
            ("WowKey", self.key),
        ):
            if value is not None:
                clauses.append(f"{attribute} = {_quote(value)}")
        if self.status is not None:
            clauses.append(status_clause(self.status, now or datetime.now(UTC)))
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
        answer_timeout: timedelta = ANSWER_TIMEOUT,
    ) -> None:
        """`start_delay=False` starts timers at once to sleep in the workflow instead (one
        more action each); the time-skipping test server does not skip start delays.
        `answer_timeout`: how long a query or an operator's update waits for a worker's
        answer (none may run); handing commits over never waits for one."""
        self.client = client
        self.task_queue = task_queue
        self.delivery = delivery or DeliverySettings()
        self.start_delay = start_delay
        self.answer_timeout = answer_timeout
        self.deletions = DeletionRecords(client, task_queue=task_queue)
        self.metrics = IngestMetrics(client_meter(client))
        """Where ingest is counted (`wow_commits_ingested`, `wow_timer_changes`), and where the
        relay that hands commits over through this client records its lag."""

    async def apply(self, commit: Commit | dict[str, Any] | str | bytes) -> list[Applied]:
        """Apply a commit's schedule events, in order; idempotent and order-safe.

        Each answer says what the event did and why. A set older than the aggregate's
        deletion is ignored; a deletion leaves a record that every timer checks before it
        delivers, so it holds against reordering and without relying on visibility.
        """
        if not isinstance(commit, Commit):
            commit = Commit.parse(commit)
        attributes: dict[str, str | int | bool] = {
            "wow.commit.id": commit.id,
            "wow.aggregate": str(commit.aggregate),
            "wow.commit.version": commit.version,
        }
        traceparent = commit.header.get("traceparent")
        with continued_span("wow.apply commit", traceparent, attributes) as span:
            applied = await self._apply(commit, current_traceparent() if span else traceparent)
            if span is not None:
                span.set_attribute("wow.changes", len(applied))
        self.metrics.ingested([(answer.kind, answer.outcome) for answer in applied])
        return applied

    async def _apply(self, commit: Commit, traceparent: str | None) -> list[Applied]:
        """`apply` inside its span; the timers it sets continue `traceparent`'s trace."""
        owner = commit.aggregate
        items = changes_of(commit, traceparent)
        deleted: DeletionRecord | None = None
        if any(isinstance(i, KeyChange) and i.change.kind == "set" for i in items):
            deleted = await self.deletions.find(owner)
        applied: list[Applied] = []
        touched: list[str] = []
        for item in items:
            if isinstance(item, AggregateChange):
                deleted, results = await self._apply_deletion(commit, item, touched)
                applied.extend(results)
                continue
            workflow_id = _timer_id(owner, item.key)
            touched.append(item.key)
            change = item.change
            if change.kind == "set" and deleted is not None and change.order < deleted.order:
                answer = Verdict(outcome="ignored", reason=deleted.describe())
            else:
                answer = await self._apply_key(owner, item.key, change)
            applied.append(
                Applied(
                    workflow_id=workflow_id,
                    kind=change.kind,
                    outcome=answer.outcome,
                    reason=answer.reason,
                )
            )
        return applied

    async def apply_many(
        self, commits: Sequence[Commit], *, concurrency: int = APPLY_CONCURRENCY
    ) -> list[list[Applied]]:
        """Apply many commits: one aggregate's in their order, different aggregates' at once.

        Answers in the order of `commits`. A relay or `POST /commits` batch goes at the pace
        of Temporal's round trips times `concurrency`, not one commit after another.
        """
        answers: list[list[Applied]] = [[] for _ in commits]
        streams: dict[AggregateRef, list[int]] = {}
        for position, commit in enumerate(commits):
            streams.setdefault(commit.aggregate, []).append(position)
        limit = asyncio.Semaphore(concurrency)

        async def stream(positions: list[int]) -> None:
            async with limit:
                for position in positions:
                    answers[position] = await self.apply(commits[position])

        try:
            async with asyncio.TaskGroup() as group:
                for positions in streams.values():
                    group.create_task(stream(positions))
        except ExceptionGroup as failed:  # the first failure, as `apply` would raise it
            raise failed.exceptions[0] from None
        return answers

    async def _apply_key(self, owner: AggregateRef, key: str, change: TimerChange) -> Verdict:
        """Hand `change` to its timer without waiting for a worker: start it, send it to the
        one running, or, when the last run has ended, start anew unless its state says stale."""
        workflow_id = _timer_id(owner, key)
        for _ in range(5):
            if change.kind != "delete":  # a deletion starts no timer where none runs
                try:
                    return await self._start(
                        owner, key, change, WorkflowIDReusePolicy.REJECT_DUPLICATE
                    )
                except WorkflowAlreadyStartedError:
                    pass
            answer = await self._hand_over(owner, key, change)
            if answer is not None:
                return answer
            if change.kind == "delete":
                return Verdict(outcome="ignored", reason="the timer had ended")
            last = await self._closed_state(workflow_id)
            if last is not None:
                stale = core.stale_reason(last, change)
                if stale is not None:
                    return Verdict(outcome="ignored", reason=f"{stale} (the timer had ended)")
            try:
                return await self._start(
                    owner, key, change, WorkflowIDReusePolicy.ALLOW_DUPLICATE, after=last
                )
            except WorkflowAlreadyStartedError:
                continue  # another ingest started it meanwhile: hand it to that one
        raise TimerError(f"could not apply a schedule to {workflow_id}: it keeps changing")

    async def _start(
        self,
        owner: AggregateRef,
        key: str,
        change: TimerChange,
        reuse: WorkflowIDReusePolicy,
        *,
        after: TimerState | None = None,
    ) -> Verdict:
        """Start the timer `change` makes, sleeping out its start delay until due.

        A cancel starts a timer too (it ends at once, cancelled): a set older than it that
        arrives later then changes nothing. `after` is the state of a run that has ended.
        """
        before = after if after is not None else TimerState()
        state = core.apply(before, change)
        due = state.next_due
        delay = None
        if due is not None and self.start_delay:
            wait = due - datetime.now(UTC)
            delay = wait if wait > timedelta(0) else None
        await self.client.start_workflow(
            TimerWorkflow.run,
            TimerInput(state=state, delivery=self.delivery),
            id=_timer_id(owner, key),
            task_queue=self.task_queue,
            id_reuse_policy=reuse,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            start_delay=delay,
            search_attributes=initial_search_attributes(owner, key, state),
            static_summary=core.static_summary(owner, key),
            static_details=core.static_details(owner, key),
        )
        if change.kind != "set":
            return core.verdict(before, change)
        assert state.spec is not None
        ended = "" if after is None else f" (the timer had ended {after.status.value})"
        when = "never due" if due is None else f"due {core.short_instant(due)}"
        return Verdict(outcome="started", reason=f"{when}{ended}")

    async def _hand_over(
        self, owner: AggregateRef, key: str, change: TimerChange
    ) -> Verdict | None:
        """Send `change` to the running timer as a signal (with start: it ends a start delay);
        None when the timer's last run has ended (it is left alone).

        A signal, not an update: the server keeps it and answers at once, so ingest goes at
        the server's pace whatever the workers do. The timer applies it in order when a worker
        runs it (a stale one changes nothing) and notes what it did in `last_change`. Should
        the key have no timer at all (a deletion racing a start), it starts one that ends
        cancelled: harmless, it keeps the deletion's order.
        """
        state = core.initial(change)
        try:
            await self.client.start_workflow(
                TimerWorkflow.run,
                TimerInput(state=state, delivery=self.delivery),
                id=_timer_id(owner, key),
                task_queue=self.task_queue,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                start_signal="apply",
                start_signal_args=[change],
                search_attributes=initial_search_attributes(owner, key, state),
                static_summary=core.static_summary(owner, key),
                static_details=core.static_details(owner, key),
            )
        except WorkflowAlreadyStartedError:
            return None
        return Verdict(
            outcome="handed-over",
            reason="sent to the running timer, which applies it when a worker runs it unless "
            "it has applied a newer event; its last change tells what it did",
        )

    async def _closed_state(self, workflow_id: str) -> TimerState | None:
        """The final state of the latest closed run, if it completed."""
        handle = self.client.get_workflow_handle(workflow_id, result_type=TimerState)
        try:
            state: TimerState = await handle.result(follow_runs=False)
        except (WorkflowFailureError, RPCError):
            return None
        return state

    async def _apply_deletion(
        self, commit: Commit, item: AggregateChange, touched: Sequence[str]
    ) -> tuple[DeletionRecord, list[Applied]]:
        """Record the deletion, then cancel the aggregate's running timers that can be found:
        the keys this commit touched (by id) and those visibility lists (it may lag: the
        record makes any timer it misses end cancelled when it comes due)."""
        owner = commit.aggregate
        record = await self.deletions.record(
            DeletionRecord(aggregate=owner, version=item.change.version, index=item.change.index)
        )
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
            answer = await self._apply_key(owner, key, item.change)
            results.append(
                Applied(
                    workflow_id=_timer_id(owner, key),
                    kind="delete",
                    outcome=answer.outcome,
                    reason=answer.reason,
                )
            )
        return record, results

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
    ) -> TimerState | None:
        """The running timer's state: queried, or while it waits out its start delay (when it
        cannot answer a query), the state it started with; None if no worker answers."""
        start = description.execution_time
        if start is None or start <= datetime.now(UTC):
            return await self._query(handle)
        initial: TimerState | None = None
        async for event in handle.fetch_history_events():
            if event.HasField("workflow_execution_started_event_attributes"):
                payloads = event.workflow_execution_started_event_attributes.input.payloads
                (decoded,) = await self.client.data_converter.decode(payloads, [TimerInput])
                initial = cast(TimerInput, decoded).state
            elif event.HasField("workflow_task_completed_event_attributes"):
                # A change ended the delay early: the workflow runs and answers queries.
                return await self._query(handle)
        if initial is None:
            raise TimerNotFoundError(f"no history for timer {handle.id!r}")
        return initial

    async def _query(self, handle: WorkflowHandle[Any, TimerState]) -> TimerState | None:
        """The running timer's state, or None when no worker answers in time."""
        try:
            return await handle.query(TimerWorkflow.state, rpc_timeout=self.answer_timeout)
        except RPCError as error:
            if error.status in (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED):
                return None
            raise

    async def retry(self, workflow_id: str, *, tenant: str | None = None) -> TimerState:
        """Retry a parked timer's slot now, with the same request id."""
        info = await self._running(workflow_id, tenant)
        if info.status != Status.PARKED.value:
            raise TimerError(
                f"only a parked timer can be retried; {workflow_id!r} is {info.status}"
            )
        try:
            return await self._operate(workflow_id, "retry")
        except WorkflowUpdateFailedError as error:
            raise TimerError(str(error.cause or error)) from None

    async def cancel(self, workflow_id: str, *, tenant: str | None = None) -> TimerState:
        """Cancel a pending or parked timer; a command already sent is not recalled."""
        await self._running(workflow_id, tenant)
        return await self._operate(workflow_id, "cancel")

    async def _operate(self, workflow_id: str, update: str) -> TimerState:
        """Run an operator's update; a clear error when no worker takes it in time."""
        handle = self.client.get_workflow_handle(workflow_id)
        try:
            state: TimerState = await handle.execute_update(
                update, result_type=TimerState, rpc_timeout=self.answer_timeout
            )
        except WorkflowUpdateRPCTimeoutOrCancelledError:
            waited = f"no worker answered within {self.answer_timeout.total_seconds():g}s (is "
            waited += f"`wow-temporal worker` running on task queue {self.task_queue}?)"
            if update == "cancel":  # a cancel request is kept by Temporal: it will happen
                await handle.cancel()
                raise TimerError(
                    f"{waited}; cancellation requested: the timer ends Cancelled when a "
                    "worker runs it"
                ) from None
            raise TimerError(f"{waited}; the retry is applied if one takes it soon") from None
        return state

    async def _running(self, workflow_id: str, tenant: str | None) -> TimerInfo:
        info, _ = await self._describe(workflow_id, tenant)
        if not info.running:
            raise TimerError(f"timer {workflow_id!r} has ended ({info.status})")
        return info


def _check_id(workflow_id: str) -> None:
    try:
        parse_timer_workflow_id(workflow_id)
    except InvalidIdError as error:
        raise TimerError(str(error)) from None


def _info(execution: WorkflowExecution) -> TimerInfo:
    attributes = execution.typed_search_attributes
    due = attributes.get(SA_DUE)
    execution_status = _EXECUTION_STATUS.get(execution.status) if execution.status else None
    status = status_of(execution_status or "", attributes.get(SA_STATUS), due, datetime.now(UTC))
    return TimerInfo(
        workflow_id=execution.id,
        run_id=execution.run_id,
        status=status.value if status is not None else (execution_status or ""),
        running=execution.status == WorkflowExecutionStatus.RUNNING,
        aggregate=attributes.get(SA_AGGREGATE) or "",
        aggregate_id=attributes.get(SA_AGGREGATE_ID) or "",
        tenant=attributes.get(SA_TENANT) or "",
        key=attributes.get(SA_KEY) or "",
        due=due,
    )
