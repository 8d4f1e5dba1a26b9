"""Proof that a workflow will send nothing more on its own, to replace "sleep, then assert
nothing arrived" (which passes trivially on a slow machine): no activity in flight, no timer
running, no workflow task to run. What it does next then needs an operator, a signal or an
update."""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus, WorkflowHandle

_OPENS_TIMER = {EventType.EVENT_TYPE_TIMER_STARTED}
_CLOSES_TIMER = {EventType.EVENT_TYPE_TIMER_FIRED, EventType.EVENT_TYPE_TIMER_CANCELED}
_TASK_PENDING = {
    EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
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
    deadline = asyncio.get_running_loop().time() + within
    while (why := await _why_not(handle)) is not None:
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{handle.id} not quiescent in {within:g}s: {why}")
        await asyncio.sleep(0.1)
