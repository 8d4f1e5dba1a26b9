"""The e-shop soak's judge of the stock and the job, from the host's log:

- each product's stock: received equals what the customers and the job's ticks delivered; no
  order reserved twice or released twice, never more reserved than on hand, and what stays
  reserved is exactly what the paid orders hold;
- every slot of the job from 1 to the last handled once (or counted as skipped by the one that
  coalesced it), its commands exactly the suppliers' deliveries for its days, and its last
  slot due shortly before the job's worker stopped."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from bench.harness.stats import summary
from bench.oracle.eshop import TENANT, Eshop, OrderLog
from workers.eshop.inventory import SupplierFeed
from wow_temporal.ids import job_workflow_id
from wow_temporal.model import Commit

__all__ = ["JOB_ID", "JOB_STALL_MS", "Job", "expected_commands", "judge_job", "judge_stock"]

JOB_ID = job_workflow_id("eshop-inventory", "receive-deliveries")
JOB_STALL_MS = 30_000
"""The job's last slot must be due no longer than this before its worker was stopped."""

Tick = tuple[int, str, int, Commit]
"""One command of a job's slot as committed: (its index, product, quantity, commit)."""


@dataclass(frozen=True)
class Job:
    """How the job ran: every how many seconds, and when its worker was stopped (epoch ms)."""

    every_s: int
    stopped_ms: int


def expected_commands(due_ms: int, skipped: int) -> list[tuple[str, int]]:
    """What the job's handler derives for a tick: the suppliers' deliveries of its days."""
    today = datetime.fromtimestamp(due_ms / 1000, UTC).date()
    feed = SupplierFeed()
    return [
        (d.product_id, d.quantity)
        for n in range(skipped + 1, 0, -1)
        for d in feed.delivered_on(TENANT, today - timedelta(days=n))
    ]


def judge_stock(
    judged: Eshop, commits: Iterable[Commit], orders: Mapping[str, OrderLog], stocked: set[str]
) -> dict[int, list[Tick]]:
    """Each product's stream: received from the customers' stocking (`stocked`, its request
    ids) or the job, reserved and released once an order, never oversold; what stays held is
    what the paid orders hold. The job's commands, by slot."""
    slots: dict[int, list[Tick]] = defaultdict(list)
    on_hand: Counter[str] = Counter()
    holds: dict[str, dict[str, int]] = defaultdict(dict)
    reserved: Counter[tuple[str, str]] = Counter()
    released: Counter[tuple[str, str]] = Counter()
    for commit in commits:
        if (commit.context_name, commit.aggregate_name) != ("eshop-inventory", "stock"):
            continue
        product = commit.aggregate_id
        held = holds[product]
        for event in commit.body:
            body = event.body
            if event.name == "eshop.inventory.StockReceived":
                on_hand[product] += body["quantity"]
                if commit.request_id.startswith(f"{JOB_ID}#"):
                    judged.received_from_job += body["quantity"]
                    slot_text, index_text = commit.request_id.split("#", 1)[1].split(":")
                    slots[int(slot_text)].append(
                        (int(index_text), product, body["quantity"], commit)
                    )
                elif commit.request_id in stocked:
                    judged.received_from_customers += body["quantity"]
                else:
                    judged.problem(
                        "received_wrongly", f"{product}: {commit.id} ({commit.request_id})"
                    )
            elif event.name == "eshop.inventory.StockReserved":
                order_id = body["order_id"]
                reserved[(product, order_id)] += 1
                if order_id in held or reserved[(product, order_id)] > 1:
                    judged.problem("reserved_twice", f"{product} for {order_id}: {commit.id}")
                held[order_id] = body["quantity"]
                if on_hand[product] - sum(held.values()) < 0:
                    judged.problem("oversold", f"{product}: {commit.id} for {order_id}")
            elif event.name == "eshop.inventory.StockShortage":
                available = on_hand[product] - sum(held.values())
                if body["available"] != available or available >= body["quantity"]:
                    judged.problem(
                        "shortage_wrong", f"{product}: {commit.id} {body}, available {available}"
                    )
            elif event.name == "eshop.inventory.StockReleased":
                order_id = body["order_id"]
                released[(product, order_id)] += 1
                if held.get(order_id) != body["quantity"] or released[(product, order_id)] > 1:
                    judged.problem("released_twice", f"{product} for {order_id}: {commit.id}")
                held.pop(order_id, None)
    _held_by_paid_orders(judged, orders, holds, on_hand)
    return slots


def _held_by_paid_orders(
    judged: Eshop,
    orders: Mapping[str, OrderLog],
    holds: dict[str, dict[str, int]],
    on_hand: Counter[str],
) -> None:
    """What stays reserved is exactly what the paid orders hold."""
    should_hold: dict[str, dict[str, int]] = defaultdict(dict)
    for order in orders.values():
        if order.paid and not order.cancelled:
            for product, quantity in order.items.items():
                should_hold[product][order.order_id] = quantity
    for product in sorted(set(holds) | set(should_hold)):
        have, want = holds.get(product, {}), should_hold.get(product, {})
        for order_id in sorted(set(have) | set(want)):
            if have.get(order_id) != want.get(order_id):
                judged.problem(
                    "held_wrongly",
                    f"{product} for {order_id}: holds {have.get(order_id)}, "
                    f"its order says {want.get(order_id)}",
                )
        judged.products[product] = {
            "received": on_hand[product],
            "held_by_paid_orders": sum(want.values()),
            "available": on_hand[product] - sum(have.values()),
        }


def judge_job(
    judged: Eshop,
    slots: Mapping[int, list[Tick]],
    job: Job,
    epoch: float,
    inside_chaos: Callable[[float], bool] = lambda _: False,
) -> None:
    """The job's slots: each from 1 to the last handled once, or skipped by a later tick; its
    commands the suppliers' deliveries; the last due shortly before its worker stopped."""
    accounted: Counter[int] = Counter()
    late: dict[str, list[float]] = {"all": [], "outside": []}
    dues: dict[int, int] = {}
    for slot, found in sorted(slots.items()):
        headed = _slot_headers(judged, slot, found)
        if headed is None:
            continue
        due, skipped = headed
        dues[slot] = due
        judged.slots_handled += 1
        judged.slots_skipped += skipped
        for covered in range(slot - skipped, slot + 1):
            accounted[covered] += 1
        _slot_commands(judged, slot, found, expected_commands(due, skipped))
        first = min(c.create_time for _, _, _, c in found)
        late["all"].append(first - due)
        if not inside_chaos(due / 1000 - epoch):
            late["outside"].append(first - due)
            judged.latest_outside.append(
                (first - due, round(due / 1000 - epoch, 1), f"{JOB_ID}#{slot}")
            )
    judged.slots_last = max(slots, default=0)
    for slot in range(1, judged.slots_last + 1):
        if accounted[slot] > 1:
            judged.problem("slots_twice", f"slot {slot} accounted for {accounted[slot]} times")
        elif accounted[slot] == 0:
            later = min((s for s in dues if s > slot), default=None)
            due = dues[later] - (later - slot) * job.every_s * 1000 if later is not None else 0
            if later is not None and not expected_commands(due, 0):
                judged.slots_silent += 1  # its day's feed is empty: nothing to see in the log
            else:
                judged.problem("slots_lost", f"slot {slot} of {JOB_ID} was never handled")
    last_due = dues.get(judged.slots_last)
    if last_due is None or last_due < job.stopped_ms - JOB_STALL_MS:
        judged.problem(
            "job_stalled",
            f"the last slot ({judged.slots_last}) was due at {last_due}, the "
            f"job worker stopped at {job.stopped_ms}",
        )
    judged.lateness_ticks = summary(late["all"])
    judged.lateness_ticks_outside = summary(late["outside"])
    judged.latest_outside = sorted(judged.latest_outside, reverse=True)[:6]


def _slot_headers(judged: Eshop, slot: int, found: list[Tick]) -> tuple[int, int] | None:
    """The slot's due time and skipped count, which its every commit must agree on."""
    headers = {
        (
            c.header.get("schedule_slot"),
            c.header.get("schedule_due"),
            c.header.get("schedule_skipped"),
        )
        for _, _, _, c in found
    }
    if len(headers) != 1:
        judged.problem("commands_wrong", f"slot {slot}: its commits disagree: {headers}")
        return None
    slot_header, due_text, skipped_text = headers.pop()
    if slot_header != str(slot) or due_text is None or skipped_text is None:
        judged.problem("commands_wrong", f"slot {slot}: header {slot_header}, {due_text}")
        return None
    return int(due_text), int(skipped_text)


def _slot_commands(
    judged: Eshop, slot: int, found: list[Tick], derived: list[tuple[str, int]]
) -> None:
    """The slot's commands, exactly those derived for it."""
    got = {index: (product, quantity) for index, product, quantity, _ in found}
    judged.job_commands += len(found)
    for index, command in enumerate(derived):
        if index not in got:
            judged.problem("commands_lost", f"slot {slot} command {index}: {command}")
        elif got[index] != command:
            judged.problem(
                "commands_wrong", f"slot {slot} command {index}: {got[index]}, not {command}"
            )
    for index in sorted(set(got) - set(range(len(derived)))):
        judged.problem("commands_wrong", f"slot {slot}: an extra command {index}")
