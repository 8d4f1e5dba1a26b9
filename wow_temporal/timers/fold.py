"""Fold a stream of commits per aggregate and key before anything reaches Temporal.

Handing changes over one by one loses the log's order the moment one of them is a set already
past due: it starts, a worker delivers it at once, and the cancel committed after it arrives a
few milliseconds too late. So ingest first folds each aggregate's changes of a batch (one
commit, a `POST /commits` array, a relay's catch-up) through the timer's own ordering rule:
per key only the latest change is handed over, a deletion is recorded before any of its
aggregate's timers start, and a set the log later replaced, cancelled or deleted, in this batch
or (for a relay catching up) further on in the log (`Horizon`), is never started.

Pure: no Temporal, no I/O; `TimerClient` runs the plan.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from wow_temporal.model import AggregateRef, Commit
from wow_temporal.timers.changes import AggregateChange, KeyChange, changes_of
from wow_temporal.timers.core import TimerChange

__all__ = ["Folded", "Horizon", "Position", "fold"]

Position = tuple[int, int]
"""Where a change stands in its batch: (the commit's place, the change's place in its commit)."""

Order = tuple[int, int]
_K = TypeVar("_K")


@dataclass
class Horizon:
    """The latest schedule order the log holds further on, per key and per aggregate deletion:
    what a relay has read ahead of the commits it hands over. A set older than any of them is
    never started (the log replaced, cancelled or deleted it); cancels and deletions are always
    handed over, since the running timer must stop before the later change arrives."""

    keys: dict[tuple[AggregateRef, str], Order] = field(default_factory=dict)
    deletions: dict[AggregateRef, Order] = field(default_factory=dict)

    def add(self, commit: Commit) -> None:
        """Note `commit`'s schedule changes."""
        owner = commit.aggregate
        for item in changes_of(commit):
            if isinstance(item, KeyChange):
                _raise(self.keys, (owner, item.key), item.change.order)
            else:
                _raise(self.deletions, owner, item.change.order)

    def extend(self, commits: Iterable[Commit]) -> None:
        for commit in commits:
            self.add(commit)

    def supersedes(self, owner: AggregateRef, key: str, change: TimerChange) -> str | None:
        """Why the log holds something later that makes set `change` moot, or None."""
        if change.kind != "set":
            return None
        deleted = self.deletions.get(owner)
        if deleted is not None and deleted > change.order:
            return (
                f"the log deletes {owner} later (version {deleted[0]}): never started, and "
                "a timer running an older schedule of the key is stopped"
            )
        later = self.keys.get((owner, key))
        if later is not None and later > change.order:
            return (
                f"the log changes key {key} later (version {later[0]}), handed over after "
                "it: never started, and a timer running an older schedule of the key is stopped"
            )
        return None

    def clear(self) -> None:
        self.keys.clear()
        self.deletions.clear()


def _raise(orders: dict[_K, Order], key: _K, order: Order) -> None:
    if orders.get(key, (0, -1)) < order:
        orders[key] = order


@dataclass(frozen=True)
class HandOver:
    """One change to hand to one key's timer, and the change it answers for."""

    key: str
    change: TimerChange
    at: Position
    stop_only: bool = False
    """Hand it only to a timer that runs (it starts none): a deletion, or the stop in place
    of a set the log changes later, which ends what an older schedule of the key runs."""

    @property
    def stops(self) -> bool:
        """A change that ends what a timer runs: handed over before any set of the batch."""
        return self.stop_only or self.change.kind != "set"


@dataclass(frozen=True)
class Folded:
    """What to do for one aggregate's changes of a batch, in this order: record `deletion`
    (if any), hand each of `steps` that stops something to its key's timer, apply the
    deletion to the aggregate's other running timers, then hand over the sets. `skipped`
    answers the changes folded away."""

    owner: AggregateRef
    deletion: tuple[Position, TimerChange] | None
    steps: list[HandOver]
    skipped: dict[Position, str]


def fold(
    owner: AggregateRef,
    items: Sequence[tuple[Position, KeyChange | AggregateChange]],
    later: Horizon | None = None,
) -> Folded:
    """Fold one aggregate's changes of a batch (in any order) into what to hand over."""
    skipped: dict[Position, str] = {}
    deletion: tuple[Position, TimerChange] | None = None
    latest: dict[str, tuple[Position, TimerChange]] = {}
    for at, item in items:
        if isinstance(item, AggregateChange):
            if deletion is None or item.change.order > deletion[1].order:
                if deletion is not None:
                    skipped[deletion[0]] = _by(deletion[1], item.change)
                deletion = (at, item.change)
            else:
                skipped[at] = _by(item.change, deletion[1])
            continue
        kept = latest.get(item.key)
        if kept is None or item.change.order > kept[1].order:
            if kept is not None:
                skipped[kept[0]] = _by(kept[1], item.change)
            latest[item.key] = (at, item.change)
        else:
            skipped[at] = _by(item.change, kept[1])
    steps: list[HandOver] = []
    for key, (at, change) in latest.items():
        if deletion is not None and change.order < deletion[1].order:
            skipped[at] = _by(change, deletion[1])
            steps.append(HandOver(key, deletion[1], deletion[0], stop_only=True))
            continue
        moot = None if later is None else later.supersedes(owner, key, change)
        if moot is not None:
            # Never started; but it replaced what the key ran before: that must stop now,
            # not when the later change is handed over.
            skipped[at] = moot
            stop = TimerChange(kind="cancel", version=change.version, index=change.index)
            steps.append(HandOver(key, stop, at, stop_only=True))
            continue
        steps.append(HandOver(key, change, at))
    steps.sort(key=lambda step: step.at)
    return Folded(owner, deletion, steps, skipped)


def _by(change: TimerChange, newer: TimerChange) -> str:
    """Why `change` was folded away: the batch holds `newer` (or the same event again)."""
    if newer.order == change.order:
        return f"the same event (version {change.version}) is in this batch again: handed over once"
    what = {"set": "a set", "cancel": "a cancel", "delete": "the aggregate's deletion"}
    return (
        f"superseded in this batch by {what[newer.kind]} of version {newer.version}, "
        "before it was handed over"
    )
