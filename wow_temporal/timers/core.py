"""The pure core of an aggregate timer: one schedule key of one aggregate, as a state machine.

Given the state, the time and an input (a schedule change, a wake-up, a delivery outcome, an
operator's retry or cancel) it returns the new state and what to do next. No Temporal, no I/O:
the workflow in `timers.workflow` is a thin shell that runs these decisions durably.

A delivery in flight when its schedule is replaced or cancelled is not recalled: the shell lets
the attempt finish, and its outcome is still counted (`on_outcome` of a delivery that is no
longer pending), so the state always says how many commands the host decided.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from wow_temporal.engine import Frozen, instant_text, latest_due, slots
from wow_temporal.model import (
    AggregateRef,
    Misfire,
    ScheduledCommand,
    ScheduleRule,
    Scope,
)
from wow_temporal.timers.status import SHOWN_STATUSES, Status

__all__ = [
    "AwaitOperator",
    "Decided",
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
    "Verdict",
    "VerdictOutcome",
    "apply",
    "cancel",
    "cancel_requested",
    "details",
    "initial",
    "on_abandoned",
    "on_failed",
    "on_outcome",
    "receive",
    "retry",
    "stale_reason",
    "static_details",
    "static_summary",
    "step",
    "summary",
    "to_show",
    "unreadable",
    "unreadable_input",
    "verdict",
]

Decided = Literal["delivered", "rejected", "cancelled"]
"""How the host (or the deletion check before sending) decided one delivery."""


class TimerSpec(Frozen):
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


class TimerChange(Frozen):
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


class Delivery(Frozen):
    """One slot of one schedule to deliver: the request id is `timer#slot`."""

    timer: str
    slot: int
    due: datetime
    skipped: int = 0

    @property
    def request_id(self) -> str:
        return f"{self.timer}#{self.slot}"


class TimerState(Frozen):
    """Everything a timer knows; carried across continue-as-new and shown by the state query.
    The status comes first: the Web UI shows a run's input and result as this JSON, in order."""

    status: Status = Status.SCHEDULED
    next_due: datetime | None = None
    applied: tuple[int, int] = (0, -1)
    """Order of the last schedule event applied: an older or equal one changes nothing."""
    spec: TimerSpec | None = None
    next_slot: int = 1
    pending: Delivery | None = None
    """The slot chosen for delivery and not yet decided (in flight, or parked)."""
    delivered: int = 0
    """Commands the host decided `Ok` over the timer's whole life (every schedule of its key)."""
    rejected: int = 0
    """Commands the host refused over the timer's whole life."""
    last_outcome: str = ""
    parked_error: str = ""
    last_change: str = ""
    """What the last schedule event handed to the running timer did, and why: ingest hands
    changes over without waiting for a worker, so this is where what they did is told."""
    unreadable: int = 0
    """Changes handed over that this timer could not read (sent by another version, or
    malformed): refused, never dropped unseen; `last_unreadable` says why."""
    last_unreadable: str = ""


VerdictOutcome = Literal["started", "replaced", "cancelled", "ignored", "handed-over"]
"""What one schedule event did to one timer: `handed-over` to a running timer, which applies
it when a worker next runs it (its `last_change` then says what it did)."""


class Verdict(Frozen):
    """What applying one schedule event did to one timer, and why."""

    outcome: VerdictOutcome
    reason: str


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


# --- schedule changes -------------------------------------------------------------------------


def initial(change: TimerChange) -> TimerState:
    """The state of a timer started by `change` (a set, or a cancel that leaves a record)."""
    return apply(TimerState(), change)


def stale_reason(state: TimerState, change: TimerChange) -> str | None:
    """Why `change` changes nothing (it is not newer than the last applied), or None."""
    if change.order > state.applied:
        return None
    return f"stale: {_order_text(change.order, state.applied)}"


def _order_text(order: tuple[int, int], applied: tuple[int, int]) -> str:
    if order[0] != applied[0] or order[1] == applied[1]:
        return f"version {order[0]} ≤ applied {applied[0]}"
    return f"version {order[0]} event {order[1]} ≤ applied event {applied[1]}"


def apply(state: TimerState, change: TimerChange) -> TimerState:
    """Apply a schedule event; one not newer than the last applied changes nothing."""
    if stale_reason(state, change) is not None:
        return state
    if change.kind == "set":
        assert change.spec is not None, "a set change carries its spec"
        return state.model_copy(
            update={
                "applied": change.order,
                "spec": change.spec,
                "status": Status.SCHEDULED,
                "next_slot": 1,
                "next_due": change.spec.first_due,
                "pending": None,
                "parked_error": "",
            }
        )
    return _cancelled(
        state.model_copy(update={"applied": change.order}),
        "cancelled by "
        + ("the aggregate's deletion" if change.kind == "delete" else "key")
        + f" (version {change.version})",
    )


def receive(state: TimerState, change: TimerChange) -> tuple[TimerState, Verdict]:
    """A running timer receives a change: apply it and note what it did in `last_change`."""
    answer = verdict(state, change)
    event = f"{change.kind} of version {change.version}"
    if change.spec is not None:
        event += f" ({change.spec.timer})"
    note = f"{event}: {answer.outcome}: {answer.reason}"
    return apply(state, change).model_copy(update={"last_change": note}), answer


def verdict(state: TimerState, change: TimerChange) -> Verdict:
    """What `apply(state, change)` does, in words for the one who handed the change over."""
    stale = stale_reason(state, change)
    if stale is not None:
        return Verdict(outcome="ignored", reason=stale)
    current = state.spec
    if change.kind == "set":
        assert change.spec is not None
        new = _schedule_text(change.spec, change.spec.first_due)
        if current is None:
            return Verdict(outcome="replaced", reason=f"set {new} (version {change.version})")
        old = _schedule_text(current, state.next_due)
        return Verdict(
            outcome="replaced", reason=f"replaced {old} by {new} (version {change.version})"
        )
    by = "the aggregate's deletion" if change.kind == "delete" else "key"
    if current is None:
        return Verdict(
            outcome="cancelled",
            reason=f"nothing was pending; the cancel by {by} (version {change.version}) is kept "
            "so an older set arriving later changes nothing",
        )
    return Verdict(
        outcome="cancelled",
        reason=f"cancelled {_schedule_text(current, state.next_due)} by {by} "
        f"(version {change.version})",
    )


def _schedule_text(spec: TimerSpec, due: datetime | None) -> str:
    when = "never due" if due is None else "due " + instant_text(due)
    return f"{spec.timer} ({spec.rule.describe()}, {when})"


def _cancelled(state: TimerState, why: str) -> TimerState:
    return state.model_copy(
        update={
            "spec": None,
            "status": Status.CANCELLED,
            "pending": None,
            "next_due": None,
            "parked_error": "",
            "last_outcome": why,
        }
    )


def unreadable(state: TimerState, why: str) -> TimerState:
    """A change handed over that the timer cannot read: counted and told, state unchanged."""
    return state.model_copy(
        update={"unreadable": state.unreadable + 1, "last_unreadable": why[:500]}
    )


def cancel_requested(
    state: TimerState,
    applied_before: tuple[int, int] | None,
    *,
    in_force: tuple[int, int] | None = None,
) -> TimerState:
    """A Temporal cancel request: it cancels what was in force when it was recorded, no later
    change. A worker finds the request together with the changes handed over beside it and
    cannot tell their order (`applied_before`: the order in force before those changes, None
    when none came with it): a newer schedule they set is kept (nothing is lost), and its
    last change says so; anything else is cancelled.

    A request that meets a delivery in flight is applied once the attempt has settled, maybe
    activations later (`in_force`: the order in force when the worker met it, None when it
    is applied at once): a schedule handed over after it is newer than the request and
    stands; the one the request met was replaced by it already."""
    if in_force is not None and state.applied > in_force and state.spec is not None:
        note = (
            f"{state.last_change}; handed over after a Temporal cancel request, which "
            f"cancelled the schedule in force before it (version {in_force[0]}), not this one"
        )
        return state.model_copy(update={"last_change": note})
    if applied_before is not None and state.applied > applied_before and state.spec is not None:
        note = (
            f"{state.last_change}; a Temporal cancel request came with it and was not "
            "applied to it (end this schedule with `wow-temporal timers cancel`)"
        )
        return state.model_copy(update={"last_change": note})
    return cancel(state, "a Temporal cancel request")


def unreadable_input(why: str) -> TimerState:
    """A timer that cannot read its own input (another version's, or a bug): parked, so it
    never fails its workflow task forever; an operator cancels it, or a set replaces it."""
    return TimerState(status=Status.PARKED, parked_error=f"cannot read its input: {why}"[:500])


def cancel(state: TimerState, by: str = "operator") -> TimerState:
    """An operator's cancel: the timer ends, whatever it was doing."""
    if state.spec is None and state.status is Status.PARKED:
        return _cancelled(state, f"cancelled by {by}")
    if state.spec is None:
        return state
    return _cancelled(state, f"cancelled by {by}")


def retry(state: TimerState) -> TimerState:
    """An operator's retry of a parked delivery: the same slot, the same request id."""
    if state.status is not Status.PARKED:
        return state
    return state.model_copy(update={"status": Status.SCHEDULED, "parked_error": ""})


# --- what to do next --------------------------------------------------------------------------


def step(
    state: TimerState, now: datetime, *, numbered_before_0_2: bool = False
) -> tuple[TimerState, Step]:
    """What to do at `now`: sleep, deliver a slot (never before it is due), wait, or finish.
    `numbered_before_0_2`: number a catch-up past `MAX_MISSED_COUNTED` as 0.1.x did (see
    `_numbered_before_0_2`)."""
    spec = state.spec
    if spec is None and state.status is Status.PARKED:
        return state, AwaitOperator()  # it cannot read its input: an operator decides
    if spec is None:
        return state.model_copy(update={"status": Status.CANCELLED}), Finish(Status.CANCELLED)
    if state.status is Status.PARKED:
        return state, AwaitOperator()
    if state.pending is not None:
        return state.model_copy(update={"status": Status.DELIVERING}), Deliver(state.pending)
    due = state.next_due
    if due is None:
        ended = state.model_copy(update={"status": _ended_with_nothing_due(state)})
        return ended, Finish(ended.status)
    if now < due:
        return state, Sleep(due)
    delivery = Delivery(timer=spec.timer, slot=state.next_slot, due=due)
    if spec.recurring and spec.rule.misfire is Misfire.COALESCE:
        latest = latest_due(spec.rule.next_cron, due, now)  # one slot, numbered past those skipped
        slot = state.next_slot + latest.skipped
        if numbered_before_0_2 and latest.skipped >= slots.MAX_MISSED_COUNTED:
            slot = _numbered_before_0_2(spec.rule, state.next_slot, due, now)
        delivery = Delivery(timer=spec.timer, slot=slot, due=latest.due, skipped=latest.skipped)
    new = state.model_copy(update={"pending": delivery, "status": Status.DELIVERING})
    return new, Deliver(delivery)


def _ended_with_nothing_due(state: TimerState) -> Status:
    """How a timer with no next due time ends: as its last slot was decided (Delivered or
    Rejected), or NeverDue when its schedule in force never had a slot (its rule matches no
    time): it never says Delivered for a schedule that sent nothing."""
    if state.status in (Status.DELIVERED, Status.REJECTED):
        return state.status
    return Status.NEVER_DUE


def passed_the_cap(step: Step) -> bool:
    """Whether `step` delivers a catch-up past `MAX_MISSED_COUNTED`, whose slot number 0.1.x
    gave otherwise: the shell asks its patch which numbering the run's history used."""
    return isinstance(step, Deliver) and step.delivery.skipped >= slots.MAX_MISSED_COUNTED


def _numbered_before_0_2(rule: ScheduleRule, slot: int, due: datetime, now: datetime) -> int:
    """The slot 0.1.x numbered a catch-up from (`slot`, `due`) at `now`: one a missed due time
    up to 100,000, then one a due time of the first window before `now` that held one (a
    minute, an hour, a day, 32 days, 400 years). Kept only so that a timer which caught up that
    far under 0.1.x replays with the request ids it already sent; remove in 0.2."""
    walked = 0
    while (following := rule.next_cron(due)) is not None and following <= now:
        if walked >= 100_000:
            break
        due, walked = following, walked + 1
    else:
        return slot + walked
    for window in _WINDOWS_BEFORE_0_2:
        found = rule.next_cron(max(due, now - window))
        if found is not None and found <= now:
            count = 1
            while (following := rule.next_cron(found)) is not None and following <= now:
                found, count = following, count + 1
            return slot + walked + count
    raise AssertionError("a slot is due by now: the walk saw one")  # pragma: no cover


_WINDOWS_BEFORE_0_2 = (
    timedelta(minutes=1),
    timedelta(hours=1),
    timedelta(days=1),
    timedelta(days=32),
    timedelta(days=366 * 400),
)


# --- delivery outcomes ------------------------------------------------------------------------


def on_outcome(state: TimerState, delivery: Delivery, outcome: Decided, detail: str) -> TimerState:
    """`delivery` was decided: move to the next slot, end a one-shot, or end a deleted timer.

    An outcome of a delivery that is no longer pending (replaced or cancelled while in flight)
    is still counted: the host decided it.
    """
    spec = state.spec
    said = f"{outcome}" + (f": {detail}" if detail else "")
    counts = {
        "delivered": state.delivered + (outcome == "delivered"),
        "rejected": state.rejected + (outcome == "rejected"),
    }
    if spec is None or state.pending != delivery:
        late = f"slot {delivery.slot} of {delivery.timer} was in flight and {said}"
        return state.model_copy(update={**counts, "last_outcome": late})
    if outcome == "cancelled":
        return _cancelled(state, f"slot {delivery.slot} not sent: {detail}")
    rejected = outcome == "rejected"
    next_due = spec.rule.next_cron(delivery.due) if spec.recurring else None
    if rejected and not spec.recurring:
        status = Status.REJECTED
    else:
        status = Status.SCHEDULED if next_due is not None else Status.DELIVERED
    return state.model_copy(
        update={
            **counts,
            "pending": None,
            "status": status,
            "next_slot": delivery.slot + 1,
            "next_due": next_due,
            "last_outcome": f"slot {delivery.slot} {said}",
        }
    )


def on_failed(state: TimerState, delivery: Delivery, error: str) -> TimerState:
    """Every attempt to deliver `delivery` failed technically: park it for an operator.

    A delivery no longer pending is not parked (nothing waits for it); the failure is noted.
    """
    if state.spec is None or state.pending != delivery:
        late = f"slot {delivery.slot} of {delivery.timer} was in flight and failed: {error}"
        return state.model_copy(update={"last_outcome": late})
    return state.model_copy(
        update={
            "status": Status.PARKED,
            "parked_error": error,
            "last_outcome": f"slot {delivery.slot} parked: {error}",
        }
    )


def on_abandoned(state: TimerState, delivery: Delivery) -> TimerState:
    """A delivery no longer pending was stopped before its next attempt: nothing was sent."""
    if state.pending == delivery:
        return state
    note = f"slot {delivery.slot} of {delivery.timer} was not sent: stopped before its next attempt"
    return state.model_copy(update={"last_outcome": note})


# --- what a person sees -----------------------------------------------------------------------


@dataclass(frozen=True)
class Shown:
    """What a timer's search attributes say: `WowStatus` (None: unset) and `WowDue`."""

    status: str | None
    due: datetime | None


def to_show(shown: Shown, next_step: Step, state: TimerState) -> Shown:
    """What the search attributes should say for `next_step`; `shown` where nothing changes.

    `WowStatus` holds only what the execution status cannot tell (Parked, Rejected,
    Cancelled, NeverDue): an undisturbed timer never upserts it, and each upsert is a billed
    action. `WowDue` is never ahead of a slot being delivered, so what visibility reads
    (`status_of`) is the state's own status at every step.
    """
    match next_step:
        case Finish(status):
            return Shown(status.value if status in SHOWN_STATUSES else None, shown.due)
        case Sleep(until):
            return Shown(None, until)
        case AwaitOperator():
            return Shown(Status.PARKED.value, shown.due)
        case Deliver(delivery):
            if shown.due is not None and shown.due <= delivery.due:
                return Shown(None, shown.due)  # already passed: Delivering as it stands
            return Shown(None, delivery.due)  # none yet, or a replaced schedule's later one


def static_summary(owner: AggregateRef, key: str) -> str:
    """The run's fixed summary, true for its whole life: which key of which aggregate."""
    tenant = f", tenant {owner.tenant_id}" if owner.tenant_id else ""
    return f"timer {key} of {owner}{tenant}"


def static_details(owner: AggregateRef, key: str, started: TimerState | None = None) -> str:
    """The run's fixed details: what the timer is, the schedule it `started` with (told as
    such, so never stale), and where its changing parts are shown once a worker runs it."""
    text = (
        f"Delivers the command scheduled under key **{key}** of {owner}. A later "
        "`wow.ScheduleSet` of that key replaces it, a `wow.ScheduleCancelled` or the "
        "aggregate's deletion cancels it.\n\n"
    )
    spec = None if started is None else started.spec
    if started is not None and spec is not None:
        text += (
            f"Started with {summary(spec, started.next_due)} ({spec.rule.describe()}), set by "
            f"commit {spec.upstream_id} (version {started.applied[0]}).\n\n"
        )
    return text + (
        "The schedule in force, its next due time and the last outcome are in **Current "
        "Details** once a worker has run the timer: one delayed to its due time (*Execution "
        "Start*) shows none until then, or until a change wakes it earlier. `WowDue` and "
        "`WowStatus` are under Search Attributes."
    )


def details(state: TimerState) -> str:
    """The current details the Web UI shows (Markdown): status, schedule, counts, last outcome."""
    spec = state.spec
    lines = [f"**{state.status.value}**"]
    if spec is not None:
        lines[0] += f" · {_where(spec, state)}"
        lines.append(
            f"rule {spec.rule.describe()} · set by commit {spec.upstream_id} "
            f"(version {state.applied[0]}), schedule {spec.timer}"
        )
    lines.append(f"delivered {state.delivered} · rejected {state.rejected}")
    if state.parked_error and spec is None:
        lines.append(
            f"parked: {state.parked_error} — cancel it (`wow-temporal timers cancel`), or hand "
            "its commit over again from a current version"
        )
    elif state.parked_error:
        lines.append(
            f"parked: {state.parked_error} — retry with `wow-temporal timers retry` "
            "or `POST /timers/{id}/retry`"
        )
    if state.last_outcome and not (state.parked_error and state.status is Status.PARKED):
        lines.append(f"last: {state.last_outcome}")
    if state.last_change:
        lines.append(f"last change: {state.last_change}")
    if state.unreadable:
        lines.append(
            f"refused {state.unreadable} change(s) it could not read; the last: "
            f"{state.last_unreadable} — hand the commit over again from a current version"
        )
    return "\n\n".join(lines)


def _where(spec: TimerSpec, state: TimerState) -> str:
    """The slot a timer is at: pending, next due, or none left (and which was the last)."""
    pending = state.pending
    if pending is not None:
        return f"{summary(spec, pending.due)} (slot {pending.slot})"
    if state.next_due is not None:
        return f"{summary(spec, state.next_due)} (slot {state.next_slot})"
    target = f"{spec.command.simple_name} → {spec.target}"
    if state.next_slot == 1:
        return f"{target}, never due: its rule never matches"
    last = state.next_slot - 1
    if spec.recurring:  # its rule matches no later time (the year 9999 is past)
        return f"{target}, slot {last} was its last: the rule matches no later time"
    decided = "rejected" if state.status is Status.REJECTED else "delivered"
    return f"{target}, {decided} slot {last}, no further slot"


def summary(spec: TimerSpec, due: datetime | None) -> str:
    """A line a person reads: `CancelOrder → eshop-order.order 42, due 2026-12-01T10:30:00.000Z`."""
    when = "never due" if due is None else "due " + instant_text(due)
    return f"{spec.command.simple_name} → {spec.target}, {when}"
