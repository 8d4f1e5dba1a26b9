"""Update, or signal when no worker takes the update: how the timer and job clients change a
running workflow.

An update answers with the state it made, but only while a worker runs the workflow; a signal
is kept by the server and applied, in order, when one does. A change that must not be lost for
want of a worker is therefore sent as an update first and as the signal of the same name when
no worker accepts the update in time.

An update takes its place in the workflow's history only when a worker accepts it, after
whatever was signalled meanwhile; a signal takes it at once. A change that must be ordered
with what others send from the moment it is made (an operator's cancel, against the schedule
changes ingest hands over) is therefore sent as the signal first, and the update of the same
name, which the workflow takes as the same change (by an id in both), only fetches the answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any, TypeVar

from temporalio.client import (
    WorkflowHandle,
    WorkflowUpdateRPCTimeoutOrCancelledError,
    WorkflowUpdateStage,
)
from temporalio.service import RPCError, RPCStatusCode

from wow_temporal.errors import WowTemporalError

__all__ = ["NotAccepted", "NotAnswered", "SentAsSignal", "update_or_signal"]

T = TypeVar("T")


class SentAsSignal:
    """No worker accepted the update in time: it went as the signal of the same name.

    `closed`: the signal went first, and the workflow had closed when the update came (the
    signal may have closed it): its result tells what it did."""

    def __init__(self, *, closed: bool = False) -> None:
        self.closed = closed


class NotAccepted(WowTemporalError):
    """No worker accepted the update in time, and it has no signal to fall back on."""


class NotAnswered(WowTemporalError):
    """A worker accepted the update but did not answer it in time (it is still applied)."""


async def update_or_signal(
    handle: WorkflowHandle[Any, Any],
    name: str,
    args: Sequence[Any],
    *,
    result_type: type[T],
    accept_within: timedelta,
    answer_within: timedelta,
    signal: Sequence[Any] | None,
    signal_first: bool = False,
) -> T | SentAsSignal:
    """Run update `name` with `args` and return its answer.

    With no worker accepting it within `accept_within`, send the signal `name` with `signal`
    as its arguments and return `SentAsSignal` (or raise `NotAccepted` when `signal` is None).
    Once accepted, wait up to `answer_within` for the answer, then raise `NotAnswered`.
    `WorkflowUpdateFailedError` (the workflow refused it) passes through.

    With `signal_first`, the signal is sent before the update, so the change is in the
    workflow's history at once (the workflow must take the update as the same change again:
    a no-op but for its answer); `SentAsSignal` then says no worker accepted the update in
    time, and the signal waits for one, or (`closed`) that the workflow closed, maybe on the
    signal, before the update came. A signal the server refuses (`RPCError`: the workflow
    has closed) passes through, as the update's refusal does without `signal_first`.
    """
    if signal_first:
        if signal is None:
            raise ValueError("signal_first needs the signal's arguments")
        await handle.signal(name, args=list(signal))
    try:
        accepted = await handle.start_update(
            name,
            args=list(args),
            wait_for_stage=WorkflowUpdateStage.ACCEPTED,
            result_type=result_type,
            rpc_timeout=accept_within,
        )
    except RPCError as error:
        if signal_first and error.status == RPCStatusCode.NOT_FOUND:
            return SentAsSignal(closed=True)  # "workflow execution already completed"
        raise
    except WorkflowUpdateRPCTimeoutOrCancelledError:
        if signal is None:
            raise NotAccepted(name) from None
        if not signal_first:
            await handle.signal(name, args=list(signal))
        return SentAsSignal()
    try:
        answer: T = await accepted.result(rpc_timeout=answer_within)
    except WorkflowUpdateRPCTimeoutOrCancelledError:
        raise NotAnswered(name) from None
    return answer
