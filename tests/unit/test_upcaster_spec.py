"""`upcaster_spec`: an app's upcasters tested as its decisions are, on the e-shop's real one
(`CancelOrder` revision 1, `{"reason": ...}`, read as revision 2's structured cause): a body of an
older revision is read through the whole chain and the command class, as the domain host reads
it, or the spec says why the host would answer `CommandValidation`."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from workers.eshop import apps
from workers.eshop.order import CANCEL_ORDER, CancelCause, CancelOrder, PaymentPolicy, order_app
from wow_temporal import App, CommandBody, Decision, aggregate, on_command, upcaster
from wow_temporal.testing import UpcasterSpec, upcaster_spec

pytestmark = pytest.mark.unit

spec = upcaster_spec(order_app(PaymentPolicy(timedelta(minutes=30))))
OLD = {"reason": "PAYMENT_TIMEOUT"}
TIMEOUT = CancelOrder(cause=CancelCause(code="PAYMENT_TIMEOUT"))


def _failure(check: Callable[[], object]) -> str:
    with pytest.raises(AssertionError) as raised:
        check()
    return str(raised.value)


def test_a_grace_period_of_revision_1_is_read_as_a_structured_cause() -> None:
    result = spec.given(CancelOrder, OLD, revision=1).expect(TIMEOUT)
    result.expect_json(CancelOrder, {"cause": {"code": "PAYMENT_TIMEOUT", "detail": ""}})
    assert result.applied == ["eshop.order.CancelOrder revision 1 -> 2"]
    assert result.command_type == CANCEL_ORDER
    assert result.command() == TIMEOUT


def test_the_app_the_host_serves_reads_it_too() -> None:
    """`workers.eshop:apps`, the app the host is started with, registers the upcaster."""
    upcaster_spec(apps()[0]).given(CANCEL_ORDER, OLD, revision="1").expect(TIMEOUT)


def test_a_body_of_the_current_revision_is_read_as_sent() -> None:
    now = CancelOrder(cause=CancelCause(code="CUSTOMER", detail="changed my mind"))
    result = spec.given(CancelOrder, now.model_dump(mode="json"), revision=2).expect(now)
    assert result.applied == []


def test_expect_says_what_was_sent_the_steps_and_both_readings() -> None:
    result = spec.given(CancelOrder, {"reason": "OUT_OF_STOCK"}, revision=1)
    message = _failure(lambda: result.expect(TIMEOUT))
    assert message == (
        'eshop.order.CancelOrder revision 1 {"reason": "OUT_OF_STOCK"}, read through '
        "eshop.order.CancelOrder revision 1 -> 2:\n"
        'expected eshop.order.CancelOrder {"cause": {"code": "PAYMENT_TIMEOUT", "detail": ""}}\n'
        'actual   eshop.order.CancelOrder {"cause": {"code": "OUT_OF_STOCK", "detail": ""}}'
    )
    wrote = _failure(lambda: result.expect_json(CANCEL_ORDER, {"cause": {"code": "OUT_OF_STOCK"}}))
    assert 'actual   eshop.order.CancelOrder {"cause": {"code": "OUT_OF_STOCK", "detail": ""}}' in (
        wrote
    )


@pytest.mark.parametrize(
    ("body", "revision", "reason"),
    [
        pytest.param(
            {"why": "late"},
            1,
            "eshop.order.CancelOrder revision 1 -> 2 failed: KeyError: 'reason'",
            id="not-revision-1",
        ),
        pytest.param(
            OLD, 3, "revision 3: no upcaster reads it (the app reads revision 2)", id="unknown"
        ),
        pytest.param({"reason": ""}, 1, "cause.code", id="refused-by-the-class"),
        pytest.param(OLD, 2, "cause", id="old-body-marked-new"),
    ],
)
def test_a_body_the_app_cannot_read_is_unreadable_naming_why(
    body: dict[str, Any], revision: int, reason: str
) -> None:
    result = spec.given(CancelOrder, body, revision=revision).expect_unreadable(reason)
    assert "expected eshop.order.CancelOrder revision" in _failure(lambda: result.expect(TIMEOUT))
    assert reason in _failure(lambda: result.command())


def test_expect_unreadable_fails_on_a_body_the_app_reads_and_on_another_reason() -> None:
    read = spec.given(CancelOrder, OLD, revision=1)
    message = _failure(lambda: read.expect_unreadable())
    assert message.startswith(
        'expected eshop.order.CancelOrder revision 1 {"reason": "PAYMENT_TIMEOUT"} to be '
        "unreadable, but it is read through eshop.order.CancelOrder revision 1 -> 2 as "
    )
    unread = spec.given(CancelOrder, {}, revision=1)
    assert "but the reason is: eshop.order.CancelOrder:" in _failure(
        lambda: unread.expect_unreadable("no upcaster")
    )
    assert "to be upcast, but" in _failure(lambda: unread.expect_json(CancelOrder, {}))


class Cancel(CommandBody):
    __wow_type__ = "shop.Cancel"
    __wow_revision__ = "b"
    code: str


@aggregate("order")
class Order:
    def __init__(self, state: object) -> None:
        self.state = state

    @on_command(create=True)
    def cancel(self, command: Cancel) -> Decision:
        return Decision.NoOp


@upcaster("shop.CancelOrder", revision="a", to="b", to_type=Cancel)
def renamed(body: dict[str, Any]) -> dict[str, Any]:
    return {"code": body["reason"]}


def test_a_type_since_renamed_is_given_by_its_old_name_and_read_as_the_new_one() -> None:
    shop = upcaster_spec(App("shop", aggregates=[Order], upcasters=[renamed]))
    result = shop.given("shop.CancelOrder", {"reason": "LATE"}, revision="a")
    result.expect(Cancel(code="LATE"))
    assert result.applied == ["shop.CancelOrder revision a -> b as shop.Cancel"]
    assert "expected shop.CancelOrder" not in _failure(lambda: result.expect(TIMEOUT))
    assert "actual   shop.Cancel" in _failure(lambda: result.expect(TIMEOUT))


def test_upcaster_spec_takes_an_app() -> None:
    assert isinstance(upcaster_spec(apps()[0]), UpcasterSpec)
    with pytest.raises(TypeError, match="upcaster_spec takes an App, not list"):
        upcaster_spec(apps())  # type: ignore[arg-type]
