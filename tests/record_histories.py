"""Re-record the workflow histories that `tests/unit/test_replay.py` replays (by hand, not in CI):

    .venv/bin/python -m tests.record_histories            # every history
    .venv/bin/python -m tests.record_histories timer_cron job_ticks   # only these

Timers run on a fresh dev server (real worker, real delivery activity, the fake Wow host over
HTTP); jobs run under `schedule_spec` on the time-skipping test server (the real job workflow and
tick activity, virtual time). Each history is written as `tests/histories/<name>.json`
(`WorkflowHistory.to_json()`). Re-record only on purpose: a history recorded by today's code
replays by definition, so re-recording hides exactly the break the replay test is there to
catch. Keep the old file as well (under another name) when a change is patched or versioned.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from bench.harness.commits import commit as harness_commit
from bench.harness.commits import schedule_set as harness_schedule_set
from tests.helpers.eventually import eventually
from wow_temporal import (
    Command,
    JobScope,
    Misfire,
    NamedAggregate,
    SagaContext,
    ScheduleTick,
    on_schedule,
)
from wow_temporal.delivery import CommandSender
from wow_temporal.dev.server import EmbeddedTemporal
from wow_temporal.ids import deletion_record_id, job_workflow_id
from wow_temporal.jobs import core as job_core
from wow_temporal.jobs.core import HostRule, JobRule, RuleLayer
from wow_temporal.jobs.directory import TenantDirectory, directory_id
from wow_temporal.jobs.workflow import DISABLE, ENABLE, RESCHEDULE, RESET, JobInput, JobWorkflow
from wow_temporal.model import Commit
from wow_temporal.testing import ScheduleSpec, schedule_spec
from wow_temporal.testing.time_skipping import start_time_skipping
from wow_temporal.testing.wow_host import FakeWowHost
from wow_temporal.timers import core as timer_core
from wow_temporal.timers.changes import KeyChange, changes_of
from wow_temporal.timers.client import TimerClient
from wow_temporal.timers.core import Status, TimerState
from wow_temporal.timers.workflow import DeliverySettings, TimerInput, TimerWorkflow
from wow_temporal.worker import timer_worker

HISTORIES = Path(__file__).resolve().parent / "histories"

CONTEXT, AGGREGATE, TENANT = "eshop-order", "order", "t1"
FAST = DeliverySettings(
    max_attempts=2,
    initial_interval=timedelta(milliseconds=100),
    max_interval=timedelta(milliseconds=200),
)

Recorder = Callable[..., Awaitable[None]]
TIMER_CASES: dict[str, Recorder] = {}
JOB_CASES: dict[str, Recorder] = {}


def timer_case(function: Recorder) -> Recorder:
    TIMER_CASES[function.__name__.removeprefix("record_")] = function
    return function


def job_case(function: Recorder) -> Recorder:
    JOB_CASES[function.__name__.removeprefix("record_")] = function
    return function


async def save(name: str, handle: WorkflowHandle[Any, Any]) -> None:
    history = await handle.fetch_history()
    text = history.to_json()
    (HISTORIES / f"{name}.json").write_text(text + "\n")
    print(f"{name}.json: {len(history.events)} events, {len(text) / 1024:.1f} KB")


# --- timers: dev server, real worker and delivery activity, fake Wow host -------------------


class TimerRig:
    def __init__(self, client: Client, host: FakeWowHost, task_queue: str) -> None:
        self.client = client
        self.host = host
        self.task_queue = task_queue
        self.timers = TimerClient(client, task_queue=task_queue, delivery=FAST)
        self.undelayed = TimerClient(
            client, task_queue=task_queue, delivery=FAST, start_delay=False
        )

    def aggregate(self) -> str:
        return uuid.uuid4().hex[:8]

    def commit(self, aggregate_id: str, version: int, *events: dict[str, Any]) -> dict[str, Any]:
        commit_id, header = f"c{version}-{uuid.uuid4().hex[:8]}", {"trace_id": "trace-1"}
        built = harness_commit(
            aggregate_id, *events, version=version, commit_id=commit_id, header=header
        )
        return {**built, "ownerId": "owner-1", "spaceId": "space-1"}

    def handle(self, aggregate_id: str, key: str) -> WorkflowHandle[Any, TimerState]:
        workflow_id = f"wow-timer:{CONTEXT}.{AGGREGATE}:{TENANT}:{aggregate_id}:{key}"
        return self.client.get_workflow_handle(workflow_id, result_type=TimerState)

    def delivered(self, aggregate_id: str) -> int:
        return sum(1 for r in self.host.delivered() if r.aggregate_id == aggregate_id)

    async def status(self, handle: WorkflowHandle[Any, TimerState]) -> Status:
        state: TimerState = await handle.query(TimerWorkflow.state)
        return state.status


def schedule_set(key: str, rule: dict[str, Any]) -> dict[str, Any]:
    return harness_schedule_set(rule, key=key, body={"reason": "PAYMENT_TIMEOUT"})


@timer_case
async def record_timer_one_shot(rig: TimerRig) -> None:
    """A one-shot timer (after PT1S, started with a start delay) delivered once."""
    agg = rig.aggregate()
    await rig.timers.apply(rig.commit(agg, 1, schedule_set("grace", {"after": "PT1S"})))
    handle = rig.handle(agg, "grace")
    assert (await asyncio.wait_for(handle.result(), 30)).status is Status.DELIVERED
    await save("timer_one_shot", handle)


@timer_case
async def record_timer_cron(rig: TimerRig) -> None:
    """A cron timer (every second): four slots delivered, then cancelled by a commit."""
    agg = rig.aggregate()
    await rig.timers.apply(rig.commit(agg, 1, schedule_set("tick", {"cron": "* * * * * *"})))
    await rig.host.wait_for(lambda h: rig.delivered(agg) >= 4, timeout=30)
    await rig.timers.apply(rig.commit(agg, 2, {"name": "wow.ScheduleCancelled", "key": "tick"}))
    handle = rig.handle(agg, "tick")
    assert (await asyncio.wait_for(handle.result(), 30)).status is Status.CANCELLED
    await save("timer_cron", handle)


@timer_case
async def record_timer_replaced(rig: TimerRig) -> None:
    """A timer set (P1D), set again by a newer version (PT1S), delivered once; an older set
    arriving late is refused (the update's validator)."""
    agg = rig.aggregate()
    await rig.timers.apply(rig.commit(agg, 2, schedule_set("grace", {"after": "P1D"})))
    await rig.timers.apply(rig.commit(agg, 3, schedule_set("grace", {"after": "PT1S"})))
    await rig.timers.apply(rig.commit(agg, 1, schedule_set("grace", {"after": "PT1H"})))
    handle = rig.handle(agg, "grace")
    assert (await asyncio.wait_for(handle.result(), 30)).status is Status.DELIVERED
    await save("timer_replaced", handle)


@timer_case
async def record_timer_replaced_by_signal(rig: TimerRig) -> None:
    """As `timer_replaced`, with the changes handed over as `apply` signals (ingest no longer
    waits for a worker): replaced, then an older set ignored, noted in `last_change`."""
    agg = rig.aggregate()
    await rig.timers.apply(rig.commit(agg, 2, schedule_set("grace", {"after": "P1D"})))
    await rig.timers.apply(rig.commit(agg, 3, schedule_set("grace", {"after": "PT2S"})))
    await rig.timers.apply(rig.commit(agg, 1, schedule_set("grace", {"after": "PT1H"})))
    handle = rig.handle(agg, "grace")
    final = await asyncio.wait_for(handle.result(), 30)
    assert final.status is Status.DELIVERED and "ignored: stale" in final.last_change, final
    await save("timer_replaced_by_signal", handle)


@timer_case
async def record_timer_cancelled(rig: TimerRig) -> None:
    """A timer set (PT1H) and cancelled by a later commit's `wow.ScheduleCancelled`."""
    agg = rig.aggregate()
    await rig.timers.apply(rig.commit(agg, 1, schedule_set("grace", {"after": "PT1H"})))
    handle = rig.handle(agg, "grace")
    await rig.timers.apply(rig.commit(agg, 2, {"name": "wow.ScheduleCancelled", "key": "grace"}))
    assert (await asyncio.wait_for(handle.result(), 30)).status is Status.CANCELLED
    await save("timer_cancelled", handle)


@timer_case
async def record_timer_cancel_request(rig: TimerRig) -> None:
    """A sleeping timer (cron, started at once) ended by a Temporal cancel request (the Web
    UI's "Request Cancellation")."""
    agg = rig.aggregate()
    await rig.undelayed.apply(rig.commit(agg, 1, schedule_set("daily", {"cron": "0 0 6 * * *"})))
    handle = rig.handle(agg, "daily")
    await eventually(lambda: _started(handle), within=30, what="started")
    await handle.cancel()
    assert (await asyncio.wait_for(handle.result(), 30)).status is Status.CANCELLED
    await save("timer_cancel_request", handle)


@timer_case
async def record_timer_cancel_request_in_flight(rig: TimerRig) -> None:
    """A Temporal cancel request while slot 1 is at a slow host (3 s), then a newer set
    handed over before the attempt ends: the set stands and is delivered (patch
    `wow-cancel-in-force`; `timer_cancel_request_in_flight_before_patch` is the same case
    recorded before it, which cancelled the set)."""
    agg = rig.aggregate()
    first = rig.commit(agg, 1, schedule_set("grace", {"after": "PT1S"}))
    rig.host.behave("hang", request_id=f"{first['id']}:e0#1", delay=3)
    await rig.undelayed.apply(first)
    handle = rig.handle(agg, "grace")
    await rig.host.wait_for(lambda host: host.for_request_id(f"{first['id']}:e0#1"), 30)
    await handle.cancel()

    async def attempt_cancelled() -> bool:
        events = [event async for event in handle.fetch_history_events()]
        return any(e.HasField("activity_task_cancel_requested_event_attributes") for e in events)

    await eventually(attempt_cancelled, within=30, what="the attempt's cancel requested")
    await rig.undelayed.apply(rig.commit(agg, 9, schedule_set("grace", {"after": "PT1S"})))
    assert (await asyncio.wait_for(handle.result(), 30)).status is Status.DELIVERED
    await save("timer_cancel_request_in_flight", handle)


@timer_case
async def record_timer_cancel_request_in_settle(rig: TimerRig) -> None:
    """Slot 1 at a slow host (3 s); a newer set replaces it (the attempt is asked to stop and
    finishes its send); a Temporal cancel request while it settles, then a third set: the third
    stands and is delivered (patch `wow-cancel-in-settle`; `..._before_patch` is the same case
    recorded before it, which cancelled the third set)."""
    agg = rig.aggregate()
    first = rig.commit(agg, 1, schedule_set("grace", {"after": "PT1S"}))
    rig.host.behave("hang", request_id=f"{first['id']}:e0#1", delay=3)
    await rig.undelayed.apply(first)
    handle = rig.handle(agg, "grace")
    await rig.host.wait_for(lambda host: host.for_request_id(f"{first['id']}:e0#1"), 30)
    await rig.undelayed.apply(rig.commit(agg, 5, schedule_set("grace", {"after": "PT1H"})))

    async def has(field: str) -> bool:
        events = [event async for event in handle.fetch_history_events()]
        return any(e.HasField(field) for e in events)

    await eventually(
        lambda: has("activity_task_cancel_requested_event_attributes"), within=30, what="asked"
    )
    await handle.cancel()
    await eventually(
        lambda: has("workflow_execution_cancel_requested_event_attributes"), within=30, what="req"
    )
    await asyncio.sleep(0.5)  # the worker meets the request while the attempt settles
    await rig.undelayed.apply(rig.commit(agg, 9, schedule_set("grace", {"after": "PT1S"})))
    await asyncio.wait_for(handle.result(), 30)
    await save(os.environ.get("WOW_RECORD_AS", "timer_cancel_request_in_settle"), handle)


@timer_case
async def record_timer_parked_retried(rig: TimerRig) -> None:
    """The host fails twice (max-attempts 2): the slot is parked; an operator retries it and
    it is delivered, with the same request id."""
    agg = rig.aggregate()
    rig.host.behave("fail", command_type="eshop.order.Park", times=2)
    commit = rig.commit(agg, 1, schedule_set("grace", {"after": "PT1S"}))
    commit["body"][0]["body"]["command"]["type"] = "eshop.order.Park"
    await rig.timers.apply(commit)
    handle = rig.handle(agg, "grace")
    await eventually(lambda: _status_is(rig, handle, Status.PARKED), within=30, what="parked")
    await rig.timers.retry(handle.id)
    assert (await asyncio.wait_for(handle.result(), 30)).status is Status.DELIVERED
    await save("timer_parked_retried", handle)


@timer_case
async def record_timer_continued_as_new(rig: TimerRig) -> None:
    """A cron timer (every second) with a history budget of 40 events: its first run, which
    ends by continuing as new."""
    agg = rig.aggregate()
    commit = Commit.parse(rig.commit(agg, 1, schedule_set("tick", {"cron": "* * * * * *"})))
    (item,) = changes_of(commit)
    assert isinstance(item, KeyChange)
    handle = rig.handle(agg, "tick")
    started = await rig.client.start_workflow(
        TimerWorkflow.run,
        TimerInput(state=timer_core.initial(item.change), delivery=FAST, continue_as_new_after=40),
        id=handle.id,
        task_queue=rig.task_queue,
    )
    first = rig.client.get_workflow_handle(handle.id, run_id=started.result_run_id)

    async def continued() -> bool:
        return (await handle.describe()).run_id != started.result_run_id

    await eventually(continued, within=60, what="continued as new")
    await rig.timers.cancel(handle.id)
    await save("timer_continued_as_new", first)


@timer_case
async def record_deletion_record(rig: TimerRig) -> None:
    """An aggregate deleted (its pending timer cancelled, a deletion record kept), recovered and
    deleted again at a later version: the record's `deleted` update raises it."""
    agg = rig.aggregate()
    await rig.timers.apply(rig.commit(agg, 1, schedule_set("grace", {"after": "PT1H"})))
    await rig.timers.apply(rig.commit(agg, 2, {"name": "wow.AggregateDeleted"}))
    await rig.timers.apply(rig.commit(agg, 4, {"name": "wow.AggregateDeleted"}))
    await rig.timers.apply(rig.commit(agg, 3, {"name": "wow.AggregateDeleted"}))  # older: kept 4
    owner = Commit.parse(rig.commit(agg, 1)).aggregate
    record = await rig.timers.deletions.find(owner)
    assert record is not None and record.version == 4, record
    await save("deletion_record", rig.client.get_workflow_handle(deletion_record_id(owner)))


@timer_case
async def record_deletion_record_restarted(rig: TimerRig) -> None:
    """Deleted, recovered and deleted again: the later record is a new run that replaced the
    older one (no update waits for a worker); an older deletion after it keeps it."""
    agg = rig.aggregate()
    await rig.timers.apply(rig.commit(agg, 2, {"name": "wow.AggregateDeleted"}))
    await rig.timers.apply(rig.commit(agg, 4, {"name": "wow.AggregateDeleted"}))
    await rig.timers.apply(rig.commit(agg, 3, {"name": "wow.AggregateDeleted"}))
    owner = Commit.parse(rig.commit(agg, 1)).aggregate
    record = await rig.timers.deletions.find(owner)
    assert record is not None and record.version == 4, record
    handle = rig.client.get_workflow_handle(deletion_record_id(owner))
    await eventually(lambda: _started(handle), within=30, what="started")
    await save("deletion_record_restarted", handle)


async def _started(handle: WorkflowHandle[Any, Any]) -> bool:
    try:
        return (await handle.describe()).history_length > 3
    except Exception:
        return False


async def _status_is(rig: TimerRig, handle: WorkflowHandle[Any, TimerState], want: Status) -> bool:
    try:
        return await rig.status(handle) is want
    except Exception:
        return False


async def record_timers(names: set[str]) -> None:
    cases = {n: f for n, f in TIMER_CASES.items() if not names or n in names}
    if not cases:
        return
    with tempfile.TemporaryDirectory() as data, FakeWowHost() as host:
        server = EmbeddedTemporal(data, headless=True)
        await server.start()
        try:
            client = await server.connect()
            rig = TimerRig(client, host, f"record-{uuid.uuid4().hex[:8]}")
            async with CommandSender(host.url) as sender, timer_worker(
                client, sender, task_queue=rig.task_queue
            ):
                await asyncio.gather(*(case(rig) for case in cases.values()))
        finally:
            await server.stop()


# --- jobs: schedule_spec on the time-skipping server ------------------------------------------


class Count(BaseModel):
    n: int


class Jobs:
    """The jobs the job histories run; `failing` makes `flaky` raise."""

    def __init__(self, context: str) -> None:
        self.counter = NamedAggregate(context, "counter")
        self.failing = False

    @on_schedule(name="hourly", cron="0 0 * * * *")
    def hourly(self, tick: ScheduleTick, context: SagaContext) -> list[Command[Count]]:
        return [context.command(self.counter.ref(tick.tenant_id, "h"), Count(n=tick.slot))]

    @on_schedule(name="flaky", cron="0 0 6 * * *")
    def flaky(self, tick: ScheduleTick, context: SagaContext) -> list[Command[Count]]:
        if self.failing:
            raise ConnectionError("supplier feed down")
        return [context.command(self.counter.ref(tick.tenant_id, "f"), Count(n=tick.slot))]

    @on_schedule(name="per-tenant", cron="0 0 6 * * *", scope=JobScope.TENANT)
    def per_tenant(self, tick: ScheduleTick, context: SagaContext) -> list[Command[Count]]:
        return [context.command(self.counter.ref(tick.tenant_id, "t"), Count(n=tick.slot))]


START = datetime(2026, 6, 1, tzinfo=UTC)


def job_handle(
    spec: ScheduleSpec, name: str, tenant: str | None = None
) -> WorkflowHandle[Any, Any]:
    context = next(iter(spec.jobs.apps))
    return spec.client.get_workflow_handle(job_workflow_id(context, name, tenant=tenant))


@job_case
async def record_job_ticks(env: WorkflowEnvironment) -> None:
    """An hourly SYSTEM job enabled: four ticks handled, each deriving a command."""
    saga = Jobs("rec-ticks")
    async with schedule_spec([saga], context="rec-ticks", start=START, env=env) as spec:
        await spec.enable("hourly")
        await spec.advance_time(timedelta(hours=4))
        assert [t.slot for t in spec.ticks] == [1, 2, 3, 4]
        await save("job_ticks", job_handle(spec, "hourly"))


@job_case
async def record_job_misfire(env: WorkflowEnvironment) -> None:
    """An hourly COALESCE job enabled as of 5.5 hours ago (created by an enable that no worker
    ran at once): the first tick is slot 6 with 5 skipped; then one punctual tick."""
    saga = Jobs("rec-misfire")
    async with schedule_spec([saga], context="rec-misfire", start=START, env=env) as spec:
        job = spec.jobs.apps["rec-misfire"].jobs["hourly"]
        definition = job.definition
        state = job_core.initial(
            "rec-misfire", "hourly",
            JobRule(expression=definition.cron, zone=definition.zone, misfire=Misfire.COALESCE),
            scope=definition.scope, tenant="(0)", partition=None, processor=job.processor,
            host=RuleLayer(),
        )
        now = await spec.now()
        assert spec.jobs.task_queue is not None  # schedule_spec's own queue
        handle = await spec.client.start_workflow(
            JobWorkflow.run,
            JobInput(
                state=state, delivery=spec.jobs.delivery,
                clock_offset_ms=spec.jobs.clock_offset_ms,
                enabled_at=now - timedelta(hours=5, minutes=30),
            ),
            id="wow-job:rec-misfire:hourly",
            task_queue=spec.jobs.task_queue,
        )
        spec.started.add(handle.id)
        await spec.advance_time(timedelta(hours=1))
        assert [(t.slot, t.skipped) for t in spec.ticks] == [(6, 5), (7, 0)], spec.ticks
        await save("job_misfire", handle)


@job_case
async def record_job_reschedule(env: WorkflowEnvironment) -> None:
    """An hourly job ticks twice, is rescheduled to half past (update), ticks twice more; a
    reschedule signal with a bad payload is refused (shown, changes nothing)."""
    saga = Jobs("rec-resched")
    async with schedule_spec([saga], context="rec-resched", start=START, env=env) as spec:
        await spec.enable("hourly")
        await spec.advance_time(timedelta(hours=2))
        await spec.reschedule("hourly", expression="0 30 * * * *")
        handle = job_handle(spec, "hourly")
        await handle.signal(RESCHEDULE, {"expression": "not a cron"})
        await handle.signal(RESCHEDULE, "not an object")
        await spec.advance_time(timedelta(hours=2))
        assert [t.due_at.minute for t in spec.ticks] == [0, 0, 30, 30], spec.ticks
        await save("job_reschedule", handle)


@job_case
async def record_job_reset(env: WorkflowEnvironment) -> None:
    """An hourly job rescheduled (update) to half past in Tokyo; a reschedule's null removes
    its zone (signal); a reset of its expression (signal), then of all of it (update): the
    code's rule again, ticking on the hour."""
    saga = Jobs("rec-reset")
    async with schedule_spec([saga], context="rec-reset", start=START, env=env) as spec:
        await spec.enable("hourly")
        await spec.advance_time(timedelta(hours=1))
        await spec.reschedule("hourly", expression="0 30 * * * *", zone="Asia/Tokyo")
        handle = job_handle(spec, "hourly")
        await handle.signal(RESCHEDULE, {"zone": None})
        await spec.advance_time(timedelta(hours=1))
        await handle.signal(RESET, {"fields": ["expression"]})
        await handle.execute_update(RESET, {"fields": None})
        await spec.advance_time(timedelta(hours=2))
        assert [t.due_at.minute for t in spec.ticks] == [0, 30, 0, 0], spec.ticks
        await save("job_reset", handle)


@job_case
async def record_job_disable_enable(env: WorkflowEnvironment) -> None:
    """An hourly job: ticks, disabled (update), enabled (update), disabled and enabled again by
    signals (the second as of a sent `at`), ticking in between."""
    saga = Jobs("rec-toggle")
    async with schedule_spec([saga], context="rec-toggle", start=START, env=env) as spec:
        await spec.enable("hourly")
        await spec.advance_time(timedelta(hours=2))
        await spec.disable("hourly")
        await spec.advance_time(timedelta(hours=3))
        await spec.enable("hourly")
        await spec.advance_time(timedelta(hours=1))
        handle = job_handle(spec, "hourly")
        await handle.signal(DISABLE)
        await spec.advance_time(timedelta(hours=2))
        at = await spec.now()
        await handle.signal(ENABLE, {"at": int(at.timestamp() * 1000)})
        await spec.advance_time(timedelta(hours=1))
        assert len(spec.ticks) == 4, spec.ticks
        await save("job_disable_enable", handle)


@job_case
async def record_job_parked_retried(env: WorkflowEnvironment) -> None:
    """A daily job whose handler fails: the tick is parked after 3 attempts, three more days
    pass, an operator retries it: slot 1 handled, then slot 4 with 2 skipped (COALESCE)."""
    saga = Jobs("rec-parked")
    saga.failing = True
    async with schedule_spec([saga], context="rec-parked", start=START, env=env) as spec:
        await spec.enable("flaky")
        await spec.advance_time(timedelta(hours=6))
        assert (await spec.show("flaky")).status == "Parked"
        await spec.advance_time(timedelta(days=3))
        saga.failing = False
        await spec.retry("flaky")
        await spec.advance_time(timedelta(seconds=1))
        assert [(t.slot, t.skipped) for t in spec.ticks] == [(1, 0), (4, 2)], spec.ticks
        await save("job_parked_retried", job_handle(spec, "flaky"))


@job_case
async def record_job_continued_as_new(env: WorkflowEnvironment) -> None:
    """An hourly job with a history budget of 40 events: its first run, which continues as
    new after a few ticks."""
    saga = Jobs("rec-can")
    async with schedule_spec(
        [saga], context="rec-can", start=START, env=env, continue_as_new_after=40
    ) as spec:
        await spec.enable("hourly")
        handle = job_handle(spec, "hourly")
        first = (await handle.describe()).run_id
        await spec.advance_time(timedelta(hours=8))
        assert (await handle.describe()).run_id != first
        await save("job_continued_as_new", spec.client.get_workflow_handle(handle.id, run_id=first))


@job_case
async def record_job_tenants(env: WorkflowEnvironment) -> None:
    """The tenant directory of a TENANT job: started with t1's `add`, t2 added, t1 added again
    (no change), and the `host` update of a worker that brought every tenant to its override."""
    saga = Jobs("rec-tenants")
    async with schedule_spec([saga], context="rec-tenants", start=START, env=env) as spec:
        await spec.enable("per-tenant", tenant="t1")
        await spec.enable("per-tenant", tenant="t2")
        handle = spec.client.get_workflow_handle(directory_id("rec-tenants", "per-tenant"))
        await handle.signal("add", "t1")
        await handle.execute_update(
            "host", HostRule(layer=RuleLayer(expression="0 0 7 * * *")),
            result_type=TenantDirectory,
        )
        await spec.advance_time(timedelta(hours=7))
        await save("job_tenants", handle)
        spec.started.add(handle.id)


async def record_jobs(names: set[str]) -> None:
    cases = {n: f for n, f in JOB_CASES.items() if not names or n in names}
    if not cases:
        return
    env = await start_time_skipping()
    try:
        for case in cases.values():  # one at a time: each moves the shared virtual clock
            await case(env)
    finally:
        await env.shutdown()


async def main(names: set[str]) -> None:
    unknown = names - TIMER_CASES.keys() - JOB_CASES.keys()
    if unknown:
        known = ", ".join([*TIMER_CASES, *JOB_CASES])
        raise SystemExit(f"unknown histories {sorted(unknown)}; known: {known}")
    HISTORIES.mkdir(exist_ok=True)
    await record_timers(names)
    await record_jobs(names)


if __name__ == "__main__":
    asyncio.run(main(set(sys.argv[1:])))
