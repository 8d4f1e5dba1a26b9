"""`bench.soak_eshop`'s judges (`bench.oracle.eshop`, `eshop_stock`, `recovery`; pure): hand-made
logs of the e-shop, each fault the soak exists to find caught (an order lost in the middle, a
timer's cancellation early, a command decided twice, stock reserved twice or oversold, a job
slot lost or handled twice, a customer told Ok of what is not in the log, a 5xx outside an
outage), and a clean log passing."""

from __future__ import annotations

from typing import Any

import pytest

from bench.oracle.eshop import (
    TENANT,
    Eshop,
    Sent,
    judge_customers,
    judge_host_log,
    judge_orders,
    judge_reads,
    judge_requests,
)
from bench.oracle.eshop_stock import JOB_ID, Job, expected_commands, judge_job, judge_stock
from bench.oracle.recovery import Recovery, judge_recovery
from workers.eshop.order import ORDER, PAYMENT_GRACE_PERIOD, PAYMENT_TIMEOUT
from wow_temporal.host.store import RequestRecord
from wow_temporal.model import AggregateRef, Commit

pytestmark = pytest.mark.unit

T0 = 1_800_000_000_000
"""The first commit's createTime, epoch ms."""
GRACE_MS = 3000


def commit(
    aggregate: tuple[str, str],
    aggregate_id: str,
    version: int,
    at_ms: int,
    *events: tuple[str, dict[str, Any]],
    request_id: str = "",
    header: dict[str, str] | None = None,
) -> Commit:
    context, name = aggregate
    return Commit.parse(
        {
            "id": f"{aggregate_id}-v{version}",
            "contextName": context,
            "aggregateName": name,
            "tenantId": TENANT,
            "aggregateId": aggregate_id,
            "version": version,
            "createTime": at_ms,
            "requestId": request_id or f"{aggregate_id}:{version}",
            "header": header or {},
            "body": [{"id": f"e{n}", "name": e, "body": b} for n, (e, b) in enumerate(events)],
        }
    )


ORDER_AGG = ("eshop-order", "order")
STOCK_AGG = ("eshop-inventory", "stock")


def placed(order_id: str, at_ms: int = T0) -> Commit:
    """The order created with its payment grace period (due `GRACE_MS` later)."""
    grace = {"key": PAYMENT_GRACE_PERIOD, "rule": {"after": f"PT{GRACE_MS // 1000}S"}}
    grace["command"] = {"type": "eshop.order.CancelOrder", "body": {}}
    items = {"items": [{"product_id": "apple", "quantity": 2}]}
    return commit(
        ORDER_AGG,
        order_id,
        1,
        at_ms,
        ("eshop.order.OrderCreated", items),
        ("wow.ScheduleSet", grace),
        request_id=f"{order_id}:create",
    )


def paid(order_id: str, version: int = 2) -> Commit:
    return commit(
        ORDER_AGG, order_id, version, T0 + 1000, ("eshop.order.OrderPaid", {}),
        request_id=f"{order_id}:pay",
    )  # fmt: skip


def cancelled_by_timer(order_id: str, late_ms: int, version: int = 2) -> Commit:
    timer = f"{order_id}-v1:e1"
    due = T0 + GRACE_MS
    cancel = {"cause": {"code": PAYMENT_TIMEOUT}, "timer": timer}
    return commit(
        ORDER_AGG, order_id, version, due + late_ms, ("eshop.order.OrderCancelled", cancel),
        request_id=f"{timer}#1", header={"schedule_due": str(due)},
    )  # fmt: skip


def nothing_requested(ref: AggregateRef, request_id: str) -> RequestRecord | None:
    return None


def orders_judged(commits: list[Commit]) -> Eshop:
    judged = Eshop()
    judge_orders(judged, commits, nothing_requested, T0 / 1000)
    judge_requests(judged, commits)
    return judged


def test_orders_paid_or_cancelled_by_their_timer_once_pass() -> None:
    log = [placed("a"), paid("a"), placed("b"), cancelled_by_timer("b", late_ms=120)]
    judged = orders_judged(log)
    assert (judged.paid, judged.cancelled_by_timer, judged.timers_set) == (1, 1, 2)
    assert judged.problems == []
    assert judged.lateness_timers["max"] == 120


def test_one_lost_one_early_and_one_twice_decided_order_are_each_caught() -> None:
    log = [
        placed("lost"),  # never paid nor cancelled
        placed("early"),
        cancelled_by_timer("early", late_ms=-500),
        placed("twice"),
        paid("twice"),
        paid("twice", version=3),  # the same request id decided again
    ]
    judged = orders_judged(log)
    assert (judged.unresolved, judged.cancelled_early) == (1, 1)
    assert (judged.paid_twice, judged.decided_twice) == (1, 1)
    assert "cancelled_early: early: 500 ms before 1800000003000" in judged.problems


def test_a_timer_cancelling_a_paid_order_or_sending_a_second_slot_is_caught() -> None:
    log = [placed("p"), paid("p"), cancelled_by_timer("p", late_ms=10, version=3)]
    assert orders_judged(log).cancelled_after_payment == 1
    judged = Eshop()

    def second_slot(ref: AggregateRef, request_id: str) -> RequestRecord | None:
        return RequestRecord(request_id, "x", 2) if request_id.endswith("#2") else None

    judge_orders(judged, [placed("s"), paid("s")], second_slot, T0 / 1000)
    assert judged.timer_wrong == 1


def test_what_a_customer_was_told_is_checked_against_the_log() -> None:
    log = [placed("a")]
    sent = [
        Sent("create", "a", "a:create", "Ok", again="DuplicateRequestId"),
        Sent("pay", "a", "a:pay", "Ok"),  # told Ok, not in the log
        Sent("cancel", "a", "a:cancel", ""),  # never answered
        Sent("create", "b", "b:create", "Ok", again="Ok"),  # its repeat not a duplicate
    ]
    judged = Eshop()
    judge_customers(judged, log, sent)
    assert (judged.acknowledged_lost, judged.unanswered) == (2, 1)
    assert (judged.repeats, judged.repeat_answered_otherwise) == (2, 1)


def test_stock_reserved_twice_oversold_or_held_for_no_paid_order_is_caught() -> None:
    orders = {"o1": placed("o1"), "o2": placed("o2")}
    stock = [
        commit(STOCK_AGG, "apple", 1, T0, ("eshop.inventory.StockReceived", {"quantity": 3}),
               request_id="stock-apple"),
        commit(STOCK_AGG, "apple", 2, T0, ("eshop.inventory.StockReserved",
                                           {"order_id": "o1", "quantity": 2})),
        commit(STOCK_AGG, "apple", 3, T0, ("eshop.inventory.StockReserved",
                                           {"order_id": "o1", "quantity": 2})),
        commit(STOCK_AGG, "apple", 4, T0, ("eshop.inventory.StockReserved",
                                           {"order_id": "o2", "quantity": 2})),
    ]  # fmt: skip
    judged = Eshop()
    logs = judge_orders(judged, [*orders.values(), paid("o1")], nothing_requested, T0 / 1000)
    judge_stock(judged, stock, logs, {"stock-apple"})
    assert (judged.reserved_twice, judged.oversold, judged.received_from_customers) == (1, 1, 3)
    assert judged.held_wrongly == 1  # o2 is not paid, yet holds 2 (o1, paid, holds its 2)
    assert judged.products["apple"] == {"received": 3, "held_by_paid_orders": 2, "available": -1}


def tick(slot: int, due_ms: int, skipped: int = 0) -> list[Commit]:
    """The job's slot as committed: one StockReceived a command it derives."""
    header = {
        "schedule_slot": str(slot),
        "schedule_due": str(due_ms),
        "schedule_skipped": str(skipped),
    }
    return [
        commit(STOCK_AGG, product, 100 + slot, due_ms + 50,
               ("eshop.inventory.StockReceived", {"quantity": quantity}),
               request_id=f"{JOB_ID}#{slot}:{index}", header=header)
        for index, (product, quantity) in enumerate(expected_commands(due_ms, skipped))
    ]  # fmt: skip


def job_judged(commits: list[Commit], stopped_ms: int) -> Eshop:
    judged = Eshop()
    slots = judge_stock(judged, commits, {}, set())
    judge_job(judged, slots, Job(every_s=3, stopped_ms=stopped_ms), T0 / 1000)
    return judged


def test_the_jobs_slots_each_once_pass_and_a_lost_or_twice_handled_one_is_caught() -> None:
    whole = [*tick(1, T0), *tick(2, T0 + 3000), *tick(3, T0 + 6000)]
    judged = job_judged(whole, T0 + 7000)
    assert (judged.slots_handled, judged.slots_last, judged.problems) == (3, 3, [])
    lost = job_judged([*tick(1, T0), *tick(3, T0 + 6000)], T0 + 7000)
    assert lost.slots_lost == 1
    twice = job_judged([*tick(1, T0), *tick(2, T0 + 3000, skipped=1)], T0 + 4000)
    assert twice.slots_twice == 1
    stalled = job_judged(tick(1, T0), T0 + 60_000)
    assert stalled.job_stalled == 1


def test_stale_reads_and_version_conflicts_are_caught() -> None:
    judged = Eshop()
    log = [placed("a"), paid("a")]
    judge_reads(judged, log, {ORDER.ref(TENANT, "a"): 2, ORDER.ref(TENANT, "b"): 1})
    assert judged.stale_reads == 1
    judge_host_log(judged, ["ok", "pay a: EventVersionConflict at 3"])
    assert judged.version_conflicts == 1


def test_a_5xx_is_excused_only_while_postgres_was_away_and_takeovers_are_bounded() -> None:
    seen = Recovery(replicas=2, takeovers=[2.0, 12.0], pg_window=(100.0, 106.0), pg_ok=107.0)
    judged = Eshop()
    recovered = judge_recovery(judged, [(103.0, "during"), (50.0, "before")], seen)
    assert (recovered["pg_answered_5xx"], judged.host_errors) == (1, 1)
    assert (judged.takeover_slow, judged.postgres_unrecovered) == (1, 1)  # never held again
    assert recovered["takeover_max_ms"] == 12000 and recovered["pg_commands_ok_after_s"] == 1.0
    verdicts = judged.verdicts(replicas=True)
    assert {"host_errors", "takeover_slow", "postgres_unrecovered"} <= set(verdicts.broken)
    alone = Eshop()
    judge_recovery(alone, [(103.0, "no outage here")], None)
    assert alone.host_errors == 1
