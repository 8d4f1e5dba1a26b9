"""The pure core of an aggregate timer (`wow_temporal.timers.core`): examples and a model.

The examples walk every transition; the model-based test drives the core the way the workflow
does (`state, step = core.step(state, now)`, deliver, feed the outcome) through random schedule
changes, wake-ups, outcomes and operator actions, and checks it against a plain model of the spec.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import Literal
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from wow_temporal.engine import slots as engine_slots
from wow_temporal.model import (
    AggregateRef,
    Misfire,
    ScheduledCommand,
    ScheduleRule,
    Scope,
)
from wow_temporal.timers import core
from wow_temporal.timers.core import (
    AwaitOperator,
    Deliver,
    Delivery,
    Finish,
    Sleep,
    Status,
    TimerChange,
    TimerSpec,
    TimerState,
)
from wow_temporal.timers.status import status_of

OWNER = AggregateRef(
    context_name="eshop-order", aggregate_name="order", tenant_id="t1", aggregate_id="42"
)
COMMAND = ScheduledCommand(type="eshop.order.CancelOrder", body={"orderId": "42"})
T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
US = timedelta(microseconds=1)
EVERY_15 = "0 */15 * * * *"
NEVER = "0 0 0 30 2 *"


def make_spec(
    rule: ScheduleRule,
    *,
    timer: str = "c1:e1",
    committed: datetime = T0,
    key: str = "cancel",
) -> TimerSpec:
    return TimerSpec(
        timer=timer,
        key=key,
        owner=OWNER,
        target=OWNER,
        rule=rule,
        command=COMMAND,
        scope=Scope(tenant_id="t1"),
        upstream_id=timer.split(":")[0],
        first_due=rule.first_due(committed),
    )


def set_change(
    rule: ScheduleRule,
    version: int = 1,
    index: int = 0,
    *,
    timer: str | None = None,
    committed: datetime = T0,
) -> TimerChange:
    timer = timer or f"c{version}:e{index}"
    return TimerChange(
        kind="set",
        version=version,
        index=index,
        spec=make_spec(rule, timer=timer, committed=committed),
    )


def at_rule(due: datetime = T0 + timedelta(minutes=30)) -> ScheduleRule:
    return ScheduleRule.at(due)


def cron_rule(expression: str = EVERY_15, misfire: Misfire = Misfire.COALESCE) -> ScheduleRule:
    """The rule as a timer's input reads it (`ScheduleRule.cron` refuses NEVER, which a timer
    started before that check may still hold)."""
    return ScheduleRule.model_validate({"cron": expression, "misfire": misfire})


def drive(
    state: TimerState,
    now: datetime,
    outcome: Literal["delivered", "rejected"] = "delivered",
    limit: int = 1000,
) -> tuple[TimerState, list[Delivery], core.Step]:
    """The workflow's loop at a fixed `now`: every Deliver gets `outcome`, until it waits."""
    deliveries: list[Delivery] = []
    for _ in range(limit):
        state, step = core.step(state, now)
        if not isinstance(step, Deliver):
            return state, deliveries, step
        assert now >= step.delivery.due, "delivered early"
        deliveries.append(step.delivery)
        state = core.on_outcome(state, step.delivery, outcome, "")
    raise AssertionError(f"still delivering after {limit} steps")


# ---------------------------------------------------------------- one-shot rules


def test_at_rule_sleeps_until_due_then_delivers_at_due_and_finishes() -> None:
    due = T0 + timedelta(minutes=30)
    state = core.initial(set_change(at_rule(due)))
    assert state.status is Status.SCHEDULED
    assert state.next_due == due
    assert state.next_slot == 1

    state, step = core.step(state, T0)
    assert step == Sleep(due)

    state, step = core.step(state, due - US)
    assert step == Sleep(due), "never early, not even by a microsecond"

    state, step = core.step(state, due)
    assert step == Deliver(Delivery(timer="c1:e0", slot=1, due=due, skipped=0))
    assert isinstance(step, Deliver)
    assert step.delivery.request_id == "c1:e0#1"
    assert state.status is Status.DELIVERING
    assert state.pending == step.delivery

    state = core.on_outcome(state, step.delivery, "delivered", "")
    assert state.status is Status.DELIVERED
    assert state.pending is None
    assert state.delivered == 1
    assert state.next_due is None
    assert state.last_outcome == "slot 1 delivered"

    state, step = core.step(state, due + timedelta(days=1))
    assert step == Finish(Status.DELIVERED)


def test_at_rule_in_a_non_utc_zone_is_due_at_the_same_instant() -> None:
    plus_two = timezone(timedelta(hours=2))
    due_local = datetime(2026, 12, 1, 12, 30, tzinfo=plus_two)  # 10:30Z
    state = core.initial(set_change(ScheduleRule.at(due_local)))
    _, step = core.step(state, datetime(2026, 12, 1, 10, 30, tzinfo=UTC) - US)
    assert isinstance(step, Sleep)
    _, step = core.step(state, datetime(2026, 12, 1, 10, 30, tzinfo=UTC))
    assert isinstance(step, Deliver)


def test_at_rule_in_the_past_is_delivered_at_once() -> None:
    due = T0 - timedelta(hours=3)
    state = core.initial(set_change(at_rule(due)))
    _, step = core.step(state, T0)
    assert step == Deliver(Delivery(timer="c1:e0", slot=1, due=due))


def test_after_rule_is_due_delay_after_the_commit() -> None:
    committed = T0 + timedelta(milliseconds=123)
    change = set_change(ScheduleRule.after(timedelta(minutes=30)), committed=committed)
    state = core.initial(change)
    due = committed + timedelta(minutes=30)
    assert state.next_due == due
    _, step = core.step(state, due - US)
    assert step == Sleep(due)
    _, step = core.step(state, due)
    assert step == Deliver(Delivery(timer="c1:e0", slot=1, due=due))


def test_a_one_shot_delivers_once_even_when_woken_again() -> None:
    due = T0 + timedelta(minutes=1)
    state = core.initial(set_change(at_rule(due)))
    state, deliveries, step = drive(state, due + timedelta(hours=5))
    assert [d.slot for d in deliveries] == [1]
    assert step == Finish(Status.DELIVERED)
    state, deliveries, step = drive(state, due + timedelta(days=5))
    assert deliveries == []
    assert step == Finish(Status.DELIVERED)


def test_step_while_in_flight_repeats_the_same_delivery() -> None:
    """Decided once: until an outcome arrives, the same slot and request id, never a new one."""
    due = T0
    state = core.initial(set_change(at_rule(due)))
    state, first = core.step(state, due)
    state, again = core.step(state, due + timedelta(hours=1))
    assert first == again
    assert isinstance(again, Deliver)
    assert again.delivery.request_id == "c1:e0#1"


def test_rejection_ends_a_one_shot_without_retry() -> None:
    state = core.initial(set_change(at_rule(T0)))
    state, step = core.step(state, T0)
    assert isinstance(step, Deliver)
    state = core.on_outcome(state, step.delivery, "rejected", "OrderShipped already shipped")
    assert state.status is Status.REJECTED
    assert state.pending is None
    assert state.delivered == 0
    assert state.last_outcome == "slot 1 rejected: OrderShipped already shipped"
    state, step = core.step(state, T0 + timedelta(days=1))
    assert step == Finish(Status.REJECTED)
    assert core.retry(state) == state, "a rejected timer cannot be retried"


def test_failure_parks_then_retry_delivers_the_same_delivery() -> None:
    state = core.initial(set_change(at_rule(T0)))
    state, step = core.step(state, T0)
    assert isinstance(step, Deliver)
    delivery = step.delivery

    state = core.on_failed(state, delivery, "connection refused")
    assert state.status is Status.PARKED
    assert state.parked_error == "connection refused"
    assert state.pending == delivery
    assert "parked" in state.last_outcome

    for later in (T0, T0 + timedelta(hours=1), T0 + timedelta(days=30)):
        state, step = core.step(state, later)
        assert step == AwaitOperator(), "a parked timer waits for an operator, whatever the time"

    state = core.retry(state)
    assert state.status is Status.SCHEDULED
    assert state.parked_error == ""
    state, step = core.step(state, T0 + timedelta(days=30))
    assert step == Deliver(delivery), "same slot, same request id"
    assert isinstance(step, Deliver)
    assert step.delivery.request_id == "c1:e0#1"

    state = core.on_outcome(state, step.delivery, "delivered", "")
    assert state.status is Status.DELIVERED
    assert state.delivered == 1
    _, step = core.step(state, T0 + timedelta(days=30))
    assert step == Finish(Status.DELIVERED)


def unmoved(before: TimerState, after: TimerState) -> bool:
    """The schedule, its slot and its status are as they were (counts and notes may differ)."""
    fields = ("applied", "spec", "status", "next_slot", "next_due", "pending", "parked_error")
    return all(getattr(before, name) == getattr(after, name) for name in fields)


def test_retry_and_outcomes_of_what_is_not_pending_move_nothing() -> None:
    state = core.initial(set_change(at_rule(T0)))
    assert core.retry(state) == state, "only a parked timer is retried"
    stranger = Delivery(timer="c1:e0", slot=1, due=T0)
    assert unmoved(state, core.on_failed(state, stranger, "boom"))
    assert core.on_failed(state, stranger, "boom").status is Status.SCHEDULED, "not parked"
    assert unmoved(state, core.on_outcome(state, stranger, "delivered", ""))
    state, step = core.step(state, T0)
    assert isinstance(step, Deliver)
    assert core.retry(state) == state, "delivering is not parked"
    other_slot = step.delivery.model_copy(update={"slot": 2})
    assert unmoved(state, core.on_outcome(state, other_slot, "delivered", ""))
    assert unmoved(state, core.on_failed(state, other_slot, "boom"))
    assert core.on_abandoned(state, step.delivery) == state, "the pending one is not abandoned"


def test_operator_cancel_while_parked_ends_the_timer() -> None:
    state = core.initial(set_change(at_rule(T0)))
    state, step = core.step(state, T0)
    assert isinstance(step, Deliver)
    state = core.on_failed(state, step.delivery, "timeout")
    state = core.cancel(state)
    assert state.status is Status.CANCELLED
    assert state.spec is None
    assert state.pending is None
    assert state.parked_error == ""
    assert state.last_outcome == "cancelled by operator"
    _, step2 = core.step(state, T0 + timedelta(hours=1))
    assert step2 == Finish(Status.CANCELLED)
    assert core.cancel(state) == state
    assert core.retry(state) == state


def test_operator_cancel_then_same_change_again_does_not_revive() -> None:
    change = set_change(at_rule(T0 + timedelta(hours=1)))
    state = core.cancel(core.initial(change))
    assert core.apply(state, change) == state


def test_replace_while_parked_starts_a_new_timer_at_slot_one() -> None:
    state = core.initial(set_change(at_rule(T0), version=1))
    state, step = core.step(state, T0)
    assert isinstance(step, Deliver)
    old = step.delivery
    state = core.on_failed(state, old, "timeout")

    new_due = T0 + timedelta(hours=2)
    state = core.apply(state, set_change(at_rule(new_due), version=2))
    assert state.status is Status.SCHEDULED
    assert state.pending is None
    assert state.parked_error == ""
    assert state.next_slot == 1
    assert state.applied == (2, 0)
    assert state.spec is not None
    assert state.spec.timer == "c2:e0"

    state, step = core.step(state, T0 + timedelta(hours=1))
    assert step == Sleep(new_due)
    state, step = core.step(state, new_due)
    assert step == Deliver(Delivery(timer="c2:e0", slot=1, due=new_due))
    assert isinstance(step, Deliver)
    assert step.delivery.request_id != old.request_id
    # the old, parked delivery's outcome does not move the new schedule
    assert unmoved(state, core.on_outcome(state, old, "delivered", ""))
    assert unmoved(state, core.on_failed(state, old, "x"))
    assert core.retry(state) == state


def test_in_flight_outcome_after_replacement_is_counted_but_moves_nothing() -> None:
    state = core.initial(set_change(at_rule(T0), version=1))
    state, step = core.step(state, T0)
    assert isinstance(step, Deliver)
    in_flight = step.delivery
    state = core.apply(state, set_change(at_rule(T0 + timedelta(hours=1)), version=2))
    replaced = state
    delivered = core.on_outcome(replaced, in_flight, "delivered", "")
    assert unmoved(replaced, delivered)
    assert (delivered.delivered, delivered.rejected) == (1, 0), "the host decided it: counted"
    assert delivered.last_outcome == "slot 1 of c1:e0 was in flight and delivered"
    rejected = core.on_outcome(replaced, in_flight, "rejected", "no")
    assert unmoved(replaced, rejected)
    assert (rejected.delivered, rejected.rejected) == (0, 1)
    failed = core.on_failed(replaced, in_flight, "boom")
    assert unmoved(replaced, failed)
    assert failed.status is Status.SCHEDULED, "a delivery no longer pending is not parked"
    abandoned = core.on_abandoned(replaced, in_flight)
    assert unmoved(replaced, abandoned)
    assert "was not sent" in abandoned.last_outcome


def test_in_flight_outcome_after_cancel_change_is_counted() -> None:
    """A cancel and the delivery's completion may reach the workflow together, the cancel
    first: the delivery the host decided is still counted (it was lost before)."""
    state = core.initial(set_change(cron_rule(), version=1))
    delivered = 0
    for hour in range(1, 4):
        state, step = core.step(state, T0 + timedelta(hours=hour))
        assert isinstance(step, Deliver)
        if hour < 3:
            state = core.on_outcome(state, step.delivery, "delivered", "")
            delivered += 1
    state = core.apply(state, TimerChange(kind="delete", version=2))
    state = core.on_outcome(state, step.delivery, "delivered", "")
    assert state.delivered == delivered + 1 == 3
    assert state.status is Status.CANCELLED
    assert core.step(state, T0)[1] == Finish(Status.CANCELLED)
    assert core.on_failed(state, step.delivery, "boom").status is Status.CANCELLED


def test_deletion_found_before_sending_cancels_the_timer() -> None:
    state = core.initial(set_change(cron_rule(), version=1))
    state, step = core.step(state, T0 + timedelta(hours=1))
    assert isinstance(step, Deliver)
    state = core.on_outcome(state, step.delivery, "cancelled", "order 42 was deleted at version 5")
    assert state.status is Status.CANCELLED
    assert state.spec is None
    assert (state.delivered, state.rejected) == (0, 0)
    assert state.last_outcome == "slot 4 not sent: order 42 was deleted at version 5"
    assert core.step(state, T0 + timedelta(days=1))[1] == Finish(Status.CANCELLED)


# ---------------------------------------------------------------- cancel, delete, versions


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("cancel", "cancelled by key (version 2)"),
        ("delete", "cancelled by the aggregate's deletion (version 2)"),
    ],
)
def test_cancel_and_delete_changes_end_the_timer(
    kind: Literal["cancel", "delete"], reason: str
) -> None:
    state = core.initial(set_change(at_rule(T0 + timedelta(hours=1)), version=1))
    state = core.apply(state, TimerChange(kind=kind, version=2, index=0))
    assert state.status is Status.CANCELLED
    assert state.spec is None
    assert state.next_due is None
    assert state.pending is None
    assert state.applied == (2, 0)
    assert state.last_outcome == reason
    _, step = core.step(state, T0 + timedelta(hours=2))
    assert step == Finish(Status.CANCELLED)


@pytest.mark.parametrize("kind", ["cancel", "delete"])
def test_cancel_change_while_parked_ends_the_timer(kind: Literal["cancel", "delete"]) -> None:
    state = core.initial(set_change(at_rule(T0), version=1))
    state, step = core.step(state, T0)
    assert isinstance(step, Deliver)
    state = core.on_failed(state, step.delivery, "timeout")
    state = core.apply(state, TimerChange(kind=kind, version=3, index=1))
    assert state.status is Status.CANCELLED
    assert state.pending is None
    assert state.parked_error == ""
    assert core.step(state, T0)[1] == Finish(Status.CANCELLED)


def test_same_change_twice_changes_nothing() -> None:
    change = set_change(at_rule(T0), version=4, index=1)
    state = core.initial(change)
    assert core.apply(state, change) == state
    state, step = core.step(state, T0)
    assert isinstance(step, Deliver)
    assert core.apply(state, change) == state, "a duplicate does not restart an in-flight slot"
    state = core.on_outcome(state, step.delivery, "delivered", "")
    assert core.apply(state, change) == state, "a duplicate does not deliver again"
    assert core.step(state, T0 + timedelta(days=1))[1] == Finish(Status.DELIVERED)


@pytest.mark.parametrize(
    ("version", "index"),
    [(3, 0), (4, 0), (4, 1), (1, 9)],
    ids=["older-version", "same-version-older-index", "same-order", "much-older"],
)
def test_older_or_equal_set_is_ignored(version: int, index: int) -> None:
    state = core.initial(set_change(at_rule(T0), version=4, index=1))
    stale = set_change(
        at_rule(T0 + timedelta(hours=9)),
        version=version,
        index=index,
        timer=f"stale{version}:{index}",
    )
    assert core.apply(state, stale) == state


@pytest.mark.parametrize(("version", "index"), [(3, 5), (4, 0), (4, 1)])
def test_older_or_equal_cancel_and_delete_are_ignored(version: int, index: int) -> None:
    state = core.initial(set_change(at_rule(T0), version=4, index=1))
    for kind in ("cancel", "delete"):
        change = TimerChange(kind=kind, version=version, index=index)  # type: ignore[arg-type]
        assert core.apply(state, change) == state


def test_newer_index_of_the_same_commit_wins() -> None:
    state = core.initial(set_change(at_rule(T0), version=4, index=0))
    state = core.apply(state, TimerChange(kind="cancel", version=4, index=1))
    assert state.status is Status.CANCELLED
    newer = set_change(at_rule(T0 + timedelta(hours=1)), version=4, index=2)
    state = core.apply(state, newer)
    assert state.spec == newer.spec
    assert state.status is Status.SCHEDULED


def test_cancel_arriving_before_an_older_set_keeps_it_cancelled() -> None:
    state = core.initial(set_change(at_rule(T0), version=2))
    state = core.apply(state, TimerChange(kind="cancel", version=5))
    assert core.apply(state, set_change(at_rule(T0), version=4)) == state
    assert core.step(state, T0)[1] == Finish(Status.CANCELLED)


def test_newer_set_after_cancel_and_after_delivery_starts_afresh() -> None:
    state = core.initial(set_change(at_rule(T0), version=1))
    state, deliveries, _ = drive(state, T0)
    assert len(deliveries) == 1
    state = core.apply(state, TimerChange(kind="delete", version=2))
    state = core.apply(state, set_change(at_rule(T0 + timedelta(hours=1)), version=3))
    assert state.status is Status.SCHEDULED
    assert state.delivered == 1, "counted over the timer's life"
    assert state.next_slot == 1
    state, deliveries, step = drive(state, T0 + timedelta(hours=1))
    assert [(d.timer, d.slot) for d in deliveries] == [("c3:e0", 1)]
    assert step == Finish(Status.DELIVERED)


def test_replacement_moves_the_due_time_both_ways() -> None:
    state = core.initial(set_change(at_rule(T0 + timedelta(hours=2)), version=1))
    state = core.apply(state, set_change(at_rule(T0 + timedelta(hours=1)), version=2))
    assert core.step(state, T0)[1] == Sleep(T0 + timedelta(hours=1))
    state = core.apply(state, set_change(at_rule(T0 + timedelta(hours=3)), version=3))
    assert core.step(state, T0 + timedelta(hours=2))[1] == Sleep(T0 + timedelta(hours=3))


# ---------------------------------------------------------------- cron rules


def test_cron_delivers_successive_slots_at_successive_cron_times() -> None:
    state = core.initial(set_change(cron_rule()))
    slots = [T0 + timedelta(minutes=15 * n) for n in (1, 2, 3)]
    assert state.next_due == slots[0]
    for number, due in enumerate(slots, start=1):
        state, step = core.step(state, due - US)
        assert step == Sleep(due)
        state, step = core.step(state, due)
        assert step == Deliver(Delivery(timer="c1:e0", slot=number, due=due, skipped=0))
        assert isinstance(step, Deliver)
        assert step.delivery.request_id == f"c1:e0#{number}"
        state = core.on_outcome(state, step.delivery, "delivered", "")
        assert state.status is Status.SCHEDULED
        state, step = core.step(state, due)
        assert step == Sleep(due + timedelta(minutes=15)), "once per slot"
    assert state.delivered == 3
    assert state.next_slot == 4


def test_cron_rejection_moves_on_to_the_next_slot() -> None:
    state = core.initial(set_change(cron_rule()))
    due = T0 + timedelta(minutes=15)
    state, step = core.step(state, due)
    assert isinstance(step, Deliver)
    state = core.on_outcome(state, step.delivery, "rejected", "nope")
    assert state.status is Status.SCHEDULED
    assert state.delivered == 0
    assert state.next_slot == 2
    assert core.step(state, due)[1] == Sleep(due + timedelta(minutes=15))


def test_cron_failure_parks_and_retry_redelivers_the_same_slot_then_continues() -> None:
    state = core.initial(set_change(cron_rule()))
    due = T0 + timedelta(minutes=15)
    state, step = core.step(state, due)
    assert isinstance(step, Deliver)
    parked = step.delivery
    state = core.on_failed(state, parked, "503")
    late = due + timedelta(hours=1)  # four more slots went by while parked
    assert core.step(state, late)[1] == AwaitOperator()
    state = core.retry(state)
    state, step = core.step(state, late)
    assert step == Deliver(parked)
    state = core.on_outcome(state, parked, "delivered", "")
    state, step = core.step(state, late)
    assert isinstance(step, Deliver)
    assert step.delivery.slot == parked.slot + 1 + step.delivery.skipped
    assert step.delivery.due == late


@pytest.mark.parametrize("gap", [1, 2, 5, 40])
def test_coalesce_after_a_gap_delivers_only_the_latest_slot(gap: int) -> None:
    state = core.initial(set_change(cron_rule(misfire=Misfire.COALESCE)))
    latest = T0 + timedelta(minutes=15 * gap)
    now = latest + timedelta(minutes=7)
    state, deliveries, step = drive(state, now)
    assert deliveries == [Delivery(timer="c1:e0", slot=gap, due=latest, skipped=gap - 1)]
    assert step == Sleep(latest + timedelta(minutes=15))


def test_coalesce_counts_skipped_from_the_last_decided_slot() -> None:
    state = core.initial(set_change(cron_rule(misfire=Misfire.COALESCE)))
    state, deliveries, _ = drive(state, T0 + timedelta(minutes=15))
    assert [(d.slot, d.skipped) for d in deliveries] == [(1, 0)]
    state, deliveries, _ = drive(state, T0 + timedelta(minutes=15 * 6))
    assert deliveries == [
        Delivery(timer="c1:e0", slot=6, due=T0 + timedelta(minutes=90), skipped=4)
    ]


@pytest.mark.parametrize("gap", [1, 2, 5])
def test_catch_up_after_a_gap_delivers_every_slot_in_order(gap: int) -> None:
    state = core.initial(set_change(cron_rule(misfire=Misfire.CATCH_UP)))
    now = T0 + timedelta(minutes=15 * gap + 7)
    state, deliveries, step = drive(state, now)
    assert deliveries == [
        Delivery(timer="c1:e0", slot=n, due=T0 + timedelta(minutes=15 * n), skipped=0)
        for n in range(1, gap + 1)
    ]
    assert step == Sleep(T0 + timedelta(minutes=15 * (gap + 1)))


def test_cron_that_never_matches_ends_never_due_and_says_so_everywhere() -> None:
    """Not Delivered with nothing delivered, nor a state still Scheduled: NeverDue, in the
    state, in `WowStatus`, and so in what `list` and `show` read from visibility."""
    state = core.initial(set_change(cron_rule(NEVER)))
    assert state.next_due is None
    state, step = core.step(state, T0)
    assert step == Finish(Status.NEVER_DUE)
    assert state.status is Status.NEVER_DUE
    shown = core.to_show(core.Shown(None, None), step, state)
    assert shown == core.Shown("NeverDue", None)
    assert status_of("Completed", shown.status, shown.due, T0) is Status.NEVER_DUE
    assert core.details(state).startswith("**NeverDue**")


def test_a_replacement_already_due_moves_wow_due_back_so_it_reads_delivering() -> None:
    """The old schedule's due time is ahead; the new one's passed: visibility must not read
    Scheduled while the state delivers."""
    old = core.initial(set_change(at_rule(T0 + timedelta(hours=2))))
    shown = core.Shown(None, old.next_due)
    late = make_spec(ScheduleRule.after(timedelta(seconds=1)), timer="c2:e0", committed=T0)
    state = core.apply(old, TimerChange(kind="set", version=2, spec=late))
    state, step = core.step(state, T0 + timedelta(minutes=1))
    assert isinstance(step, Deliver)
    shown = core.to_show(shown, step, state)
    assert shown.due == T0 + timedelta(seconds=1)
    assert status_of("Running", shown.status, shown.due, T0 + timedelta(minutes=1)) is (
        state.status
    ) is Status.DELIVERING


def test_coalesce_beyond_the_count_limit_still_delivers_only_the_latest_slot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """MAX_MISSED_COUNTED bounds the *count* (the due times past it go uncounted, never
    delivered early): a wake-up after more missed slots than the limit must still deliver one
    slot, the latest, not a stale one and then more."""
    monkeypatch.setattr(engine_slots, "MAX_MISSED_COUNTED", 3)
    state = core.initial(set_change(cron_rule(misfire=Misfire.COALESCE)))
    latest = T0 + timedelta(minutes=15 * 10)
    state, deliveries, step = drive(state, latest)
    assert [d.due for d in deliveries] == [latest], (
        f"COALESCE delivered {[(d.slot, d.due.isoformat(), d.skipped) for d in deliveries]}"
    )
    (delivery,) = deliveries
    assert 3 <= delivery.skipped <= 9
    assert 1 < delivery.slot <= 10
    assert delivery.skipped == delivery.slot - 1, "skipped counts the slot numbers it skipped"
    assert step == Sleep(latest + timedelta(minutes=15))
    state, deliveries, _ = drive(state, latest + timedelta(minutes=15))
    assert [(d.slot, d.skipped) for d in deliveries] == [(delivery.slot + 1, 0)]


def test_coalesce_past_the_count_limit_counts_up_to_the_limit() -> None:
    """Yearly slots 2027, 2028, 2029 all missed, limit 1: 2029 is found and delivered, it
    skips two slots of which one is counted (the limit): it is slot 2, skipping 1."""
    rule = cron_rule("0 0 0 1 1 *")
    state = core.initial(set_change(rule, committed=datetime(2026, 12, 1, tzinfo=UTC)))
    with patch.object(engine_slots, "MAX_MISSED_COUNTED", 1):
        _, deliveries, _ = drive(state, datetime(2029, 3, 1, tzinfo=UTC))
    assert deliveries == [
        Delivery(timer="c1:e0", slot=2, due=datetime(2029, 1, 1, tzinfo=UTC), skipped=1)
    ]


def _latest_due_of_0_1(
    rule: ScheduleRule, slot: int, due: datetime, now: datetime
) -> tuple[int, datetime]:
    """0.1.x's coalesced slot number and due time, verbatim (the oracle its histories hold)."""
    skipped = 0
    while True:
        following = rule.next_cron(due)
        if following is None or following > now:
            return slot, due
        if skipped >= 100_000:
            break
        slot, due, skipped = slot + 1, following, skipped + 1
    for window in (timedelta(minutes=1), timedelta(hours=1), timedelta(days=1),
                   timedelta(days=32), timedelta(days=366 * 400)):
        found = rule.next_cron(max(due, now - window))
        if found is not None and found <= now:
            count = 1
            while (following := rule.next_cron(found)) is not None and following <= now:
                found, count = following, count + 1
            return slot + count, found
    raise AssertionError


def test_a_catch_up_past_the_cap_is_numbered_as_the_run_recorded_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past the cap the engine numbers the slot `next + cap`; a run recorded under 0.1.x
    numbered it `next + missed` and already sent that request id, so its replay (the shell
    asks its patch) numbers it as then: the ids it sends next were never sent."""
    monkeypatch.setattr(engine_slots, "MAX_MISSED_COUNTED", 3)
    rule = cron_rule("0 */15 * * * *")
    state = core.initial(set_change(rule))
    assert state.next_due is not None
    now = state.next_due + timedelta(minutes=15 * 7, seconds=1)
    _, new = core.step(state, now)
    _, old = core.step(state, now, numbered_before_0_2=True)
    assert core.passed_the_cap(new)
    assert isinstance(new, Deliver) and isinstance(old, Deliver)
    assert (new.delivery.slot, new.delivery.skipped) == (4, 3)
    assert old.delivery.slot == _latest_due_of_0_1(rule, 1, state.next_due, now)[0] == 8
    assert old.delivery.due == new.delivery.due
    _, short = core.step(state, state.next_due + timedelta(minutes=15 * 2, seconds=1))
    assert not core.passed_the_cap(short), "within the cap both numberings agree"


def test_the_0_1_numbering_past_its_own_walk_matches_0_1() -> None:
    """A one-second rule 100,050 s behind: 0.1.x walked 100,000 due times, then counted the
    last minute's; the kept numbering gives the same slot."""
    rule = cron_rule("* * * * * *")
    first = datetime(2026, 12, 1, tzinfo=UTC)
    now = first + timedelta(seconds=100_050, milliseconds=500)
    want, _ = _latest_due_of_0_1(rule, 1, first, now)
    assert core._numbered_before_0_2(rule, 1, first, now) == want


LIMIT_CRONS = (
    "0 */15 * * * *",
    "*/30 * * * * *",
    "0 0 6 * * *",
    "0 30 9 * * MON-FRI",
    "0 0 0 1 1 *",
    "0 0 12 29 2 *",
)


@settings(max_examples=150, deadline=None)
@given(
    expression=st.sampled_from(LIMIT_CRONS),
    limit=st.integers(1, 6),
    gaps=st.lists(st.integers(1, 30), min_size=1, max_size=3),
    fraction=st.floats(0, 0.999),
)
def test_coalesce_with_any_count_limit_delivers_the_latest_due_slot(
    expression: str, limit: int, gaps: list[int], fraction: float
) -> None:
    """Whatever the limit: one delivery per wake-up, of the latest due slot, never early; slot
    numbers increase; `skipped` is exact within the limit and a lower bound past it."""
    rule = cron_rule(expression, Misfire.COALESCE)
    state = core.initial(set_change(rule))
    assert state.next_due is not None
    slots = [state.next_due]  # slots[i] is the due time of true slot i + 1
    last_slot, last_index = 0, -1
    with patch.object(engine_slots, "MAX_MISSED_COUNTED", limit):
        for gap in gaps:
            index = last_index + gap
            while len(slots) <= index + 1:
                following = rule.next_cron(slots[-1])
                assert following is not None
                slots.append(following)
            now = slots[index] + (slots[index + 1] - slots[index]) * fraction
            now = min(now, slots[index + 1] - US)
            state, deliveries, step = drive(state, now)
            assert len(deliveries) == 1, [(d.slot, d.due, d.skipped) for d in deliveries]
            (delivery,) = deliveries
            assert delivery.due == slots[index]
            assert delivery.slot > last_slot
            assert delivery.slot <= index + 1, "never numbered past the true slot"
            assert delivery.skipped <= gap - 1
            assert delivery.skipped == delivery.slot - last_slot - 1, "numbering and count agree"
            if gap - 1 <= limit:
                assert delivery.skipped == gap - 1
                if last_slot == last_index + 1:  # numbering still exact so far
                    assert delivery.slot == index + 1
            assert step == Sleep(slots[index + 1])
            last_slot, last_index = delivery.slot, index


# ---------------------------------------------------------------- names and state on the wire


def test_summary_reads_like_a_sentence() -> None:
    spec = make_spec(at_rule())
    assert (
        core.summary(spec, datetime(2026, 12, 1, 10, 30, tzinfo=UTC))
        == "CancelOrder → eshop-order.order 42, due 2026-12-01T10:30:00.000Z"
    )
    assert (
        core.summary(spec, datetime(2026, 12, 1, 10, 30, 5, tzinfo=UTC))
        == "CancelOrder → eshop-order.order 42, due 2026-12-01T10:30:05.000Z"
    )
    assert (
        core.summary(spec, datetime(2026, 12, 1, 10, 30, 5, 250_000, tzinfo=UTC))
        == "CancelOrder → eshop-order.order 42, due 2026-12-01T10:30:05.250Z"
    )
    assert (
        core.summary(spec, datetime(2026, 12, 1, 11, 30, tzinfo=timezone(timedelta(hours=1))))
        == "CancelOrder → eshop-order.order 42, due 2026-12-01T10:30:00.000Z"
    )
    assert core.summary(spec, None) == "CancelOrder → eshop-order.order 42, never due"


def test_summary_names_the_target() -> None:
    other = AggregateRef(
        context_name="eshop-payment", aggregate_name="payment", tenant_id="t1", aggregate_id="p7"
    )
    spec = make_spec(at_rule()).model_copy(update={"target": other})
    assert core.summary(spec, T0) == (
        "CancelOrder → eshop-payment.payment p7, due 2026-12-01T10:00:00.000Z"
    )


def test_request_id_is_timer_hash_slot() -> None:
    assert Delivery(timer="c9:e3", slot=17, due=T0).request_id == "c9:e3#17"


def test_state_survives_json_round_trip() -> None:
    """The state is carried across continue-as-new and changes travel as signals (JSON)."""
    for schedule in (
        at_rule(),
        ScheduleRule.after(timedelta(minutes=30, seconds=1.5)),
        cron_rule(),
    ):
        change = set_change(schedule, version=3, index=2)
        assert TimerChange.model_validate_json(change.model_dump_json()) == change
        state = core.initial(change)
        state, step = core.step(state, T0 + timedelta(days=1))
        assert isinstance(step, Deliver)
        state = core.on_failed(state, step.delivery, "boom")
        again = TimerState.model_validate_json(state.model_dump_json())
        assert again == state
        assert core.step(again, T0 + timedelta(days=2))[1] == AwaitOperator()
        assert core.step(core.retry(again), T0 + timedelta(days=2))[1] == step


# ---------------------------------------------------------------- the model-based test

CRONS = ("0 */15 * * * *", "0 0 * * * *", "*/30 * * * * *", NEVER)


@dataclass
class TimerRecord:
    """What the model knows about one timer (one ScheduleSet)."""

    spec: TimerSpec
    decided: list[Delivery] = field(default_factory=list)
    sent: set[str] = field(default_factory=set)
    retried: set[str] = field(default_factory=set)
    """Request ids an operator retried after a park: each may be sent once more."""
    next_slot: int = 1
    next_due: datetime | None = None


class TimerMachine(RuleBasedStateMachine):
    """Drives `core` like the workflow does and checks it against a plain model of the spec."""

    def __init__(self) -> None:
        super().__init__()
        self.now = T0
        self.state = TimerState()
        self.events: dict[tuple[int, int], TimerChange] = {}
        self.applied: list[TimerChange] = []
        self.operator_cancelled: set[str] = set()
        self.timers: dict[str, TimerRecord] = {}
        self.in_flight: Delivery | None = None
        self.parked: Delivery | None = None
        self.finished: Finish | None = None
        self.shown = core.Shown(None, None)
        """What the run's search attributes say, as the shell upserts them after each step."""

    # -- the model

    def live(self) -> TimerSpec | None:
        """The set change with the greatest order, unless a newer cancel/delete or an operator."""
        if not self.applied:
            return None
        newest = max(self.applied, key=lambda c: c.order)
        if newest.kind != "set":
            return None
        assert newest.spec is not None
        if newest.spec.timer in self.operator_cancelled:
            return None
        return newest.spec

    def change_at(
        self, data: st.DataObject, kind: Literal["set", "cancel", "delete"]
    ) -> TimerChange:
        """The event at a drawn (version, index): an existing one is re-sent (a duplicate)."""
        order = (
            data.draw(st.integers(1, 8), label="version"),
            data.draw(st.integers(0, 2), label="index"),
        )
        if order in self.events:
            return self.events[order]
        if kind == "set":
            rule = data.draw(rules(self.now), label="rule")
            committed = self.now - data.draw(
                st.timedeltas(timedelta(0), timedelta(hours=2)), label="commit age"
            )
            timer = f"c{order[0]}:e{order[1]}"
            change = TimerChange(
                kind="set",
                version=order[0],
                index=order[1],
                spec=make_spec(rule, timer=timer, committed=committed),
            )
        else:
            change = TimerChange(kind=kind, version=order[0], index=order[1])
        self.events[order] = change
        return change

    def apply(self, change: TimerChange) -> None:
        before = self.state
        received, answer = core.receive(self.state, change)
        self.state = core.apply(self.state, change)
        assert received == self.state.model_copy(update={"last_change": received.last_change})
        assert received.last_change.endswith(f": {answer.outcome}: {answer.reason}")
        assert (answer.outcome == "ignored") == (self.state == before)
        self.applied.append(change)
        if change.spec is not None and change.spec.timer not in self.timers:
            self.timers[change.spec.timer] = TimerRecord(
                spec=change.spec, next_due=change.spec.first_due
            )
        if self.state == before:
            return
        if self.finished is not None or not self.applied[:-1]:  # a new run: its start's
            self.shown = core.Shown(None, self.state.next_due)  # attributes
        self.finished = None
        if self.parked is not None and self.state.pending != self.parked:
            self.parked = None

    # -- schedule changes

    @initialize(data=st.data())
    def start(self, data: st.DataObject) -> None:
        self.apply(self.change_at(data, "set"))

    @rule(data=st.data())
    def set_schedule(self, data: st.DataObject) -> None:
        self.apply(self.change_at(data, "set"))

    @rule(data=st.data(), kind=st.sampled_from(["cancel", "delete"]))
    def cancel_schedule(self, data: st.DataObject, kind: Literal["cancel", "delete"]) -> None:
        self.apply(self.change_at(data, kind))

    @precondition(lambda self: bool(self.applied))
    @rule(data=st.data())
    def duplicate(self, data: st.DataObject) -> None:
        change = data.draw(st.sampled_from(self.applied), label="duplicate")
        before = self.state
        self.apply(change)
        assert self.state == before, "the same change twice changes nothing"

    # -- time

    @rule(delta=st.timedeltas(timedelta(0), timedelta(hours=3)))
    def advance(self, delta: timedelta) -> None:
        self.now += delta
        self.wake()

    @precondition(lambda self: self.state.next_due is not None)
    @rule()
    def advance_to_due(self) -> None:
        due = self.state.next_due
        assert due is not None
        self.now = max(self.now, due)
        self.wake()

    @precondition(lambda self: self.state.next_due is not None)
    @rule()
    def wake_just_before_due(self) -> None:
        due = self.state.next_due
        assert due is not None
        self.now = max(self.now, due - US)
        self.wake()

    @rule()
    def wake(self) -> None:
        """The workflow's loop: step until it has something to wait for."""
        if self.in_flight is not None:
            if self.state.pending == self.in_flight:
                return  # the activity is still running
            # replaced or cancelled while in flight: the workflow abandons the activity; its
            # late outcome, if any, changes nothing
            self.feed_stale(self.in_flight)
            self.in_flight = None
        self.state, step = core.step(self.state, self.now)
        self.shown = core.to_show(self.shown, step, self.state)
        self.check_shown(step)
        live = self.live()
        match step:
            case Deliver(delivery):
                self.check_delivery(delivery, live)
                self.in_flight = delivery
            case Sleep(until):
                assert live is not None
                assert until > self.now, "sleeps only until a future instant"
                assert until == self.state.next_due
                assert self.state.pending is None
                record = self.timers[live.timer]
                assert (record.next_slot, record.next_due) == (
                    self.state.next_slot,
                    until,
                )
            case AwaitOperator():
                assert live is not None
                assert self.parked is not None
                assert self.state.status is Status.PARKED
                assert self.state.pending == self.parked
                assert self.parked.timer == live.timer
            case Finish(status):
                self.check_finish(status, live)
                self.finished = step

    def check_shown(self, step: core.Step) -> None:
        """What visibility reads (`list`, the Web UI's queries) is the state's own status,
        however the timer ends or waits: one status, never two."""
        execution = "Completed" if isinstance(step, Finish) else "Running"
        read = status_of(execution, self.shown.status, self.shown.due, self.now)
        assert read is self.state.status, f"visibility reads {read}, the state {self.state.status}"
        if isinstance(step, Finish):
            assert step.status is self.state.status

    def check_delivery(self, delivery: Delivery, live: TimerSpec | None) -> None:
        assert live is not None, "delivered with no live schedule"
        assert delivery.timer == live.timer, "delivered a replaced or cancelled schedule"
        assert self.now >= delivery.due, f"early: now {self.now} < due {delivery.due}"
        assert self.state.status is Status.DELIVERING
        record = self.timers[live.timer]
        decided_slots = [d.slot for d in record.decided]
        assert delivery.slot not in decided_slots, "a slot is decided at most once"
        if decided_slots:
            assert delivery.slot > max(decided_slots), "slots increase"
        if delivery.request_id in record.sent:
            assert delivery.request_id in record.retried, "re-sent without an operator's retry"
            record.retried.discard(delivery.request_id)
            return
        record.sent.add(delivery.request_id)
        rule = live.rule
        if not live.recurring:
            assert delivery == Delivery(timer=live.timer, slot=1, due=live.first_due)
            return
        assert record.next_due is not None
        # the cron slots due by now, from the next undecided one on
        slots = [(record.next_slot, record.next_due)]
        while True:
            following = rule.next_cron(slots[-1][1])
            if following is None or following > self.now:
                break
            slots.append((slots[-1][0] + 1, following))
        if rule.misfire is Misfire.CATCH_UP:
            expected = Delivery(timer=live.timer, slot=slots[0][0], due=slots[0][1])
        else:
            expected = Delivery(
                timer=live.timer, slot=slots[-1][0], due=slots[-1][1], skipped=len(slots) - 1
            )
        assert delivery == expected

    def check_finish(self, status: Status, live: TimerSpec | None) -> None:
        if live is None:
            assert status is Status.CANCELLED
            return
        record = self.timers[live.timer]
        if not live.recurring:
            assert len(record.decided) == 1, "a one-shot finishes once its slot is decided"
            last = self.state.last_outcome
            expected = Status.REJECTED if "rejected" in last else Status.DELIVERED
            assert status is expected
        else:
            assert record.next_due is None, "a cron timer finishes only when it has no next slot"
            assert status is not Status.CANCELLED

    # -- outcomes

    def feed_stale(self, delivery: Delivery) -> None:
        """A delivery replaced or cancelled while in flight ends somehow: counted, no move."""
        before = self.state
        for outcome in ("delivered", "rejected"):
            after = core.on_outcome(before, delivery, outcome, "late")  # type: ignore[arg-type]
            assert unmoved(before, after)
            assert after.delivered + after.rejected == before.delivered + before.rejected + 1
        assert unmoved(before, core.on_failed(before, delivery, "late"))
        assert unmoved(before, core.on_abandoned(before, delivery))

    @precondition(lambda self: self.in_flight is not None)
    @rule(outcome=st.sampled_from(["delivered", "rejected"]))
    def decide(self, outcome: Literal["delivered", "rejected"]) -> None:
        delivery = self.in_flight
        assert delivery is not None
        self.in_flight = None
        if self.state.pending != delivery:
            self.feed_stale(delivery)
            return
        live = self.live()
        assert live is not None and live.timer == delivery.timer
        self.state = core.on_outcome(self.state, delivery, outcome, "")
        record = self.timers[delivery.timer]
        record.decided.append(delivery)
        record.next_slot = delivery.slot + 1
        record.next_due = live.rule.next_cron(delivery.due) if live.recurring else None
        assert self.state.pending is None
        assert self.state.next_slot == record.next_slot
        assert self.state.next_due == record.next_due
        if not live.recurring:
            assert len(record.decided) == 1, "a one-shot decides one slot"
            expected = Status.REJECTED if outcome == "rejected" else Status.DELIVERED
            assert self.state.status is expected

    @precondition(lambda self: self.in_flight is not None)
    @rule()
    def fail(self) -> None:
        delivery = self.in_flight
        assert delivery is not None
        self.in_flight = None
        if self.state.pending != delivery:
            self.feed_stale(delivery)
            return
        self.state = core.on_failed(self.state, delivery, "all attempts failed")
        assert self.state.status is Status.PARKED
        assert self.state.pending == delivery
        self.parked = delivery

    # -- operators

    @rule()
    def operator_retry(self) -> None:
        before = self.state
        self.state = core.retry(self.state)
        if self.parked is None:
            assert self.state == before, "only a parked timer is retried"
            return
        assert self.state.status is Status.SCHEDULED
        assert self.state.pending == self.parked
        self.timers[self.parked.timer].retried.add(self.parked.request_id)
        self.parked = None

    @rule()
    def operator_cancel(self) -> None:
        live = self.live()
        before = self.state
        self.state = core.cancel(self.state)
        if before.spec is None:
            assert self.state == before
            return
        assert live is not None
        self.operator_cancelled.add(live.timer)
        assert self.state.status is Status.CANCELLED
        assert self.state.pending is None
        self.parked = None
        self.finished = None

    # -- invariants

    @invariant()
    def core_holds_the_live_schedule(self) -> None:
        if not self.applied:
            return
        live = self.live()
        assert self.state.spec == live
        newest = max(self.applied, key=lambda c: c.order)
        assert self.state.applied == newest.order
        if live is None:
            assert self.state.status is Status.CANCELLED
            assert self.state.pending is None

    @invariant()
    def parked_only_with_a_pending_slot(self) -> None:
        if self.state.status is Status.PARKED:
            assert self.state.pending is not None
            assert self.state.pending == self.parked


def rules(now: datetime) -> st.SearchStrategy[ScheduleRule]:
    at = st.builds(
        ScheduleRule.at,
        st.timedeltas(-timedelta(hours=1), timedelta(hours=4)).map(lambda d: now + d),
    )
    after = st.builds(ScheduleRule.after, st.timedeltas(timedelta(seconds=1), timedelta(hours=2)))
    cron = st.builds(cron_rule, st.sampled_from(CRONS), st.sampled_from(list(Misfire)))
    return st.one_of(at, after, cron)


TimerMachine.TestCase.settings = settings(
    max_examples=300,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_timer_core_against_model = TimerMachine.TestCase


# ---------------------------------------------------------------- what the search attributes show


def test_an_undisturbed_one_shot_timer_never_upserts_its_search_attributes() -> None:
    """Started with its due and no status: sleeping, delivering and ending change nothing."""
    state = core.initial(set_change(at_rule()))
    shown = core.Shown(None, state.next_due)
    seen = []
    for now in (T0, T0 + timedelta(minutes=30)):
        state, step = core.step(state, now)
        seen.append(core.to_show(shown, step, state))
        if isinstance(step, Deliver):
            state = core.on_outcome(state, step.delivery, "delivered", "")
            state, step = core.step(state, now)
            seen.append(core.to_show(shown, step, state))
    assert isinstance(step, core.Finish)
    assert seen == [shown] * len(seen)


def test_parked_rejected_and_cancelled_are_shown_and_nothing_else() -> None:
    due = T0 + timedelta(minutes=30)
    state = core.initial(set_change(at_rule(due)))
    shown = core.Shown(None, due)
    state, step = core.step(state, due)
    assert isinstance(step, Deliver)
    parked = core.on_failed(state, step.delivery, "host answered 500")
    parked, step = core.step(parked, due)
    assert core.to_show(shown, step, parked) == core.Shown("Parked", due)
    rejected = core.on_outcome(state, step_delivery(state, due), "rejected", "IllegalState")
    rejected, step = core.step(rejected, due)
    assert core.to_show(shown, step, rejected) == core.Shown("Rejected", due)
    cancelled, step = core.step(core.cancel(state), due)
    assert core.to_show(shown, step, cancelled) == core.Shown("Cancelled", due)
    # A retry clears Parked at once; the timer that then ends delivered shows no status.
    retried, step = core.step(core.retry(parked), due)
    assert isinstance(step, Deliver)
    assert core.to_show(core.Shown("Parked", due), step, retried) == core.Shown(None, due)
    done, step = core.step(core.on_outcome(retried, step.delivery, "delivered", ""), due)
    assert core.to_show(core.Shown(None, due), step, done) == core.Shown(None, due)


def test_a_cron_timer_shows_each_next_due() -> None:
    state = core.initial(set_change(cron_rule()))
    first = state.next_due
    assert first == T0 + timedelta(minutes=15)
    shown = core.Shown(None, first)
    state, step = core.step(state, first)
    assert isinstance(step, Deliver)
    assert core.to_show(shown, step, state) == shown
    state, step = core.step(core.on_outcome(state, step.delivery, "delivered", ""), first)
    assert step == Sleep(first + timedelta(minutes=15))
    assert core.to_show(shown, step, state) == core.Shown(None, first + timedelta(minutes=15))


def step_delivery(state: TimerState, now: datetime) -> Delivery:
    _, step = core.step(state, now)
    assert isinstance(step, Deliver)
    return step.delivery


def test_details_say_status_schedule_counts_and_last_outcome() -> None:
    due = T0 + timedelta(minutes=30)
    state = core.initial(set_change(at_rule(due)))
    text = core.details(state)
    assert text.startswith(
        "**Scheduled** · CancelOrder → eshop-order.order 42, due 2026-12-01T10:30:00.000Z"
    )
    assert "set by commit c1 (version 1), schedule c1:e0" in text
    state, step = core.step(state, due)
    assert isinstance(step, Deliver)
    state = core.on_failed(state, step.delivery, "host answered 500")
    text = core.details(state)
    assert text.startswith(
        "**Parked** · CancelOrder → eshop-order.order 42, due 2026-12-01T10:30:00.000Z"
    )
    assert "(slot 1)" in text
    assert "delivered 0 · rejected 0" in text
    assert "parked: host answered 500" in text
    assert "timers retry" in text
    done = core.on_outcome(core.retry(state), step.delivery, "delivered", "")
    assert "last: slot 1 delivered" in core.details(done)


def test_details_of_an_ended_timer_name_its_last_slot_not_a_next_one() -> None:
    """Delivered or rejected, a one-shot says which slot it decided and that none follows
    (it read `never due (slot 2)`); a cron rule that never matches says so."""
    due = T0 + timedelta(minutes=30)
    state = core.initial(set_change(at_rule(due)))
    state, step = core.step(state, due)
    assert isinstance(step, Deliver)
    delivered = core.details(core.on_outcome(state, step.delivery, "delivered", ""))
    assert delivered.startswith(
        "**Delivered** · CancelOrder → eshop-order.order 42, delivered slot 1, no further slot\n"
    )
    rejected = core.details(core.on_outcome(state, step.delivery, "rejected", "NotFound"))
    assert rejected.startswith(
        "**Rejected** · CancelOrder → eshop-order.order 42, rejected slot 1, no further slot\n"
    )
    never = core.details(core.initial(set_change(cron_rule(NEVER))))
    assert "never due: its rule never matches" in never
    for text in (delivered, rejected, never):
        assert "(slot" not in text


def test_static_details_name_the_schedule_as_started_and_when_current_details_appear() -> None:
    """A timer in its start delay has no Current Details yet (no worker ran it): its static
    details say what it started with, as such, and that Current Details come once it runs."""
    state = core.initial(set_change(at_rule(T0 + timedelta(hours=1)), version=3))
    text = core.static_details(OWNER, "cancel", state)
    assert (
        "Started with CancelOrder → eshop-order.order 42, due 2026-12-01T11:00:00.000Z "
        "(at 2026-12-01T11:00:00+00:00), set by commit c3 (version 3)."
    ) in text
    assert "in **Current Details** once a worker has run the timer" in text
    cancelled = core.initial(TimerChange(kind="cancel", version=2))
    assert core.static_details(OWNER, "cancel", cancelled) == core.static_details(OWNER, "cancel")


def test_static_summary_and_details_hold_only_what_never_changes() -> None:
    first = core.initial(set_change(at_rule(T0 + timedelta(hours=1)), version=1))
    replaced = core.apply(first, set_change(cron_rule(), version=2))
    assert first.spec is not None and replaced.spec is not None
    summary = core.static_summary(OWNER, "cancel")
    assert summary == "timer cancel of eshop-order.order 42, tenant t1"
    details = core.static_details(OWNER, "cancel")
    for changing in ("c1:", "c2:", "PT", "cron", "due 2026"):
        assert changing not in summary and changing not in details


def test_verdicts_say_why() -> None:
    first = set_change(at_rule(T0 + timedelta(hours=1)), version=1)
    state = core.initial(first)
    assert core.verdict(state, first) == core.Verdict(
        outcome="ignored", reason="stale: version 1 ≤ applied 1"
    )
    assert core.verdict(state, set_change(at_rule(), version=1, timer="x:y")).reason == (
        "stale: version 1 ≤ applied 1"
    )
    older = core.apply(state, set_change(at_rule(), version=3, index=2))
    assert core.stale_reason(older, set_change(at_rule(), version=3, index=1)) == (
        "stale: version 3 event 1 ≤ applied event 2"
    )
    assert core.stale_reason(older, set_change(at_rule(), version=2)) == (
        "stale: version 2 ≤ applied 3"
    )
    replace = core.verdict(state, set_change(cron_rule(), version=2))
    assert replace.outcome == "replaced"
    assert replace.reason.startswith("replaced c1:e0 (at 2026-12-01T11:00:00+00:00, due ")
    assert "by c2:e0 (cron 0 */15 * * * * (UTC, COALESCE), due 2026-12-01T10:15:00.000Z)" in (
        replace.reason
    )
    cancel = core.verdict(state, TimerChange(kind="cancel", version=2))
    assert cancel.outcome == "cancelled"
    assert cancel.reason.endswith("by key (version 2)")
    nothing = core.verdict(TimerState(), TimerChange(kind="delete", version=2))
    assert nothing.outcome == "cancelled"
    assert nothing.reason.startswith("nothing was pending")


def test_a_received_change_notes_what_it_did_and_the_details_show_it() -> None:
    first = set_change(at_rule(T0 + timedelta(hours=1)), version=1)
    state = core.initial(first)
    assert state.last_change == ""
    replaced, answer = core.receive(state, set_change(at_rule(), version=2))
    assert answer.outcome == "replaced"
    assert replaced.last_change == f"set of version 2 (c2:e0): replaced: {answer.reason}"
    assert f"last change: set of version 2 (c2:e0): replaced: {answer.reason}" in (
        core.details(replaced)
    )
    again, stale = core.receive(replaced, set_change(at_rule(), version=2))
    assert stale == core.Verdict(outcome="ignored", reason="stale: version 2 ≤ applied 2")
    assert again.last_change == "set of version 2 (c2:e0): ignored: stale: version 2 ≤ applied 2"
    assert again.spec == replaced.spec and again.applied == replaced.applied
    gone, _ = core.receive(again, TimerChange(kind="delete", version=3))
    assert gone.last_change.startswith("delete of version 3: cancelled: cancelled c2:e0 (")
    assert gone.last_change.endswith("by the aggregate's deletion (version 3)")


# ---------------------------------------------------------------- a Temporal cancel request


def _in_flight() -> tuple[TimerState, Delivery]:
    """Slot 1 of a set of version 1 handed to the delivery activity."""
    state, step = core.step(core.initial(set_change(at_rule(T0), version=1)), T0)
    assert isinstance(step, Deliver)
    return state, step.delivery


def test_a_cancel_request_met_in_flight_spares_a_set_handed_over_after_it() -> None:
    state, delivery = _in_flight()
    in_force = state.applied  # the request came alone, while slot 1 was at the host
    newer = set_change(at_rule(T0 + timedelta(hours=1)), version=9)
    state, _ = core.receive(state, newer)
    state = core.on_outcome(state, delivery, "delivered", "")  # the attempt settles
    kept = core.cancel_requested(state, None, in_force=in_force)
    assert kept.spec == newer.spec and kept.status is Status.SCHEDULED
    assert kept.delivered == 1, "the slot in flight counted"
    assert kept.last_change.endswith(
        "; handed over after a Temporal cancel request, which cancelled the schedule in force "
        "before it (version 1), not this one"
    )
    assert core.step(kept, T0 + timedelta(hours=1))[1] == Deliver(
        Delivery(timer="c9:e0", slot=1, due=T0 + timedelta(hours=1))
    )
    # Without `in_force` (runs recorded before the patch), the set handed over is cancelled.
    assert core.cancel_requested(state, None).status is Status.CANCELLED


def test_a_cancel_request_met_in_flight_with_nothing_after_it_cancels() -> None:
    state, delivery = _in_flight()
    in_force = state.applied
    state = core.on_outcome(state, delivery, "delivered", "")
    assert core.cancel_requested(state, None, in_force=in_force).status is Status.CANCELLED
    state, delivery = _in_flight()
    stale, _ = core.receive(state, set_change(at_rule(T0), version=1))  # changes nothing
    stale = core.on_outcome(stale, delivery, "delivered", "")
    cancelled = core.cancel_requested(stale, None, in_force=in_force)
    assert cancelled.status is Status.CANCELLED and cancelled.spec is None


@given(
    came_with=st.booleans(),
    after=st.lists(st.sampled_from(["set", "cancel", "delete", "stale"]), max_size=4),
    outcome=st.sampled_from(["delivered", "rejected"]),
)
def test_a_cancel_request_met_in_flight_ends_exactly_what_was_in_force(
    came_with: bool, after: list[str], outcome: Literal["delivered", "rejected"]
) -> None:
    """Whatever is handed over after the request, before the attempt settles: the latest
    schedule handed over after it stands; what it met is cancelled, unless a set came with
    it (their order cannot be told: kept); a cancel or deletion after it ends it anyway."""
    state, delivery = _in_flight()
    before = state.applied
    if came_with:
        state, _ = core.receive(state, set_change(at_rule(T0 + timedelta(hours=2)), version=2))
    in_force = state.applied
    last, version = None, 3
    for kind in after:
        if kind == "stale":
            state, _ = core.receive(state, TimerChange(kind="cancel", version=1))
            continue
        if kind == "set":
            change = set_change(at_rule(T0 + timedelta(hours=version)), version=version)
        else:
            change = TimerChange(kind=kind, version=version)  # type: ignore[arg-type]
        state, _ = core.receive(state, change)
        last, version = kind, version + 1
    state = core.on_outcome(state, delivery, outcome, "")
    result = core.cancel_requested(state, before if came_with else None, in_force=in_force)
    assert result.delivered + result.rejected == 1
    if last == "set" or (last is None and came_with):
        assert result.spec is not None and result.spec == state.spec
        assert result.status is Status.SCHEDULED
        said = "handed over after a Temporal cancel request" if last else "came with it"
        assert said in result.last_change
    else:
        assert result.spec is None and result.status is Status.CANCELLED
        assert core.step(result, T0 + timedelta(days=1))[1] == Finish(Status.CANCELLED)
