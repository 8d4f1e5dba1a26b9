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
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, cast

from opentelemetry.trace import Span
from pydantic import (
    BaseModel,
)
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowHandle,
)
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from wow_temporal.engine import history, instant_text
from wow_temporal.engine.listing import LIST_DEFAULT, LIST_LIMIT
from wow_temporal.engine.runs import describe_or_none
from wow_temporal.errors import WowTemporalError
from wow_temporal.ids import (
    TIMER_ID_PREFIX,
    deletion_record_id,
)
from wow_temporal.ids import timer_workflow_id as _timer_id
from wow_temporal.metrics import IngestMetrics, client_meter
from wow_temporal.model import AggregateRef, Commit, WireModel
from wow_temporal.search_attributes import SA_KEY
from wow_temporal.settings import Settings
from wow_temporal.timers import core
from wow_temporal.timers.admission import Admission, Admitted, admit
from wow_temporal.timers.attributes import initial_search_attributes
from wow_temporal.timers.changes import AggregateChange, KeyChange, continuing
from wow_temporal.timers.core import TimerChange, TimerState, Verdict, VerdictOutcome
from wow_temporal.timers.deletion import DeletionRecord, DeletionRecords
from wow_temporal.timers.fold import Folded, Horizon, Position, fold
from wow_temporal.timers.keylocks import KeyLock, key_locks
from wow_temporal.timers.operations import (
    ANSWER_TIMEOUT,
    TIMER_WORKFLOW,
    ShownState,
    TimerError,
    TimerFilter,
    TimerInfo,
    TimerNotAnsweredError,
    TimerNotFoundError,
    TimerOperations,
    TimerPage,
    _ended_as,
    check_timer_id,
)
from wow_temporal.timers.status import Status
from wow_temporal.timers.workflow import DeliverySettings, TimerInput
from wow_temporal.tracing import (
    current_traceparent,
    detached_span,
    mark_failed,
    within_span,
)

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

VISIBILITY_RETRY_S = 30.0
"""How long deletions skip listing an aggregate's running timers after a listing failed or
timed out: with visibility down, each would wait out its timeout, and a batch of deletions would
take minutes for nothing (the deletion record alone stops every timer)."""


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


class Applied(BaseModel):
    """What applying one schedule event did to one timer, and why."""

    model_config = WireModel.model_config  # camelCase in JSON, as every answer

    workflow_id: str
    kind: Literal["set", "cancel", "delete"]
    outcome: VerdictOutcome
    """`started` a timer (or `cancelled`: a cancel with nothing pending starts one that keeps
    it), `handed-over` to the running timer (applied when a worker runs it), or `ignored`."""
    reason: str = ""
    """Why, in words: `due 2026-12-01T10:30Z`, `stale: version 1 ≤ applied 1`, …"""


class TimerClient(TimerOperations):
    """The timers of one Temporal namespace, driven through a connected `Client`: ingest here,
    the operator's side (list, show, check, retry, cancel) from `TimerOperations`."""

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
        async for entry in history.entries(self.client, run.id, run.run_id):
            try:
                if entry.kind == "started":
                    started = await history.decoded(self.client, entry.payloads, TimerInput)
                    applied = max(applied, started.state.applied)
                elif entry.handed and entry.name == "apply":
                    change = await history.decoded(self.client, entry.payloads, TimerChange)
                    applied = max(applied, change.order)
            except Exception as error:  # one the timer could not read either: it refused it
                what = "its input" if entry.kind == "started" else "a change in its history"
                logger.warning("%s: %s cannot be read: %s", run.id, what, error)
        return TimerState(
            applied=applied,
            spec=None,
            status=ended,
            last_outcome=f"ended {ended.value} by Temporal, having been handed up to "
            f"version {applied[0]}",
        )


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
