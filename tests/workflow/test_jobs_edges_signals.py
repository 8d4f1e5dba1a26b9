"""Bad input at the job edges, on the time-skipping server: a signal of no such name is refused
and changes nothing; reset and a reschedule's null, as updates and as signals (the rest of the
edges: tests/unit/test_jobs_edges.py)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment

from tests.helpers.eventually import eventually
from wow_temporal import App, Command, SagaContext, ScheduleTick, on_schedule
from wow_temporal.delivery import DeliveryOutcome, DeliveryRequest
from wow_temporal.ids import job_workflow_id
from wow_temporal.jobs import core as job_core
from wow_temporal.jobs.core import JobRule, JobState, RuleLayer
from wow_temporal.jobs.workflow import (
    DISABLE,
    ENABLE,
    JOB_WORKFLOW,
    RESCHEDULE,
    RESET,
    RETRY,
    JobInput,
)
from wow_temporal.model import Misfire
from wow_temporal.worker import job_worker


class _NoHost:
    """A sink for an instance that must not tick: any send fails the test."""

    async def send(self, request: DeliveryRequest) -> DeliveryOutcome:
        raise AssertionError(f"nothing should be sent, got {request.request_id}")


class _Hourly:
    """A SYSTEM job due every hour; the test instance never reaches its first due time."""

    def __init__(self, context: str) -> None:
        self.context = context

    @on_schedule(name="hourly", cron="0 0 * * * *")
    def hourly(self, tick: ScheduleTick, context: SagaContext) -> list[Command[Any]]:
        return []


@pytest.mark.asyncio(loop_scope="session")
async def test_an_unknown_signal_is_logged_and_shown_and_wakes_nothing(
    time_skipping_env: WorkflowEnvironment, caplog: pytest.LogCaptureFixture
) -> None:
    """`wow.schedule.bogus` sent to an instance: refused under its notices and in the log, the
    rule and slots unchanged, and no command after it (a history recorded before the handler
    existed, with the signal left unhandled, replays the same)."""
    client = time_skipping_env.client
    context = f"unknown-{uuid.uuid4().hex[:6]}"
    app = App(context, sagas=[_Hourly(context)])
    queue = f"{context}-jobs"
    workflow_id = job_workflow_id(context, "hourly")
    state = job_core.initial(context, "hourly", JobRule(expression="0 0 * * * *"))
    async with job_worker(client, app, _NoHost(), task_queue=queue):
        handle = await client.start_workflow(
            JOB_WORKFLOW,
            JobInput(state=state, enabled_at=await time_skipping_env.get_current_time()),
            id=workflow_id,
            task_queue=queue,
        )
        before = await handle.query("state", result_type=JobState)  # a task ran: it sleeps
        assert before.enabled and before.notices == ()
        with caplog.at_level(logging.WARNING, logger="temporalio.workflow"):
            await handle.signal("wow.schedule.bogus", {"expression": "* * * * * *"})
            after = await _state_when(handle, lambda s: s.notices != ())
        (notice,) = after.notices
        assert notice.startswith("wow.schedule.bogus signal refused: no such signal"), notice
        assert f"{ENABLE}, {DISABLE}, {RESCHEDULE}" in notice
        assert after.model_copy(update={"notices": ()}) == before, (before, after)
        assert after.cursor is not None
        assert f"notice: {notice}" in job_core.details(after, after.cursor)
        assert any("wow.schedule.bogus" in record.getMessage() for record in caplog.records)
        events = [event async for event in handle.fetch_history_events()]
        signalled = next(
            i for i, e in enumerate(events)
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
        )
        tasks = {
            EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
            EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
            EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
        }
        assert [e.event_type for e in events[signalled + 1 :]] and all(
            e.event_type in tasks for e in events[signalled + 1 :]
        ), [EventType.Name(e.event_type) for e in events[signalled + 1 :]]
        await handle.terminate("test over")


@pytest.mark.asyncio(loop_scope="session")
async def test_reset_and_a_null_remove_the_instances_own_rule_as_updates_and_signals(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    """`wow.schedule.reset` (all, or `fields`) and a reschedule's null remove the instance's
    own fields, the host's then in force; a reset with nothing to remove answers the same
    state; bad input is refused (update) or shown under the notices (signal)."""
    client = time_skipping_env.client
    context = f"reset-{uuid.uuid4().hex[:6]}"
    app = App(context, sagas=[_Hourly(context)])
    queue = f"{context}-jobs"
    state = job_core.initial(
        context, "hourly", JobRule(expression="0 0 * * * *"),
        host=RuleLayer(expression="0 30 * * * *"),
    )
    async with job_worker(client, app, _NoHost(), task_queue=queue):
        handle = await client.start_workflow(
            JOB_WORKFLOW,
            JobInput(state=state, enabled_at=await time_skipping_env.get_current_time()),
            id=job_workflow_id(context, "hourly"),
            task_queue=queue,
        )

        async def update(name: str, *args: Any) -> JobState:
            answer: JobState = await handle.execute_update(
                name, args=list(args), result_type=JobState
            )
            return answer

        pinned = await update(RESCHEDULE, {"expression": "0 15 * * * *", "zone": "Asia/Tokyo"})
        assert pinned.own == RuleLayer(expression="0 15 * * * *", zone="Asia/Tokyo")
        assert job_core.shadowed(pinned) and pinned.rule.expression == "0 15 * * * *"
        unpinned = await update(RESCHEDULE, {"expression": None, "misfire": "catch_up"})
        assert unpinned.own == RuleLayer(zone="Asia/Tokyo", misfire=Misfire.CATCH_UP)
        assert unpinned.rule.expression == "0 30 * * * *"
        assert unpinned.source("expression") == "host"
        some = await update(RESET, {"fields": ["zone"]})
        assert some.own == RuleLayer(misfire=Misfire.CATCH_UP)
        bare = await update(RESET)
        assert bare.own == RuleLayer() and bare.rule == JobRule(expression="0 30 * * * *")
        assert (await update(RESET)) == bare, "nothing to remove: answered, unchanged"
        for name, args, words in [
            (RESET, [{"fields": ["expresion"]}], "no rule field 'expresion'"),
            (RESCHEDULE, [{"expression": "0 0 0 30 2 *"}], "never fires"),
            (RESCHEDULE, [{}], "at least one"),
            (RETRY, [], "only a parked instance can be retried"),
        ]:
            with pytest.raises(WorkflowUpdateFailedError) as refused:
                await update(name, *args)
            assert words in str(refused.value.cause), (name, refused.value.cause)

        await handle.signal(RESCHEDULE, {"expression": "0 45 * * * *", "zone": "UTC"})
        await _state_when(handle, lambda s: s.own.zone == "UTC")
        await handle.signal(RESCHEDULE, {"zone": None})
        signalled = await _state_when(handle, lambda s: s.own.zone is None)
        assert signalled.own == RuleLayer(expression="0 45 * * * *")
        await handle.signal(RESET, {"fields": "zone"})
        await handle.signal(RESET)
        after = await _state_when(handle, lambda s: s.own == RuleLayer())
        assert after.rule == JobRule(expression="0 30 * * * *")
        assert any(n.startswith(f"{RESET} signal refused: fields: a list") for n in after.notices)
        await handle.terminate("test over")


async def _state_when(
    handle: WorkflowHandle[Any, Any], ready: Callable[[JobState], bool]
) -> JobState:
    """Query the instance's state until `ready` (a signal is applied by a later task)."""
    state: JobState = await eventually(
        lambda: handle.query("state", result_type=JobState), within=10, what="the state",
        holds=ready,
    )
    return state
