"""From a commit to the timer changes it makes: pure, so ingest and its tests share one reading."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from wow_temporal.model import (
    AggregateDeleted,
    Commit,
    ScheduleCancelled,
    ScheduleSet,
)
from wow_temporal.timers.core import TimerChange, TimerSpec

__all__ = ["AggregateChange", "KeyChange", "changes_of", "continuing", "spec_of"]


@dataclass(frozen=True)
class KeyChange:
    """A change to the timer under one key of the commit's aggregate."""

    key: str
    change: TimerChange


@dataclass(frozen=True)
class AggregateChange:
    """A change to every pending timer of the commit's aggregate (its deletion)."""

    change: TimerChange


def spec_of(
    commit: Commit, event_id: str, event: ScheduleSet, traceparent: str | None = None
) -> TimerSpec:
    """The timer a `wow.ScheduleSet` of `commit` sets: its identity, due time and delivery
    scope; its deliveries continue `traceparent`'s trace (default: the commit header's)."""
    owner = commit.aggregate
    return TimerSpec(
        timer=f"{commit.id}:{event_id}",
        key=event.key,
        owner=owner,
        target=event.target or owner,
        rule=event.rule,
        command=event.command,
        scope=commit.scope,
        upstream_id=commit.id,
        trace_id=commit.header.get("trace_id", ""),
        traceparent=traceparent or commit.header.get("traceparent"),
        first_due=event.rule.first_due(commit.created_at),
    )


def changes_of(commit: Commit, traceparent: str | None = None) -> list[KeyChange | AggregateChange]:
    """The commit's schedule events as timer changes, in commit order, domain events skipped;
    the timers set continue `traceparent`'s trace (default: the commit header's)."""
    found: list[KeyChange | AggregateChange] = []
    for index, (envelope, event) in enumerate(commit.schedule_events()):
        if isinstance(event, ScheduleSet):
            spec = spec_of(commit, envelope.id, event, traceparent)
            found.append(
                KeyChange(
                    event.key,
                    TimerChange(kind="set", version=commit.version, index=index, spec=spec),
                )
            )
        elif isinstance(event, ScheduleCancelled):
            found.append(
                KeyChange(
                    event.key, TimerChange(kind="cancel", version=commit.version, index=index)
                )
            )
        elif isinstance(event, AggregateDeleted):
            found.append(
                AggregateChange(TimerChange(kind="delete", version=commit.version, index=index))
            )
    return found


def continuing(
    changes: Iterable[KeyChange | AggregateChange], traceparent: str | None
) -> list[KeyChange | AggregateChange]:
    """`changes` with the timers they set continuing `traceparent`'s trace instead (what
    `changes_of(commit, traceparent)` gives, without reading the commit again)."""
    found: list[KeyChange | AggregateChange] = []
    for item in changes:
        spec = item.change.spec
        if spec is not None and traceparent is not None and spec.traceparent != traceparent:
            moved = spec.model_copy(update={"traceparent": traceparent})
            item = replace(item, change=item.change.model_copy(update={"spec": moved}))
        found.append(item)
    return found
