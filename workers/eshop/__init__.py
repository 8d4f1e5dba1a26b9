"""The spec's e-shop: the order (`eshop-order`) and the inventory (`eshop-inventory`), served
together by one domain host (`wow-temporal host --app workers.eshop:apps`)."""

from __future__ import annotations

from wow_temporal import App


def apps() -> list[App]:
    """The e-shop's two contexts; the payment grace period from `ESHOP_PAYMENT_GRACE_PERIOD`."""
    from workers.eshop.inventory import app as inventory
    from workers.eshop.order import order_app

    return [order_app(), inventory]
