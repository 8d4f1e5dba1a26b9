"""What a relay has read of the log ahead of the batch it hands over, and the stops it hands
over early from it.

The read-ahead keeps, per key and per aggregate's deletion, the latest change the log holds
past the relay's position (`horizon`, so a set the log later changes is never started), and
what stops a timer. After a gap (a relay starting, taking over, resuming after a failure, or
more than a batch behind) timers already running in Temporal may hold schedules the log has
since cancelled, replaced or deleted, batches away; `early_stops` gives what ends them now,
as admitted commits holding just those changes, which `TimerClient.apply_many` takes, instead
of when their own batch comes.

What is let go: the changes of commits the relay has handed over (`passed`), since a later
commit of an aggregate always holds newer versions.

Pure: no Temporal, no I/O; the relay reads the log and hands the commits over.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TypeVar

from wow_temporal.model import AggregateRef, Commit
from wow_temporal.timers.admission import Admission, Admitted
from wow_temporal.timers.changes import AggregateChange, KeyChange, changes_of
from wow_temporal.timers.fold import Horizon

__all__ = ["ReadAhead"]

Slot = tuple[AggregateRef, str]
"""A key's timer: its aggregate and key."""
_S = TypeVar("_S", Slot, AggregateRef)


@dataclass(frozen=True)
class _Read:
    """One change read ahead: where its commit stands in the log, and the change."""

    position: int
    commit: Commit
    """Its commit, schedule events only (their places are the changes' indexes)."""
    item: KeyChange | AggregateChange

    @property
    def order(self) -> tuple[int, int]:
        return self.item.change.order


@dataclass
class _Ahead:
    """A key's (or an aggregate's deletion's) changes read ahead: its latest, and its stop."""

    latest: _Read
    stop: _Read | None
    handed: tuple[int, int] | None = None
    """The order of the stop last handed over early (None: none yet)."""


class ReadAhead:
    """The log past a relay's position, as far as it has read it (`scanned`)."""

    def __init__(self) -> None:
        self.horizon = Horizon()
        """Each key's and each deletion's latest order ahead: what `fold` judges sets by."""
        self.scanned = 0
        """How far the log has been read."""
        self._keys: dict[Slot, _Ahead] = {}
        self._deletions: dict[AggregateRef, _Ahead] = {}
        self._read: deque[tuple[int, Slot | AggregateRef]] = deque()
        """What was noted, in the log's order: let go of as the relay passes it."""

    def add(self, position: int, commit: Commit) -> None:
        """Note the schedule changes of `commit`, at `position` in the log (read in order)."""
        self.scanned = max(self.scanned, position)
        if not commit.has_schedule_events:
            return
        kept = commit.model_copy(
            update={"body": [envelope for envelope, _ in commit.schedule_events()]}
        )
        owner = commit.aggregate
        for item in changes_of(kept):
            read = _Read(position, kept, item)
            if isinstance(item, KeyChange):
                self._note_key((owner, item.key), read, item.change.kind)
            else:
                self._note_deletion(owner, read)

    def _note_key(self, slot: Slot, read: _Read, kind: str) -> None:
        """A key's new latest change. Its stop is the latest change ahead that the log's end
        leaves stopped: the change itself if a cancel; the one before it if a set."""
        ahead = self._keys.get(slot)
        if ahead is not None and read.order <= ahead.latest.order:
            return  # the same commit read again
        if kind != "set":
            stop: _Read | None = read
        else:
            stop = None if ahead is None else ahead.latest
        if ahead is None:
            self._keys[slot] = _Ahead(read, stop)
        else:
            ahead.latest, ahead.stop = read, stop
        self.horizon.keys[slot] = read.order
        self._read.append((read.position, slot))

    def _note_deletion(self, owner: AggregateRef, read: _Read) -> None:
        ahead = self._deletions.get(owner)
        if ahead is not None and read.order <= ahead.latest.order:
            return
        if ahead is None:
            self._deletions[owner] = _Ahead(read, read)
        else:
            ahead.latest = ahead.stop = read
        self.horizon.deletions[owner] = read.order
        self._read.append((read.position, owner))

    def early_stops(self) -> Admission:
        """Every deletion and every key's latest stop read ahead and not handed over early yet,
        each commit admitted with only those of its changes, in the log's order (each change
        keeps its own order: handed over again in its batch, it changes nothing).

        A key's latest stop is its last change ahead when that is a cancel. When its last
        change is a set, it is the change before that set (a cancel, or a set the last one
        replaces, which the fold hands over as a stop only, against `horizon`, starting no
        timer): its order is below the last set's, so that set still applies when its batch
        comes, and above anything a timer ran before the gap, so it ends that schedule now;
        the log replaced it before it was due, since the replacing commit is already in the
        log. A stop at the last set's own order would make that set stale: never. A key with
        one set ahead and nothing before it has no order between: the set replaces the
        timer's schedule when its batch comes, and the target's own guard refuses the old
        slot meanwhile. Handed over again in its batch, a stop changes nothing (the timers
        ignore an order they applied), so the end is the same as handing the log in order.
        """
        chosen: dict[int, list[_Read]] = {}
        for ahead in (*self._keys.values(), *self._deletions.values()):
            stop = ahead.stop
            if stop is not None and stop.order != ahead.handed:
                chosen.setdefault(stop.position, []).append(stop)
        return Admission(
            tuple(
                Admitted(
                    reads[0].commit,
                    tuple(read.item for read in sorted(reads, key=lambda read: read.order)),
                )
                for _, reads in sorted(chosen.items())
            )
        )

    def mark_handed(self) -> None:
        """The stops `early_stops` gave were handed over: give them no more."""
        for ahead in (*self._keys.values(), *self._deletions.values()):
            if ahead.stop is not None:
                ahead.handed = ahead.stop.order

    def passed(self, position: int) -> None:
        """The relay handed the log over up to `position`: let go of what is no longer ahead."""
        while self._read and self._read[0][0] <= position:
            _, slot = self._read.popleft()
            if isinstance(slot, AggregateRef):
                self._let_go(self._deletions, self.horizon.deletions, slot, position)
            else:
                self._let_go(self._keys, self.horizon.keys, slot, position)

    @staticmethod
    def _let_go(
        aheads: dict[_S, _Ahead], latest: dict[_S, tuple[int, int]], slot: _S, position: int
    ) -> None:
        ahead = aheads.get(slot)
        if ahead is None:
            return
        if ahead.latest.position <= position:
            del aheads[slot]
            latest.pop(slot, None)
        elif ahead.stop is not None and ahead.stop.position <= position:
            ahead.stop = None  # handed over in its batch

    def held(self) -> int:
        """How many changes it holds (keys and deletions)."""
        return len(self._keys) + len(self._deletions)

    def clear(self, position: int = 0) -> None:
        """Forget everything read; the log is read again from `position`."""
        self.horizon.clear()
        self._keys.clear()
        self._deletions.clear()
        self._read.clear()
        self.scanned = position
