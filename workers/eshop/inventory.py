"""The spec's recurring job: every morning the inventory receives the suppliers' deliveries of
the day before into stock. Run it with `wow-temporal worker --app workers.eshop.inventory:app`
(`./run dev` runs it too).

The suppliers' feed here is a stand-in that makes up a few deliveries per day and tenant, the
same each time it is asked (so handling a tick again sends the same commands).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Protocol

from pydantic import BaseModel

from wow_temporal import App, Command, NamedAggregate, SagaContext, ScheduleTick, on_schedule

STOCK = NamedAggregate("eshop-inventory", "stock")
PRODUCTS = ("mug", "cap", "tee", "tote")


class ReceiveStock(BaseModel):
    """Add delivered units to a product's stock."""

    __wow_type__ = "eshop.inventory.ReceiveStock"
    quantity: int


@dataclass(frozen=True)
class Delivery:
    product_id: str
    quantity: int


class DeliveryLike(Protocol):
    @property
    def product_id(self) -> str: ...
    @property
    def quantity(self) -> int: ...


class Deliveries(Protocol):
    """What the saga needs of the suppliers' feed (injected: a real client, or a test's fake)."""

    def delivered_on(self, tenant_id: str, day: date) -> Sequence[DeliveryLike]: ...


class SupplierFeed:
    """What the suppliers delivered on a day: made up, but stable for a (tenant, day)."""

    def delivered_on(self, tenant_id: str, day: date) -> list[Delivery]:
        seed = hashlib.sha256(f"{tenant_id}/{day.isoformat()}".encode()).digest()
        return [
            Delivery(product, 1 + seed[index] % 40)
            for index, product in enumerate(PRODUCTS)
            if seed[index] % 3
        ]


class InventorySaga:
    """The inventory's saga: its morning job receives yesterday's deliveries."""

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


app = App("eshop-inventory", sagas=[InventorySaga(SupplierFeed())])
