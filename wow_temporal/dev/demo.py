"""`wow-temporal demo`: a two-minute walk through the spec's e-shop on a running `./run dev`.

It talks only to what a newcomer has: the domain host (Wow's command API), the control API and
the Web UI's addresses, and prints each step with what to look at.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from wow_temporal.errors import WowTemporalError
from wow_temporal.ids import job_workflow_id, timer_workflow_id
from wow_temporal.model import NamedAggregate
from wow_temporal.wire import (
    COMMAND_SEND_PATH,
    ERROR_CODE_HEADER,
    OK,
    ReadResult,
    WireCommand,
    command_headers,
    read_result,
)

__all__ = ["DemoError", "restoring", "run_demo"]

ORDER = NamedAggregate("eshop-order", "order")
STOCK = NamedAggregate("eshop-inventory", "stock")
JOB = "receive-deliveries"
JOB_CONTEXT = STOCK.context_name
SYSTEM_TENANT = "(0)"


class DemoError(WowTemporalError, RuntimeError):
    """The dev stack is not there, or did not do what the walk expects."""


class _Walk:
    def __init__(
        self,
        host: httpx.AsyncClient,
        api: httpx.AsyncClient,
        ui_url: str,
        tenant: str,
        say: Callable[[str], None],
    ) -> None:
        self.host = host
        self.api = api
        self.ui_url = ui_url.rstrip("/")
        self.tenant = tenant
        self.say = say
        self.step = 0

    def heading(self, text: str) -> None:
        self.step += 1
        self.say("")
        self.say(f"{self.step}. {text}")

    def ui(self, workflow_id: str) -> str:
        return f"{self.ui_url}/namespaces/default/workflows/{quote(workflow_id, safe='')}"

    async def send(
        self,
        kind: str,
        aggregate: NamedAggregate,
        aggregate_id: str,
        body: dict[str, Any],
        tenant: str | None = None,
    ) -> ReadResult:
        command = WireCommand(
            type=kind,
            context_name=aggregate.context_name,
            aggregate_name=aggregate.aggregate_name,
            aggregate_id=aggregate_id,
            tenant_id=tenant or self.tenant,
        )
        response = await self.host.post(
            COMMAND_SEND_PATH, json=body, headers=command_headers(command)
        )
        result = read_result(response.content, response.headers.get(ERROR_CODE_HEADER))
        self.say(
            f"   → {kind.rsplit('.', 1)[-1]} {aggregate} {aggregate_id}: {result.code}"
            + (f" ({result.message})" if result.code != OK else "")
        )
        return result

    async def read(
        self, aggregate: NamedAggregate, aggregate_id: str, tenant: str | None = None
    ) -> dict[str, Any] | None:
        response = await self.host.get(
            f"/wow/aggregate/{aggregate.context_name}/{aggregate.aggregate_name}/"
            f"{quote(tenant or self.tenant, safe='')}/{quote(aggregate_id, safe='')}"
        )
        if response.status_code == 404:
            return None
        response.raise_for_status()
        found: dict[str, Any] = response.json()
        return found

    async def until(self, what: str, check: Callable[[], Any], within: float) -> Any:
        deadline = time.monotonic() + within
        while True:
            value = await check()
            if value:
                return value
            if time.monotonic() > deadline:
                raise DemoError(f"waited {within:.0f} s for {what}; see the dev stack's output")
            await asyncio.sleep(0.25)

    async def status_of(self, aggregate_id: str) -> str | None:
        order = await self.read(ORDER, aggregate_id)
        return None if order is None else str(order["state"]["status"])

    async def job(self, suffix: str = "", body: dict[str, Any] | None = None) -> dict[str, Any]:
        """Show the morning job (no `suffix`), or post `body` to its `suffix` route."""
        path = f"/{JOB_CONTEXT}/schedule/{JOB}{suffix}"
        response = await (self.api.post(path, json=body) if suffix else self.api.get(path))
        if response.status_code != 200:
            raise DemoError(f"the control API answered {response.status_code}: {response.text}")
        found: dict[str, Any] = response.json()
        return found


async def run_demo(
    host_url: str,
    api_url: str,
    ui_url: str,
    *,
    token: str | None = None,
    say: Callable[[str], None] = print,
) -> None:
    """Walk through the e-shop on the dev stack at these addresses; `DemoError` if it cannot."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx.AsyncClient(base_url=host_url, timeout=15) as host,
        httpx.AsyncClient(base_url=api_url, timeout=30, headers=headers) as api,
    ):
        for name, client in (("domain host", host), ("control API", api)):
            try:
                await client.get("/health")
            except httpx.HTTPError:
                raise DemoError(
                    f"no {name} at {client.base_url}: start the dev stack first (./run dev)"
                ) from None
        walk = _Walk(host, api, ui_url, f"demo-{uuid.uuid4().hex[:6]}", say)
        await _walk(walk)


async def _walk(walk: _Walk) -> None:
    """The walk, step by step; each step prints what happened and where to look."""
    walk.say(f"The spec's e-shop, tenant {walk.tenant}. Web UI: {walk.ui_url}")
    await _receive_stock(walk)
    order_a = await _place_order_a(walk)
    await _pay_order_b_in_time(walk, order_a.key)
    await _let_order_a_cancel_itself(walk, order_a)
    await _run_the_morning_job(walk)
    walk.say("")
    walk.say(
        f"Done. Try `wow-temporal timers list`, `wow-temporal schedule show {JOB_CONTEXT} "
        f"{JOB}`, and the README's commit by hand."
    )


@dataclass(frozen=True)
class _OrderA:
    """Order A and the timer its confirmation scheduled, as later steps need them."""

    order_id: str
    key: str
    timer_id: str
    timer: dict[str, Any]
    """The timer as the control API first showed it."""


async def _receive_stock(walk: _Walk) -> None:
    walk.heading("The inventory receives stock: 10 mugs, 5 caps.")
    await walk.send("eshop.inventory.ReceiveStock", STOCK, "mug", {"quantity": 10})
    await walk.send("eshop.inventory.ReceiveStock", STOCK, "cap", {"quantity": 5})


async def _place_order_a(walk: _Walk) -> _OrderA:
    """Order A is confirmed, its schedule committed with the confirmation and its timer started."""
    walk.heading(
        "Place order A (2 mugs, 1 cap). The inventory's saga reserves each product "
        "and confirms it to the order."
    )
    order_a = f"A-{uuid.uuid4().hex[:6]}"
    items = [{"product_id": "mug", "quantity": 2}, {"product_id": "cap", "quantity": 1}]
    await walk.send("eshop.order.CreateOrder", ORDER, order_a, {"items": items})
    await walk.until(
        "order A's stock to be confirmed",
        lambda: _is(walk, order_a, "AWAITING_PAYMENT"),
        15,
    )
    key = await _show_the_scheduling_commit(walk, order_a)
    timer_a = timer_workflow_id(ORDER.ref(walk.tenant, order_a), key)
    shown = await walk.until(
        "the relay to start order A's timer", lambda: _timer_started(walk, timer_a), 15
    )
    walk.say(f"   The relay handed it to Temporal: timer {shown['status']}, due {shown['due']}.")
    walk.say(f"   Look at it in the Web UI: {walk.ui(timer_a)}")
    walk.say(
        "   (its Summary names the timer; Current Details show the command, due time and rule)"
    )
    return _OrderA(order_a, key, timer_a, shown)


async def _show_the_scheduling_commit(walk: _Walk, order_id: str) -> str:
    """Print the order's last commit, the one that set its schedule; the schedule's key."""
    order = await walk.read(ORDER, order_id)
    assert order is not None
    last = order["commits"][-1]
    scheduled = next(e for e in last["body"] if e["name"] == "wow.ScheduleSet")["body"]
    walk.say(f"   The last confirmation committed {', '.join(e['name'] for e in last['body'])}")
    walk.say(
        f"   in one commit (version {last['version']}): {scheduled['command']['type']} "
        f"{scheduled['rule']} under {scheduled['key']}."
    )
    return str(scheduled["key"])


async def _pay_order_b_in_time(walk: _Walk, key: str) -> None:
    walk.heading("Place order B and pay it in time: paying cancels its payment-grace-period.")
    order_b = f"B-{uuid.uuid4().hex[:6]}"
    await walk.send(
        "eshop.order.CreateOrder", ORDER, order_b, {"items": [{"product_id": "mug", "quantity": 1}]}
    )
    await walk.until("order B's stock", lambda: _is(walk, order_b, "AWAITING_PAYMENT"), 15)
    await walk.send("eshop.order.PayOrder", ORDER, order_b, {})
    timer_b = timer_workflow_id(ORDER.ref(walk.tenant, order_b), key)
    ended = await walk.until(
        "order B's timer to end", lambda: _timer_in(walk, timer_b, {"Cancelled"}), 20
    )
    walk.say(f"   Order B is PAID; its timer is {ended['status']}: {walk.ui(timer_b)}")


async def _let_order_a_cancel_itself(walk: _Walk, order_a: _OrderA) -> None:
    walk.heading(
        "Wait for order A's grace period to end: its timer sends CancelOrder("
        "PAYMENT_TIMEOUT), and the saga releases its stock."
    )
    due = order_a.timer.get("due") or ""
    walk.say(f"   due {due}; waiting …")
    order_id = order_a.order_id
    await walk.until("order A to cancel itself", lambda: _is(walk, order_id, "CANCELLED"), 180)
    order = await walk.read(ORDER, order_id)
    assert order is not None
    cancelled = next(
        e for c in order["commits"] for e in c["body"] if e["name"].endswith("OrderCancelled")
    )["body"]
    cause = cancelled["cause"]
    why = f"{cause['code']}: {cause['detail']}" if cause.get("detail") else cause["code"]
    walk.say(f"   Order A is CANCELLED ({why}), sent by its {order_a.key} timer")
    walk.say(f"   (request id {cancelled['timer']}#1: the schedule and its slot).")
    done = await walk.until(
        "order A's timer to be Delivered",
        lambda: _timer_in(walk, order_a.timer_id, {"Delivered"}),
        20,
    )
    walk.say(
        f"   Its timer is {done['status']}. A second delivery would be a DuplicateRequestId: "
        "decided once."
    )
    await walk.send("eshop.order.PayOrder", ORDER, order_id, {})
    walk.say("   (paying now is refused: the order decides on its state then)")
    mug = await walk.read(STOCK, "mug")
    if mug is not None:
        walk.say(
            f"   mug stock: {mug['state']['on_hand']} on hand, reserved {mug['state']['reserved']}"
        )


async def _run_the_morning_job(walk: _Walk) -> None:
    """Enable the job, tick it every 5 seconds until it ticks once, then put it back.

    The instance is read before anything changes and put back in a `finally`: however the
    step ends (Ctrl+C, SIGTERM, SIGHUP, an error), the job must not be left ticking every 5
    seconds, sending ReceiveStock each time, long after the demo is gone, nor with a rule of
    the demo's pinned over the host's override.
    """
    walk.heading(f"The morning job {JOB}: enable it and reschedule it to run every 5 seconds.")
    found = await walk.job()
    try:
        await walk.job("/wow.schedule.enable")
        info = await walk.job("/wow.schedule.reschedule", {"expression": "*/5 * * * * *"})
        walk.say(f"   {JOB} is {info['status']}, next {', '.join(info['nextDue'][:2])}")
        walk.say(f"   Watch its ticks in the Web UI: {walk.ui(job_workflow_id(JOB_CONTEXT, JOB))}")
        recent = info.get("recent") or []
        before = recent[-1]["slot"] if recent else 0
        ticked = await walk.until("a tick of the job", lambda: _ticked(walk, before), 30)
        tick = ticked["recent"][-1]
        walk.say(
            f"   tick: slot {tick['slot']}, {tick['outcome']}: {tick['commands']} ReceiveStock "
            f"commands, {tick['delivered']} delivered"
        )
        stock = await walk.read(STOCK, "mug", SYSTEM_TENANT)
        if stock is not None:
            walk.say(
                f"   the suppliers' deliveries reached tenant {SYSTEM_TENANT}'s stock: mug "
                f"{stock['state']['on_hand']} on hand"
            )
    finally:
        await _uncancelled(_put_back(walk, found))


async def _uncancelled(work: Coroutine[Any, Any, None]) -> None:
    """Run `work` to its end even if the demo is cancelled again meanwhile (a second Ctrl+C, a
    SIGHUP then a SIGTERM): putting the job back must not be cut short by a second signal; the
    cancellation goes on once it is done."""
    task = asyncio.ensure_future(work)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True
    task.result()
    if cancelled:
        raise asyncio.CancelledError


_FIELDS = ("expression", "zone", "misfire")


def restoring(found: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """How to give the job the rule it had in `found` (as the control API showed it) again:
    a reset when it had no rule of its own (the host's or the code's in force, as before),
    else a reschedule to its own fields, a null removing each it did not have."""
    own = found.get("own") or {}
    if not any(own.get(name) is not None for name in _FIELDS):
        return "/wow.schedule.reset", None
    return "/wow.schedule.reschedule", {name: own.get(name) for name in _FIELDS}


async def _put_back(walk: _Walk, found: dict[str, Any]) -> None:
    """Give the job the rule it had in `found` again (disabling it if it was) and say so in
    one line; awaited even while the walk is being cancelled."""
    verb, body = restoring(found)
    restored = await walk.job(verb, body)
    if found.get("status") == "Disabled":
        restored = await walk.job("/wow.schedule.disable")
    how = (
        "put back with a reset (the demo's rule removed)" if body is None
        else "put back to the rule of its own it had"
    )
    source = (restored.get("sources") or {}).get("expression", "?")
    walk.say(
        f"   {JOB} {how}: {restored['expression']} from the {source}, {restored['status']}, "
        f"next {', '.join(restored['nextDue'][:1]) or 'none'}"
    )


async def _is(walk: _Walk, order_id: str, status: str) -> bool:
    return await walk.status_of(order_id) == status


async def _timer_started(walk: _Walk, workflow_id: str) -> dict[str, Any] | None:
    response = await walk.api.get(f"/timers/{quote(workflow_id, safe='')}")
    if response.status_code == 404:
        return None
    response.raise_for_status()
    found: dict[str, Any] = response.json()
    return found


async def _timer_in(walk: _Walk, workflow_id: str, statuses: set[str]) -> dict[str, Any] | None:
    found = await _timer_started(walk, workflow_id)
    return found if found is not None and found["status"] in statuses else None


async def _ticked(walk: _Walk, after_slot: int) -> dict[str, Any] | None:
    info = await walk.job()
    recent = info.get("recent") or []
    return info if recent and recent[-1]["slot"] > after_slot else None
