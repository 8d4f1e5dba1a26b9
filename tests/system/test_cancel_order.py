"""Cancels are ordered with ingest where they are made (#36, points 4 and 5): a Temporal cancel
request, or an operator's cancel, cancels the schedule in force when it was made, never a set
handed over after it, whether a delivery is in flight or no worker runs the timer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    Client,
    Interceptor,
    OutboundInterceptor,
    StartWorkflowUpdateInput,
    WorkflowExecutionStatus,
)

from tests.helpers.builders import fast_delivery
from tests.helpers.eventually import eventually
from tests.helpers.timer_rig import MAX_ATTEMPTS, Rig, request_id, rig, schedule_set
from tests.helpers.wow_host import wow_host
from wow_temporal.timers.client import TimerClient
from wow_temporal.timers.core import Status

pytestmark = pytest.mark.asyncio(loop_scope="session")

__all__ = ["rig", "wow_host"]  # the fixtures, used by every test here

MINUTE_AGO_MS = int((time.time() - 60) * 1000)  # a set made then is due at once


async def _events(rig: Rig, key: str) -> list[Any]:
    return [event async for event in rig.handle(key).fetch_history_events()]


async def test_a_temporal_cancel_request_during_a_delivery_spares_a_set_handed_over_after_it(
    rig: Rig,
) -> None:
    """The request lands while slot 1 is at a slow host; a newer set is handed over after the
    worker has met the request, while the attempt still runs: the newer set stands."""
    timers = TimerClient(  # an attempt the test ends itself (by resetting the host), not a clock
        rig.client,
        task_queue=rig.task_queue,
        delivery=fast_delivery(MAX_ATTEMPTS, attempt_timeout=timedelta(seconds=60)),
    )
    first = rig.commit(1, schedule_set("grace", {"after": "PT1S"}), created_ms=MINUTE_AGO_MS)
    rig.host.behave("hang", request_id=request_id(first), delay=60)
    async with rig.worker():
        await timers.apply(first)
        await rig.host.wait_for(lambda host: host.for_request_id(request_id(first)))
        await rig.handle("grace").cancel()
        # The worker has met the request: it asked the attempt to stop (it finishes its send).
        await eventually(
            lambda: _events(rig, "grace"),
            within=10,
            what="the attempt's cancel requested",
            holds=lambda events: any(
                e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED for e in events
            ),
        )
        later = rig.commit(9, schedule_set("grace", {"after": "PT1S"}), created_ms=MINUTE_AGO_MS)
        (answer,) = await timers.apply(later)
        assert answer.outcome == "handed-over"
        await eventually(  # the worker has applied it too, with the attempt still running
            lambda: timers.show(rig.workflow_id("grace")),
            within=10,
            what="the set applied",
            holds=lambda info: info.state is not None and info.state.applied == (9, 0),
        )
        assert [r.request_id for r in rig.host.requests] == [request_id(first)]
        rig.host.reset()  # the slow host answers now: the attempt ends
        state = await rig.result("grace", within=10)
    assert state.status is Status.DELIVERED, state
    assert [r.request_id for r in rig.host.requests] == [request_id(later)]
    assert state.delivered == 2  # the first slot's late Ok counted, then the newer set's


async def _cancel_signalled(rig: Rig, key: str) -> bool:
    return any(
        e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
        and e.workflow_execution_signaled_event_attributes.signal_name == "cancel"
        for e in await _events(rig, key)
    )


async def test_an_operators_cancel_waiting_for_a_worker_spares_a_set_handed_over_meanwhile(
    rig: Rig,
) -> None:
    """The click, then a newer set while the cancel still waits for a worker's answer: the
    cancel is in the timer's history at once, ahead of the set, and ends only the schedule in
    force at the click; the worker that then comes answers the cancel and delivers the set."""
    timers = TimerClient(rig.client, task_queue=rig.task_queue, answer_timeout=timedelta(seconds=8))
    first = rig.commit(1, schedule_set("grace", {"after": "PT1H"}))
    await timers.apply(first)
    cancelling = asyncio.create_task(timers.cancel(rig.workflow_id("grace")))
    try:  # ordered at the click: in the history well before the wait for a worker ends
        ordered = await eventually(
            lambda: _cancel_signalled(rig, "grace"), within=3, what="the cancel in the history"
        )
    except AssertionError:
        ordered = False  # today's code: only after the wait; the set goes ahead as it would
    later = rig.commit(9, schedule_set("grace", {"after": "PT1S"}), created_ms=MINUTE_AGO_MS)
    (answer,) = await timers.apply(later)
    assert answer.outcome == "handed-over"
    assert not cancelling.done(), "still waiting for a worker's answer"
    async with rig.worker():
        answered = await cancelling
        state = await rig.result("grace", within=10)
    assert state.status is Status.DELIVERED, state
    assert [r.request_id for r in rig.host.requests] == [request_id(later)]
    assert state.last_outcome.startswith("slot 1 delivered")
    assert answered.last_outcome == "cancelled by operator", "answered once a worker ran it"
    assert ordered


class _UpdateAfterClose(Interceptor):
    """Holds each update until its workflow's run has closed: the worker ends the timer on the
    cancel signal before the update of the same cancel reaches the server; `then` runs
    before the update goes on (a newer set handed over meanwhile)."""

    def __init__(self, client: Client, then: Callable[[], Awaitable[None]] | None = None) -> None:
        self.client = client
        self.then = then

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        return _HeldUpdates(next, self.client, self.then)


class _HeldUpdates(OutboundInterceptor):
    def __init__(
        self,
        next: OutboundInterceptor,
        client: Client,
        then: Callable[[], Awaitable[None]] | None,
    ) -> None:
        super().__init__(next)
        self.client = client
        self.then = then

    async def start_workflow_update(self, input: StartWorkflowUpdateInput) -> Any:
        handle = self.client.get_workflow_handle(input.id, run_id=input.run_id)

        async def closed() -> bool:
            return (await handle.describe()).status != WorkflowExecutionStatus.RUNNING

        await eventually(closed, within=5, what="the timer closed before the update")
        if self.then is not None:
            await self.then()
        return await self.next.start_workflow_update(input)


async def test_an_operators_cancel_that_ends_the_timer_before_its_update_comes_answers(
    rig: Rig,
) -> None:
    """The signal goes first: a worker may end the timer on it before the update of the same
    cancel comes, which the server then refuses; the answer is the state the timer ended in."""
    config = rig.client.config()
    config["interceptors"] = [_UpdateAfterClose(rig.client)]
    held = TimerClient(Client(**config), task_queue=rig.task_queue, start_delay=False)
    await held.apply(rig.commit(1, schedule_set("grace", {"after": "PT1H"})))
    async with rig.worker():
        answered = await held.cancel(rig.workflow_id("grace"))
    assert answered.status is Status.CANCELLED
    assert answered.last_outcome == "cancelled by operator"
    assert rig.host.requests == []


async def test_an_operators_cancel_never_reaches_a_run_a_newer_set_started_after_it(
    rig: Rig,
) -> None:
    """The cancel's signal ends the run the operator saw; a newer set then starts a new run of
    the key before the update of the same cancel comes: the update is for the run the operator
    saw, so the newer set stands (found by review: it cancelled the newer run)."""
    plain = TimerClient(rig.client, task_queue=rig.task_queue, start_delay=False)
    newer = rig.commit(9, schedule_set("grace", {"after": "PT1H"}))

    async def hand_over_newer() -> None:
        (answer,) = await plain.apply(newer)
        assert answer.outcome == "started", answer

    config = rig.client.config()
    config["interceptors"] = [_UpdateAfterClose(rig.client, hand_over_newer)]
    held = TimerClient(Client(**config), task_queue=rig.task_queue, start_delay=False)
    await held.apply(rig.commit(1, schedule_set("grace", {"after": "PT1H"})))
    async with rig.worker():
        answered = await held.cancel(rig.workflow_id("grace"))
        assert (answered.status, answered.applied) == (Status.CANCELLED, (1, 0))
        shown = await plain.show(rig.workflow_id("grace"))
    assert shown.running and shown.status == "Scheduled", shown
    assert shown.state is not None and shown.state.applied == (9, 0)


async def test_a_temporal_cancel_request_while_a_replaced_attempt_settles_spares_a_later_set(
    rig: Rig,
) -> None:
    """Slot 1 is at a slow host; a newer set replaces it (the attempt is asked to stop and
    finishes its send); the cancel request comes while it settles, then a third set: the
    request cancels the second, in force when it came, and the third stands (found by review)."""
    timers = TimerClient(
        rig.client,
        task_queue=rig.task_queue,
        delivery=fast_delivery(MAX_ATTEMPTS, attempt_timeout=timedelta(seconds=60)),
    )
    first = rig.commit(1, schedule_set("grace", {"after": "PT1S"}), created_ms=MINUTE_AGO_MS)
    rig.host.behave("hang", request_id=request_id(first), delay=60)

    def after(kind: EventType.ValueType) -> Callable[[list[Any]], bool]:
        return lambda events: any(e.event_type == kind for e in events)

    async with rig.worker():
        await timers.apply(first)
        await rig.host.wait_for(lambda host: host.for_request_id(request_id(first)))
        await timers.apply(rig.commit(5, schedule_set("grace", {"after": "PT1H"})))
        await eventually(
            lambda: _events(rig, "grace"),
            within=10,
            what="the replaced attempt asked to stop",
            holds=after(EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED),
        )
        await rig.handle("grace").cancel()

        def met(events: list[Any]) -> bool:  # a workflow task completed after the request
            kinds = [e.event_type for e in events]
            asked = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED
            done = EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
            return asked in kinds and done in kinds[kinds.index(asked) :]

        await eventually(lambda: _events(rig, "grace"), within=10, what="met", holds=met)
        third = rig.commit(9, schedule_set("grace", {"after": "PT1S"}), created_ms=MINUTE_AGO_MS)
        await timers.apply(third)
        await eventually(
            lambda: timers.show(rig.workflow_id("grace")),
            within=10,
            what="the third set applied",
            holds=lambda info: info.state is not None and info.state.applied == (9, 0),
        )
        rig.host.reset()  # the slow host answers: the replaced attempt settles
        state = await rig.result("grace", within=15)
    assert state.status is Status.DELIVERED, state
    assert request_id(third) in [r.request_id for r in rig.host.requests]
