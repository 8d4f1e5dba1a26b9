"""The pure core of an aggregate timer: one schedule key of one aggregate, as a state machine.

Given the state, the time and an input (a schedule change, a wake-up, a delivery outcome, an
operator's retry or cancel) it returns the new state and what to do next. No Temporal, no I/O:
the workflow in `timers.workflow` is a thin shell that runs these decisions durably.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict

from wow_temporal.schedule import (
    AggregateRef,
    Misfire,
    ScheduledCommand,
    ScheduleRule,
    Scope,
)

__all__ = [
    "MAX_CATCH_UP_COUNT",
    "AwaitOperator",
    "Deliver",
    "Delivery",
    "Finish",
    "Shown",
    "Sleep",
    "Status",
    "Step",
    "TimerChange",
    "TimerSpec",
    "TimerState",
    "apply",
    "cancel",
    "details",
    "initial",
    "on_failed",
    "on_outcome",
    "retry",
    "step",
    "summary",
    "timer_workflow_id",
    "to_show",
]

MAX_CATCH_UP_COUNT = 100_000
"""A cron timer counts at most this many missed slots when it wakes (a one-second rule after a
day down is 86,400); beyond it the oldest are dropped from the count, never delivered early."""


class Status(StrEnum):
    """A timer's status, as the `WowStatus` search attribute shows it."""

    SCHEDULED = "Scheduled"
    DELIVERING = "Delivering"
    PARKED = "Parked"
    DELIVERED = "Delivered"
    REJECTED = "Rejected"
    CANCELLED = "Cancelled"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class TimerSpec(_Frozen):
    """One schedule as a `wow.ScheduleSet` committed it, with what delivery needs."""

    timer: str
    """Identifies this schedule, distinct per `wow.ScheduleSet`: the first half of `timer#slot`."""
    key: str
    owner: AggregateRef
    """The aggregate that committed the schedule (the timer belongs to it)."""
    target: AggregateRef
    rule: ScheduleRule
    command: ScheduledCommand
    scope: Scope
    upstream_id: str
    """The scheduling commit's id: the causation of every command this timer sends."""
    trace_id: str = ""
    traceparent: str | None = None
    first_due: datetime | None
    """When slot 1 is due (UTC); None for a cron rule that never matches."""

    @property
    def recurring(self) -> bool:
        return self.rule.kind == "cron"


class TimerChange(_Frozen):
    """A schedule event of a commit, as it applies to one timer, ordered by `order`."""

    kind: Literal["set", "cancel", "delete"]
    version: int
    """The version of the commit that holds the event."""
    index: int = 0
    """The event's position among its commit's schedule events: orders two of one commit."""
    spec: TimerSpec | None = None

    @property
    def order(self) -> tuple[int, int]:
        return (self.version, self.index)


class Delivery(_Frozen):
    """One slot of one schedule to deliver: the request id is `timer#slot`."""

    timer: str
    slot: int
    due: datetime
    skipped: int = 0

    @property
    def request_id(self) -> str:
        return f"{self.timer}#{self.slot}"


class TimerState(_Frozen):
    """Everything a timer knows; carried across continue-as-new and shown by the state query."""

    applied: tuple[int, int] = (0, -1)
    """Order of the last schedule event applied: an older or equal one changes nothing."""
    spec: TimerSpec | None = None
    status: Status = Status.SCHEDULED
    next_slot: int = 1
    next_due: datetime | None = None
    pending: Delivery | None = None
    """The slot chosen for delivery and not yet decided (in flight, or parked)."""
    delivered: int = 0
    last_outcome: str = ""
    parked_error: str = ""


@dataclass(frozen=True)
class Sleep:
    """Wait until `until` (or until a change arrives)."""

    until: datetime


@dataclass(frozen=True)
class Deliver:
    """Deliver this slot now."""

    delivery: Delivery


@dataclass(frozen=True)
class AwaitOperator:
    """Parked: wait for an operator's retry or cancel, or a newer schedule."""


@dataclass(frozen=True)
class Finish:
    """The timer is done; its final status."""

    status: Status


Step = Sleep | Deliver | AwaitOperator | Finish


def timer_workflow_id(owner: AggregateRef, key: str) -> str:
    """The workflow id `wow-timer:{context}.{aggregate}:{tenant}:{aggregate_id}:{key}`."""
    return (
        f"wow-timer:{owner.context_name}.{owner.aggregate_name}:"
        f"{owner.tenant_id}:{owner.aggregate_id}:{key}"
    )


def initial(change: TimerChange) -> TimerState:
    """The state of a timer started by a `set` change."""
    return apply(TimerState(), change)


def apply(state: TimerState, change: TimerChange) -> TimerState:
    """Apply a schedule event; one not newer than the last applied changes nothing."""
    if change.order <= state.applied:
        return state
    if change.kind == "set":
        assert change.spec is not None, "a set change carries its spec"
        return TimerState(
            applied=change.order,
            spec=change.spec,
            status=Status.SCHEDULED,
            next_due=change.spec.first_due,
            delivered=0,
        )
    return state.model_copy(
        update={
            "applied": change.order,
            "spec": None,
            "status": Status.CANCELLED,
            "pending": None,
            "next_due": None,
            "parked_error": "",
            "last_outcome": "cancelled by " + ("deletion" if change.kind == "delete" else "key"),
        }
    )


def cancel(state: TimerState) -> TimerState:
    """An operator's cancel: the timer ends, whatever it was doing."""
    if state.spec is None:
        return state
    return state.model_copy(
        update={
            "spec": None,
            "status": Status.CANCELLED,
            "pending": None,
            "next_due": None,
            "parked_error": "",
            "last_outcome": "cancelled by operator",
        }
    )


def retry(state: TimerState) -> TimerState:
    """An operator's retry of a parked delivery: the same slot, the same request id."""
    if state.status is not Status.PARKED:
        return state
    return state.model_copy(update={"status": Status.SCHEDULED, "parked_error": ""})


def step(state: TimerState, now: datetime) -> tuple[TimerState, Step]:
    """What to do at `now`: sleep, deliver a slot (never before it is due), wait, or finish."""
    spec = state.spec
    if spec is None:
        return state, Finish(Status.CANCELLED)
    if state.status is Status.PARKED:
        return state, AwaitOperator()
    if state.pending is not None:
        return state.model_copy(update={"status": Status.DELIVERING}), Deliver(state.pending)
    due = state.next_due
    if due is None:
        final = state.status if state.status is Status.REJECTED else Status.DELIVERED
        return state, Finish(final)
    if now < due:
        return state, Sleep(due)
    slot, due, skipped = state.next_slot, due, 0
    if spec.recurring and spec.rule.misfire is Misfire.COALESCE:
        slot, due, skipped = _latest_due(spec.rule, slot, due, now)
    delivery = Delivery(timer=spec.timer, slot=slot, due=due, skipped=skipped)
    new = state.model_copy(update={"pending": delivery, "status": Status.DELIVERING})
    return new, Deliver(delivery)


def _latest_due(
    rule: ScheduleRule, slot: int, due: datetime, now: datetime
) -> tuple[int, datetime, int]:
    """Of the cron slots due by `now` from (`slot`, `due`) on, the latest, and how many it skips.

    Past `MAX_CATCH_UP_COUNT` missed slots it stops counting one by one and finds the latest
    due slot directly; slot numbers then stay increasing and unique, and `skipped` is a lower
    bound (the uncounted stretch is left out).
    """
    skipped = 0
    while True:
        following = rule.next_cron(due)
        if following is None or following > now:
            return slot, due, skipped
        if skipped >= MAX_CATCH_UP_COUNT:
            break
        slot, due, skipped = slot + 1, following, skipped + 1
    latest, counted = _latest_slot_by(rule, due, now)
    return slot + counted, latest, skipped + counted


def _latest_slot_by(rule: ScheduleRule, floor: datetime, now: datetime) -> tuple[datetime, int]:
    """The latest cron slot in (`floor`, `now`], found from a window just before `now` that
    grows until it holds a slot, and how many slots that window holds (at least one)."""
    for window in _WINDOWS:
        start = max(floor, now - window)
        found = rule.next_cron(start)
        if found is not None and found <= now:
            count = 1
            while (following := rule.next_cron(found)) is not None and following <= now:
                found, count = following, count + 1
            return found, count
    raise AssertionError("a slot is due by now: the caller saw one")  # pragma: no cover


_WINDOWS = (
    timedelta(minutes=1),
    timedelta(hours=1),
    timedelta(days=1),
    timedelta(days=32),
    timedelta(days=366 * 400),
)


def on_outcome(
    state: TimerState, delivery: Delivery, outcome: Literal["delivered", "rejected"], detail: str
) -> TimerState:
    """The host decided `delivery`: move to the next slot, or end a one-shot timer."""
    spec = state.spec
    if spec is None or state.pending != delivery:
        return state  # cancelled or replaced while in flight: the command is not recalled
    rejected = outcome == "rejected"
    next_due = spec.rule.next_cron(delivery.due) if spec.recurring else None
    if rejected and not spec.recurring:
        status = Status.REJECTED
    else:
        status = Status.SCHEDULED if next_due is not None else Status.DELIVERED
    return state.model_copy(
        update={
            "pending": None,
            "status": status,
            "next_slot": delivery.slot + 1,
            "next_due": next_due,
            "delivered": state.delivered + (0 if rejected else 1),
            "last_outcome": f"slot {delivery.slot} {outcome}" + (f": {detail}" if detail else ""),
        }
    )


def on_failed(state: TimerState, delivery: Delivery, error: str) -> TimerState:
    """Every attempt to deliver `delivery` failed technically: park it for an operator."""
    if state.spec is None or state.pending != delivery:
        return state
    return state.model_copy(
        update={
            "status": Status.PARKED,
            "parked_error": error,
            "last_outcome": f"slot {delivery.slot} parked: {error}",
        }
    )


@dataclass(frozen=True)
class Shown:
    """What a timer's search attributes say: `WowStatus` and `WowDue`."""

    status: str
    due: datetime | None


def to_show(shown: Shown, next_step: Step, state: TimerState) -> Shown:
    """What the search attributes should say for `next_step`; `shown` where nothing changes.

    A timer that ends delivered while it still shows Scheduled keeps it: a completed timer is a
    delivered one, and skipping that upsert saves a billed action on the common path.
    """
    match next_step:
        case Finish(status):
            if status is Status.DELIVERED and shown.status == Status.SCHEDULED.value:
                return shown
            return Shown(status.value, shown.due)
        case Sleep(until):
            return Shown(state.status.value, until)
        case AwaitOperator():
            return Shown(Status.PARKED.value, state.next_due or shown.due)
        case Deliver():
            return shown


def details(state: TimerState) -> str:
    """The current details the Web UI shows (Markdown): status, next due, slot, last outcome."""
    lines = [f"**{state.status.value}**"]
    if state.spec is not None:
        lines.append(summary(state.spec, state.next_due))
        lines.append(f"next slot {state.next_slot}, delivered {state.delivered}")
    if state.last_outcome:
        lines.append(f"last: {state.last_outcome}")
    if state.parked_error:
        lines.append(f"parked: {state.parked_error}")
    return "\n\n".join(lines)


def summary(spec: TimerSpec, due: datetime | None) -> str:
    """A line a person reads: `CancelOrder → eshop-order.order 42, due 2026-12-01T10:30Z`."""
    when = "never due" if due is None else "due " + _short_instant(due)
    return f"{spec.command.simple_name} → {spec.target}, {when}"


def _short_instant(instant: datetime) -> str:
    instant = instant.astimezone(UTC)
    text = instant.strftime("%Y-%m-%dT%H:%M")
    if instant.second or instant.microsecond:
        text += instant.strftime(":%S")
        if instant.microsecond:
            text += f".{instant.microsecond // 1000:03d}"
    return text + "Z"
