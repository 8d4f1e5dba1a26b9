"""`schedule_spec`, the spec's test helper, on the time-skipping server with the real workflow."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.eshop_inventory import STOCK, Deliveries, Delivery, InventorySaga, ReceiveStock
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
