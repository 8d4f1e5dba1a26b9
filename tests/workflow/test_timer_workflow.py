"""The timer workflow on the time-skipping test server: a scripted delivery activity stands in
for the host (the end-to-end tests use the real one over HTTP)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import pytest_asyncio
from temporalio import activity
from temporalio.client import Client, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from bench.harness.commits import commit as harness_commit
from bench.harness.commits import schedule_set as harness_schedule_set
from tests.helpers.eventually import eventually
from tests.helpers.told import told
from wow_temporal.delivery import DELIVERY_PARKED, DeliveryOutcome, DeliveryRequest
from wow_temporal.engine import slots as engine_slots
from wow_temporal.model import Commit
from wow_temporal.timers import core
from wow_temporal.timers.changes import KeyChange, changes_of
from wow_temporal.timers.client import FenceLapsedError, TimerClient, TimerError, fenced
from wow_temporal.timers.core import Status, TimerState
from wow_temporal.timers.workflow import DeliverySettings, TimerInput, TimerWorkflow
from wow_temporal.worker import timer_worker

pytestmark = pytest.mark.asyncio(loop_scope="session")


@dataclass
class ScriptedHost:
    """The delivery activity's stand-in: records requests with the workflow clock, answers.

    It keeps the real activity's contract: the `max_failures`-th failure of a request id in a
    row is final (`DeliveryParked`); the ones before are retried by Temporal.
    """

    env: WorkflowEnvironment
    answers: list[str] = field(default_factory=list)
    default: str = "ok"
    requests: list[tuple[DeliveryRequest, datetime]] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)

    @activity.defn(name="wow.deliver")
    async def deliver(self, request: DeliveryRequest) -> DeliveryOutcome:
        now = await self.env.get_current_time()
        self.requests.append((request, now))
        answer = self.answers.pop(0) if self.answers else self.default
        if answer == "fail":
            failed = self.failures.get(request.request_id, 0) + 1
            self.failures[request.request_id] = failed % request.max_failures
            final = failed >= request.max_failures
            raise ApplicationError(
                "host answered 500",
                type=DELIVERY_PARKED if final else "DeliveryFailure",
                non_retryable=final,
            )
        if answer == "reject":
            return DeliveryOutcome(
                status="rejected", error_code="IllegalState", error_msg="paid", http_status=400
            )
        return DeliveryOutcome(status="delivered", http_status=200)

    @property
    def request_ids(self) -> list[str]:
        return [request.request_id for request, _ in self.requests]


@dataclass
class Rig:
    env: WorkflowEnvironment
    client: Client
    timers: TimerClient
    host: ScriptedHost
    task_queue: str
    aggregate_id: str

    async def now(self) -> datetime:
        return await self.env.get_current_time()

    async def commit(
        self, version: int, *events: dict[str, Any], created: datetime | None = None
    ) -> dict[str, Any]:
        created = created or await self.now()
        built = harness_commit(
            self.aggregate_id,
            *events,
            version=version,
            commit_id=f"c{version}-{uuid.uuid4().hex[:6]}",
            header={"trace_id": "trace-1"},
            created_ms=int(created.timestamp() * 1000),
        )
        return {**built, "ownerId": "u1", "spaceId": ""}

    def worker(self) -> Worker:
        return timer_worker(
            self.client,
            None,
            task_queue=self.task_queue,  # type: ignore[arg-type]
            activities=[self.host.deliver],
        )

    async def result(self, key: str) -> TimerState:
        handle = self.client.get_workflow_handle(self.workflow_id(key), result_type=TimerState)
        async with self.env.time_skipping_unlocked():  # type: ignore[attr-defined]
            state: TimerState = await handle.result()
        return state

    def workflow_id(self, key: str) -> str:
        return f"wow-timer:eshop-order.order:t1:{self.aggregate_id}:{key}"


def schedule_set(key: str, rule: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {**harness_schedule_set(rule, key=key, body={"reason": "PAYMENT_TIMEOUT"}), **extra}


@pytest_asyncio.fixture(loop_scope="session")
async def rig(time_skipping_env: WorkflowEnvironment) -> AsyncIterator[Rig]:
    task_queue = f"timers-{uuid.uuid4().hex[:8]}"
    client = time_skipping_env.client
    timers = TimerClient(
        client,
        task_queue=task_queue,
        start_delay=False,
        delivery=DeliverySettings(
            max_attempts=3, initial_interval=timedelta(seconds=1), max_interval=timedelta(seconds=2)
        ),
    )
    yield Rig(
        time_skipping_env,
        client,
        timers,
        ScriptedHost(time_skipping_env),
        task_queue,
        uuid.uuid4().hex[:8],
    )


async def test_one_shot_due_in_days_fires_once_never_early(rig: Rig) -> None:
    async with rig.worker():
        commit = await rig.commit(1, schedule_set("grace", {"after": "P2D"}))
        applied = await rig.timers.apply(commit)
        assert [a.outcome for a in applied] == ["started"]
        state = await rig.result("grace")
    assert state.status is Status.DELIVERED
    assert rig.host.request_ids == [f"{commit['id']}:e0#1"]
    request, delivered_at = rig.host.requests[0]
    due = datetime.fromtimestamp(commit["createTime"] / 1000, UTC) + timedelta(days=2)
    assert request.schedule.due == int(due.timestamp() * 1000)
    assert delivered_at >= due
    assert request.upstream_id == commit["id"]
    assert request.scope.owner_id == "u1"
    assert request.trace_id == "trace-1"
    assert request.target.aggregate_id == rig.aggregate_id


async def test_replace_delivers_only_the_new_schedule(rig: Rig) -> None:
    async with rig.worker():
        first = await rig.commit(1, schedule_set("grace", {"after": "P1D"}))
        second = await rig.commit(2, schedule_set("grace", {"after": "P3D"}))
        await rig.timers.apply(first)
        (replaced,) = await rig.timers.apply(second)
        assert replaced.outcome == "handed-over"
        said = await told(rig.timers, replaced.workflow_id, 2)
        assert said.startswith(f"set of version 2 ({second['id']}:e0): replaced: ")
        assert f"replaced {first['id']}:e0 (after PT24H, due " in said
        assert f"by {second['id']}:e0 (after PT72H, due " in said
        state = await rig.result("grace")
    assert state.status is Status.DELIVERED
    assert rig.host.request_ids == [f"{second['id']}:e0#1"]
    assert rig.host.requests[0][1] >= datetime.fromtimestamp(
        second["createTime"] / 1000, UTC
    ) + timedelta(days=3)


async def test_older_version_and_duplicate_change_nothing(rig: Rig) -> None:
    async with rig.worker():
        newer = await rig.commit(5, schedule_set("grace", {"after": "P1D"}))
        older = await rig.commit(4, schedule_set("grace", {"after": "PT1H"}))
        await rig.timers.apply(newer)
        (stale,) = await rig.timers.apply(older)
        assert stale.outcome == "handed-over"
        said = await told(rig.timers, stale.workflow_id, 4)
        assert said == f"set of version 4 ({older['id']}:e0): ignored: stale: version 4 ≤ applied 5"
        (again,) = await rig.timers.apply(newer)
        assert again.outcome == "handed-over"
        said = await told(rig.timers, again.workflow_id, 5)
        assert said.endswith(": ignored: stale: version 5 ≤ applied 5")
        state = await rig.result("grace")
        # After it fired, the same commit again and an older one still change nothing.
        (after,) = await rig.timers.apply(newer)
        assert after.outcome == "ignored"
        assert after.reason == "stale: version 5 ≤ applied 5 (the timer had ended)"
        assert [a.outcome for a in await rig.timers.apply(older)] == ["ignored"]
    assert state.status is Status.DELIVERED
    assert rig.host.request_ids == [f"{newer['id']}:e0#1"]


async def test_a_lapsed_fence_hands_nothing_over(rig: Rig) -> None:
    """A relay whose lease lapsed mid-batch sends no start nor signal: the timer it would have
    started does not exist, and the next holder's hand-over starts it."""
    commit = await rig.commit(1, schedule_set("grace", {"after": "P1D"}))
    with fenced(lambda: False), pytest.raises(FenceLapsedError):
        await rig.timers.apply(commit)
    handle = rig.client.get_workflow_handle(rig.workflow_id("grace"))
    with pytest.raises(RPCError) as missing:
        await handle.describe()
    assert missing.value.status is RPCStatusCode.NOT_FOUND
    with fenced(lambda: True):
        assert [a.outcome for a in await rig.timers.apply(commit)] == ["started"]
    await handle.terminate()


async def test_cancel_ends_the_timer_without_delivery(rig: Rig) -> None:
    async with rig.worker():
        await rig.timers.apply(await rig.commit(1, schedule_set("grace", {"after": "P1D"})))
        await rig.timers.apply(
            await rig.commit(2, {"name": "wow.ScheduleCancelled", "key": "grace"})
        )
        state = await rig.result("grace")
    assert state.status is Status.CANCELLED
    assert rig.host.requests == []


async def test_rejection_ends_the_timer_without_retry(rig: Rig) -> None:
    rig.host.answers = ["reject"]
    async with rig.worker():
        await rig.timers.apply(await rig.commit(1, schedule_set("grace", {"after": "PT30M"})))
        state = await rig.result("grace")
    assert state.status is Status.REJECTED
    assert len(rig.host.requests) == 1


async def test_failures_park_then_retry_delivers_the_same_request(rig: Rig) -> None:
    rig.host.default = "fail"
    async with rig.worker():
        commit = await rig.commit(1, schedule_set("grace", {"after": "PT30M"}))
        await rig.timers.apply(commit)
        handle = rig.client.get_workflow_handle(rig.workflow_id("grace"))
        for _ in range(100):
            state = await handle.query(TimerWorkflow.state)
            if state.status is Status.PARKED:
                break
            await rig.env.sleep(timedelta(minutes=1))
        assert state.status is Status.PARKED
        assert "500" in state.parked_error
        assert len(rig.host.requests) == 3  # wow.timers.max-attempts
        # Parked is kept: time passes, nothing more is tried, the timer stays.
        await rig.env.sleep(timedelta(days=3))
        assert len(rig.host.requests) == 3
        with pytest.raises(TimerError):
            await rig.timers.cancel("not-a-timer")
        rig.host.default = "ok"
        await rig.timers.retry(rig.workflow_id("grace"))
        state = await rig.result("grace")
    assert state.status is Status.DELIVERED
    assert set(rig.host.request_ids) == {f"{commit['id']}:e0#1"}
    assert len(rig.host.requests) == 4
    # the operator's retry says so: it starts late by design and is not counted late
    assert [r.retried for r, _ in rig.host.requests] == [False, False, False, True]


async def test_a_newer_schedule_ends_a_parked_one(rig: Rig) -> None:
    rig.host.default = "fail"
    async with rig.worker():
        await rig.timers.apply(await rig.commit(1, schedule_set("grace", {"after": "PT1M"})))
        handle = rig.client.get_workflow_handle(rig.workflow_id("grace"))
        for _ in range(100):
            if (await handle.query(TimerWorkflow.state)).status is Status.PARKED:
                break
            await rig.env.sleep(timedelta(minutes=1))
        rig.host.default = "ok"
        newer = await rig.commit(2, schedule_set("grace", {"after": "PT1H"}))
        await rig.timers.apply(newer)
        state = await rig.result("grace")
    assert state.status is Status.DELIVERED
    assert rig.host.request_ids[-1] == f"{newer['id']}:e0#1"


async def delivered(handle: WorkflowHandle[Any, Any], count: int) -> TimerState:
    """The timer's state once it has recorded `count` deliveries' outcomes."""
    state: TimerState = await eventually(
        lambda: handle.query(TimerWorkflow.state),
        within=10,
        what=f"{count} delivered",
        interval=0.1,
        holds=lambda state: state.delivered >= count,
    )
    return state


@pytest.mark.parametrize(
    ("misfire", "expected"),
    [("COALESCE", "latest"), ("CATCH_UP", "each")],
)
async def test_cron_slots_missed_while_no_worker_ran(rig: Rig, misfire: str, expected: str) -> None:
    # The commit was made hours ago and nothing ran the timer since (it is handed over late):
    # five hourly slots are already due when it starts.
    now = await rig.now()
    created = now - timedelta(hours=5, minutes=30)
    commit = await rig.commit(
        1,
        schedule_set("hourly", {"cron": "0 0 * * * *", "zone": "UTC", "misfire": misfire}),
        created=created,
    )
    first_due = (created + timedelta(hours=1)).replace(minute=0, second=0, microsecond=0)
    due_by_now = sum(1 for h in range(8) if first_due + timedelta(hours=h) <= now)
    async with rig.worker():
        await rig.timers.apply(commit)
        handle = rig.client.get_workflow_handle(rig.workflow_id("hourly"))
        wanted = 1 if expected == "latest" else due_by_now
        state = await delivered(handle, wanted)
        await rig.timers.cancel(rig.workflow_id("hourly"))
    got = [(r.schedule.slot, r.schedule.skipped) for r, _ in rig.host.requests]
    if expected == "latest":
        assert got == [(due_by_now, due_by_now - 1)]
    else:
        assert got == [(slot, 0) for slot in range(1, due_by_now + 1)]
    for request, at in rig.host.requests:
        due = datetime.fromtimestamp(request.schedule.due / 1000, UTC)
        assert due == first_due + timedelta(hours=request.schedule.slot - 1)
        assert at >= due
        assert request.request_id == f"{commit['id']}:e0#{request.schedule.slot}"
    assert state.next_slot == due_by_now + 1
    assert state.next_due == first_due + timedelta(hours=due_by_now)


async def test_a_catch_up_past_the_cap_is_numbered_by_the_engine_and_marks_its_history(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With the cap at 2, five missed hourly slots coalesce into slot 3 (the engine's rule),
    # and the run records the patch that says so: a replay of a run without it (recorded
    # under 0.1.x) numbers as 0.1.x did, so it never sends a request id twice.
    monkeypatch.setattr(engine_slots, "MAX_MISSED_COUNTED", 2)
    now = await rig.now()
    created = now - timedelta(hours=5, minutes=30)
    commit = await rig.commit(
        1, schedule_set("capped", {"cron": "0 0 * * * *", "zone": "UTC"}), created=created
    )
    async with rig.worker():
        await rig.timers.apply(commit)
        handle = rig.client.get_workflow_handle(rig.workflow_id("capped"))
        await delivered(handle, 1)
        await rig.timers.cancel(rig.workflow_id("capped"))
    assert [(r.schedule.slot, r.schedule.skipped) for r, _ in rig.host.requests] == [(3, 2)]
    markers = [
        event.marker_recorded_event_attributes
        for event in (await handle.fetch_history()).events
        if event.HasField("marker_recorded_event_attributes")
    ]
    recorded = [str(m.details) for m in markers]
    assert any("wow-one-missed-cap" in text for text in recorded), recorded


async def test_cron_timer_continues_as_new_and_keeps_counting(rig: Rig) -> None:
    commit = Commit.parse(await rig.commit(1, schedule_set("tick", {"cron": "0 * * * * *"})))
    (item,) = changes_of(commit)
    assert isinstance(item, KeyChange)
    started = await rig.client.start_workflow(
        TimerWorkflow.run,
        # A small history budget, so that a few slots make it continue as new.
        TimerInput(state=core.initial(item.change), continue_as_new_after=40),
        id=rig.workflow_id("tick"),
        task_queue=rig.task_queue,
    )
    async with rig.worker():
        for _ in range(200):
            if len(rig.host.requests) >= 12:
                break
            await rig.env.sleep(timedelta(seconds=30))
        handle = rig.client.get_workflow_handle(rig.workflow_id("tick"))
        state = await handle.query(TimerWorkflow.state)
        description = await handle.describe()
        await rig.timers.cancel(rig.workflow_id("tick"))
    assert description.run_id != started.first_execution_run_id
    slots = [r.schedule.slot for r, _ in rig.host.requests]
    assert slots[:12] == list(range(1, 13))
    assert len(set(rig.host.request_ids)) == len(slots)
    assert state.next_slot == len(slots) + 1
