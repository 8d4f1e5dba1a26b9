"""The spec's inventory example (`receive-deliveries`), as users write it, for the job tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta

from pydantic import BaseModel

from wow_temporal import (
    App,
    Command,
    JobScope,
    Misfire,
    NamedAggregate,
    SagaContext,
    ScheduleTick,
    on_schedule,
)

STOCK = NamedAggregate("eshop-inventory", "stock")


class ReceiveStock(BaseModel):
    quantity: int


@dataclass(frozen=True)
class Delivery:
    product_id: str
    quantity: int


@dataclass
class Deliveries:
    """A supplier's deliveries by day, recording which days were asked for."""

    by_day: dict[date, list[Delivery]] = field(default_factory=dict)
    asked: list[date] = field(default_factory=list)

    def delivered_on(self, tenant_id: str, day: date) -> list[Delivery]:
        self.asked.append(day)
        return self.by_day.get(day, [])


class InventorySaga:
    def __init__(self, deliveries: Deliveries) -> None:
        self.deliveries = deliveries

    @on_schedule(name="receive-deliveries", cron="0 0 6 * * *")
    def on_schedule(self, tick: ScheduleTick, context: SagaContext) -> list[Command[ReceiveStock]]:
        today = tick.due_at.date()
        days = [today - timedelta(days=n) for n in range(tick.skipped + 1, 0, -1)]
        return [
            context.command(
                STOCK.ref(tick.tenant_id, d.product_id), ReceiveStock(quantity=d.quantity)
            )
            for day in days
            for d in self.deliveries.delivered_on(tick.tenant_id, day)
        ]


def inventory_app(deliveries: Deliveries) -> App:
    return App("eshop-inventory", sagas=[InventorySaga(deliveries)])


_ = (JobScope, Misfire)
