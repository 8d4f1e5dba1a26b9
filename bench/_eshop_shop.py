"""The e-shop soak's customers (`bench.soak_eshop`): their orders planned, each led over real
HTTP (retried with its request id until the host answers), what they were told; and what the
run reads of the host meanwhile and at the end (its followers, the orders' statuses and
versions)."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.oracle.eshop import CUSTOMER_CANCEL, TENANT, Sent
from workers.eshop.inventory import PRODUCTS
from workers.eshop.order import ORDER
from workers.eshop.stock import STOCK
from wow_temporal.model import AggregateRef
from wow_temporal.wire import (
    COMMAND_SEND_PATH,
    ERROR_CODE_HEADER,
    WireCommand,
    command_headers,
    read_result,
)

NEVER_STOCKED = "gift"
"""A product the inventory has never heard of: ReserveStock is NotFound, the order cancelled."""
INITIAL_STOCK = 40
PLANS: tuple[tuple[str, float], ...] = (
    ("pay", 0.42),
    ("pay-late", 0.1),
    ("cancel", 0.12),
    ("cancel-early", 0.06),
    ("abandon", 0.3),
)
"""What a customer does with a placed order, and how often."""
DELETE_SHARE = 0.3
"""Orders deleted by their customer once ended (paid or cancelled)."""
TWICE_SHARE = 0.1
"""Commands a customer sends again with the same request id once answered."""
COMMAND_DEADLINE_S = 120.0
"""How long a customer keeps retrying one command (the host may be down for a while)."""
PLACED_BY = 0.75
"""Orders are placed during this share of the duration (the rest lets them end)."""


@dataclass
class OrderPlan:
    customer: int
    order_id: str
    at: float
    items: dict[str, int]
    plan: str
    delete: bool
    twice: str
    """The kind of command this order's customer sends twice ("" none)."""
    wait: float
    """Seconds after the order awaits payment before the customer acts (pay, cancel)."""


@dataclass
class Shop:
    """The customers' side: their HTTP client and what they were told."""

    url: str
    http: httpx.AsyncClient
    grace: float
    sent: list[Sent] = field(default_factory=list)
    host_errors: list[tuple[float, str]] = field(default_factory=list)
    """Each 5xx answer: when (monotonic), and what."""
    oks: list[float] = field(default_factory=list)
    """When each command was answered Ok (monotonic)."""
    waited_out: int = 0
    """Orders a customer stopped waiting for (the end checks every order anyway)."""
    epoch: float = field(default_factory=time.time)
    """When the run began (epoch s): its clock's 0."""
    versions: dict[AggregateRef, int | None] = field(default_factory=dict)
    """Each order's and product's version as the host read it at the end."""

    def clock(self) -> float:
        return time.time() - self.epoch

    async def send(
        self,
        kind: str,
        ref: AggregateRef,
        command_type: str,
        body: dict[str, Any],
        request_id: str,
        *,
        record: bool = True,
    ) -> Sent:
        """Send until the host answers (a transport error or a 5xx is retried, same id)."""
        sent = Sent(kind, ref.aggregate_id, request_id)
        command = WireCommand.to(ref, command_type, request_id=request_id, wait_stage=None)
        headers = command_headers(command)
        deadline = time.monotonic() + COMMAND_DEADLINE_S
        while time.monotonic() < deadline:
            try:
                response = await self.http.post(
                    self.url + COMMAND_SEND_PATH, json=body, headers=headers
                )
            except httpx.HTTPError:
                await asyncio.sleep(random.uniform(0.2, 0.5))
                continue
            answer = read_result(response.content, response.headers.get(ERROR_CODE_HEADER))
            if answer.body is None:  # not a CommandResult: as a dropped connection
                await asyncio.sleep(random.uniform(0.2, 0.5))
                continue
            code = answer.code or ""
            if response.status_code >= 500:
                what = f"{kind} {ref.aggregate_id} ({request_id}): {response.text}"
                self.host_errors.append((time.monotonic(), what))
                await asyncio.sleep(0.5)
                continue
            sent.code = code
            if code == "Ok":
                self.oks.append(time.monotonic())
            break
        if record:
            self.sent.append(sent)
        return sent

    async def read(self, ref: AggregateRef, tries: int = 1) -> dict[str, Any] | None:
        """The aggregate as the host reads it (None: not there, or no answer in `tries`)."""
        path = f"/wow/aggregate/{ref.context_name}/{ref.aggregate_name}/{ref.tenant_id}/"
        for _ in range(tries):
            try:
                response = await self.http.get(self.url + path + ref.aggregate_id)
                return dict(response.json()) if response.status_code == 200 else None
            except (httpx.HTTPError, ValueError):
                await asyncio.sleep(0.2)
        return None

    async def status(self, ref: AggregateRef) -> str | None:
        """The order's status as the host reads it (None: not there, or no answer)."""
        status = ((await self.read(ref)) or {}).get("state", {}).get("status")
        return None if status is None else str(status)

    async def wait_status(
        self,
        ref: AggregateRef,
        wanted: set[str],
        timeout: float,  # noqa: ASYNC109
    ) -> str | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = await self.status(ref)
            if found in wanted:
                return found
            await asyncio.sleep(0.3)
        return None


def plan_orders(customers: int, duration: float, rng: random.Random, run: str) -> list[OrderPlan]:
    """Each customer's orders (one to three), spread evenly over the placing window."""
    names, weights = zip(*PLANS, strict=True)
    plans = []
    for customer in range(customers):
        for n in range(rng.choice((1, 1, 2, 2, 3))):
            products = rng.sample(PRODUCTS, rng.choice((1, 1, 2, 2, 3)))
            if rng.random() < 0.04:
                products.append(NEVER_STOCKED)
            plan = rng.choices(names, weights)[0]
            twice = rng.choice(("create", "act", "delete")) if rng.random() < TWICE_SHARE else ""
            plans.append(
                OrderPlan(
                    customer=customer,
                    order_id=f"o-{customer:04d}-{n}-{run}",
                    at=0.0,
                    items={p: rng.randint(1, 6) for p in products},
                    plan=plan,
                    delete=rng.random() < DELETE_SHARE,
                    twice=twice,
                    wait=rng.random(),
                )
            )
    rng.shuffle(plans)
    window = duration * PLACED_BY
    for index, plan_ in enumerate(plans):  # a steady rate, a little jitter
        plan_.at = 1.0 + window * (index + rng.random()) / max(len(plans), 1)
    return plans


async def customer(shop: Shop, plan: OrderPlan, clock: Callable[[], float]) -> None:
    """One order's life as its customer leads it."""
    await asyncio.sleep(max(0.0, plan.at - clock()))
    ref = ORDER.ref(TENANT, plan.order_id)
    lines = [{"product_id": p, "quantity": q} for p, q in plan.items.items()]

    async def command(kind: str, command_type: str, body: dict[str, Any]) -> Sent:
        request_id = f"{plan.order_id}:{kind}"
        sent = await shop.send(kind, ref, command_type, body, request_id)
        if plan.twice == kind or (plan.twice == "act" and kind in ("pay", "cancel")):
            again = await shop.send(kind, ref, command_type, body, request_id, record=False)
            sent.again = again.code
        return sent

    created = await command("create", "eshop.order.CreateOrder", {"items": lines})
    if created.code not in ("Ok", "DuplicateRequestId"):
        return
    cancel = {"cause": {"code": CUSTOMER_CANCEL, "detail": "soak"}}
    if plan.plan == "cancel-early":
        await command("cancel", "eshop.order.CancelOrder", cancel)
    else:
        status = await shop.wait_status(ref, {"AWAITING_PAYMENT", "CANCELLED"}, 90)
        if status is None:
            shop.waited_out += 1
        elif status == "AWAITING_PAYMENT" and plan.plan != "abandon":
            after = {
                "pay": 0.1 + plan.wait * shop.grace * 0.5,
                "pay-late": shop.grace + (plan.wait - 0.3) * 1.5,
                "cancel": plan.wait * shop.grace * 0.7,
            }[plan.plan]
            await asyncio.sleep(max(0.0, after))
            if plan.plan == "cancel":
                await command("cancel", "eshop.order.CancelOrder", cancel)
            else:
                await command("pay", "eshop.order.PayOrder", {})
    if plan.delete:
        if await shop.wait_status(ref, {"PAID", "CANCELLED"}, shop.grace + 90) is None:
            shop.waited_out += 1
            return
        await command("delete", "wow.DeleteAggregate", {})


@dataclass
class Followers:
    """The host's followers (relay, sagas) sampled every second from `/wow/followers`: the most
    commits each was behind, and its longest stall (behind, its position not moving)."""

    worst: dict[str, tuple[int, float]] = field(default_factory=dict)
    """Per follower: (commits behind, at s)."""
    stalls: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Per follower: its longest stall (seconds, from s)."""

    async def sample(self, url: str, clock: Callable[[], float], stop: asyncio.Event) -> None:
        moved: dict[str, tuple[int, float]] = {}  # position, since when it has not moved
        async with httpx.AsyncClient(timeout=5) as http:
            while not stop.is_set():
                now = clock()
                with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, TypeError):
                    for follower in (await http.get(url + "/wow/followers")).json():
                        name, behind = follower["name"], int(follower["behind"])
                        position = int(follower["position"])
                        if behind > self.worst.get(name, (0, 0.0))[0]:
                            self.worst[name] = (behind, round(now, 1))
                        if name not in moved or moved[name][0] != position or behind == 0:
                            moved[name] = (position, now)
                        stalled = now - moved[name][1]
                        if stalled > self.stalls.get(name, (0.0, 0.0))[0]:
                            self.stalls[name] = (round(stalled, 1), round(moved[name][1], 1))
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(1.0):
                        await stop.wait()

    def print_worst(self) -> None:
        for name in sorted(self.worst):
            behind, at = self.worst[name]
            stalled, since = self.stalls.get(name, (0.0, 0.0))
            print(
                f"  follower {name}: at most {behind} commits behind (at {at}s), longest stall "
                f"{stalled}s (from {since}s)"
            )


async def drained(url: str, timeout: float) -> bool:  # noqa: ASYNC109
    """Wait until the relay and every saga have nothing left in the log (twice in a row)."""
    deadline = time.monotonic() + timeout
    quiet = 0
    async with httpx.AsyncClient(timeout=10) as http:
        while time.monotonic() < deadline:
            try:
                followers = (await http.get(url + "/wow/followers")).json()
                idle = all(f["behind"] == 0 and not f["lastError"] for f in followers)
            except (httpx.HTTPError, ValueError, KeyError, TypeError):
                idle = False
            quiet = quiet + 1 if idle else 0
            if quiet >= 3:
                return True
            await asyncio.sleep(0.5)
    return False


async def stock_up(shop: Shop, run: str) -> set[str]:
    """Every product stocked with `INITIAL_STOCK` before the customers come; the request ids."""
    stocked: set[str] = set()
    for product in PRODUCTS:
        request_id = f"stock-{product}-{run}"
        answer = await shop.send(
            "stock",
            STOCK.ref(TENANT, product),
            "eshop.inventory.ReceiveStock",
            {"quantity": INITIAL_STOCK},
            request_id,
            record=False,
        )
        assert answer.code == "Ok", answer
        stocked.add(request_id)
    return stocked


async def orders_end(shop: Shop, refs: list[AggregateRef], within: float) -> None:
    """Wait until every order placed has ended (its grace period at the latest), `within`
    seconds at most."""
    pending = list(refs)
    deadline = time.monotonic() + within
    while pending and time.monotonic() < deadline:
        statuses = await asyncio.gather(*(shop.status(r) for r in pending))
        pending = [
            r
            for r, s in zip(pending, statuses, strict=True)
            if s not in ("PAID", "CANCELLED") and not (s is None and _never(shop, r))
        ]
        if pending:
            await asyncio.sleep(0.5)


async def read_versions(shop: Shop, refs: list[AggregateRef]) -> dict[AggregateRef, int | None]:
    """Each order's and product's version as the host reads it at the end."""
    every = refs + [STOCK.ref(TENANT, p) for p in (*PRODUCTS, NEVER_STOCKED)]
    read = await asyncio.gather(*(shop.read(r, tries=5) for r in every))
    return {r: None if a is None else int(a["version"]) for r, a in zip(every, read, strict=True)}


def _never(shop: Shop, ref: AggregateRef) -> bool:
    """The order was never created: its customer had no answer to CreateOrder."""
    return any(
        s.kind == "create" and s.order_id == ref.aggregate_id and not s.code for s in shop.sent
    )
