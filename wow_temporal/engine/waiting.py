"""The engine's Temporal half for the workflows: one way for a timer or a job to wait.

Each counts what its handlers change (`Changes`); its main loop sleeps until a deadline, a
change, or Temporal suggests continuing as new (`wait`), and continues as new once its history
is long (`history_is_long`). Thin over `temporalio.workflow`: deterministic, no I/O.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import datetime, timedelta

from temporalio import workflow

__all__ = ["Changes", "history_is_long", "wait"]

_AT_LEAST = timedelta(milliseconds=1)
"""The shortest sleep: a deadline already passed still gives the loop one turn."""


class Changes:
    """How many changes a workflow's handlers have made: its main loop wakes on the next."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    def bump(self) -> None:
        """A handler changed the state (or wants the loop to look again)."""
        self.count += 1


def history_is_long(bound: int) -> bool:
    """Whether the run should continue as new: its history is past `bound` events, or Temporal
    suggests it (the history's size or its event count nears the server's limits)."""
    info = workflow.info()
    return info.is_continue_as_new_suggested() or info.get_current_history_length() > bound


async def wait(
    changes: Changes,
    until: datetime | None,
    *,
    now: datetime,
    summary: str | None = None,
    wake_on_suggested: Callable[[], bool] = lambda: True,
) -> None:
    """Sleep until `until` (for good if None; `now` is the workflow's clock), the next change,
    or Temporal's suggestion to continue as new; `summary` labels the timer in the Web UI.
    `wake_on_suggested` is asked only once the suggestion comes (a patch asked there marks no
    other run): it must say yes only when the caller will then continue as new, or its loop
    would wake again at once, without end."""
    seen = changes.count
    timeout = None if until is None else max(until - now, _AT_LEAST)

    def woken() -> bool:
        # `workflow.patched` may be asked here: temporalio checks conditions outside its
        # read-only context (1.35), and the suggestion comes from history, so replay asks alike.
        if changes.count != seen:
            return True
        return workflow.info().is_continue_as_new_suggested() and wake_on_suggested()

    with contextlib.suppress(TimeoutError):
        await workflow.wait_condition(woken, timeout=timeout, timeout_summary=summary)
