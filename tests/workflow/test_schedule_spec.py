"""`schedule_spec`, the spec's test helper, on the time-skipping server with the real workflow."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.apps.eshop_inventory import STOCK, Deliveries, Delivery, InventorySaga, ReceiveStock
from wow_temporal import Command, JobScope, Misfire, SagaContext, ScheduleTick, on_schedule
from wow_temporal.testing import schedule_spec

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_the_morning_job_receives_yesterdays_deliveries(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    deliveries = Deliveries(
        {date(2026, 10, 19): [Delivery("mug", 40), Delivery("cap", 12)]}
    )
    async with schedule_spec(
        [InventorySaga(deliveries)],
        context="eshop-inventory",
        start=datetime(2026, 10, 20, tzinfo=UTC),
        env=time_skipping_env,
    ) as spec:
        await spec.enable("receive-deliveries")
        await spec.advance_time(timedelta(hours=6))
        assert [(c.ref, c.body) for c in spec.commands] == [
            (STOCK.ref("(0)", "mug"), ReceiveStock(quantity=40)),
            (STOCK.ref("(0)", "cap"), ReceiveStock(quantity=12)),
        ]
        assert [(t.slot, t.skipped, t.due_at) for t in spec.ticks] == [
            (1, 0, datetime(2026, 10, 20, 6, tzinfo=UTC))
        ]
    assert deliveries.asked == [date(2026, 10, 19)]


class Night:
    """Jobs for the slot and DST tests; records every tick."""

    def __init__(self) -> None:
        self.ticks: list[ScheduleTick] = []

    @on_schedule(name="half-past-two", cron="0 30 2 * * *", zone="Europe/Berlin")
    def half_past_two(self, tick: ScheduleTick, context: SagaContext) -> list[Command[Any]]:
        self.ticks.append(tick)
        return []

    @on_schedule(name="hourly", cron="0 0 * * * *", misfire=Misfire.CATCH_UP)
    async def hourly(self, tick: ScheduleTick, context: SagaContext) -> list[Command[Any]]:
        self.ticks.append(tick)
        return [context.command(STOCK.ref(tick.tenant_id, "x"), ReceiveStock(quantity=tick.slot))]

    @on_schedule(name="tenants", cron="0 0 6 * * *", scope=JobScope.TENANT)
    def tenants(self, tick: ScheduleTick, context: SagaContext) -> list[Command[Any]]:
        self.ticks.append(tick)
        return [context.command(STOCK.ref(tick.tenant_id, "t"), ReceiveStock(quantity=1))]


async def test_a_job_in_a_dst_zone_across_both_transitions(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    night = Night()
    async with schedule_spec(
        [night], context="night", start=datetime(2026, 3, 27, tzinfo=UTC), env=time_skipping_env
    ) as spec:
        await spec.enable("half-past-two")
        await spec.advance_time(timedelta(days=4))  # 29 March: 02:30 does not exist in Berlin
        await spec.reschedule("half-past-two", expression="0 30 2 * * *")  # same rule, kept
        await spec.disable("half-past-two")  # over the summer: 206 ticks that prove nothing
        await spec.advance_time(timedelta(days=206))
        await spec.enable("half-past-two")  # on 23 October
        await spec.advance_time(timedelta(days=3))  # past 25 October: 02:30 happens twice
    berlin = ZoneInfo("Europe/Berlin")
    local = [t.due_at.astimezone(berlin) for t in night.ticks]
    days = [d.date() for d in local]
    assert date(2026, 3, 29) not in days  # the gap's wall time is not a due time
    assert days[:3] == [date(2026, 3, 27), date(2026, 3, 28), date(2026, 3, 30)]
    assert days[3:] == [date(2026, 10, d) for d in (23, 24, 25, 25)]
    assert all((d.hour, d.minute) == (2, 30) for d in local)
    october_25 = [d for d in local if d.date() == date(2026, 10, 25)]
    assert len(october_25) == 2 and october_25[0].utcoffset() != october_25[1].utcoffset()
    assert [t.slot for t in night.ticks] == list(range(1, len(night.ticks) + 1))
    assert all(t.skipped == 0 for t in night.ticks)


async def test_slots_never_repeat_across_disable_enable_reschedule_and_continue_as_new(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    night = Night()
    async with schedule_spec(
        [night], context="slots", start=datetime(2026, 6, 1, tzinfo=UTC), env=time_skipping_env,
        continue_as_new_after=40,
    ) as spec:
        await spec.enable("hourly")
        await spec.advance_time(timedelta(hours=3))  # slots 1-3
        await spec.disable("hourly")
        await spec.advance_time(timedelta(hours=5))  # disabled: no slot numbers used
        await spec.enable("hourly")
        await spec.advance_time(timedelta(hours=2))  # slots 4-5
        await spec.reschedule("hourly", expression="0 30 * * * *")
        await spec.advance_time(timedelta(hours=12))  # many ticks: several continue-as-new
        info = await spec.show("hourly")
        latest = await spec.client.get_workflow_handle("wow-job:slots:hourly").describe()
        assert latest.history_length < 80  # this run began well after slot 1: it continued
    slots = [t.slot for t in night.ticks]
    assert slots == list(range(1, len(slots) + 1)), slots
    dues = [t.due_at for t in night.ticks]
    assert dues[:5] == [
        datetime(2026, 6, 1, h, tzinfo=UTC) for h in (1, 2, 3)
    ] + [datetime(2026, 6, 1, h, tzinfo=UTC) for h in (9, 10)]
    assert all(d.minute == 30 for d in dues[5:])
    assert len(dues) == 5 + 12
    assert info.next_slot == len(slots) + 1
    ids = [r.request_id for r in spec.sent]
    assert len(ids) == len(set(ids))
    assert ids[0] == "wow-job:slots:hourly#1:0"


async def test_a_tenant_jobs_instances_are_separate_and_start_may_be_in_the_future(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    night = Night()
    async with schedule_spec(
        [night], context="tenants", start=datetime(2031, 1, 1, 5, tzinfo=UTC),
        env=time_skipping_env,
    ) as spec:
        with pytest.raises(ValueError, match="TENANT job"):
            await spec.enable("tenants")
        await spec.enable("tenants", tenant="t1")
        await spec.advance_time(timedelta(hours=1))
        await spec.enable("tenants", tenant="t2")
        await spec.advance_time(timedelta(days=1))
        assert [(c.ref.tenant_id, c.ref.aggregate_id) for c in spec.commands] == [
            ("t1", "t"), ("t1", "t"), ("t2", "t"),
        ]
        ticks = spec.ticks  # by due time, then instance: the handlers ran concurrently
    assert sorted(night.ticks, key=lambda t: (t.due, t.tenant_id)) == ticks
    assert [(t.tenant_id, t.slot, t.due_at) for t in ticks] == [
        ("t1", 1, datetime(2031, 1, 1, 6, tzinfo=UTC)),
        ("t1", 2, datetime(2031, 1, 2, 6, tzinfo=UTC)),
        ("t2", 1, datetime(2031, 1, 2, 6, tzinfo=UTC)),
    ]


async def test_coalesce_counts_the_slots_missed_while_parked(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    deliveries = Deliveries({})
    saga = InventorySaga(deliveries)
    failing = True
    original = deliveries.delivered_on

    def feed(tenant_id: str, day: date) -> list[Delivery]:
        if failing:
            raise ConnectionError("supplier feed down")
        return original(tenant_id, day)

    deliveries.delivered_on = feed  # type: ignore[method-assign]
    async with schedule_spec(
        [saga], context="eshop-inventory", start=datetime(2026, 10, 20, tzinfo=UTC),
        env=time_skipping_env,
    ) as spec:
        await spec.enable("receive-deliveries")
        await spec.advance_time(timedelta(hours=6))
        parked = await spec.show("receive-deliveries")
        assert parked.status == "Parked" and "supplier feed down" in (parked.parked or "")
        await spec.advance_time(timedelta(days=3))  # slots 2-4 wait behind the parked one
        assert spec.ticks == []
        failing = False
        await spec.retry("receive-deliveries")
        await spec.advance_time(timedelta(seconds=1))
    assert [(t.slot, t.skipped) for t in spec.ticks] == [(1, 0), (4, 2)]
    assert deliveries.asked == [
        date(2026, 10, 19), date(2026, 10, 20), date(2026, 10, 21), date(2026, 10, 22)
    ]
