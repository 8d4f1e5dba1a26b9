"""The operator's side of the timers: list, page, show, check, retry and cancel, and what they
answer (`TimerInfo`, `TimerPage`, `TimerFilter`). `TimerClient` (`timers.client`, the ingest
side) has these verbs too; apart here as the two directions they are.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, field_validator
from temporalio.client import (
    Client,
    WorkflowExecution,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.service import RPCError, RPCStatusCode

from wow_temporal.engine import Instant, history
from wow_temporal.engine.listing import FILTER_CONFIG, LIST_DEFAULT, quoted
from wow_temporal.engine.runs import describe_or_none
from wow_temporal.engine.text import shown_instants
from wow_temporal.errors import WowTemporalError
from wow_temporal.ids import InvalidIdError, parse_timer_workflow_id
from wow_temporal.model import WireModel, has_control
from wow_temporal.search_attributes import (
    SA_AGGREGATE,
    SA_AGGREGATE_ID,
    SA_DUE,
    SA_KEY,
    SA_STATUS,
    SA_TENANT,
)
from wow_temporal.timers import core
from wow_temporal.timers.core import TimerState
from wow_temporal.timers.status import Status, parse_status, status_clause, status_of
from wow_temporal.timers.workflow import TimerInput, TimerWorkflow
from wow_temporal.updates import NotAccepted, NotAnswered, SentAsSignal, update_or_signal

if TYPE_CHECKING:
    from wow_temporal.domain.app import App
    from wow_temporal.timers.check import CheckReport

__all__ = [
    "ANSWER_TIMEOUT",
    "CHECK_LIMIT",
    "TIMER_WORKFLOW",
    "ShownState",
    "TimerError",
    "TimerFilter",
    "TimerInfo",
    "TimerNotAnsweredError",
    "TimerNotFoundError",
    "TimerOperations",
    "TimerPage",
    "check_timer_id",
]

logger = logging.getLogger(__name__)

TIMER_WORKFLOW = "wow.Timer"
"""The timer workflow's type, by name: its run takes its input raw (`TimerInput` as JSON), so
that one it cannot read parks it instead of failing every workflow task."""

CHECK_LIMIT = 10_000
"""How many running timers `check` reads by default."""
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


class TimerError(WowTemporalError, ValueError):
    """An operation on a timer that cannot be done; the message says why."""


class TimerNotFoundError(TimerError, LookupError):
    """No timer has that workflow id."""


class TimerNotAnsweredError(TimerError):
    """No worker answered an operator's request in time; what happens to it is said."""


_CAMEL = WireModel.model_config
"""The answers' models: snake_case in Python, camelCase in JSON (the control API's and the
CLI's `--json` alike), as Wow's commits and the query parameters are."""


ShownState = Annotated[
    TimerState, shown_instants(("next_due",), ("pending", "due"), ("spec", "first_due"))
]
"""A timer's state as the CLI and the control API answer it (the schema: `TimerState`)."""


class TimerInfo(BaseModel):
    """A timer as the CLI and the control API show it."""

    model_config = _CAMEL

    workflow_id: str
    run_id: str | None = None
    status: str
    """One of `Status` (see `timers.status` for what each means and how it is read)."""
    running: bool
    aggregate: str = ""
    aggregate_id: str = ""
    tenant: str = ""
    key: str = ""
    due: Instant | None = None
    """When its pending slot is due (`WowDue`); None when none is (ended, or never due)."""
    ended: Instant | None = None
    """When the timer's run ended (delivered, rejected, cancelled, …); None while it runs."""
    state: ShownState | None = None
    waiting: list[str] = []
    """What was handed to the running timer and waits for a worker to run it (with no worker,
    or in its start delay, its state does not show it yet): `cancel requested by an
    operator`, `1 change(s) handed over`."""


class TimerPage(BaseModel):
    """One listing's answer: the timers found, newest first, and whether more matched than
    the limit let through (`truncated`: the same word in the CLI's `--json` and the API)."""

    model_config = _CAMEL

    items: list[TimerInfo]
    truncated: bool = False
    """More timers match than `limit`: narrow the filters, or raise the limit."""
    limit: int


class TimerFilter(BaseModel):
    """Which timers to list: each filter given narrows it (camelCase on the wire)."""

    model_config = FILTER_CONFIG

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
        clauses = [
            f"WorkflowType = {quoted(TIMER_WORKFLOW)}",
            f"ExecutionStatus != {quoted('ContinuedAsNew')}",
        ]
        for attribute, value in (
            ("WowAggregate", self.aggregate),
            ("WowAggregateId", self.aggregate_id),
            ("WowTenant", self.tenant),
            ("WowKey", self.key),
        ):
            if value is not None:
                clauses.append(f"{attribute} = {quoted(value)}")
        if self.status is not None:
            clauses.append(status_clause(self.status, now or datetime.now(UTC)))
        if self.running is not None:
            clauses.append(f"ExecutionStatus {'=' if self.running else '!='} {quoted('Running')}")
        return " AND ".join(clauses)


class TimerOperations:
    """The operator's verbs on the timers of one namespace (a `TimerClient` has them)."""

    client: Client
    task_queue: str
    answer_timeout: timedelta

    async def list(
        self, where: TimerFilter | None = None, *, limit: int = LIST_DEFAULT
    ) -> list[TimerInfo]:
        """Timers matching `where`, newest first (the same query the Web UI takes)."""
        query = (where or TimerFilter()).query()
        found = self.client.list_workflows(query, limit=limit)
        return [_info(execution) async for execution in found]

    async def page(
        self, where: TimerFilter | None = None, *, limit: int = LIST_DEFAULT
    ) -> TimerPage:
        """`list`, saying whether more timers matched than `limit` (one more is asked for)."""
        found = await self.list(where, limit=limit + 1)
        return TimerPage(items=found[:limit], truncated=len(found) > limit, limit=limit)

    async def show(self, workflow_id: str, *, tenant: str | None = None) -> TimerInfo:
        """One timer with its full state (queried if running, its result if closed)."""
        handle = self.client.get_workflow_handle(workflow_id, result_type=TimerState)
        info, description = await self._describe(workflow_id, tenant)
        state: TimerState | None = None
        try:
            if description.status == WorkflowExecutionStatus.RUNNING:
                state = await self._running_state(handle, description)
            elif description.status == WorkflowExecutionStatus.COMPLETED:
                run = self.client.get_workflow_handle(
                    workflow_id, run_id=description.run_id, result_type=TimerState
                )
                state = await run.result(follow_runs=False, rpc_timeout=self.answer_timeout)
        except (ValueError, TypeError) as error:  # a state this version cannot read
            logger.warning("%s: its state cannot be read: %s", workflow_id, error)
            state = core.unreadable_input(f"its state cannot be read here: {error}")
        waiting: list[str] = []
        if description.status == WorkflowExecutionStatus.RUNNING:
            waiting = await _waiting(self.client, workflow_id)
        return info.model_copy(update={"state": state, "waiting": waiting})

    async def _describe(
        self, workflow_id: str, tenant: str | None
    ) -> tuple[TimerInfo, WorkflowExecutionDescription]:
        """The timer as its search attributes show it (no query: queries are billed actions)."""
        _check_id(workflow_id)
        description = await describe_or_none(self.client, workflow_id)
        if description is None:
            raise TimerNotFoundError(f"no timer {workflow_id!r}")
        info = _info(description)
        if tenant is not None and info.tenant != tenant:
            raise TimerNotFoundError(f"no timer {workflow_id!r}")
        return info, description

    async def check(
        self,
        apps: Sequence[App],
        *,
        limit: int = CHECK_LIMIT,
        progress: Callable[[int], None] | None = None,
    ) -> CheckReport:
        """Before a deploy: the running timers (up to `limit`) whose command `apps` would
        refuse, read-only and with no worker (`timers.check`); `progress(read)` told after
        each page."""
        from wow_temporal.timers.check import check_timers

        return await check_timers(self, apps, limit=limit, progress=progress)

    async def _running_state(
        self, handle: WorkflowHandle[Any, TimerState], description: WorkflowExecutionDescription
    ) -> TimerState | None:
        """The running timer's state: queried, or while it waits out its start delay (when it
        cannot answer a query), the state it started with; None if no worker answers."""
        start = description.execution_time
        if start is None or start <= datetime.now(UTC):
            return await self._query(handle)
        initial: TimerState | None = None
        async for entry in history.entries(self.client, handle.id):
            if entry.kind == "started":
                try:
                    initial = (await history.decoded(self.client, entry.payloads, TimerInput)).state
                except Exception as error:  # the timer parks itself on it when it runs
                    return core.unreadable_input(f"{type(error).__name__}: {error}")
            elif entry.kind == "task_completed":
                # A change ended the delay early: the workflow runs and answers queries.
                return await self._query(handle)
        if initial is None:
            raise TimerNotFoundError(f"no history for timer {handle.id!r}")
        return initial

    async def _query(self, handle: WorkflowHandle[Any, TimerState]) -> TimerState | None:
        """The running timer's state, or None when no worker answers in time (or the workflow
        cannot answer: its task is failing)."""
        try:
            return await handle.query(TimerWorkflow.state, rpc_timeout=self.answer_timeout)
        except WorkflowQueryFailedError:
            return None
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
            return await self._operate(workflow_id, "retry", info.run_id)
        except WorkflowUpdateFailedError as error:
            raise TimerError(str(error.cause or error)) from None

    async def cancel(self, workflow_id: str, *, tenant: str | None = None) -> TimerState:
        """Cancel a pending or parked timer; a command already sent is not recalled."""
        info = await self._running(workflow_id, tenant)
        return await self._operate(workflow_id, "cancel", info.run_id)

    async def _operate(self, workflow_id: str, update: str, run_id: str | None) -> TimerState:
        """Run an operator's update on the run the operator saw (`run_id`: never on a run a
        newer set started after it ended); a clear error when no worker takes it in time."""
        handle = self.client.get_workflow_handle(workflow_id, run_id=run_id)
        request = str(uuid.uuid4())
        args = [request] if update == "cancel" else []
        waited = f"no worker answered within {self.answer_timeout.total_seconds():g}s (is "
        waited += f"`wow-temporal worker` running on task queue {self.task_queue}?)"
        try:
            # A cancel goes as a signal first: in the timer's history at once, in order with
            # the changes handed over, it cancels what is in force now and no set handed over
            # after it; the update of the same request (the same cancel) fetches the answer.
            state = await update_or_signal(
                handle,
                update,
                args,
                result_type=TimerState,
                accept_within=self.answer_timeout,
                answer_within=self.answer_timeout,
                signal=args if update == "cancel" else None,
                signal_first=update == "cancel",
            )
        except NotAccepted:
            raise TimerNotAnsweredError(
                f"{waited}; the retry is applied if one takes it soon"
            ) from None
        except NotAnswered:  # a delivery in flight ends first
            raise TimerNotAnsweredError(
                f"the {update} was accepted by a worker but not answered within "
                f"{self.answer_timeout.total_seconds():g}s (a delivery in flight ends first): "
                "it applies then; show the timer to see it"
            ) from None
        except RPCError as error:
            if error.status != RPCStatusCode.NOT_FOUND:
                raise
            raise TimerError(f"timer {workflow_id!r} has ended meanwhile") from None
        if isinstance(state, SentAsSignal) and state.closed:  # it ended, on the cancel or before
            ended: TimerState = await self.client.get_workflow_handle(
                workflow_id, run_id=run_id, result_type=TimerState
            ).result(rpc_timeout=self.answer_timeout)
            return ended
        if isinstance(state, SentAsSignal):
            raise TimerNotAnsweredError(
                f"{waited}; cancellation requested: it is in the timer's history, so the "
                "schedule in force now ends Cancelled when a worker runs it (a set handed "
                "over after it stands)"
            )
        return state

    async def _running(self, workflow_id: str, tenant: str | None) -> TimerInfo:
        info, _ = await self._describe(workflow_id, tenant)
        if not info.running:
            raise TimerError(f"timer {workflow_id!r} has ended ({info.status})")
        return info


async def _waiting(client: Client, workflow_id: str) -> list[str]:
    """The signals and cancel requests a timer's history holds after the last workflow task
    a worker completed: what it will apply when one runs it."""
    changes, cancels, requested = 0, 0, False
    async for entry in history.entries(client, workflow_id):
        if entry.kind == "task_completed":
            changes, cancels, requested = 0, 0, False
        elif entry.kind == "signal":
            changes += entry.name == "apply"
            cancels += entry.name == "cancel"
        elif entry.kind == "cancel_requested":
            requested = True
    waiting = []
    if cancels:
        waiting.append("cancel requested by an operator")
    if requested:
        waiting.append("a Temporal cancel request")
    if changes:
        waiting.append(f"{changes} change(s) handed over")
    return waiting


def _ended_as(status: WorkflowExecutionStatus) -> Status:
    """A run's status that ended by Temporal's hand, as a timer status."""
    found = _EXECUTION_STATUS.get(status, "Terminated")
    return {"Failed": Status.FAILED, "TimedOut": Status.TIMED_OUT}.get(found, Status.TERMINATED)


def check_timer_id(workflow_id: str) -> None:
    """`TimerError` unless `workflow_id` is one the timers could have made: checked before
    Temporal is asked, so a malformed id is bad input (the CLI's exit 2, the API's 400) and
    never an answer about some other state."""
    try:
        parse_timer_workflow_id(workflow_id)
    except InvalidIdError as error:
        raise TimerError(str(error)) from None
    if has_control(workflow_id):
        raise TimerError(f"not a timer id: {workflow_id!r} (a control character)")


_check_id = check_timer_id


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
        ended=execution.close_time,
    )
