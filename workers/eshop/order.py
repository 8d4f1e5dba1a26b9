"""The spec's order, `eshop-order.order`: it confirms its products' stock one by one, and when the
last is confirmed it schedules its own cancellation for when the payment grace period ends.
Paying in time cancels that schedule; a cancellation that arrives after payment is refused.

`CancelOrder` is at revision 2 (a structured `cause` where revision 1 had a `reason` string): a
grace period scheduled by an older build still carries the first shape, and the order app's
upcaster (`cancel_order_reason_to_cause`) reads it as now. Build the app with `order_app`, so no
host serves the order without it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field, TypeAdapter, field_validator, model_validator

from wow_temporal import (
    App,
    CommandBody,
    CommandRejected,
    DecideScope,
    Decision,
    NamedAggregate,
    ScheduleRule,
    aggregate,
    on_command,
    on_sourcing,
    upcaster,
)

ORDER = NamedAggregate("eshop-order", "order")
CANCEL_ORDER = "eshop.order.CancelOrder"
PAYMENT_GRACE_PERIOD = "payment-grace-period"
PAYMENT_TIMEOUT = "PAYMENT_TIMEOUT"
OUT_OF_STOCK = "OUT_OF_STOCK"


@dataclass(frozen=True)
class PaymentPolicy:
    """How long a confirmed order waits for its payment before it cancels itself."""

    grace_period: timedelta

    @classmethod
    def from_env(cls) -> PaymentPolicy:
        """`ESHOP_PAYMENT_GRACE_PERIOD` (an ISO-8601 duration such as PT30M), 20 s by default so
        the demo is short."""
        text = os.environ.get("ESHOP_PAYMENT_GRACE_PERIOD", "PT20S")
        try:
            period = TypeAdapter(timedelta).validate_python(text)
        except ValueError:
            raise ValueError(
                f"ESHOP_PAYMENT_GRACE_PERIOD={text!r}: give an ISO-8601 duration such as PT30M"
            ) from None
        if period <= timedelta(0):
            raise ValueError(f"ESHOP_PAYMENT_GRACE_PERIOD={text!r}: give a positive duration")
        return cls(period)


class OrderStatus(StrEnum):
    AWAITING_VALIDATION = "AWAITING_VALIDATION"
    AWAITING_PAYMENT = "AWAITING_PAYMENT"
    PAID = "PAID"
    CANCELLED = "CANCELLED"


class OrderItem(BaseModel):
    product_id: str = Field(min_length=1, max_length=64)
    quantity: int = Field(gt=0, le=10_000)


class CreateOrder(CommandBody):
    """Place an order for these products (each once)."""

    __wow_type__ = "eshop.order.CreateOrder"
    items: list[OrderItem] = Field(min_length=1, max_length=100)

    @field_validator("items")
    @classmethod
    def _distinct(cls, items: list[OrderItem]) -> list[OrderItem]:
        products = [item.product_id for item in items]
        if len(set(products)) != len(products):
            raise ValueError("each product appears once in an order")
        return items


class ConfirmOrderStock(CommandBody):
    """The inventory reserved this product's quantity for the order."""

    __wow_type__ = "eshop.order.ConfirmOrderStock"
    product_id: str


class PayOrder(CommandBody):
    """The customer paid."""

    __wow_type__ = "eshop.order.PayOrder"


class CancelCause(BaseModel):
    """Why an order is cancelled: a `code` a program can branch on (`PAYMENT_TIMEOUT`,
    `OUT_OF_STOCK`, `CUSTOMER`, …) and a `detail` for people, empty when the code says it all."""

    model_config = {"frozen": True}

    code: str = Field(min_length=1, max_length=64)
    detail: str = Field(default="", max_length=256)

    def __str__(self) -> str:
        return f"{self.code}: {self.detail}" if self.detail else self.code


class CancelOrder(CommandBody):
    """Cancel the order: sent by its own timer (`PAYMENT_TIMEOUT`), by the inventory
    (`OUT_OF_STOCK`) or by the customer.

    Revision 2; revision 1 (every timer scheduled before it, still pending in Temporal) was
    `{"reason": "PAYMENT_TIMEOUT"}`, read through `cancel_order_reason_to_cause`."""

    __wow_type__ = CANCEL_ORDER
    __wow_revision__ = 2
    cause: CancelCause


@upcaster(CancelOrder, revision=1)
def cancel_order_reason_to_cause(body: dict[str, Any]) -> dict[str, Any]:
    """`CancelOrder` revision 1 to 2: its `reason` string is the cause's code, with no detail
    (a body without one is not revision 1: the `KeyError` parks the timer for an operator)."""
    return {"cause": {"code": body["reason"], "detail": ""}}


class OrderCreated(BaseModel):
    __wow_type__ = "eshop.order.OrderCreated"
    items: list[OrderItem]


class OrderStockItemConfirmed(BaseModel):
    __wow_type__ = "eshop.order.OrderStockItemConfirmed"
    product_id: str


class OrderStockConfirmed(BaseModel):
    __wow_type__ = "eshop.order.OrderStockConfirmed"


class OrderPaid(BaseModel):
    __wow_type__ = "eshop.order.OrderPaid"


class OrderCancelled(BaseModel):
    __wow_type__ = "eshop.order.OrderCancelled"
    cause: CancelCause
    """Why, as the `CancelOrder` said (an event stored before causes were: its `reason`)."""
    items: list[OrderItem]
    """What the order held, so the inventory can release its reservations."""
    timer: str | None = None
    """The timer that sent the cancellation (its `command.schedule.timer`), if one did."""

    @model_validator(mode="before")
    @classmethod
    def _reason_was_the_code(cls, data: Any) -> Any:
        """An event is kept for good: one committed before the cause was structured carries
        `{"reason": "PAYMENT_TIMEOUT"}`, still read (as the cause's code) when it is sourced."""
        if isinstance(data, dict) and "cause" not in data and "reason" in data:
            data = {**data, "cause": {"code": data["reason"]}}
            del data["reason"]
        return data


class OrderState:
    """The order as its events left it."""

    def __init__(self, order_id: str) -> None:
        self.id = order_id
        self.items: list[OrderItem] = []
        self.status = OrderStatus.AWAITING_VALIDATION
        self.confirmed_products: set[str] = set()
        self.cancel_cause: CancelCause | None = None

    def products(self) -> set[str]:
        return {item.product_id for item in self.items}

    @on_sourcing
    def created(self, event: OrderCreated) -> None:
        self.items = list(event.items)

    @on_sourcing
    def item_confirmed(self, event: OrderStockItemConfirmed) -> None:
        self.confirmed_products.add(event.product_id)

    @on_sourcing
    def stock_confirmed(self, event: OrderStockConfirmed) -> None:
        self.status = OrderStatus.AWAITING_PAYMENT

    @on_sourcing
    def paid(self, event: OrderPaid) -> None:
        self.status = OrderStatus.PAID

    @on_sourcing
    def cancelled(self, event: OrderCancelled) -> None:
        self.status = OrderStatus.CANCELLED
        self.cancel_cause = event.cause


@aggregate("order")
class Order:
    """The order aggregate over its `OrderState`."""

    def __init__(self, state: OrderState) -> None:
        self.state = state

    @on_command(produces=[OrderCreated], create=True)
    def create(self, command: CreateOrder) -> Decision:
        return Decision.events(OrderCreated(items=command.items))

    @on_command(
        produces=[OrderStockItemConfirmed, OrderStockConfirmed],
        schedules=[CANCEL_ORDER],
    )
    def confirm_stock(
        self, command: ConfirmOrderStock, payment_policy: PaymentPolicy, scope: DecideScope
    ) -> Decision:
        """Confirms one product. A confirmation the order does not wait for changes nothing: one
        read again from the stock stream, or one that arrives after another product's shortage
        cancelled the order (that reservation is released when the inventory hears of the
        cancellation)."""
        state = self.state
        waiting = (
            state.status == OrderStatus.AWAITING_VALIDATION
            and command.product_id in state.products()
            and command.product_id not in state.confirmed_products
        )
        if not waiting:
            return Decision.NoOp
        confirmed = OrderStockItemConfirmed(product_id=command.product_id)
        if state.confirmed_products | {command.product_id} != state.products():
            return Decision.events(confirmed)
        scope.schedule(
            PAYMENT_GRACE_PERIOD,
            ScheduleRule.after(payment_policy.grace_period),
            CancelOrder(cause=CancelCause(code=PAYMENT_TIMEOUT)),
        )
        return Decision.events(confirmed, OrderStockConfirmed())

    @on_command(produces=[OrderPaid])
    def pay(self, command: PayOrder, scope: DecideScope) -> Decision:
        """Pays the order while it waits for payment, and cancels its payment grace period."""
        status = self.state.status
        if status != OrderStatus.AWAITING_PAYMENT:
            why = {
                OrderStatus.AWAITING_VALIDATION: "its stock is not confirmed yet",
                OrderStatus.PAID: "it is already paid",
                OrderStatus.CANCELLED: f"it was cancelled ({self.state.cancel_cause})",
            }[status]
            raise CommandRejected(f"order {self.state.id} cannot be paid: {why}")
        scope.cancel_schedule(PAYMENT_GRACE_PERIOD)
        return Decision.events(OrderPaid())

    @on_command(produces=[OrderCancelled])
    def cancel(self, command: CancelOrder, scope: DecideScope) -> Decision:
        """Cancels an order not yet paid. A cancellation after payment is a refused guard (the
        timer that sent it is done); one for an order already cancelled is refused too."""
        status = self.state.status
        if status == OrderStatus.PAID:
            raise CommandRejected(
                f"order {self.state.id} is paid: cancellation ({command.cause}) refused"
            )
        if status == OrderStatus.CANCELLED:
            raise CommandRejected(
                f"order {self.state.id} is already cancelled ({self.state.cancel_cause})"
            )
        schedule = command.schedule
        timer = schedule.timer if schedule is not None else None
        by_grace_period = schedule is not None and schedule.key == PAYMENT_GRACE_PERIOD
        if not by_grace_period and status == OrderStatus.AWAITING_PAYMENT:
            scope.cancel_schedule(PAYMENT_GRACE_PERIOD)
        return Decision.events(
            OrderCancelled(cause=command.cause, items=self.state.items, timer=timer)
        )


def order_app(payment_policy: PaymentPolicy | None = None) -> App:
    """The order's context, `eshop-order`, with its upcasters: the one way to build it, so every
    host (and test) reads a timer's `CancelOrder` of revision 1. The grace period is
    `payment_policy`'s, else `ESHOP_PAYMENT_GRACE_PERIOD`'s."""
    return App(
        ORDER.context_name,
        aggregates=[Order],
        services=[PaymentPolicy.from_env() if payment_policy is None else payment_policy],
        upcasters=[cancel_order_reason_to_cause],
    )
