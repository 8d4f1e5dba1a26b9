"""Recurring jobs under faults, on the session dev server: a real `wow-temporal worker --app`
process SIGKILLed mid-tick and while slots come due, signals sent by the real Temporal CLI,
and a disable while a tick is sending to a slow host.

The apps are in tests/apps/jobs_app.py, with contexts of this run's own (`JOBS_TEST_CONTEXT`), so
their task queues and instance ids meet nothing else on the shared server. The worker
processes also poll the timers' default task queue; nothing here schedules a timer.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus

from tests.apps import jobs_app
from tests.helpers.builders import fast_delivery
from tests.helpers.eventually import eventually
from tests.helpers.quiescent import attempts, quiescent
from tests.helpers.worker_process import WorkerProcess
from tests.helpers.wow_host import wow_host
from wow_temporal.delivery import CommandSender
from wow_temporal.dev.binaries import find_temporal_cli
from wow_temporal.dev.server import EmbeddedTemporal
from wow_temporal.domain.app import App
from wow_temporal.ids import job_workflow_id
from wow_temporal.jobs.client import JobClient
from wow_temporal.jobs.core import JobState
from wow_temporal.jobs.workflow import DISABLE, RESCHEDULE
from wow_temporal.search_attributes import SA_STATUS
from wow_temporal.testing.wow_host import Arrival, FakeWowHost
from wow_temporal.worker import job_worker

pytestmark = pytest.mark.asyncio(loop_scope="session")

__all__ = ["wow_host"]  # the shared host's fixture, used by the tests here

FAST = fast_delivery(3, heartbeat_timeout=timedelta(seconds=2))


def now_ms() -> int:
    return int(time.time() * 1000)


def index_of(request: Arrival) -> int:
    """The command's index in its tick: `{workflow id}#{slot}:{index}`."""
    return int(request.request_id.rsplit(":", 1)[1])


def decided(request: Arrival) -> bool:
    """Decided by the host for the first time (`hang` answers Ok, late)."""
    return request.behaviour in ("ok", "hang")


def fresh_slow_app() -> App:
    """The slow job in a context of its own (an in-process worker runs it)."""
    context = f"{jobs_app.CONTEXT}-slow-{uuid.uuid4().hex[:6]}"
    return App(context, sagas=[jobs_app.SlowSaga(context)])


def jobs_worker(server: EmbeddedTemporal, host_url: str, app: str, log: Path) -> WorkerProcess:
    """`wow-temporal worker --app tests.apps.jobs_app:<app>`, up once it has brought its instances
    to its settings."""
    return WorkerProcess(
        server, host_url, log, "--app", f"tests.apps.jobs_app:{app}",
        ready=b"job worker for", env={"JOBS_TEST_CONTEXT": jobs_app.CONTEXT},
    )


async def terminate_all(client: Client, app: App) -> None:
    async for execution in client.list_workflows(
        f"WorkflowId STARTS_WITH 'wow-job:{app.context}:'"
    ):
        with contextlib.suppress(Exception):
            await client.get_workflow_handle(execution.id).terminate("test over")


@contextlib.asynccontextmanager
async def cleaned(client: Client, app: App, *workers: WorkerProcess) -> AsyncIterator[None]:
    """Kill the worker processes and terminate the app's instances, whatever happens."""
    try:
        yield
    finally:
        for worker in workers:
            await worker.stop()
        await terminate_all(client, app)


async def state_of(client: Client, workflow_id: str) -> JobState:
    state: JobState = await client.get_workflow_handle(workflow_id).query(
        "state", result_type=JobState
    )
    return state


async def wait_state(
    client: Client, workflow_id: str, predicate: Callable[[JobState], bool]
) -> JobState:
    state: JobState = await eventually(
        lambda: state_of(client, workflow_id), within=10, what="state", holds=predicate
    )
    return state


async def recorded_progress(client: Client, workflow_id: str) -> dict[str, Any] | None:
    """The heartbeat details the server holds for the instance's running tick, if any."""
    description = await client.get_workflow_handle(workflow_id).describe()
    for pending in description.raw_description.pending_activities:
        if pending.heartbeat_details.payloads:
            (details,) = await client.data_converter.decode(pending.heartbeat_details.payloads)
            return dict(details)
    return None


def cron_at(instant: datetime) -> str:
    """A six-field cron that matches that one second of the year (UTC)."""
    return f"{instant.second} {instant.minute} {instant.hour} {instant.day} {instant.month} *"


# --- 1. a worker killed mid-tick ----------------------------------------------------------------


async def test_a_worker_killed_mid_tick_of_2000_commands_resumes_and_each_is_decided_once(
    dev_server: EmbeddedTemporal, dev_client: Client, wow_host: FakeWowHost,
    tmp_path: Path,
) -> None:
    app = jobs_app.bulk
    workflow_id = job_workflow_id(app.context, "bulk")
    count = jobs_app.BULK_COMMANDS
    ids = [f"{workflow_id}#1:{i}" for i in range(count)]
    # The host takes its time over command 400 (then answers Ok), so the worker is killed
    # while that request is in flight, some hundreds decided and the rest not sent.
    hang_at = 400
    wow_host.behave("hang", request_id=ids[hang_at], times=1, delay=30)
    jobs = JobClient(dev_client, app)
    worker = jobs_worker(dev_server, wow_host.url, "bulk", tmp_path / "worker.log")
    async with cleaned(dev_client, app, worker):
        await worker.start()
        state = await state_of(dev_client, workflow_id)
        assert state.enabled and state.next_slot == 1, "the worker's start enables it"
        # One slot in the test: the rule matches one second of the year, two seconds on.
        due = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
        await jobs.reschedule(app.context, "bulk", {"expression": cron_at(due)})
        await eventually(
            lambda: wow_host.for_request_id(ids[hang_at]), within=15, what="command 400 sent"
        )
        # Kill it once the server holds its progress (heartbeats are sent throttled).
        progress = await eventually(
            lambda: recorded_progress(dev_client, workflow_id), within=10, what="progress",
            holds=lambda progress: progress is not None and progress["sent"] >= 300,
        )
        at_kill = wow_host.requests
        await worker.kill()  # reaped (it asserts the SIGKILL): it sends nothing more
        assert 300 <= len(at_kill) < count
        await worker.start()  # a new process

        def all_decided(host: FakeWowHost) -> bool:
            return sum(decided(r) for r in host.requests) >= count

        await eventually(
            lambda: all_decided(wow_host), within=45, what="every command decided"
        )
        state = await wait_state(
            dev_client, workflow_id, lambda s: any(r.slot == 1 for r in s.recent)
        )
        disabled = await jobs.disable(app.context, "bulk")
        assert disabled.status == "Disabled"

    requests = wow_host.requests
    assert {r.request_id for r in requests} == set(ids), "a request of another slot"
    firsts = [r for r in requests if decided(r)]
    assert sorted(r.request_id for r in firsts) == sorted(ids), "not decided exactly once"
    assert all(r.behaviour == "duplicate" for r in requests if not decided(r))
    assert len({r.aggregate_id for r in firsts}) == count
    assert all(r.received_ms >= int(due.timestamp() * 1000) for r in requests), "sent early"
    # The new attempt resumed after the progress the server held, in order, none skipped
    # (and nothing else came after the kill: a late request would show here).
    resumed = [index_of(r) for r in requests[len(at_kill):]]
    assert resumed == list(range(progress["sent"], count)), resumed[:20]
    (record,) = [r for r in state.recent if r.slot == 1]
    assert (record.outcome, record.commands, record.delivered, record.rejected) == (
        "handled", count, count, 0,
    )
    assert state.handled == 1 and state.commands == count and state.next_slot == 2
    print(
        f"\nbulk: {len(at_kill)} requests before the kill, progress held {progress}, "
        f"{len(requests)} in all"
    )


# --- 2. misfire policies across a stopped worker ----------------------------------------------


def ticks_of(requests: list[Arrival], job: str) -> list[Arrival]:
    return [r for r in requests if isinstance(r.body, dict) and r.body.get("job") == job]


async def test_misfire_policies_across_a_killed_worker_skip_exactly_and_never_reset(
    dev_server: EmbeddedTemporal, dev_client: Client, wow_host: FakeWowHost,
    tmp_path: Path,
) -> None:
    app = jobs_app.misfire
    jobs = JobClient(dev_client, app)
    worker = jobs_worker(dev_server, wow_host.url, "misfire", tmp_path / "worker.log")
    async with cleaned(dev_client, app, worker):
        await worker.start()

        def two_each(host: FakeWowHost) -> bool:
            oks = [r for r in host.requests if decided(r)]
            return len(ticks_of(oks, "coalesce")) >= 2 and len(ticks_of(oks, "catch-up")) >= 2

        await eventually(lambda: two_each(wow_host), within=15, what="two slots of each job")
        await worker.kill()
        killed_ms = now_ms()
        at_kill = len(wow_host.requests)
        # Slots come due meanwhile: real time must pass (the misfire policies are what this
        # test is about); that nothing arrived meanwhile is read from the whole record below.
        await asyncio.sleep(max(0.0, (killed_ms + 4000 - now_ms()) / 1000))
        restarted_ms = now_ms()
        await worker.start()

        def caught_up(host: FakeWowHost) -> bool:
            oks = [r for r in host.requests if decided(r)]
            later = [r for r in ticks_of(oks, "coalesce") if r.body["due"] > killed_ms]
            dues = [r.body["due"] for r in ticks_of(oks, "catch-up")]
            return len(later) >= 2 and max(dues) >= restarted_ms + 1000

        await eventually(
            lambda: caught_up(wow_host), within=25, what="both jobs past the restart"
        )
        for name in ("coalesce", "catch-up"):
            assert (await jobs.disable(app.context, name)).status == "Disabled"
        states = {
            name: await state_of(dev_client, job_workflow_id(app.context, name))
            for name in ("coalesce", "catch-up")
        }

    requests = wow_host.requests
    assert all(r.received_ms >= restarted_ms for r in requests[at_kill:]), "sent by no worker"
    for request in requests:
        assert request.received_ms >= request.body["due"], f"{request.request_id} early"
        assert request.message_header("schedule_slot") == str(request.body["slot"])
    for name in ("coalesce", "catch-up"):
        all_of = ticks_of(requests, name)
        oks = [r for r in all_of if decided(r)]
        slots = [r.body["slot"] for r in oks]
        assert slots == sorted(set(slots)), f"{name}: a slot twice or out of order: {slots}"
        assert slots[0] == 1
        # A repeat only for a tick in flight at the kill, answered as a duplicate.
        repeats = [r for r in all_of if not decided(r)]
        assert all(r.behaviour == "duplicate" for r in repeats)
        assert len({r.request_id for r in repeats}) <= 1, (name, repeats)
        before = [r.body["slot"] for r in oks if r.body["due"] <= killed_ms]
        after = [r.body["slot"] for r in oks if r.body["due"] > killed_ms]
        assert before and after and min(after) > max(before), (name, slots)  # never reset
        state = states[name]
        assert state.next_slot == slots[-1] + 1 and state.handled == len(oks)

    coalesce = [r for r in ticks_of(requests, "coalesce") if decided(r)]
    for earlier, later in itertools.pairwise(coalesce):
        gap_s, rest = divmod(later.body["due"] - earlier.body["due"], 1000)
        assert rest == 0
        assert later.body["skipped"] == later.body["slot"] - earlier.body["slot"] - 1 == gap_s - 1
    first = next(i for i, r in enumerate(coalesce) if r.body["due"] > killed_ms)
    resumed, previous = coalesce[first].body, coalesce[first - 1].body
    # The first tick after the restart is the latest due second when the new worker ran it:
    # none of the seconds between the kill and the restart, all of them counted as skipped.
    assert resumed["due"] >= restarted_ms // 1000 * 1000, (resumed, restarted_ms)
    assert resumed["skipped"] >= 3, resumed
    assert resumed["skipped"] == (resumed["due"] - previous["due"]) // 1000 - 1

    catch_up = [r.body for r in ticks_of(requests, "catch-up") if decided(r)]
    assert [t["slot"] for t in catch_up] == list(range(1, len(catch_up) + 1))
    assert all(t["skipped"] == 0 for t in catch_up)
    assert [t["due"] for t in catch_up] == [
        catch_up[0]["due"] + 1000 * i for i in range(len(catch_up))
    ]
    missed = [t for t in catch_up if killed_ms < t["due"] <= restarted_ms]
    assert len(missed) >= 3, "the slots due while no worker ran were not caught up"
    print(
        f"\nmisfire: coalesce resumed at slot {resumed['slot']} skipping {resumed['skipped']}; "
        f"catch-up ran {len(missed)} missed slots"
    )


# --- 3. signals from the Temporal CLI -----------------------------------------------------------


async def temporal_cli(server: EmbeddedTemporal, *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        str(find_temporal_cli()),
        *args,
        "--address",
        server.address,
        "--namespace",
        server.namespace,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, (args, out.decode(), err.decode())
    return out.decode()


async def cli_signal(
    server: EmbeddedTemporal, workflow_id: str, name: str, payload: str | None = None
) -> None:
    args = ["workflow", "signal", "--workflow-id", workflow_id, "--name", name]
    if payload is not None:
        args += ["--input", payload]
    await temporal_cli(server, *args)


async def test_signals_from_the_temporal_cli_apply_or_are_refused_and_shown(
    dev_server: EmbeddedTemporal, dev_client: Client, wow_host: FakeWowHost
) -> None:
    app = jobs_app.signals
    workflow_id = job_workflow_id(app.context, "signalled")
    jobs = JobClient(dev_client, app, delivery=FAST)
    async with (
        CommandSender(wow_host.url) as sender,
        job_worker(dev_client, app, sender),
        cleaned(dev_client, app),
    ):
        assert (await jobs.enable(app.context, "signalled")).status == "Enabled"
        await cli_signal(dev_server, workflow_id, RESCHEDULE, '{"expression": "*/2 * * * * *"}')
        state = await wait_state(
            dev_client, workflow_id, lambda s: s.rule.expression == "*/2 * * * * *"
        )
        assert state.source("expression") == "operator" and state.source("zone") == "code"
        assert state.notices == ()
        shown = await jobs.show(app.context, "signalled")
        assert shown.sources["expression"] == "operator"
        assert all(due.second % 2 == 0 for due in shown.next_due)

        refusals = []
        for payload, words in [
            ('{"expression": "0 0 25 * * *"}', "hour"),
            ('{"zone": "Mars/Olympus"}', "Mars/Olympus"),
            ('"hello"', "one JSON object"),
            ('{"misfire": "SOMETIMES"}', "misfire"),
            (None, "one JSON object"),
        ]:
            seen = state.notices
            await cli_signal(dev_server, workflow_id, RESCHEDULE, payload)
            state = await wait_state(
                dev_client, workflow_id, lambda s, seen=seen: s.notices != seen
            )
            notice = state.notices[-1]
            assert notice.startswith(f"{RESCHEDULE} signal refused:"), notice
            assert words in notice, (payload, notice)
            refusals.append(notice)
            rule = state.rule
            assert (rule.expression, rule.zone, rule.misfire.value) == (
                "*/2 * * * * *", "UTC", "COALESCE",
            ), payload
            assert state.enabled
        assert list(state.notices) == refusals
        # The Web UI's current details show them (`temporal workflow metadata` reads them).
        metadata = json.loads(
            await temporal_cli(
                dev_server, "workflow", "metadata", "--workflow-id", workflow_id, "-o", "json"
            )
        )
        (answer,) = metadata["queryResult"]
        current = answer["currentDetails"]
        assert "rule `*/2 * * * * *` (operator)" in current, current
        for notice in refusals:
            assert f"notice: {notice}" in current, (notice, current)

        await cli_signal(dev_server, workflow_id, DISABLE)
        state = await wait_state(dev_client, workflow_id, lambda s: not s.enabled)
        assert state.status.value == "Disabled"
        assert state.rule.expression == "*/2 * * * * *"

        handle = dev_client.get_workflow_handle(workflow_id)
        description = await handle.describe()
        assert description.status == WorkflowExecutionStatus.RUNNING

        async def shown_disabled() -> bool:
            attributes = (await handle.describe()).typed_search_attributes
            return attributes.get(SA_STATUS) == "Disabled"

        await eventually(shown_disabled, within=5, what="WowStatus Disabled")
        events = [event async for event in handle.fetch_history_events()]
        failed = [
            e for e in events
            if e.event_type in (
                EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED,
                EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT,
            )
        ]
        assert not failed, failed
        signals = [
            e for e in events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
        ]
        assert len(signals) == 7
        # Not stuck: an update is answered by the workflow (no note: not the signal fallback).
        again = await jobs.enable(app.context, "signalled")
        assert again.status == "Enabled" and again.note is None


# --- 4. disable while a tick is sending ---------------------------------------------------------


@pytest.mark.parametrize(
    "how",
    [
        "slow-host",  # each command answered after 250 ms
        "sleeping-handler",  # the handler sleeps 3 s before it returns its commands
        "send-past-the-heartbeat-timeout",  # one command answered after 4 s, past the 2 s
    ],
)
async def test_disable_is_in_force_when_it_answers_no_command_after(
    dev_client: Client, wow_host: FakeWowHost, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    app = fresh_slow_app()  # ids of their own: a terminated instance's slots carry on
    workflow_id = job_workflow_id(app.context, "slow")
    jobs = JobClient(dev_client, app, delivery=FAST)
    if how == "slow-host":
        wow_host.behave("hang", delay=0.25)
    elif how == "sleeping-handler":
        monkeypatch.setenv("JOBS_TEST_SLEEP", "3")  # read by the handler, in this process
    else:
        wow_host.behave("hang", delay=4, times=1)
    handle = dev_client.get_workflow_handle(workflow_id)

    async with (
        CommandSender(wow_host.url) as sender,
        job_worker(dev_client, app, sender),
        cleaned(dev_client, app),
    ):
        await jobs.enable(app.context, "slow")
        if how == "sleeping-handler":  # it heartbeats while the handler runs
            await eventually(
                lambda: recorded_progress(dev_client, workflow_id), within=10, what="the handler"
            )
            assert wow_host.requests == [], "disabled after the handler returned"
        elif how == "slow-host":
            await eventually(
                lambda: len(wow_host.requests) >= 3, within=10, what="the tick sending"
            )
        else:
            await eventually(
                lambda: wow_host.requests, within=10, what="the first command sent"
            )
        disabled = await jobs.disable(app.context, "slow")
        answered_ms = now_ms()
        assert disabled.status == "Disabled" and disabled.note is None, disabled
        at_answer = len(wow_host.requests)
        # The tick's attempt has ended (it reports its cancel only once its code has returned)
        # and the disabled instance starts nothing more: nothing can be sent after this.
        await quiescent(handle)
        late = wow_host.requests[at_answer:]
        assert not late, f"{len(late)} commands sent after the disable answered"
        state = await state_of(dev_client, workflow_id)
        pending = (await handle.describe()).raw_description.pending_activities

    requests = wow_host.requests
    assert all(r.received_ms <= answered_ms for r in requests)
    assert {r.message_header("schedule_slot") for r in requests} <= {"1"}
    assert len(requests) < jobs_app.SLOW_COMMANDS
    assert not state.enabled and state.pending is None and not pending, state
    (record,) = state.recent
    assert (record.slot, record.outcome) == (1, "interrupted"), record
    print(f"\ndisable ({how}): {len(requests)} commands sent before the disable answered")


async def test_a_send_slower_than_the_heartbeat_timeout_is_not_sent_again_alongside(
    dev_client: Client, wow_host: FakeWowHost
) -> None:
    """No fault but a slow answer (4 s, within the sender's 10 s timeout, past the 2 s
    heartbeat timeout): the tick goes on in one attempt, each command sent once."""
    app = fresh_slow_app()  # ids of their own: a terminated instance's slots carry on
    workflow_id = job_workflow_id(app.context, "slow")
    jobs = JobClient(dev_client, app, delivery=FAST)
    wow_host.behave("hang", request_id=f"{workflow_id}#1:0", delay=4, times=1)

    def slot_1() -> list[Arrival]:
        return [r for r in wow_host.requests if r.message_header("schedule_slot") == "1"]

    async with (
        CommandSender(wow_host.url) as sender,
        job_worker(dev_client, app, sender),
        cleaned(dev_client, app),
    ):
        await jobs.enable(app.context, "slow")
        await eventually(
            lambda: sum(decided(r) for r in slot_1()) >= jobs_app.SLOW_COMMANDS,
            within=20,
            what="every command of slot 1 decided",
        )
        state = await wait_state(
            dev_client, workflow_id, lambda s: any(r.slot == 1 for r in s.recent)
        )
        await jobs.disable(app.context, "slow")
        # Slot 1's tick took one attempt: no stale one was sending alongside, or can still send.
        assert (await attempts(dev_client.get_workflow_handle(workflow_id)))[:1] == [1]
        requests = slot_1()

    repeated = [(r.request_id, r.behaviour) for r in requests if not decided(r)]
    assert not repeated, f"{len(repeated)} commands sent twice, e.g. {repeated[:3]}"
    assert [index_of(r) for r in requests] == list(range(jobs_app.SLOW_COMMANDS))
    (record,) = [r for r in state.recent if r.slot == 1]
    assert (record.outcome, record.commands, record.delivered) == ("handled", 100, 100)
