"""The engine's Temporal half for the workflows: one way for a timer or a job to wait.

Each counts what its handlers change (`Changes`); its main loop sleeps until a deadline, a
change, or Temporal suggests continuing as new (`wait`), and continues as new once its history
is long (`history_is_long`). Thin over `temporalio.workflow`: deterministic, no I/O.
"""

from __future__ import annotations

import contextlib
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
    patch: str | None = None,
) -> None:
    """Sleep until `until` (for good if None; `now` is the workflow's clock), the next change,
    or Temporal's suggestion to continue as new; `summary` labels the timer in the Web UI.
    `patch`: wake on the suggestion only once that patch is in force (runs recorded before it
    waited on; asked only when the suggestion comes, so no other run gains a marker)."""
    seen = changes.count
    timeout = None if until is None else max(until - now, _AT_LEAST)

    def woken() -> bool:
        if changes.count != seen:
            return True
        if not workflow.info().is_continue_as_new_suggested():
            return False
        return patch is None or workflow.patched(patch)

    with contextlib.suppress(TimeoutError):
        await workflow.wait_condition(woken, timeout=timeout, timeout_summary=summary)
