"""A run's history as the clients read it: the few events timers and jobs fold (their start, what
was handed to them, a cancel request, a finished task, an activity scheduled), with payloads
decoded by the client's own converter. One reader, so no client parses history events itself."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

from temporalio.api.common.v1 import Payload
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

__all__ = ["Entry", "Kind", "decoded", "entries"]

Kind = Literal["started", "signal", "update", "cancel_requested", "task_completed", "activity"]

T = TypeVar("T")


@dataclass(frozen=True)
class Entry:
    """One event a client folds: its kind, the signal's, update's or activity's name, and its
    input still encoded (decode it with `decoded`)."""

    kind: Kind
    name: str = ""
    payloads: Sequence[Payload] = ()

    @property
    def handed(self) -> bool:
        """A signal or an accepted update: something handed to the workflow by a client."""
        return self.kind in ("signal", "update")


async def entries(
    client: Client, workflow_id: str, run_id: str | None = None
) -> AsyncIterator[Entry]:
    """The entries of the run's history in order (the latest run's without `run_id`); the
    events no client folds are passed over. A missing run raises the server's `RPCError`."""
    handle = client.get_workflow_handle(workflow_id, run_id=run_id)
    async for event in handle.fetch_history_events():
        entry = _entry(event)
        if entry is not None:
            yield entry


async def decoded(client: Client, payloads: Sequence[Payload], type_: type[T]) -> T:
    """The one value `payloads` hold, as `type_`, by the client's data converter; whatever it
    cannot read raises (the caller decides what an unreadable input means)."""
    (value,) = await client.data_converter.decode(payloads, [type_])
    if not isinstance(value, type_):
        raise TypeError(f"expected {type_.__name__}, read {type(value).__name__}")
    return value


def _entry(event: HistoryEvent) -> Entry | None:
    if event.HasField("workflow_execution_started_event_attributes"):
        started = event.workflow_execution_started_event_attributes
        return Entry("started", started.workflow_type.name, started.input.payloads)
    if event.HasField("workflow_execution_signaled_event_attributes"):
        signal = event.workflow_execution_signaled_event_attributes
        return Entry("signal", signal.signal_name, signal.input.payloads)
    if event.HasField("workflow_execution_update_accepted_event_attributes"):
        update = event.workflow_execution_update_accepted_event_attributes.accepted_request.input
        return Entry("update", update.name, update.args.payloads)
    if event.HasField("workflow_execution_cancel_requested_event_attributes"):
        return Entry("cancel_requested")
    if event.HasField("workflow_task_completed_event_attributes"):
        return Entry("task_completed")
    if event.HasField("activity_task_scheduled_event_attributes"):
        activity = event.activity_task_scheduled_event_attributes
        return Entry("activity", activity.activity_type.name, activity.input.payloads)
    return None
