"""The log's last word wins however far the relay lags (issue #36): on the dev server, with a
real HTTP host, a timer already in Temporal that falls due after its key was cancelled, set anew
or its aggregate deleted in the log, but before the relay handed that change over, is refused by
the host (the target's guard), and its command never runs. A change committed after the due
time does not refuse it: the slot was owed."""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio import workflow
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from tests.apps.reminders import KEY, REMINDER, reminders_app
from tests.helpers.eshop_stack import EshopStack, new_tenant, timer_result
from tests.helpers.eventually import eventually
from wow_temporal.host import aside as relay_aside
from wow_temporal.ids import timer_workflow_id
from wow_temporal.model import AggregateRef, Commit
from wow_temporal.timers.client import TimerClient
from wow_temporal.timers.core import Status

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.timeout(90)]

ARM = "reminders.Arm"
REARM = "reminders.Rearm"
DISARM = "reminders.Disarm"
DELETE = "wow.DeleteAggregate"
DUE_MS = 5_000
"""How long after arming a reminder rings: far more than the arming and disarming take."""


@pytest_asyncio.fixture(loop_scope="session")
async def stack(dev_client: Client, tmp_path: Path) -> AsyncIterator[EshopStack]:
    async with EshopStack(
        dev_client, tmp_path / "domain.db", grace=timedelta(minutes=5), apps=[reminders_app]
    ) as started:
        yield started


async def arm(stack: EshopStack, refs: list[AggregateRef], after_ms: int = DUE_MS) -> None:
    """Arm each reminder and wait until the relay has started its timer in Temporal."""
    for ref in refs:
        answer = await stack.send(ARM, ref, {"millis": after_ms})
        assert answer.ok, answer

    def started() -> bool:
        handed = {commit.aggregate_id for commit, _ in stack.timers.handed}
        return all(ref.aggregate_id in handed for ref in refs)

    await eventually(started, within=20, what="the relay starts the timers", interval=0.05)


async def commits(stack: EshopStack, ref: AggregateRef) -> list[Commit]:
    data = await stack.read(ref)
    assert data is not None
    return [Commit.model_validate(commit) for commit in data["commits"]]


async def stopped_before_due(stack: EshopStack, ref: AggregateRef) -> bool:
    """Whether the reminder's log changed its first schedule before it was due (the test's own
    oracle: on a box slow enough to take `DUE_MS` between arming and disarming, it was owed)."""
    armed, changed = (await commits(stack, ref))[:2]
    return changed.create_time < armed.create_time + DUE_MS


async def rang(stack: EshopStack, ref: AggregateRef) -> int:
    data = await stack.read(ref)
    assert data is not None
    return sum(
        1 for commit in data["commits"] for event in commit["body"]
        if event["name"] == "reminders.Rang"
    )


async def test_reminders_disarmed_while_the_relay_is_cut_off_never_ring(
    stack: EshopStack, dev_client: Client
) -> None:
    """The user's trial: armed, handed over, the host's connection to Temporal cut, each
    disarmed before due, reconnected after: none rings (on main, 10 of 10 rang)."""
    tenant = new_tenant()
    refs = [REMINDER.ref(tenant, f"r-{n}") for n in range(10)]
    await arm(stack, refs)
    stack.timers.cut = ConnectionError("the host lost its connection to Temporal")
    try:
        for ref in refs:
            answer = await stack.send(DISARM, ref)
            assert answer.ok, answer
        states = await asyncio.gather(
            *(timer_result(dev_client, timer_workflow_id(ref, KEY)) for ref in refs)
        )
    finally:
        stack.timers.cut = None
    before = [await stopped_before_due(stack, ref) for ref in refs]
    for state, stopped, ref in zip(states, before, refs, strict=True):
        if stopped:  # disarmed before it was due (on a slow box one may not be: then owed)
            assert state.status is Status.REJECTED, state
            assert "the log no longer held this slot" in state.last_outcome, state.last_outcome
            assert "cancelled key ring" in state.last_outcome
        assert await rang(stack, ref) == (0 if stopped else 1)


async def test_a_deletion_or_a_new_set_in_the_log_stops_the_older_slot(
    stack: EshopStack, dev_client: Client
) -> None:
    tenant = new_tenant()
    deleted, reset = REMINDER.ref(tenant, "deleted"), REMINDER.ref(tenant, "reset")
    await arm(stack, [deleted, reset])
    stack.timers.cut = ConnectionError("the host lost its connection to Temporal")
    try:
        assert (await stack.send(DELETE, deleted)).ok
        assert (await stack.send(REARM, reset, {"millis": 60 * 60_000})).ok
        first = await timer_result(dev_client, timer_workflow_id(deleted, KEY))
        second = await timer_result(dev_client, timer_workflow_id(reset, KEY))
    finally:
        stack.timers.cut = None
    if await stopped_before_due(stack, deleted):
        assert first.status is Status.REJECTED and f"deleted {deleted}" in first.last_outcome
    if await stopped_before_due(stack, reset):
        assert second.status is Status.REJECTED and "set key ring anew" in second.last_outcome
        assert await rang(stack, reset) == 0


async def test_a_change_committed_after_the_due_time_does_not_refuse_the_slot(
    stack: EshopStack, dev_client: Client
) -> None:
    """With no worker to deliver, the slot falls due; the disarm comes after: it was owed."""
    tenant = new_tenant()
    ref = REMINDER.ref(tenant, "late")
    async with stack.workers_paused():
        await arm(stack, [ref], after_ms=300)
        stack.timers.cut = ConnectionError("the host lost its connection to Temporal")
        await asyncio.sleep(0.5)  # past due: no worker runs
        assert (await stack.send(DISARM, ref)).ok
    try:
        state = await timer_result(dev_client, timer_workflow_id(ref, KEY))
    finally:
        stack.timers.cut = None
    assert state.status is Status.DELIVERED, state
    assert await rang(stack, ref) == 1


async def test_a_backlog_posted_one_commit_a_request_delivers_nothing_its_log_stopped(
    stack: EshopStack, dev_client: Client
) -> None:
    """A host that hands its backlog over one commit a request (as a host in another language
    posting to `POST /commits` may): each past-due set starts and falls due at once, before its
    cancel arrives in the next request; the host's guard refuses it (on main, 11 of 20 rang)."""
    tenant = new_tenant()
    refs = [REMINDER.ref(tenant, f"f-{n}") for n in range(20)]
    stack.timers.cut = ConnectionError("this host hands its log over by hand")
    try:
        for ref in refs:
            assert (await stack.send(ARM, ref, {"millis": 2_000})).ok
            assert (await stack.send(DISARM, ref)).ok
        log = [await commits(stack, ref) for ref in refs]
        await asyncio.sleep(max(c[0].create_time for c in log) / 1000 + 2.1 - time.time())
        for set_commit, disarm_commit in log:  # every set is past due now
            await stack.timers.timers.apply(set_commit)
            await stack.timers.timers.apply(disarm_commit)
        states = await asyncio.gather(
            *(timer_result(dev_client, timer_workflow_id(ref, KEY)) for ref in refs)
        )
    finally:
        stack.timers.cut = None
    assert {state.status for state in states} <= {Status.REJECTED, Status.CANCELLED}
    assert [await rang(stack, ref) for ref in refs] == [0] * len(refs)


# --- one key that cannot be handed over is set aside, the rest goes on -------------------------


@workflow.defn(name="not-a-timer")
class NotATimer:
    """A run under a timer's id whose result no version of the timers can read."""

    @workflow.run
    async def run(self) -> str:
        return "not a timer's state"


async def test_a_key_the_timers_cannot_take_is_set_aside_and_the_rest_goes_on(
    stack: EshopStack, dev_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On main the relay retried the whole batch forever: no reminder of any aggregate rang."""
    monkeypatch.setattr(relay_aside, "BACKOFF_S", (0.3,))  # retried soon after the operator's fix
    tenant = new_tenant()
    poisoned = REMINDER.ref(tenant, "poisoned")
    poison_id = timer_workflow_id(poisoned, KEY)
    queue = f"poison-{uuid.uuid4().hex[:8]}"
    runner = UnsandboxedWorkflowRunner()
    async with Worker(dev_client, task_queue=queue, workflows=[NotATimer], workflow_runner=runner):
        await dev_client.execute_workflow(NotATimer.run, id=poison_id, task_queue=queue)
    others = [REMINDER.ref(tenant, f"o-{n}") for n in range(5)]
    assert (await stack.send(ARM, poisoned, {"millis": 500})).ok
    for ref in others:
        assert (await stack.send(ARM, ref, {"millis": 500})).ok

    async def aside() -> list[dict[str, Any]]:
        return list((await stack.followers())["relay"]["setAside"])

    shown = await eventually(aside, within=20, what="the poisoned key set aside", holds=bool)
    assert [(a["aggregateId"], a["commits"]) for a in shown] == [("poisoned", 1)]
    assert shown[0]["reason"] and shown[0]["attempts"] >= 1
    for ref in others:  # the rest of the log went on
        state = await timer_result(dev_client, timer_workflow_id(ref, KEY))
        assert state.status is Status.DELIVERED
    assert (await stack.send(DISARM, others[0])).ok  # and goes on after it
    (disarmed,) = [
        c for c in await commits(stack, others[0]) if c.body[0].name == "reminders.Disarmed"
    ]
    await eventually(
        lambda: disarmed.id in [c.id for c, _ in stack.timers.handed],
        within=10,
        what="a later commit of another aggregate handed over",
    )
    assert await rang(stack, poisoned) == 0
    again = await eventually(aside, within=10, what="retried", holds=lambda a: a[0]["attempts"] > 1)
    assert again[0]["commits"] == 1  # still waiting, on its own (a restart hands it over again)


# --- two processes handing one key over: a stale start is refused at the target ---------------


class _ReadsThenWaits(TimerClient):
    """Ingest in this process that, having read a key's closed run, waits until a newer run of
    the key has started and ended (another process's hand-over) before it starts its own."""

    async def _last_run(self, workflow_id: str) -> Any:
        read = await super()._last_run(workflow_id)
        before = (await self.client.get_workflow_handle(workflow_id).describe()).run_id

        async def newer_ended() -> bool:
            found = await self.client.get_workflow_handle(workflow_id).describe()
            return found.run_id != before and found.status != WorkflowExecutionStatus.RUNNING

        await eventually(newer_ended, within=30, what="the other process's hand-over")
        return read


async def test_a_stale_set_two_processes_start_after_a_newer_cancel_never_rings(
    stack: EshopStack, dev_client: Client, tmp_path: Path
) -> None:
    """Temporal has no conditional start after a closed run, so two processes can interleave:
    this one reads the key's closed run, `wow-temporal apply` in another process hands the
    newer cancel over (a run that starts and ends), then this one starts the stale set. The
    stale run's slot reaches the host, which refuses it: its log holds the cancel (on main, it
    rang)."""
    tenant = new_tenant()
    ref = REMINDER.ref(tenant, "two")
    await arm(stack, [ref], after_ms=200)
    await timer_result(dev_client, timer_workflow_id(ref, KEY))  # rang: the key's run closed
    stack.timers.cut = ConnectionError("this host hands its log over by hand")
    try:
        assert (await stack.send(REARM, ref, {"millis": 3_000})).ok
        assert (await stack.send(DISARM, ref)).ok
        stale, newer = (await commits(stack, ref))[-2:]
        path = tmp_path / "cancel.json"
        path.write_text(newer.model_dump_json(by_alias=True))
        slow = _ReadsThenWaits(dev_client, task_queue=stack.task_queue)
        starting = asyncio.create_task(slow.apply(stale))
        env = {
            **os.environ,
            "TEMPORAL_ADDRESS": dev_client.service_client.config.target_host,
            "TEMPORAL_NAMESPACE": dev_client.namespace,
            "WOW_TIMERS_TASK_QUEUE": stack.task_queue,
        }
        other = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "wow_temporal.cli", "apply", str(path), env=env
        )
        assert await asyncio.wait_for(other.wait(), 60) == 0
        (answer,) = await starting
        assert answer.outcome == "started", answer  # the stale start happened
        state = await timer_result(
            dev_client, timer_workflow_id(ref, KEY), until=lambda s: s.applied[0] == stale.version
        )
    finally:
        stack.timers.cut = None
    assert state.status is Status.REJECTED, state
    assert f"commit {newer.id} (version {newer.version}" in state.last_outcome
    assert await rang(stack, ref) == 1
