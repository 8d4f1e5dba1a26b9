"""Ingest and operate aggregate timers: apply commits, list, show, retry and cancel timers.

`TimerClient.apply_many` is the one code path behind the Python API, the control API's
`POST /commits`, the CLI and the host's relay; every batch passes admission
(`timers.admission`) before anything reaches Temporal. It never waits for a timer to fire.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

from opentelemetry.trace import Span
from pydantic import (
    BaseModel,
    field_validator,
)
from temporalio.client import (
    Client,
    WorkflowExecution,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from wow_temporal.engine import Instant, instant_text
from wow_temporal.engine.listing import FILTER_CONFIG, LIST_DEFAULT, LIST_LIMIT, quoted
from wow_temporal.engine.runs import describe_or_none
from wow_temporal.engine.text import shown_instants
from wow_temporal.errors import WowTemporalError
from wow_temporal.ids import (
    TIMER_ID_PREFIX,
    InvalidIdError,
    deletion_record_id,
    parse_timer_workflow_id,
)
from wow_temporal.ids import timer_workflow_id as _timer_id
from wow_temporal.metrics import IngestMetrics, client_meter
from wow_temporal.model import AggregateRef, Commit, WireModel, has_control
from wow_temporal.settings import Settings
from wow_temporal.timers import core
from wow_temporal.timers.admission import Admission, Admitted, admit
from wow_temporal.timers.attributes import (
    SA_AGGREGATE,
    SA_AGGREGATE_ID,
    SA_DUE,
    SA_KEY,
    SA_STATUS,
    SA_TENANT,
    initial_search_attributes,
)
from wow_temporal.timers.changes import AggregateChange, KeyChange, continuing
from wow_temporal.timers.core import TimerChange, TimerState, Verdict, VerdictOutcome
from wow_temporal.timers.deletion import DeletionRecord, DeletionRecords
from wow_temporal.timers.fold import Folded, Horizon, Position, fold
from wow_temporal.timers.keylocks import KeyLock, key_locks
from wow_temporal.timers.status import Status, parse_status, status_clause, status_of
from wow_temporal.timers.workflow import DeliverySettings, TimerInput, TimerWorkflow
from wow_temporal.tracing import (
    current_traceparent,
    detached_span,
    mark_failed,
    within_span,
)
from wow_temporal.updates import NotAccepted, NotAnswered, SentAsSignal, update_or_signal

if TYPE_CHECKING:
    from wow_temporal.domain.app import App
    from wow_temporal.timers.check import CheckReport

__all__ = [
    "LIST_DEFAULT",
    "LIST_LIMIT",
    "TIMER_ID_PREFIX",
    "TIMER_TASK_QUEUE",
    "Applied",
    "FenceLapsedError",
    "ShownState",
    "SlowHandOverError",
    "TimerClient",
    "TimerError",
    "TimerFilter",
    "TimerInfo",
    "TimerNotAnsweredError",
    "TimerNotFoundError",
    "TimerPage",
    "check_timer_id",
    "fenced",
]

logger = logging.getLogger(__name__)

TIMER_TASK_QUEUE = "wow-timers"
APPLY_CONCURRENCY = 32
"""Aggregates whose commits `apply_many` hands over at once."""

TIMER_WORKFLOW = "wow.Timer"
"""The timer workflow's type, by name: its run takes its input raw (`TimerInput` as JSON), so
that one it cannot read parks it instead of failing every workflow task."""

VISIBILITY_RETRY_S = 30.0
"""How long deletions skip listing an aggregate's running timers after a listing failed or
timed out: with visibility down, each would wait out its timeout, and a batch of deletions would
take minutes for nothing (the deletion record alone stops every timer)."""
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


class SlowHandOverError(WowTemporalError):
    """One aggregate's changes took longer than `apply_many`'s `within` to hand over."""


class FenceLapsedError(WowTemporalError, RuntimeError):
    """The lease a hand-over runs under lapsed (`fenced`): it stops before its next request."""


_fence: ContextVar[Callable[[], bool] | None] = ContextVar("wow_timers_fence", default=None)


@contextlib.contextmanager
def fenced(holds: Callable[[], bool]) -> Iterator[None]:
    """Hand changes over only while `holds()`: checked right before each request that starts or
    signals a timer. A relay under a lease hands over this way, so a replica that stalled
    mid-batch sends nothing once another may run the relay (the check of a key's last run and
    the start after it are one step only within one process)."""
    token = _fence.set(holds)
    try:
        yield
    finally:
        _fence.reset(token)


def _check_fence() -> None:
    holds = _fence.get()
    if holds is not None and not holds():
        raise FenceLapsedError("the lease this hand-over ran under lapsed: stopped before sending")


_CAMEL = WireModel.model_config
"""The answers' models: snake_case in Python, camelCase in JSON (the control API's and the
CLI's `--json` alike), as Wow's commits and the query parameters are."""


ShownState = Annotated[
    TimerState, shown_instants(("next_due",), ("pending", "due"), ("spec", "first_due"))
]
"""A timer's state as the CLI and the control API answer it (the schema: `TimerState`)."""


class Applied(BaseModel):
    """What applying one schedule event did to one timer, and why."""

    model_config = _CAMEL

    workflow_id: str
    kind: Literal["set", "cancel", "delete"]
    outcome: VerdictOutcome
    """`started` a timer (or `cancelled`: a cancel with nothing pending starts one that keeps
    it), `handed-over` to the running timer (applied when a worker runs it), or `ignored`."""
    reason: str = ""
    """Why, in words: `due 2026-12-01T10:30Z`, `stale: version 1 ≤ applied 1`, …"""


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
        self._visibility_down_until = 0.0
        """Until when (monotonic) deletions list no running timers: visibility just failed."""
        self.metrics = IngestMetrics(client_meter(client))
        """Where ingest is counted (`wow_commits_ingested`, `wow_timer_changes`), and where the
        relay that hands commits over through this client records its lag."""
        self._keys = key_locks
        """A lock per timer being handed a change, shared by every client of the process: two
        ingests of one key never read the run before and start after it at once
        (`_apply_key`)."""

    async def reachable(self, within: timedelta = timedelta(seconds=5)) -> bool:
        """Whether the Temporal frontend answers a health check now."""
        try:
            return await self.client.service_client.check_health(timeout=within)
        except (RPCError, TimeoutError):
            return False

    @classmethod
    def from_settings(cls, client: Client, settings: Settings) -> TimerClient:
        """The timers as `wow.timers.*` configure them: started on `task-queue`, the one the
        workers poll, with the delivery retries of `max-attempts` and `retry-*`."""
        return cls(client, task_queue=settings.timers.task_queue, delivery=settings.timers.delivery)

    async def apply(
        self, commit: Commit | dict[str, Any] | str | bytes, *, later: Horizon | None = None
    ) -> list[Applied]:
        """Apply a commit's schedule events; idempotent and order-safe.

        The commit passes admission first (`timers.admission`): a bad one raises
        `InvalidCommitError` and nothing is applied. Each answer says what the event did and
        why, in the commit's order. The commit's changes are folded per key first (a set the
        same commit cancels or deletes is never started). A set older than the aggregate's
        deletion is ignored; a deletion leaves a record that every timer checks before it
        delivers, so it holds against reordering and without relying on visibility.
        """
        (applied,) = await self.apply_many(admit([commit]), later=later)
        return applied

    async def apply_many(
        self,
        commits: Sequence[Commit] | Admission,
        *,
        concurrency: int = APPLY_CONCURRENCY,
        later: Horizon | None = None,
        failures: dict[AggregateRef, Exception] | None = None,
        within: float | None = None,
    ) -> list[list[Applied]]:
        """Apply many commits: each aggregate's folded together, different aggregates' at once.

        Answers in the order of `commits`. One aggregate's changes are folded per key before
        any reaches Temporal (`timers.fold`): only each key's latest is handed over, a deletion
        is recorded before any of its timers start, and a set the batch (or `later`, what a
        relay has read further on in the log) replaces, cancels or deletes is never started.
        Whatever stops a timer (cancels, deletions) is handed over first, for every aggregate
        of the batch, then the sets. A relay or `POST /commits` batch goes at the pace of
        Temporal's round trips times `concurrency`, not one commit after another.

        The batch passes admission first (`timers.admission`; already, if an `Admission` is
        given): a bad commit raises `InvalidCommitError` and nothing of the batch is applied.

        With `failures` given, one aggregate cannot stop the others: an aggregate whose hand-over
        fails, or takes more than `within` seconds a phase, is noted there with its error, its
        commits are answered `[]`, and the rest of the batch goes on (the relay sets it aside).
        """
        admission = admit(commits)
        streams: dict[AggregateRef, list[int]] = {}
        for position, item in enumerate(admission):
            streams.setdefault(item.commit.aggregate, []).append(position)
        prepared = [
            self._prepare(positions, [admission.admitted[p] for p in positions], later)
            for positions in streams.values()
        ]
        answers: list[list[Applied]] = [[] for _ in admission]
        isolated = None if failures is None else _Isolated(failures, within)
        try:
            await _each(prepared, self._stop_phase, concurrency, isolated)
            await _each(prepared, self._set_phase, concurrency, isolated)
            for stream in prepared:  # before the spans end: each answer counts on its span
                if isolated is not None and stream.folded.owner in isolated.failures:
                    continue
                for position, applied in zip(stream.positions, stream.answers(), strict=True):
                    answers[position] = applied
        except BaseException as error:
            for stream in prepared:
                for span in stream.spans:
                    mark_failed(span, error)
            raise
        finally:
            for stream in prepared:
                for span in stream.spans:
                    if span is not None:
                        span.end()
        return answers

    def _prepare(
        self, positions: list[int], admitted: list[Admitted], later: Horizon | None
    ) -> _Stream:
        """One aggregate's commits of a batch, folded; each commit with a span of its own (the
        timers it sets continue it)."""
        commits = [item.commit for item in admitted]
        spans = [_commit_span(commit) for commit in commits]
        items: list[tuple[Position, KeyChange | AggregateChange]] = []
        for n, (one, span) in enumerate(zip(admitted, spans, strict=True)):
            changes = continuing(one.changes, _traceparent(span, one.commit))
            items.extend(((n, e), item) for e, item in enumerate(changes))
        folded = fold(commits[0].aggregate, items, later)
        return _Stream(positions, commits, spans, items, folded, self.metrics)

    async def _stop_phase(self, stream: _Stream) -> None:
        """Record the deletion, hand over what stops a timer (cancels, deletions, the stops in
        place of sets the log changes later), and apply the deletion to the aggregate's other
        running timers."""
        folded, owner = stream.folded, stream.folded.owner
        if folded.deletion is not None:
            at, change = folded.deletion
            with within_span(stream.spans[at[0]]):
                stream.deleted = await self.deletions.record(
                    DeletionRecord(aggregate=owner, version=change.version, index=change.index)
                )
        for step in folded.steps:
            if step.stops:
                with within_span(stream.spans[step.at[0]]):
                    if step.stop_only:
                        verdict = await self._stop(owner, step.key, step.change)
                    else:
                        verdict = await self._apply_key(owner, step.key, step.change)
                stream.answered(step.at, step.key, step.change.kind, verdict)
        if folded.deletion is not None:
            at, change = folded.deletion
            handed = {step.key for step in folded.steps}
            with within_span(stream.spans[at[0]]):
                for key in await self._running_keys(owner):
                    if key and key not in handed:
                        handed.add(key)
                        stream.answered(at, key, "delete", await self._stop(owner, key, change))

    async def _set_phase(self, stream: _Stream) -> None:
        """Hand over the sets, unless older than the aggregate's deletion."""
        folded, owner = stream.folded, stream.folded.owner
        sets = [step for step in folded.steps if not step.stops]
        if not sets:
            return
        deleted = stream.deleted
        if folded.deletion is None:
            deleted = await self.deletions.find(owner)
        for step in sets:
            change = step.change
            with within_span(stream.spans[step.at[0]]):
                if deleted is not None and change.order < deleted.order:
                    verdict = Verdict(outcome="ignored", reason=deleted.describe())
                else:
                    verdict = await self._apply_key(owner, step.key, change)
            stream.answered(step.at, step.key, change.kind, verdict)

    async def _stop(self, owner: AggregateRef, key: str, change: TimerChange) -> Verdict:
        """Hand a change that ends what a timer runs to the key's running timer, starting
        none where none runs (the deletion record, or the change's order once a later one
        arrives, holds without it)."""
        workflow_id = _timer_id(owner, key)
        async with self._key_lock(workflow_id):
            description = await describe_or_none(self.client, workflow_id)
            if description is not None and description.status == WorkflowExecutionStatus.RUNNING:
                answer = await self._hand_over(owner, key, change)
                if answer is not None:
                    return answer
        return Verdict(outcome="ignored", reason="no timer of this key was running")

    async def _running_keys(self, owner: AggregateRef) -> list[str]:
        """The keys of the aggregate's running timers that visibility lists: best effort (it
        lags, and may be down), since the deletion record alone makes every timer it misses
        end cancelled when it comes due."""
        query = TimerFilter(
            aggregate=f"{owner.context_name}.{owner.aggregate_name}",
            aggregate_id=owner.aggregate_id,
            tenant=owner.tenant_id,
            running=True,
        ).query()
        if time.monotonic() < self._visibility_down_until:
            return []  # it failed a moment ago: no deletion waits out its timeout again
        try:
            async with asyncio.timeout(self.answer_timeout.total_seconds()):
                return [
                    execution.typed_search_attributes.get(SA_KEY) or ""
                    async for execution in self.client.list_workflows(query)
                ]
        except (RPCError, TimeoutError) as error:
            self._visibility_down_until = time.monotonic() + VISIBILITY_RETRY_S
            logger.warning(
                "deletion of %s: cannot list its running timers (%s); the deletion record "
                "cancels each when it comes due (no listing for %g s)",
                owner,
                error,
                VISIBILITY_RETRY_S,
            )
            return []

    async def _apply_key(self, owner: AggregateRef, key: str, change: TimerChange) -> Verdict:
        """Hand `change` to its timer without waiting for a worker: start it, send it to the
        one running, or, when the last run has ended, start anew unless its state says stale.

        One key's changes go one at a time through the process: the check (the run before
        is read) and the act (a run starts after it) are one step, so a stale set can never
        start from a state that a newer change, started and ended meanwhile, has passed.
        """
        async with self._key_lock(_timer_id(owner, key)):
            return await self._apply_key_now(owner, key, change)

    def _key_lock(self, workflow_id: str) -> KeyLock:
        """The process's lock of the key (`timers.keylocks`): any client of this namespace
        takes the same one, on whatever event loop it runs."""
        return self._keys.lock(self.client.namespace, workflow_id)

    async def _apply_key_now(self, owner: AggregateRef, key: str, change: TimerChange) -> Verdict:
        """`_apply_key`, its key's lock held."""
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
            last = await self._last_run(workflow_id)
            if last is None:
                continue  # another ingest started a run meanwhile: hand it to that one
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
        before = TimerState() if after is None else after.model_copy(update={"last_change": ""})
        state = core.apply(before, change)
        due = state.next_due
        delay = None
        if due is not None and self.start_delay:
            wait = due - datetime.now(UTC)
            delay = wait if wait > timedelta(0) else None
        _check_fence()
        await self.client.start_workflow(
            TIMER_WORKFLOW,
            TimerInput(state=state, delivery=self.delivery),
            id=_timer_id(owner, key),
            task_queue=self.task_queue,
            id_reuse_policy=reuse,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            start_delay=delay,
            search_attributes=initial_search_attributes(owner, key, state),
            static_summary=core.static_summary(owner, key),
            static_details=core.static_details(owner, key, state),
        )
        if change.kind != "set":
            return core.verdict(before, change)
        assert state.spec is not None
        ended = "" if after is None else f" (the timer had ended {after.status.value})"
        when = "never due" if due is None else f"due {instant_text(due)}"
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
        state = core.initial(change)  # what it shows until a worker runs it
        _check_fence()
        try:
            await self.client.start_workflow(
                TIMER_WORKFLOW,
                TimerInput(state=TimerState(), delivery=self.delivery),
                id=_timer_id(owner, key),
                task_queue=self.task_queue,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                start_signal="apply",
                start_signal_args=[change],
                search_attributes=initial_search_attributes(owner, key, state),
                static_summary=core.static_summary(owner, key),
                static_details=core.static_details(owner, key, state),
            )
        except WorkflowAlreadyStartedError:
            return None
        return Verdict(
            outcome="handed-over",
            reason="sent to the running timer, which applies it when a worker runs it unless "
            "it has applied a newer event; its last change tells what it did",
        )

    async def _last_run(self, workflow_id: str) -> TimerState | None:
        """The state the key's latest run ended in, read by its run id; None while a run is
        running (another ingest started one). Fails closed: an error reading it raises, so a
        change is never taken for the first of its key because its predecessor could not be
        read. A run that ended without a state (terminated, failed, timed out) gives the
        latest order it had been handed, from its history; one past retention, nothing."""
        description = await describe_or_none(self.client, workflow_id)
        if description is None:
            return TimerState()  # past the namespace's retention: nothing is known
        if description.status in (WorkflowExecutionStatus.RUNNING, None):
            return None
        if description.status == WorkflowExecutionStatus.CONTINUED_AS_NEW:
            return None  # its successor runs (or has just ended): read again
        run = self.client.get_workflow_handle(
            workflow_id, run_id=description.run_id, result_type=TimerState
        )
        if description.status == WorkflowExecutionStatus.COMPLETED:
            state: TimerState = await run.result(follow_runs=False, rpc_timeout=self.answer_timeout)
            return state
        return await self._recovered(run, _ended_as(description.status))

    async def _recovered(self, run: WorkflowHandle[Any, TimerState], ended: Status) -> TimerState:
        """The latest order a run that ended without a state had been handed (its input and
        every `apply` it received), so no older change starts its key again."""
        applied = (0, -1)
        async for event in run.fetch_history_events():
            payloads = None
            if event.HasField("workflow_execution_started_event_attributes"):
                attributes = event.workflow_execution_started_event_attributes
                try:
                    (decoded,) = await self.client.data_converter.decode(
                        attributes.input.payloads, [TimerInput]
                    )
                except Exception as error:
                    logger.warning("%s: its input cannot be read: %s", run.id, error)
                    continue
                applied = max(applied, cast(TimerInput, decoded).state.applied)
                continue
            if event.HasField("workflow_execution_signaled_event_attributes"):
                signal = event.workflow_execution_signaled_event_attributes
                if signal.signal_name == "apply":
                    payloads = signal.input.payloads
            elif event.HasField("workflow_execution_update_accepted_event_attributes"):
                update = event.workflow_execution_update_accepted_event_attributes
                if update.accepted_request.input.name == "apply":
                    payloads = update.accepted_request.input.args.payloads
            if payloads:
                try:
                    (change,) = await self.client.data_converter.decode(payloads, [TimerChange])
                except Exception as error:  # one the timer could not read either: it refused it
                    logger.warning("%s: a change in its history cannot be read: %s", run.id, error)
                    continue
                applied = max(applied, cast(TimerChange, change).order)
        return TimerState(
            applied=applied,
            spec=None,
            status=ended,
            last_outcome=f"ended {ended.value} by Temporal, having been handed up to "
            f"version {applied[0]}",
        )

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
            waiting = await _waiting(handle)
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
        async for event in handle.fetch_history_events():
            if event.HasField("workflow_execution_started_event_attributes"):
                payloads = event.workflow_execution_started_event_attributes.input.payloads
                try:
                    (decoded,) = await self.client.data_converter.decode(payloads, [TimerInput])
                except Exception as error:  # the timer parks itself on it when it runs
                    return core.unreadable_input(f"{type(error).__name__}: {error}")
                initial = cast(TimerInput, decoded).state
            elif event.HasField("workflow_task_completed_event_attributes"):
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


@dataclass
class _Stream:
    """One aggregate's commits of a batch on their way: folded, then handed over in two
    phases, the answers gathered by the change they answer."""

    positions: list[int]
    commits: list[Commit]
    spans: list[Span | None]
    items: list[tuple[Position, KeyChange | AggregateChange]]
    folded: Folded
    metrics: IngestMetrics
    found: dict[Position, list[Applied]] = field(default_factory=dict)
    deleted: DeletionRecord | None = None

    def answered(self, at: Position, key: str, kind: str, verdict: Verdict) -> None:
        self.found.setdefault(at, []).append(
            Applied(
                workflow_id=_timer_id(self.folded.owner, key),
                kind=cast(Literal["set", "cancel", "delete"], kind),
                outcome=verdict.outcome,
                reason=verdict.reason,
            )
        )

    def answers(self) -> list[list[Applied]]:
        """Each commit's answers, in its events' order; counted in the metrics."""
        owner = self.folded.owner
        answers: list[list[Applied]] = [[] for _ in self.commits]
        for at, item in self.items:
            reason = self.folded.skipped.get(at)
            stopped = self.found.pop(at, []) if isinstance(item, KeyChange) and reason else []
            if stopped:  # a set never started; what ran before it was told to stop
                reason = f"{reason} ({'; '.join(answer.reason for answer in stopped)})"
            if reason is not None:
                if isinstance(item, KeyChange):
                    workflow_id = _timer_id(owner, item.key)
                else:
                    workflow_id = deletion_record_id(owner)
                answers[at[0]].append(
                    Applied(
                        workflow_id=workflow_id,
                        kind=item.change.kind,
                        outcome="ignored",
                        reason=reason,
                    )
                )
            answers[at[0]].extend(self.found.get(at, []))
        for span, applied in zip(self.spans, answers, strict=True):
            if span is not None:
                span.set_attribute("wow.changes", len(applied))
            self.metrics.ingested([(answer.kind, answer.outcome) for answer in applied])
        return answers


@dataclass(frozen=True)
class _Isolated:
    """How `apply_many` keeps one aggregate's failure from the others: noted in `failures`."""

    failures: dict[AggregateRef, Exception]
    within: float | None

    async def run(self, stream: _Stream, phase: Callable[[_Stream], Awaitable[None]]) -> None:
        owner = stream.folded.owner
        if owner in self.failures:
            return  # failed in an earlier phase: its sets are not handed over
        try:
            async with asyncio.timeout(self.within):
                await phase(stream)
        except FenceLapsedError:
            raise  # not the aggregate's: the relay's lease lapsed
        except TimeoutError:
            self.failures[owner] = SlowHandOverError(f"not handed over within {self.within:g} s")
        except Exception as error:
            self.failures[owner] = error
        if owner in self.failures:
            for span in stream.spans:
                mark_failed(span, self.failures[owner])


async def _each(
    streams: Sequence[_Stream],
    phase: Callable[[_Stream], Awaitable[None]],
    concurrency: int,
    isolated: _Isolated | None = None,
) -> None:
    """Run `phase` for every stream, `concurrency` at once; the first failure is raised,
    unless `isolated` notes each stream's own."""
    limit = asyncio.Semaphore(concurrency)

    async def one(stream: _Stream) -> None:
        async with limit:
            if isolated is None:
                await phase(stream)
            else:
                await isolated.run(stream, phase)

    try:
        async with asyncio.TaskGroup() as group:
            for stream in streams:
                group.create_task(one(stream))
    except ExceptionGroup as failed:
        raise failed.exceptions[0] from None


def _commit_span(commit: Commit) -> Span | None:
    """The commit's `wow.apply commit` span: it continues the commit header's trace, else the
    caller's (None without either)."""
    attributes: dict[str, str | int | bool] = {
        "wow.commit.id": commit.id,
        "wow.aggregate": str(commit.aggregate),
        "wow.commit.version": commit.version,
    }
    return detached_span("wow.apply commit", commit.header.get("traceparent"), attributes)


def _traceparent(span: Span | None, commit: Commit) -> str | None:
    """What the timers a commit sets continue: its span, else its header's traceparent."""
    if span is None:
        return commit.header.get("traceparent")
    with within_span(span):
        return current_traceparent()


async def _waiting(handle: WorkflowHandle[Any, TimerState]) -> list[str]:
    """The signals and cancel requests a timer's history holds after the last workflow task
    a worker completed: what it will apply when one runs it."""
    changes, cancels, requested = 0, 0, False
    async for event in handle.fetch_history_events():
        if event.HasField("workflow_task_completed_event_attributes"):
            changes, cancels, requested = 0, 0, False
        elif event.HasField("workflow_execution_signaled_event_attributes"):
            name = event.workflow_execution_signaled_event_attributes.signal_name
            changes += name == "apply"
            cancels += name == "cancel"
        elif event.HasField("workflow_execution_cancel_requested_event_attributes"):
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
