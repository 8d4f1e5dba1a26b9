"""The spec's e-shop end to end: orders placed over the domain host's real HTTP API, the
inventory saga confirming them, the relay handing the payment grace period to the timers on a
real `temporal server start-dev`, and the timer worker delivering `CancelOrder` back over HTTP.

Every check reads by id: the host's aggregate read (`GET /wow/aggregate/...`) for the commits,
the timer's workflow id for its final state, and the host's door (`Front`) for what reached it;
never a Temporal visibility list. Each test has its own tenant (and store file), so tests on the
session's dev server never see each other. The tests that kill the worker or stop Temporal run
on a dev server of this module's own.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from tests.helpers.eshop_stack import (
    EshopStack,
    OrderView,
    Seen,
    new_tenant,
    timer_result,
)
from tests.helpers.eventually import eventually
from tests.helpers.own_server import own_server, server
from tests.helpers.quiescent import attempts, quiescent
from tests.helpers.worker_process import WorkerProcess
from workers.eshop.order import (
    CANCEL_ORDER,
    ORDER,
    OUT_OF_STOCK,
    PAYMENT_GRACE_PERIOD,
    PAYMENT_TIMEOUT,
    CancelCause,
    CancelOrder,
    OrderCreated,
)
from wow_temporal import App, Command, Rejected, SagaContext, ScheduleRule, on_event, on_rejected
from wow_temporal.dev.server import EmbeddedTemporal
from wow_temporal.domain.system import SetSchedule
from wow_temporal.host import follower
from wow_temporal.host.relay import RELAY, Relay
from wow_temporal.host.store import EventStore
from wow_temporal.model import AggregateRef, Commit
from wow_temporal.timers.client import TIMER_TASK_QUEUE
from wow_temporal.timers.core import Status, TimerState
from wow_temporal.timers.workflow import TimerWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")

__all__ = ["own_server", "server"]  # the fixtures of the fault tests' own server

GRACE = timedelta(seconds=3)
GRACE_MS = round(GRACE.total_seconds() * 1000)
PAY = "eshop.order.PayOrder"
CANCELLED, AWAITING_PAYMENT, PAID = "CANCELLED", "AWAITING_PAYMENT", "PAID"


@pytest_asyncio.fixture(loop_scope="session")
async def stack(dev_client: Client, tmp_path: Path) -> AsyncIterator[EshopStack]:
    """The e-shop host and a timer worker (a task queue of the test's own) on the session's
    dev server, with a 3 s payment grace period."""
    async with EshopStack(dev_client, tmp_path / "domain.db", grace=GRACE) as started:
        yield started


@pytest_asyncio.fixture(loop_scope="session")
async def delivering(stack: EshopStack) -> EshopStack:
    """`stack`, for a test that needs the timers' commands taken by the host."""
    return stack


async def confirmed_order(stack: EshopStack, tenant: str, order_id: str = "o-1") -> OrderView:
    """A stocked order, confirmed by the inventory saga: its payment grace period runs."""
    await stack.receive_stock(tenant, "mug", 10)
    ref = await stack.place_order(tenant, order_id, {"mug": 2})
    view = await stack.wait_order(ref, AWAITING_PAYMENT)
    set_commit, _ = view.schedule_set()
    assert [e.name for e in set_commit.body] == [
        "eshop.order.OrderStockItemConfirmed",
        "eshop.order.OrderStockConfirmed",
        "wow.ScheduleSet",
    ]
    return view


def only(seen: list[Seen]) -> Seen:
    assert len(seen) == 1, [(s.request_id, s.error_code) for s in seen]
    return seen[0]


# --- 1. not paid: cancelled once, never early --------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("delivering")
async def test_an_unpaid_order_is_cancelled_once_by_its_timer_never_early(
    stack: EshopStack, dev_client: Client
) -> None:
    tenant = new_tenant()
    confirmed = await confirmed_order(stack, tenant)
    ref = confirmed.ref
    set_commit, timer = confirmed.schedule_set()

    state = await timer_result(dev_client, stack.timer_id(ref), timeout=30)
    assert state.status is Status.DELIVERED
    assert (state.delivered, state.rejected) == (1, 0)

    view = await stack.wait_order(ref, CANCELLED)
    (cancel_commit, cancelled), *others = view.cancellations
    assert others == [], "cancelled more than once"
    assert cancelled["cause"]["code"] == PAYMENT_TIMEOUT
    assert cancelled["timer"] == timer
    assert cancel_commit.request_id == f"{timer}#1"
    assert cancel_commit.header.get("upstream_id") == set_commit.id, "causation: the set"
    assert cancel_commit.create_time >= set_commit.create_time + GRACE_MS, (
        f"{set_commit.create_time + GRACE_MS - cancel_commit.create_time} ms early"
    )
    arrived = only(stack.front.by_timer(timer))
    assert (arrived.request_id, arrived.error_code) == (f"{timer}#1", "Ok")
    assert arrived.received_ms >= set_commit.create_time + GRACE_MS
    # The inventory hears of the cancellation and releases what the order held.
    stock = f"/wow/aggregate/eshop-inventory/stock/{tenant}/mug"

    async def released() -> bool:
        data = (await stack.http.get(stack.url + stock)).json()
        return bool(data["state"]["reserved"] == {})

    await eventually(released, within=10, what="the stock released")


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("delivering")
async def test_one_trace_runs_from_the_order_placed_to_its_cancellation(
    stack: EshopStack,
) -> None:
    tenant = new_tenant()
    trace = uuid.uuid4().hex
    await stack.receive_stock(tenant, "mug", 10)
    ref = await stack.place_order(
        tenant, "o-1", {"mug": 2}, traceparent=f"00-{trace}-{uuid.uuid4().hex[:16]}-01"
    )
    view = await stack.wait_order(ref, CANCELLED)
    # CreateOrder -> its commit -> the inventory saga -> ConfirmOrderStock -> the ScheduleSet's
    # commit -> the relay -> the timer -> CancelOrder delivered -> its commit: one trace id.
    set_commit, _ = view.schedule_set()
    (cancel_commit, _), = view.cancellations
    for commit in (view.commits[0], set_commit, cancel_commit):
        traceparent = commit.header.get("traceparent", "")
        assert traceparent.split("-")[1:2] == [trace], (commit.body[0].name, commit.header)


# --- 2. paid in time: the timer ends cancelled, nothing is sent ---------------------------------


async def cancelled_before_due(
    stack: EshopStack, client: Client, command: str
) -> tuple[OrderView, Commit, TimerState]:
    """A confirmed order sent `command`: its timer ends Cancelled with no delivery ever
    scheduled, so it can send nothing, however late. The order, its set commit, the timer."""
    confirmed = await confirmed_order(stack, new_tenant())
    set_commit, timer = confirmed.schedule_set()
    sent = await stack.send(command, confirmed.ref)
    assert sent.ok, sent
    state = await timer_result(client, stack.timer_id(confirmed.ref), timeout=30)
    assert state.status is Status.CANCELLED
    assert (state.delivered, state.rejected) == (0, 0)
    assert await attempts(client.get_workflow_handle(stack.timer_id(confirmed.ref))) == []
    assert stack.front.by_timer(timer) == [], f"its timer sent its command after {command}"
    view = await stack.order(confirmed.ref)
    assert view.cancellations == []
    return view, set_commit, state


@pytest.mark.timeout(60)
async def test_an_order_paid_in_time_cancels_its_timer_and_is_never_cancelled(
    stack: EshopStack, dev_client: Client
) -> None:
    view, set_commit, state = await cancelled_before_due(stack, dev_client, PAY)
    assert view.status == PAID
    pay_commit = view.commits[-1]
    assert [e.name for e in pay_commit.body] == ["eshop.order.OrderPaid", "wow.ScheduleCancelled"]
    assert pay_commit.create_time < set_commit.create_time + GRACE_MS, "paid too late to test"
    again = await timer_result(dev_client, stack.timer_id(view.ref), timeout=5)
    assert again == state, "the timer ran again"


# --- 3. paid after the timer fired; a cancellation that arrives after payment ------------------


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("delivering")
async def test_paying_an_order_its_timer_cancelled_is_refused(
    stack: EshopStack, dev_client: Client
) -> None:
    tenant = new_tenant()
    ref = (await confirmed_order(stack, tenant)).ref
    state = await timer_result(dev_client, stack.timer_id(ref), timeout=30)
    assert state.status is Status.DELIVERED
    cancelled = await stack.wait_order(ref, CANCELLED)

    late = await stack.send(PAY, ref)
    assert (late.status, late.error_code) == (400, "IllegalState"), late
    assert PAYMENT_TIMEOUT in late.error_msg, late
    after = await stack.order(ref)
    assert (after.status, after.version) == (CANCELLED, cancelled.version)


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("delivering")
async def test_a_cancellation_scheduled_after_payment_is_rejected_once_and_not_retried(
    stack: EshopStack, dev_client: Client
) -> None:
    """The order is paid (its timer cancelled); then a `wow.schedule.Set` of the same key, as
    a saga would send it, hands the same timer a new slot: its `CancelOrder` arrives after the
    payment and is refused, and the timer ends Rejected after one attempt."""
    tenant = new_tenant()
    ref = (await confirmed_order(stack, tenant)).ref
    workflow_id = stack.timer_id(ref)
    assert (await stack.send(PAY, ref)).ok
    first = await timer_result(dev_client, workflow_id, timeout=30)
    assert first.status is Status.CANCELLED

    schedule = {
        "key": PAYMENT_GRACE_PERIOD,
        "rule": {"after": "PT1S"},
        "command": {
            "type": CANCEL_ORDER,
            "body": {"cause": {"code": PAYMENT_TIMEOUT, "detail": ""}},
            "revision": "2",
        },
    }
    asked = await stack.send("wow.schedule.Set", ref, schedule)
    assert asked.ok, asked
    view = await stack.order(ref)
    set_commit, timer = view.schedule_set(1)
    assert set_commit.version == asked.version == 4

    state = await timer_result(
        dev_client, workflow_id, until=lambda s: s.status is not Status.CANCELLED, timeout=30
    )
    assert state.status is Status.REJECTED
    assert (state.delivered, state.rejected) == (0, 1)
    assert state.spec is not None and state.spec.timer == timer
    arrived = only(stack.front.by_timer(timer))
    assert (arrived.request_id, arrived.status, arrived.error_code) == (
        f"{timer}#1",
        400,
        "IllegalState",
    )
    assert arrived.received_ms >= set_commit.create_time + 1000
    await quiescent(dev_client.get_workflow_handle(workflow_id))  # rejected: final, closed
    assert len(stack.front.by_timer(timer)) == 1, "a rejection was retried"
    after = await stack.order(ref)
    assert after.status == PAID
    assert after.cancellations == []


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("delivering")
async def test_a_cancellation_in_flight_when_the_order_is_paid_is_refused_and_counted(
    stack: EshopStack, dev_client: Client
) -> None:
    """The timer's `CancelOrder` reaches the host's door and waits there while the order is
    paid: the host then refuses it, and the timer, whose schedule the payment cancelled while
    the command was in flight, counts the refusal and sends nothing more."""
    tenant = new_tenant()
    confirmed = await confirmed_order(stack, tenant)
    ref = confirmed.ref
    _, timer = confirmed.schedule_set()
    hold = stack.front.hold(lambda seen: seen.timer == timer)
    async with asyncio.timeout(20):
        await hold.arrived.wait()
    paid = await stack.send(PAY, ref)
    assert paid.ok, paid
    pay_commit = (await stack.order(ref)).commits[-1]
    assert pay_commit.version == paid.version
    handle = dev_client.get_workflow_handle(stack.timer_id(ref))

    async def cancelled_in_flight() -> bool:
        running: TimerState = await handle.query(TimerWorkflow.state)
        return running.spec is None and running.pending is None

    # The relay hands the payment's cancel to the timer while its command is at the door.
    await eventually(cancelled_in_flight, within=10, what="the cancel reaches the timer")
    # Handed over without waiting for the command's fate (nor for a worker).
    (answer,) = stack.timers.answers_for(pay_commit.id)
    assert [(a.kind, a.outcome) for a in answer] == [("cancel", "handed-over")]
    hold.release()

    state = await timer_result(dev_client, stack.timer_id(ref), timeout=30)
    assert state.status is Status.CANCELLED
    assert (state.delivered, state.rejected) == (0, 1), state.last_outcome
    assert state.last_change.startswith(f"cancel of version {pay_commit.version}: cancelled")
    assert "in flight" in state.last_outcome, state.last_outcome
    arrived = only(stack.front.by_timer(timer))
    assert arrived.error_code == "IllegalState"
    assert await attempts(handle) == [1], "sent again"  # closed: no stale attempt left
    view = await stack.order(ref)
    assert view.status == PAID
    assert view.cancellations == []


# --- 4. deleting an order cancels its timer ----------------------------------------------------


@pytest.mark.timeout(60)
async def test_deleting_an_order_cancels_its_pending_timer(
    stack: EshopStack, dev_client: Client
) -> None:
    view, _, _ = await cancelled_before_due(stack, dev_client, "wow.DeleteAggregate")
    assert view.deleted
    assert [e.name for e in view.commits[-1].body] == ["wow.AggregateDeleted"]
    refused = await stack.send(PAY, view.ref)
    assert (refused.status, refused.error_code) == (410, "IllegalAccessDeletedAggregate")


# --- 5. a saga's command to a missing target goes to its @on_rejected -------------------------


@pytest.mark.timeout(60)
async def test_the_inventory_cancels_an_order_for_a_product_it_never_stocked(
    stack: EshopStack, dev_client: Client
) -> None:
    """`ReserveStock` to a stock that does not exist is refused (NotFound): the inventory's
    `@on_rejected` cancels the order OUT_OF_STOCK, and no grace period is ever scheduled."""
    tenant = new_tenant()
    product = f"never-{uuid.uuid4().hex[:6]}"
    ref = await stack.place_order(tenant, "o-1", {product: 1})
    view = await stack.wait_order(ref, CANCELLED)
    (_, cancelled), *others = view.cancellations
    assert others == []
    assert (cancelled["cause"]["code"], cancelled["timer"]) == (OUT_OF_STOCK, None)
    assert view.events("wow.ScheduleSet") == []
    assert await stack.read(ref.model_copy(update={"aggregate_id": product})) is None
    await assert_no_timer(dev_client, stack.timer_id(ref))


REMINDER = "reminder"
REFUSED = "SCHEDULE_REFUSED"


class ReminderSaga:
    """For each new order, asks an order that does not exist to schedule a reminder; when that
    is refused, it cancels the real order (and records what it heard)."""

    def __init__(self) -> None:
        self.heard: list[Rejected] = []

    @on_event(OrderCreated, schedules=[CANCEL_ORDER])
    def on_order_created(self, event: OrderCreated, context: SagaContext) -> Command[SetSchedule]:
        assert context.source is not None
        missing = context.source.model_copy(
            update={"aggregate_id": f"missing-{context.source.aggregate_id}"}
        )
        return context.schedule(
            REMINDER,
            ScheduleRule.after(timedelta(seconds=1)),
            missing,
            CancelOrder(cause=CancelCause(code="REMINDER")),
        )

    @on_rejected(SetSchedule)
    def on_schedule_refused(self, rejected: Rejected, context: SagaContext) -> Command[CancelOrder]:
        self.heard.append(rejected)
        order_id = rejected.ref.aggregate_id.removeprefix("missing-")
        return context.command(
            ORDER.ref(rejected.ref.tenant_id, order_id),
            CancelOrder(cause=CancelCause(code=REFUSED)),
        )


async def assert_no_timer(client: Client, workflow_id: str) -> None:
    with pytest.raises(RPCError) as raised:
        await client.get_workflow_handle(workflow_id).describe()
    assert raised.value.status == RPCStatusCode.NOT_FOUND


@pytest.mark.timeout(60)
async def test_a_sagas_schedule_for_a_missing_target_goes_to_its_on_rejected(
    dev_client: Client, tmp_path: Path
) -> None:
    saga = ReminderSaga()
    probe = App("eshop-e2e-probe", sagas=[saga])
    async with EshopStack(dev_client, tmp_path / "domain.db", grace=GRACE, apps=[probe]) as stack:
        tenant = new_tenant()
        await stack.receive_stock(tenant, "mug", 10)
        ref = await stack.place_order(tenant, "o-1")
        view = await stack.wait_order(ref, CANCELLED)
        (_, cancelled), *others = view.cancellations
        assert others == []
        assert cancelled["cause"]["code"] == REFUSED
        (heard,) = saga.heard
        missing = ORDER.ref(tenant, "missing-o-1")
        assert (heard.command_type, heard.ref, heard.error_code) == (
            "wow.schedule.Set",
            missing,
            "NotFound",
        )
        assert heard.body["key"] == REMINDER
        assert heard.body["command"]["type"] == CANCEL_ORDER
        assert await stack.read(missing) is None
        await assert_no_timer(dev_client, stack.timer_id(missing, REMINDER))
        # If the inventory confirmed the order first, the cancellation cancelled its grace
        # period: no PAYMENT_TIMEOUT is ever sent.
        if view.events("wow.ScheduleSet"):
            state = await timer_result(dev_client, stack.timer_id(ref), timeout=30)
            assert state.status is Status.CANCELLED and state.delivered == 0
        assert stack.front.from_timers(tenant) == []


# --- 8. a crash between the hand-over and the relay's checkpoint ------------------------------


@pytest.mark.timeout(90)
async def test_a_crash_between_the_hand_over_and_the_checkpoint_applies_the_schedule_once(
    dev_client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The relay hands the grace period over, then the host dies before recording its position
    (`EventStore.advance` fails for the relay). A new host on the same store file hands it over
    again: the timer ignores it, and the order is cancelled once."""
    trail: list[tuple[str, str]] = []
    crashing = True
    advance = EventStore.advance

    def crash_before_checkpoint(store: EventStore, follower: str, position: int) -> None:
        if follower == RELAY and crashing:
            trail.append(("crash", str(position)))
            raise RuntimeError("the host died before the relay recorded its position")
        advance(store, follower, position)

    monkeypatch.setattr(EventStore, "advance", crash_before_checkpoint)
    async with EshopStack(dev_client, tmp_path / "domain.db", grace=GRACE) as stack:
        stack.timers.on_handed = lambda commits: trail.extend(("handed", c.id) for c in commits)
        tenant = new_tenant()
        confirmed = await confirmed_order(stack, tenant)
        ref = confirmed.ref
        set_commit, timer = confirmed.schedule_set()

        def crashed_after_hand_over() -> bool:
            if ("handed", set_commit.id) not in trail:
                return False
            handed = trail.index(("handed", set_commit.id))
            return any(kind == "crash" for kind, _ in trail[handed:])

        await eventually(crashed_after_hand_over, within=10, what="a crash after the hand-over")
        await stack.stop_runtime()
        crashing = False
        first = stack.timers.answers_for(set_commit.id)
        assert [a.outcome for a in first[0]] == ["started"]
        assert all(
            [a.outcome for a in answers] in (["handed-over"], ["ignored"]) for answers in first[1:]
        )

        store = EventStore(stack.db_path)
        try:
            recorded = store.position(RELAY)
            log = store.commits_after(recorded, 1000)
        finally:
            store.close()
        assert set_commit.id in [c.id for _, c in log], "the relay recorded its position"

        stack.start_runtime()
        await eventually(
            lambda: len(stack.timers.answers_for(set_commit.id)) > len(first),
            within=15,
            what="the new host hands the commit over again",
        )
        again = stack.timers.answers_for(set_commit.id)[len(first)]
        assert [a.outcome for a in again] in (["handed-over"], ["ignored"]), again

        state = await timer_result(dev_client, stack.timer_id(ref), timeout=30)
        assert state.status is Status.DELIVERED
        # Handed over again while it ran, the timer ignored it (ended, ingest did).
        assert state.last_change == "" or ": ignored: stale: " in state.last_change
        assert (state.delivered, state.rejected) == (1, 0)
        view = await stack.wait_order(ref, CANCELLED)
        (cancel_commit, cancelled), *others = view.cancellations
        assert others == [], "cancelled more than once"
        assert cancelled["timer"] == timer
        assert cancel_commit.create_time >= set_commit.create_time + GRACE_MS
        only(stack.front.by_timer(timer))
        await eventually(
            lambda: _relay_caught_up(stack), within=15, what="the new relay records its position"
        )


async def _relay_caught_up(stack: EshopStack) -> bool:
    relay = (await stack.followers())[RELAY]
    return bool(relay["behind"] == 0 and relay["lastError"] is None)


# --- 6 and 7: faults, on a server of this module's own ----------------------------------------


FAULT_GRACE = timedelta(seconds=2)
FAULT_GRACE_MS = 2000


def assert_cancelled_once_never_early(views: list[OrderView], grace_ms: int) -> None:
    for view in views:
        assert view.status == CANCELLED, view.ref.aggregate_id
        set_commit, timer = view.schedule_set()
        cancellations = view.cancellations
        assert len(cancellations) == 1, f"{view.ref.aggregate_id}: {len(cancellations)} cancels"
        ((commit, cancelled),) = cancellations
        assert (cancelled["cause"]["code"], cancelled["timer"]) == (PAYMENT_TIMEOUT, timer)
        early = set_commit.create_time + grace_ms - commit.create_time
        assert early <= 0, f"{view.ref.aggregate_id}: cancelled {early} ms early"


async def all_timers(
    client: Client,
    stack: EshopStack,
    refs: list[AggregateRef],
    timeout: float,  # noqa: ASYNC109
) -> list[TimerState]:
    limit = asyncio.Semaphore(50)

    async def one(workflow_id: str) -> TimerState:
        async with limit:
            return await timer_result(client, workflow_id, timeout=timeout)

    return list(await asyncio.gather(*(one(stack.timer_id(ref)) for ref in refs)))


@pytest.mark.timeout(120)
async def test_a_worker_killed_while_grace_periods_fire_cancels_every_order_once(
    server: EmbeddedTemporal, tmp_path: Path
) -> None:
    count = 50
    client = await server.connect()
    async with EshopStack(
        client,
        tmp_path / "domain.db",
        grace=FAULT_GRACE,
        task_queue=TIMER_TASK_QUEUE,  # the CLI worker's
        worker=False,
    ) as stack:
        worker = WorkerProcess(server, stack.url, tmp_path / "worker.log")
        await worker.start()
        try:
            tenant = new_tenant()
            await stack.receive_stock(tenant, "mug", 10 * count)
            refs = []
            for n in range(count):  # over ~2 s, so the grace periods end one after another
                refs.append(await stack.place_order(tenant, f"o-{n}"))
                await asyncio.sleep(0.04)
            await eventually(
                lambda: sum(s.answered for s in stack.front.from_timers(tenant)) >= count // 6,
                within=30,
                what="the first grace periods end",
            )
            # From now on the host decides each timer's command but holds the answer, so the
            # worker dies with answers on their way.
            stack.front.answers.clear()
            await eventually(
                lambda: any(s.status and not s.answered for s in stack.front.from_timers(tenant)),
                within=30,
                what="a decided command whose answer is held",
            )
            await worker.kill()  # reaped (it asserts the SIGKILL): it sends nothing more
            at_kill = list(stack.front.from_timers(tenant))
            # Decided by the host, the answer still on its way.
            in_flight = [s.request_id for s in at_kill if s.status and not s.answered]
            stack.front.answers.set()  # to a connection the killed worker closed
            await worker.start()
            states = await all_timers(client, stack, refs, timeout=60)
        finally:
            await worker.stop()
        views = [await stack.order(ref) for ref in refs]
        seen = stack.front.from_timers(tenant)

    assert len({s.request_id for s in at_kill}) < count, "killed after every order was cancelled"
    assert in_flight, "no answer was on its way when the worker was killed"
    assert all(s.status is Status.DELIVERED for s in states), {s.status for s in states}
    assert all((s.delivered, s.rejected) == (1, 0) for s in states)
    assert_cancelled_once_never_early(views, FAULT_GRACE_MS)
    # Each command was decided once: its first arrival Ok, any repeat a duplicate.
    decided = [s.request_id for s in seen if s.error_code == "Ok"]
    assert sorted(decided) == sorted({s.request_id for s in seen})
    assert len(decided) == count
    for arrived in seen:  # only a request the killed worker dropped before the host read it
        assert arrived.error_code in ("Ok", "DuplicateRequestId") or arrived in at_kill, arrived
    repeated = {s.request_id for s in seen if s.error_code == "DuplicateRequestId"}
    assert set(in_flight) <= repeated, "an answer lost with the worker was not asked again"
    print(
        f"\nworker kill: {len(at_kill)} of {count} sent before the kill ({len(in_flight)} "
        f"answers on their way), {len(seen)} requests in all, {len(repeated)} repeated"
    )


@pytest.mark.timeout(150)
async def test_orders_placed_while_temporal_is_down_are_all_scheduled_once_it_is_back(
    server: EmbeddedTemporal, tmp_path: Path
) -> None:
    count = 80  # a backlog the relay hands over in batches; more only costs the suite time
    client = await server.connect()
    async with EshopStack(client, tmp_path / "domain.db", grace=FAULT_GRACE) as stack:
        assert stack.runtime is not None
        stack.runtime.relay.timeout_s = 5.0  # try again soon after the server is back
        tenant = new_tenant()
        await server.stop()
        try:
            started = time.monotonic()
            await stack.receive_stock(tenant, "mug", 10 * count)
            limit = asyncio.Semaphore(16)

            async def place(n: int) -> AggregateRef:
                async with limit:
                    return await stack.place_order(tenant, f"o-{n}")

            refs = list(await asyncio.gather(*(place(n) for n in range(count))))
            placed = time.monotonic() - started

            async def sagas_done() -> bool:
                followers = await stack.followers()
                return all(f["behind"] == 0 for name, f in followers.items() if name != RELAY)

            await eventually(sagas_done, within=60, what="the inventory saga confirms")
            views = [await stack.order(ref) for ref in refs]
            assert {v.status for v in views} == {AWAITING_PAYMENT}
            relay = (await stack.followers())[RELAY]
            assert relay["behind"] >= count, relay
            assert stack.front.from_timers(tenant) == []
            assert not server.running
        finally:
            back_ms = int(time.time() * 1000)
            await server.start()
        states = await all_timers(client, stack, refs, timeout=90)
        assert all(s.status is Status.DELIVERED for s in states), {s.status for s in states}
        assert all((s.delivered, s.rejected) == (1, 0) for s in states)
        views = [await stack.wait_order(ref, CANCELLED) for ref in refs]
        seen = stack.front.from_timers(tenant)
        await eventually(lambda: _relay_caught_up(stack), within=30, what="the relay catches up")
    assert_cancelled_once_never_early(views, FAULT_GRACE_MS)
    assert len({s.request_id for s in seen}) == count
    assert all(s.received_ms >= back_ms for s in seen), "delivered while Temporal was down"
    print(
        f"\nTemporal down: {count} orders placed in {placed:.1f} s, relay {relay['behind']} "
        f"commits behind; {len(seen)} deliveries after the restart"
    )


# --- 9. a gap: the relay hands the stops it read ahead over before its first batch ------------


@pytest.mark.timeout(60)
async def test_a_running_timer_whose_cancel_is_batches_away_stops_before_the_relays_first_batch(
    dev_client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Order A's grace period runs in Temporal; the timers go away while order B is confirmed
    (its set), stock is received and A is paid (its cancel), batches apart. Back, the relay
    hands A's cancel over before B's batch: A's timer ends cancelled by it."""
    monkeypatch.setattr(Relay, "batch", 2)
    monkeypatch.setattr(follower, "_BACKOFF_S", (0.1,))
    async with EshopStack(dev_client, tmp_path / "domain.db", grace=timedelta(minutes=5)) as stack:
        tenant = new_tenant()
        confirmed = await confirmed_order(stack, tenant, "a")
        a, (a_set, _) = confirmed.ref, confirmed.schedule_set()
        await eventually(  # its timer runs in Temporal before the timers go away
            lambda: a_set.id in [c.id for c, _ in stack.timers.handed], within=20, what="A set"
        )
        stack.timers.cut = ConnectionError("temporal is away")
        b = await stack.place_order(tenant, "b", {"mug": 1})
        b_set, _ = (await stack.wait_order(b, AWAITING_PAYMENT)).schedule_set()
        for product in ("cap", "hat", "pen"):
            await stack.receive_stock(tenant, product, 1)
        assert (await stack.send(PAY, a)).ok
        paid = (await stack.wait_order(a, PAID)).commits[-1]
        assert [e.name for e in paid.body][-1] == "wow.ScheduleCancelled"
        stack.timers.cut = None

        state = await timer_result(dev_client, stack.timer_id(a), timeout=20)
        assert state.status is Status.CANCELLED and state.applied == (paid.version, 0)
        await eventually(
            lambda: b_set.id in [c.id for c, _ in stack.timers.handed], within=20, what="B set"
        )
        handed = [c.id for c, _ in stack.timers.handed]
        assert handed.index(paid.id) < handed.index(b_set.id), handed
        early = stack.timers.answers_for(paid.id)[0]
        assert [(x.kind, x.outcome) for x in early] == [("cancel", "handed-over")]
