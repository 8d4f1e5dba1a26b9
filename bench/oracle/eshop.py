"""The e-shop soak's judge (`python -m bench.soak_eshop`) of its orders, from the host's own log
(every commit, in order) and what its customers were told; the stock and the job are judged in
`eshop_stock`, the replicas' recovery in `recovery` (the checks: docs/benchmarks.md)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from bench.harness.stats import summary
from bench.oracle.verdicts import Findings, Verdicts, positive, zero
from workers.eshop.order import ORDER, OUT_OF_STOCK, PAYMENT_GRACE_PERIOD, PAYMENT_TIMEOUT
from wow_temporal.host.store import RequestRecord
from wow_temporal.model import AggregateRef, Commit, ScheduleRule

__all__ = [
    "CUSTOMER_CANCEL",
    "TENANT",
    "Eshop",
    "OrderLog",
    "Sent",
    "judge_customers",
    "judge_host_log",
    "judge_orders",
    "judge_reads",
    "judge_requests",
]

TENANT = "(0)"
"""Wow's default tenant: the SYSTEM job's, so its deliveries stock the customers' shop."""
CUSTOMER_CANCEL = "CUSTOMER"
ANSWERED = ("Ok", "DuplicateRequestId")
"""A customer's answers that say the command was done."""

Requested = Callable[[AggregateRef, str], RequestRecord | None]
"""The host's record of a request id of an aggregate (its store's), None if it has none."""


@dataclass
class Sent:
    """One command a customer sent, and the answer it was finally given."""

    kind: str  # create, pay, cancel, delete
    order_id: str
    request_id: str
    code: str = ""
    """Wow's error code of the final answer; "" if the host never answered in time."""
    again: str = ""
    """The answer to the same request sent again, if it was."""


@dataclass
class OrderLog:
    """One order as its stream in the log tells it."""

    order_id: str
    items: dict[str, int] = field(default_factory=dict)
    timers: list[tuple[str, int]] = field(default_factory=list)
    """(timer, due ms) of each payment grace period it set."""
    paid: list[Commit] = field(default_factory=list)
    cancelled: list[tuple[Commit, dict[str, Any]]] = field(default_factory=list)
    deleted: bool = False


@dataclass
class Eshop(Findings):
    """The log judged: what happened (for the reader; the `positive()` counts: every path
    taken), what must be 0, and the lateness (ms, commit - due) of the timers' cancellations
    and the job's ticks."""

    paid: int = positive()
    cancelled_by_timer: int = positive()
    cancelled_by_customer: int = positive()
    cancelled_out_of_stock: int = positive()
    deleted: int = positive()
    timers_set: int = positive()
    timer_refused: int = 0
    """Timers whose cancellation came after the order was paid or cancelled: refused."""
    repeats: int = 0
    received_from_customers: int = 0
    received_from_job: int = positive()
    slots_last: int = 0
    slots_handled: int = positive()
    slots_skipped: int = 0
    slots_silent: int = 0
    job_commands: int = 0
    products: dict[str, dict[str, int]] = field(default_factory=dict)
    unresolved: int = zero()
    paid_and_cancelled: int = zero()
    paid_twice: int = zero()
    cancelled_twice: int = zero()
    cancelled_early: int = zero()
    cancelled_after_payment: int = zero()
    timer_wrong: int = zero()
    acknowledged_lost: int = zero()
    refused_but_committed: int = zero()
    repeat_answered_otherwise: int = zero()
    unanswered: int = zero()
    host_errors: int = zero()
    decided_twice: int = zero()
    reserved_twice: int = zero()
    released_twice: int = zero()
    oversold: int = zero()
    shortage_wrong: int = zero()
    held_wrongly: int = zero()
    received_wrongly: int = zero()
    slots_lost: int = zero()
    slots_twice: int = zero()
    commands_lost: int = zero()
    commands_wrong: int = zero()
    timers_still_running: int = zero()
    job_stalled: int = zero()
    not_drained: int = zero()
    stale_reads: int = zero()
    version_conflicts: int = zero()
    takeover_slow: int = zero()
    """With replicas: a takeover slower than the bound, or a follower left running nowhere."""
    postgres_unrecovered: int = zero()
    """With replicas: no command Ok, or a follower not running, long after PostgreSQL was back."""
    lateness_timers: dict[str, float] = field(default_factory=dict)
    lateness_timers_outside: dict[str, float] = field(default_factory=dict)
    lateness_ticks: dict[str, float] = field(default_factory=dict)
    lateness_ticks_outside: dict[str, float] = field(default_factory=dict)
    latest_outside: list[tuple[int, float, str]] = field(default_factory=list)
    """The latest cancellations and ticks due outside the chaos windows: (ms, due at s, what)."""

    REPLICAS_ZERO = ("takeover_slow", "postgres_unrecovered")
    """Must be 0 only with replicas."""

    def verdicts(self, *, replicas: bool = False) -> Verdicts:
        """Every count that must be 0 (with replicas, their recovery's too); every path taken;
        the lateness outside the chaos windows."""
        declared = super().verdicts()
        zero = declared.must_be_zero.items()
        return Verdicts(
            must_be_zero={k: v for k, v in zero if replicas or k not in self.REPLICAS_ZERO},
            must_be_positive=declared.must_be_positive,
            figures={
                f"lateness_{what}_{q}_ms": figures[q]
                for what, figures in (
                    ("timers_outside", self.lateness_timers_outside),
                    ("ticks_outside", self.lateness_ticks_outside),
                )
                for q in ("p50", "p99")
                if q in figures
            },
        )


def judge_orders(
    judged: Eshop,
    commits: Iterable[Commit],
    requested: Requested,
    epoch: float,
    inside_chaos: Callable[[float], bool] = lambda _: False,
) -> dict[str, OrderLog]:
    """Each order's stream: ended once, paid xor cancelled, its timer on time and only while
    it awaited payment; the orders as the log tells them."""
    orders: dict[str, OrderLog] = {}
    late: dict[str, list[float]] = {"all": [], "outside": []}
    for commit in commits:
        if (commit.context_name, commit.aggregate_name) != ("eshop-order", "order"):
            continue
        order = orders.setdefault(commit.aggregate_id, OrderLog(commit.aggregate_id))
        for event in commit.body:
            _order_event(judged, order, commit, event.name, event.id, event.body)
        for timer, due, ms in _timer_cancels(judged, order, commit):
            late["all"].append(ms)
            if not inside_chaos(due / 1000 - epoch):
                late["outside"].append(ms)
                judged.latest_outside.append((ms, round(due / 1000 - epoch, 1), f"{timer}#1"))
    for order in orders.values():
        _order_end(judged, order, requested)
    judged.lateness_timers = summary(late["all"], (0.5, 0.9, 0.99))
    judged.lateness_timers_outside = summary(late["outside"], (0.5, 0.9, 0.99))
    return orders


def _order_event(
    judged: Eshop, order: OrderLog, commit: Commit, name: str, event_id: str, body: Any
) -> None:
    if name == "eshop.order.OrderCreated":
        order.items = {i["product_id"]: i["quantity"] for i in body["items"]}
    elif name == "wow.ScheduleSet" and body["key"] == PAYMENT_GRACE_PERIOD:
        rule = ScheduleRule.model_validate(body["rule"])
        first = rule.first_due(datetime.fromtimestamp(commit.create_time / 1000, UTC))
        assert first is not None
        order.timers.append((f"{commit.id}:{event_id}", round(first.timestamp() * 1000)))
    elif name == "eshop.order.OrderPaid":
        if order.paid:
            judged.problem("paid_twice", f"{order.order_id}: {commit.id}")
        order.paid.append(commit)
    elif name == "eshop.order.OrderCancelled":
        if order.cancelled:
            judged.problem("cancelled_twice", f"{order.order_id}: {commit.id}")
        if order.paid:
            judged.problem("cancelled_after_payment", f"{order.order_id}: {commit.id} {body}")
        order.cancelled.append((commit, body))
        reason = body["cause"]["code"]
        if body.get("timer") is not None:
            judged.cancelled_by_timer += 1
        elif reason == CUSTOMER_CANCEL:
            judged.cancelled_by_customer += 1
        elif reason == OUT_OF_STOCK:
            judged.cancelled_out_of_stock += 1
    elif name == "wow.AggregateDeleted":
        order.deleted = True
        judged.deleted += 1


def _timer_cancels(judged: Eshop, order: OrderLog, commit: Commit) -> list[tuple[str, int, int]]:
    """The commit's cancellations by the order's timer, each checked against the grace period
    it set: (timer, due ms, ms late) of each that is right."""
    found = []
    for event in commit.body:
        timer = event.body.get("timer") if event.name == "eshop.order.OrderCancelled" else None
        if timer is None:
            continue
        due = dict(order.timers).get(timer)
        header_due = int(commit.header.get("schedule_due", "0"))
        if (
            due is None
            or event.body["cause"]["code"] != PAYMENT_TIMEOUT
            or commit.request_id != f"{timer}#1"
            or abs(header_due - due) > 1
        ):
            judged.problem(
                "timer_wrong",
                f"{order.order_id}: {commit.id} by {timer} (set: {order.timers}), "
                f"request {commit.request_id}, due {header_due}",
            )
            continue
        late = commit.create_time - due
        if late < 0:
            judged.problem("cancelled_early", f"{order.order_id}: {-late} ms before {due}")
        found.append((timer, due, late))
    return found


def _order_end(judged: Eshop, order: OrderLog, requested: Requested) -> None:
    """Ended once, paid xor cancelled; one grace period, its one slot sent once."""
    if not order.paid and not order.cancelled:
        judged.problem("unresolved", f"{order.order_id}: neither paid nor cancelled")
    elif order.paid and order.cancelled:
        judged.problem("paid_and_cancelled", order.order_id)
    judged.paid += bool(order.paid)
    if len(order.timers) > 1:
        judged.problem("timer_wrong", f"{order.order_id}: {len(order.timers)} grace periods")
    judged.timers_set += len(order.timers)
    ref = ORDER.ref(TENANT, order.order_id)
    for timer, _ in order.timers:
        record = requested(ref, f"{timer}#1")
        if record is not None and record.refused is not None:
            judged.timer_refused += 1
        if requested(ref, f"{timer}#2") is not None:
            judged.problem("timer_wrong", f"{order.order_id}: {timer} sent a slot 2")


def judge_customers(judged: Eshop, commits: Iterable[Commit], sent: Iterable[Sent]) -> None:
    """What the customers were told against the log: a command done is in it, one refused is
    not, one sent again is answered as a duplicate (or refused alike)."""
    committed = {
        (commit.aggregate_id, commit.request_id)
        for commit in commits
        if commit.aggregate_name == "order" and commit.request_id
    }
    for one in sent:
        if not one.code:
            judged.problem("unanswered", f"{one.kind} {one.order_id} ({one.request_id})")
            continue
        done = (one.order_id, one.request_id) in committed
        if one.code in ANSWERED and not done:
            judged.problem("acknowledged_lost", f"{one.kind} {one.order_id}: told {one.code}")
        elif one.code not in ANSWERED and done:
            judged.problem("refused_but_committed", f"{one.kind} {one.order_id}: {one.code}")
        if one.again:
            judged.repeats += 1
            want = "DuplicateRequestId" if one.code in ANSWERED else one.code
            if one.again != want:
                judged.problem(
                    "repeat_answered_otherwise",
                    f"{one.kind} {one.order_id}: {one.code}, then {one.again}",
                )


def judge_requests(judged: Eshop, commits: Iterable[Commit]) -> None:
    """No request id decided twice in the log (of one aggregate type and tenant)."""
    requests: Counter[tuple[str, str, str, str]] = Counter()
    for commit in commits:
        if commit.request_id:
            ref = commit.aggregate
            requests[(ref.context_name, ref.aggregate_name, ref.tenant_id, commit.request_id)] += 1
    for (context, aggregate, tenant, request_id), count in requests.items():
        if count > 1:
            judged.problem(
                "decided_twice", f"{context}.{aggregate} (tenant {tenant}) {request_id}: {count}"
            )


def judge_reads(
    judged: Eshop, commits: Iterable[Commit], versions: Mapping[AggregateRef, int | None]
) -> None:
    """The host's own read of each aggregate at the end shows the version its log ends at."""
    logged: dict[AggregateRef, int] = {}
    for commit in commits:
        logged[commit.aggregate] = max(logged.get(commit.aggregate, 0), commit.version)
    for ref, read in versions.items():
        if read != logged.get(ref):
            judged.problem(
                "stale_reads",
                f"{ref.aggregate_name} {ref.aggregate_id}: the host reads version {read}, its "
                f"log ends at {logged.get(ref)}",
            )


def judge_host_log(judged: Eshop, lines: Iterable[str]) -> None:
    """No command was answered with a version conflict: the host decides one aggregate's
    commands one at a time, so a conflict means it decided on a state it should not have had
    (timers and sagas take the answer as a refusal). Replicas decide again on a commit another
    one made first; an expected version's conflict needs one sent, and none is."""
    for line in lines:
        if ": EventVersionConflict" in line or ": CommandExpectVersionConflict" in line:
            judged.problem("version_conflicts", line[:300])
