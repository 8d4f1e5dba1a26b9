"""The inventory's stock, `eshop-inventory.stock`, one aggregate per product: received into
stock, reserved for orders, and released when an order is cancelled."""

from __future__ import annotations

from pydantic import BaseModel, Field

from wow_temporal import CommandBody, Decision, NamedAggregate, aggregate, on_command, on_sourcing

STOCK = NamedAggregate("eshop-inventory", "stock")


class ReceiveStock(CommandBody):
    """Add delivered units to a product's stock (the product's first delivery creates it)."""

    __wow_type__ = "eshop.inventory.ReceiveStock"
    quantity: int = Field(gt=0, le=1_000_000)


class ReserveStock(CommandBody):
    """Hold units for an order; a shortage is an event, so the order hears of it."""

    __wow_type__ = "eshop.inventory.ReserveStock"
    order_id: str = Field(min_length=1)
    quantity: int = Field(gt=0)


class ReleaseStock(CommandBody):
    """Give back what an order held (it was cancelled)."""

    __wow_type__ = "eshop.inventory.ReleaseStock"
    order_id: str = Field(min_length=1)


class StockReceived(BaseModel):
    __wow_type__ = "eshop.inventory.StockReceived"
    quantity: int


class StockReserved(BaseModel):
    __wow_type__ = "eshop.inventory.StockReserved"
    order_id: str
    quantity: int


class StockShortage(BaseModel):
    __wow_type__ = "eshop.inventory.StockShortage"
    order_id: str
    quantity: int
    available: int


class StockReleased(BaseModel):
    __wow_type__ = "eshop.inventory.StockReleased"
    order_id: str
    quantity: int


class StockState:
    """A product's stock: units on hand and what each order holds of them."""

    def __init__(self, product_id: str) -> None:
        self.product_id = product_id
        self.on_hand = 0
        self.reserved: dict[str, int] = {}

    @property
    def available(self) -> int:
        return self.on_hand - sum(self.reserved.values())

    @on_sourcing
    def received(self, event: StockReceived) -> None:
        self.on_hand += event.quantity

    @on_sourcing
    def reserved_for(self, event: StockReserved) -> None:
        self.reserved[event.order_id] = event.quantity

    @on_sourcing
    def released(self, event: StockReleased) -> None:
        self.reserved.pop(event.order_id, None)


@aggregate("stock")
class Stock:
    """The stock aggregate over its `StockState`."""

    def __init__(self, state: StockState) -> None:
        self.state = state

    @on_command(produces=[StockReceived], allow_create=True)
    def receive(self, command: ReceiveStock) -> Decision:
        return Decision.events(StockReceived(quantity=command.quantity))

    @on_command(produces=[StockReserved, StockShortage])
    def reserve(self, command: ReserveStock) -> Decision:
        """Reserve once per order: the same order asking again changes nothing."""
        if command.order_id in self.state.reserved:
            return Decision.NoOp
        if self.state.available < command.quantity:
            return Decision.events(
                StockShortage(
                    order_id=command.order_id,
                    quantity=command.quantity,
                    available=self.state.available,
                )
            )
        return Decision.events(StockReserved(order_id=command.order_id, quantity=command.quantity))

    @on_command(produces=[StockReleased])
    def release(self, command: ReleaseStock) -> Decision:
        held = self.state.reserved.get(command.order_id)
        if held is None:
            return Decision.NoOp
        return Decision.events(StockReleased(order_id=command.order_id, quantity=held))
