"""Proofs from workflow history, to replace "sleep, then assert nothing arrived" (which passes
trivially on a slow machine): `quiescent` (the workflow can start nothing more by itself: no
activity in flight, no timer running, no workflow task to run), `attempts` (no activity was
retried, so no stale attempt can still act) and `first_task_ended` (a worker ran it)."""

from __future__ import annotations

from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import WorkflowExecutionStatus, WorkflowHandle

from tests.helpers.eventually import eventually

_OPENS_TIMER = {EventType.EVENT_TYPE_TIMER_STARTED}
_CLOSES_TIMER = {EventType.EVENT_TYPE_TIMER_FIRED, EventType.EVENT_TYPE_TIMER_CANCELED}
_TASK_PENDING = {
    EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
}
_TASK_ENDED = {
    EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT,
}


async def _why_not(handle: WorkflowHandle[Any, Any]) -> str | None:
    description = await handle.describe()
    if description.status != WorkflowExecutionStatus.RUNNING:
        return None  # closed: it can start nothing (an attempt in flight was waited for)
    if description.raw_description.pending_activities:
        return "an activity is in flight"
    events = [e async for e in handle.fetch_history_events()]
    timers = 0
    for event in events:
        timers += event.event_type in _OPENS_TIMER
        timers -= event.event_type in _CLOSES_TIMER
    if timers:
        return "a timer is running"
    if events and events[-1].event_type in _TASK_PENDING:
        return "a workflow task is pending"
    return None


async def quiescent(handle: WorkflowHandle[Any, Any], *, within: float = 60.0) -> None:
    """Wait until `handle`'s workflow can do nothing more by itself (closed, or running with
    no activity, timer or workflow task outstanding); AssertionError after `within` s."""
    await eventually(
        lambda: _why_not(handle),
        within=within,
        what=f"{handle.id} quiescent",
        interval=0.1,
        holds=lambda why: why is None,
    )


async def attempts(handle: WorkflowHandle[Any, Any]) -> list[int]:
    """The attempts each activity in `handle`'s history took, in the order they were scheduled
    (0: never started). One each, in a closed workflow: none was retried alongside a stale
    attempt, so nothing of it can still send."""
    taken: dict[int, int] = {}
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            taken[event.event_id] = 0
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            started = event.activity_task_started_event_attributes
            taken[started.scheduled_event_id] = started.attempt
    return list(taken.values())


async def first_task_ended(
    handle: WorkflowHandle[Any, Any], *, within: float = 30.0
) -> list[HistoryEvent]:
    """The history once a worker has run the workflow's first task (completed, failed or
    timed out): what it made of it, without sleeping for it."""

    async def history() -> list[HistoryEvent]:
        return [e async for e in handle.fetch_history_events()]

    events: list[HistoryEvent] = await eventually(
        history,
        within=within,
        what=f"{handle.id}'s first workflow task ended",
        holds=lambda events: any(e.event_type in _TASK_ENDED for e in events),
    )
    return events
