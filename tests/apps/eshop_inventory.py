"""The spec's inventory example (`workers/eshop/inventory.py`'s saga) with a recording fake of
the suppliers' feed, for the job tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date

from workers.eshop.inventory import STOCK, InventorySaga, ReceiveStock

__all__ = ["STOCK", "Deliveries", "Delivery", "InventorySaga", "ReceiveStock"]


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
