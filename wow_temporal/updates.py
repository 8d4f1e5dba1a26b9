"""Update, or signal when no worker takes the update: how the timer and job clients change a
running workflow.

An update answers with the state it made, but only while a worker runs the workflow; a signal
is kept by the server and applied, in order, when one does. A change that must not be lost for
want of a worker is therefore sent as an update first and as the signal of the same name when
no worker accepts the update in time.
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

__all__ = ["NotAccepted", "NotAnswered", "SentAsSignal", "update_or_signal"]

T = TypeVar("T")


class SentAsSignal:
    """No worker accepted the update in time: it went as the signal of the same name."""


class NotAccepted(Exception):
    """No worker accepted the update in time, and it has no signal to fall back on."""


class NotAnswered(Exception):
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
) -> T | SentAsSignal:
    """Run update `name` with `args` and return its answer.

    With no worker accepting it within `accept_within`, send the signal `name` with `signal`
    as its arguments and return `SentAsSignal` (or raise `NotAccepted` when `signal` is None).
    Once accepted, wait up to `answer_within` for the answer, then raise `NotAnswered`.
    `WorkflowUpdateFailedError` (the workflow refused it) passes through.
    """
    try:
        accepted = await handle.start_update(
            name,
            args=list(args),
            wait_for_stage=WorkflowUpdateStage.ACCEPTED,
            result_type=result_type,
            rpc_timeout=accept_within,
        )
    except WorkflowUpdateRPCTimeoutOrCancelledError:
        if signal is None:
            raise NotAccepted(name) from None
        await handle.signal(name, args=list(signal))
        return SentAsSignal()
    try:
        answer: T = await accepted.result(rpc_timeout=answer_within)
    except WorkflowUpdateRPCTimeoutOrCancelledError:
        raise NotAnswered(name) from None
    return answer
