"""The target's guard of a scheduled command: the log's last word, read at the target.

A timer already in Temporal may fall due before the change that stops it reaches it (the
relay lags, Temporal restarts, a host posts its backlog late). The command it sends carries
where it came from (the owner, the version and event of its `wow.ScheduleSet`, the slot's due
time), so the target reads the owner's log: a cancel of the key, a replacing set of the key or
the owner's deletion, committed after that set and **before the slot was due**, means the log
no longer held the slot at its due time, and the command is refused like any guard. A change
committed at or after the due time does not refuse it: the slot was owed.

Pure: the host reads the commits, this decides.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from wow_temporal.model import (
    AggregateDeleted,
    Commit,
    ScheduleCancelled,
    ScheduleSet,
)
from wow_temporal.wire import SlotOrigin

__all__ = [
    "SLOT_STOPPED",
    "Stop",
    "stop_before_due",
]

SLOT_STOPPED = "IllegalState"
"""Wow's code for the refusal: a business guard, so the timer is done and nothing retries it."""

@dataclass(frozen=True, slots=True)
class Stop:
    """A change in the owner's log that stopped the slot before it was due."""

    kind: str
    """`cancel`, `set` (a replacing one) or `delete`."""
    commit: Commit
    event_id: str

    def describe(self, origin: SlotOrigin) -> str:
        """The refusal's message: which change, in which commit, when, against which slot."""
        what = {
            "cancel": f"cancelled key {origin.key}",
            "set": f"set key {origin.key} anew",
            "delete": f"deleted {origin.owner}",
        }[self.kind]
        return (
            f"the log no longer held this slot when it was due: commit {self.commit.id} "
            f"(version {self.commit.version}, event {self.event_id}) {what} at "
            f"{_instant(self.commit.create_time)}, before the slot was due at "
            f"{_instant(origin.due)}; the schedule of version {origin.version} is done"
        )


def stop_before_due(origin: SlotOrigin, commits: Sequence[Commit]) -> Stop | None:
    """The first change of the owner's log after the slot's `wow.ScheduleSet` that stops the
    slot (its key cancelled or set anew, or the owner deleted), committed before the slot was
    due; None when the log still held the slot then.

    `commits` are the owner's commits in version order, from the set's version on. When the
    commit at that version is not the one the slot names (another log's aggregate of the same
    name), this log cannot judge the slot, and None is answered.
    """
    for commit in commits:
        if commit.version < origin.version:
            continue
        events = commit.schedule_events()
        start = 0
        if commit.version == origin.version:
            if commit.id != origin.commit_id:
                return None
            ids = [envelope.id for envelope, _ in events]
            if origin.event_id not in ids:
                return None
            start = ids.index(origin.event_id) + 1
        if commit.create_time >= origin.due:
            continue  # committed once the slot was due: it was owed
        for envelope, event in events[start:]:
            kind = _stop_kind(event, origin.key)
            if kind is not None:
                return Stop(kind, commit, envelope.id)
    return None


def _stop_kind(event: object, key: str) -> str | None:
    if isinstance(event, AggregateDeleted):
        return "delete"
    if isinstance(event, ScheduleCancelled) and event.key == key:
        return "cancel"
    if isinstance(event, ScheduleSet) and event.key == key:
        return "set"
    return None


def _instant(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, UTC).isoformat(timespec="milliseconds")
