"""One status vocabulary for timers: what the state says, what the Web UI shows, what filters find.

A timer's status is read from two things Temporal keeps: its execution status and the `WowStatus`
search attribute. `WowStatus` is written only where the execution status alone would mislead
(Parked, Rejected, Cancelled, NeverDue), so an undisturbed one-shot timer costs no upsert: Running
with no `WowStatus` is Scheduled (Delivering once `WowDue` has passed), Completed with none is
Delivered. The state a timer ends with says the same status (`timers.core.step` finishes with the
state's own status, `to_show` writes it): `status_of` is the one reading of both.

| status     | the timer                                | `WowStatus` | execution status     |
|------------|------------------------------------------|-------------|----------------------|
| Scheduled  | waits for its due time                   | unset       | Running, `WowDue` ahead |
| Delivering | is due: its command is being sent        | unset       | Running, `WowDue` passed |
| Parked     | sending failed; waits for an operator    | `Parked`    | Running              |
| Delivered  | ended: every command it sent was decided | unset       | Completed            |
| Rejected   | ended: its target refused the command    | `Rejected`  | Completed            |
| Cancelled  | ended: by key, deletion or an operator   | `Cancelled` | Completed            |
| NeverDue   | ended: its rule matches no time, so nothing was due | `NeverDue` | Completed   |
| Terminated | ended by `temporal workflow terminate`   | -           | Terminated           |
| Failed     | ended by a bug (the run failed)          | -           | Failed               |
| TimedOut   | ended by a run timeout                   | -           | TimedOut             |

`status_clause` gives the Web UI query for each.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum

from wow_temporal.engine.listing import quoted

__all__ = ["SHOWN_STATUSES", "Status", "parse_status", "status_clause", "status_of"]


class Status(StrEnum):
    """A timer's status; the first seven are the timer's own, the last three Temporal's."""

    SCHEDULED = "Scheduled"
    DELIVERING = "Delivering"
    PARKED = "Parked"
    DELIVERED = "Delivered"
    REJECTED = "Rejected"
    CANCELLED = "Cancelled"
    NEVER_DUE = "NeverDue"
    """Ended with nothing due: the schedule in force has a rule that matches no time (a cron
    such as `0 0 0 30 2 *`, accepted before the edge refused such rules)."""
    TERMINATED = "Terminated"
    FAILED = "Failed"
    TIMED_OUT = "TimedOut"


SHOWN_STATUSES = frozenset({Status.PARKED, Status.REJECTED, Status.CANCELLED, Status.NEVER_DUE})
"""The statuses a timer writes to `WowStatus`; every other status leaves it unset."""

_ALIASES = {
    "canceled": Status.CANCELLED,
    "timed-out": Status.TIMED_OUT,
    "never-due": Status.NEVER_DUE,
}

_ENDED_BY_TEMPORAL = {
    "Terminated": Status.TERMINATED,
    "Failed": Status.FAILED,
    "TimedOut": Status.TIMED_OUT,
    "Canceled": Status.CANCELLED,
}


_ENDED_SHOWN = frozenset(s.value for s in SHOWN_STATUSES - {Status.PARKED})
"""The `WowStatus` values a completed run may carry: each is its status."""


def parse_status(text: str) -> Status:
    """A status from its name in any case (`parked`, `Canceled` too); ValueError naming all."""
    for known in Status:
        if known.value.lower() == text.strip().lower():
            return known
    alias = _ALIASES.get(text.strip().lower())
    if alias is not None:
        return alias
    raise ValueError(f"unknown timer status {text!r}; one of {', '.join(s.value for s in Status)}")


def status_of(
    execution: str, shown: str | None, due: datetime | None, now: datetime
) -> Status | None:
    """The status of a timer run from its execution status (`Running`, `Completed`, ... as
    Temporal's visibility names them), its `WowStatus` and `WowDue`; None for a run that
    continued as new (its successor holds the status)."""
    if execution == "Running":
        if shown == Status.PARKED.value:
            return Status.PARKED
        return Status.DELIVERING if due is not None and due <= now else Status.SCHEDULED
    if execution == "Completed":
        if shown in _ENDED_SHOWN:
            return Status(shown)
        return Status.DELIVERED
    return _ENDED_BY_TEMPORAL.get(execution)


def status_clause(status: Status, now: datetime) -> str:
    """The visibility query that finds the timers of `status` (see the module's table)."""
    pending = f"ExecutionStatus = {quoted('Running')} AND WowStatus IS NULL"
    instant = quoted(now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
    match status:
        case Status.SCHEDULED:
            return f"{pending} AND WowDue > {instant}"
        case Status.DELIVERING:
            return f"{pending} AND WowDue <= {instant}"
        case Status.DELIVERED:
            return f"ExecutionStatus = {quoted('Completed')} AND WowStatus IS NULL"
        case Status.CANCELLED:
            return f"(WowStatus = {quoted('Cancelled')} OR ExecutionStatus = {quoted('Canceled')})"
        case Status.PARKED | Status.REJECTED | Status.NEVER_DUE:
            return f"WowStatus = {quoted(status.value)}"
        case _:
            return f"ExecutionStatus = {quoted(status.value)}"
