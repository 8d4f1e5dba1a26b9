"""The inventory's saga: it reserves stock for each new order and confirms it to the order (or
cancels the order on a shortage), releases what a cancelled order held, and, the spec's
recurring job, every morning receives the suppliers' deliveries of the day before into stock.
Run its job with `wow-temporal worker --app workers.eshop.inventory:app` (`./run dev` runs it).

The suppliers' feed here is a stand-in that makes up a few deliveries per day and tenant, the
same each time it is asked (so handling a tick again sends the same commands).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Protocol

from workers.eshop.order import (
    ORDER,
    OUT_OF_STOCK,
    CancelCause,
    CancelOrder,
    ConfirmOrderStock,
    OrderCancelled,
    OrderCreated,
)
from workers.eshop.stock import (
    STOCK,
    ReceiveStock,
    ReleaseStock,
    ReserveStock,
    Stock,
    StockReserved,
    StockShortage,
)
from wow_temporal import (
    App,
    Command,
    Rejected,
    SagaContext,
    ScheduleTick,
    on_event,
    on_rejected,
    on_schedule,
)

PRODUCTS = ("mug", "cap", "tee", "tote")


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
    """The inventory's saga: stock for orders, and the morning job that receives deliveries."""

    def __init__(self, deliveries: Deliveries) -> None:
        self.deliveries = deliveries

    @on_event(OrderCreated)
    def on_order_created(
        self, event: OrderCreated, context: SagaContext
    ) -> list[Command[ReserveStock]]:
        assert context.source is not None
        order_id = context.source.aggregate_id
        return [
            context.command(
                STOCK.ref(context.source.tenant_id, item.product_id),
                ReserveStock(order_id=order_id, quantity=item.quantity),
            )
            for item in event.items
        ]

    @on_event(StockReserved)
    def on_stock_reserved(
        self, event: StockReserved, context: SagaContext
    ) -> Command[ConfirmOrderStock]:
        assert context.source is not None
        return context.command(
            ORDER.ref(context.source.tenant_id, event.order_id),
            ConfirmOrderStock(product_id=context.source.aggregate_id),
        )

    @on_event(StockShortage)
    def on_stock_shortage(self, event: StockShortage, context: SagaContext) -> Command[CancelOrder]:
        assert context.source is not None
        return context.command(
            ORDER.ref(context.source.tenant_id, event.order_id),
            CancelOrder(cause=CancelCause(code=OUT_OF_STOCK)),
        )

    @on_rejected(ReserveStock)
    def on_reserve_rejected(self, rejected: Rejected, context: SagaContext) -> Command[CancelOrder]:
        """A product the inventory has never stocked: the order cannot be served."""
        return context.command(
            ORDER.ref(rejected.ref.tenant_id, str(rejected.body["order_id"])),
            CancelOrder(cause=CancelCause(code=OUT_OF_STOCK)),
        )

    @on_event(OrderCancelled)
    def on_order_cancelled(
        self, event: OrderCancelled, context: SagaContext
    ) -> list[Command[ReleaseStock]]:
        assert context.source is not None
        order_id = context.source.aggregate_id
        return [
            context.command(
                STOCK.ref(context.source.tenant_id, item.product_id),
                ReleaseStock(order_id=order_id),
            )
            for item in event.items
        ]

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


app = App("eshop-inventory", aggregates=[Stock], sagas=[InventorySaga(SupplierFeed())])
