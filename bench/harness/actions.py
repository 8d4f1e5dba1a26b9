"""Temporal Cloud's billable actions (docs.temporal.io/cloud/actions), read from a workflow's
histories event by event: what `bench.timers` and `bench.jobs` count a command or a tick at."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

__all__ = ["BILLED", "billed", "by_kind", "history", "total"]

BILLED: dict[EventType.ValueType, str] = {
    # a workflow started, by a client, a Schedule, or continue-as-new (the new run's first event)
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED: "start",
    # a timer started, `wait_condition(timeout=…)`'s implicit one included
    EventType.EVENT_TYPE_TIMER_STARTED: "timer",
    # an activity started (its retries: `ActivityTaskStarted.attempt` - 1, below)
    EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED: "activity",
    # each `UpsertWorkflowSearchAttributes` command (attributes given at start are free)
    EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES: "upsert",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED: "signal",
    # an update received by the worker, accepted or rejected by its validator
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED: "update",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_REJECTED: "update",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_OPTIONS_UPDATED: "options",
    # local activities / mutable side effects (one per workflow task, really); none here
    EventType.EVENT_TYPE_MARKER_RECORDED: "marker",
    # a child workflow: two actions (its start and its execution)
    EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED: "child",
}
"""One action each. Not counted from histories because they leave no event: queries, activity
heartbeats that reach the server (the SDK sends the first at once, then throttles), a
Schedule's own start. Workflow tasks, timers firing and activities completing are free."""


def billed(events: Iterable[HistoryEvent]) -> list[tuple[int, str]]:
    """(index, kind) of each billable action in a history (two for a child, retries apart)."""
    found: list[tuple[int, str]] = []
    for index, event in enumerate(events):
        kind = BILLED.get(event.event_type)
        if kind is not None:
            found.extend([(index, kind)] * (2 if kind == "child" else 1))
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            retries = event.activity_task_started_event_attributes.attempt - 1
            found.extend([(index, "retry")] * max(retries, 0))
    return found


def by_kind(events: Iterable[HistoryEvent]) -> dict[str, int]:
    """A history's actions by kind, and `slots`: its activities that completed (not billed)."""
    events = list(events)
    counts = Counter(kind for _, kind in billed(events))
    done = EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
    slots = sum(e.event_type == done for e in events)
    return dict(counts) | ({"slots": slots} if slots else {})


def total(counts: dict[str, int]) -> int:
    """The actions of `by_kind`'s counts (`slots` are not)."""
    return sum(v for k, v in counts.items() if k != "slots")


async def history(client: Client, workflow_id: str) -> list[HistoryEvent]:
    """Every run of `workflow_id`, oldest first (following continue-as-new back)."""
    runs: list[list[HistoryEvent]] = []
    run_id: str | None = None
    while True:
        handle = client.get_workflow_handle(workflow_id, run_id=run_id)
        events = [e async for e in handle.fetch_history_events()]
        runs.append(events)
        run_id = events[0].workflow_execution_started_event_attributes.continued_execution_run_id
        if not run_id:
            return [e for run in reversed(runs) for e in run]
