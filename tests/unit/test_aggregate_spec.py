"""`aggregate_spec`: the spec's order decisions (events with the schedules committed with them),
the refusals every aggregate gives, and the assertions' own failure messages."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import BaseModel

from workers.eshop.order import (
    CANCEL_ORDER,
    OUT_OF_STOCK,
    PAYMENT_GRACE_PERIOD,
    PAYMENT_TIMEOUT,
    CancelCause,
    CancelOrder,
    ConfirmOrderStock,
    CreateOrder,
    Order,
    OrderCancelled,
    OrderCreated,
    OrderItem,
    OrderPaid,
    OrderStatus,
    OrderStockConfirmed,
    OrderStockItemConfirmed,
    PaymentPolicy,
    PayOrder,
)
from workers.eshop.stock import ReceiveStock
from wow_temporal import (
    AggregateDeleted,
    CommandBody,
    DecideScope,
    Decision,
    NamedAggregate,
    SagaContext,
    ScheduledCommand,
    ScheduleRule,
    aggregate,
    on_command,
    on_sourcing,
)
from wow_temporal.domain import CancelSchedule, DeleteAggregate, SetSchedule, UndeclaredError
from wow_temporal.testing import Cancelled, Scheduled, aggregate_spec

GRACE = timedelta(minutes=30)
ITEMS = [OrderItem(product_id="mug", quantity=1), OrderItem(product_id="cap", quantity=2)]
CREATED = OrderCreated(items=ITEMS)
TIMEOUT = Scheduled(
    PAYMENT_GRACE_PERIOD,
    ScheduleRule.after(GRACE),
    CancelOrder(cause=CancelCause(code=PAYMENT_TIMEOUT)),
)

spec = aggregate_spec(
    Order, services=[PaymentPolicy(GRACE)], context="eshop-order", aggregate_id="42"
)
awaiting_payment = spec.given(
    CREATED,
    OrderStockItemConfirmed(product_id="mug"),
    OrderStockItemConfirmed(product_id="cap"),
    OrderStockConfirmed(),
)


# --- the spec's decision ------------------------------------------------------------------------


def test_the_last_product_confirmed_schedules_the_payment_timeout() -> None:
    result = spec.given(CREATED, OrderStockItemConfirmed(product_id="mug")).when(
        ConfirmOrderStock(product_id="cap")
    )
    result.expect_events(OrderStockItemConfirmed(product_id="cap"), OrderStockConfirmed())
    result.expect_schedules(
        (
            PAYMENT_GRACE_PERIOD,
            ScheduleRule.after(GRACE),
            CancelOrder(cause=CancelCause(code=PAYMENT_TIMEOUT)),
            None,
        )
    )
    assert result.state.status == OrderStatus.AWAITING_PAYMENT
    assert result.state.confirmed_products == {"mug", "cap"}
    assert result.version == 2
    # the commit as the host writes it: domain events first, then the schedule event
    assert result.decided is not None
    assert [name for name, _ in result.decided.events] == [
        "eshop.order.OrderStockItemConfirmed",
        "eshop.order.OrderStockConfirmed",
        "wow.ScheduleSet",
    ]
    assert result.decided.events[2][1] == {
        "key": "payment-grace-period",
        "rule": {"after": "PT30M"},
        "command": {
            "type": CANCEL_ORDER,
            "body": {"cause": {"code": "PAYMENT_TIMEOUT", "detail": ""}},
            "revision": "2",
        },
        "target": None,
    }


def test_a_product_that_is_not_the_last_only_confirms_the_item() -> None:
    spec.given(CREATED).when(ConfirmOrderStock(product_id="mug")).expect_events(
        OrderStockItemConfirmed(product_id="mug")
    ).expect_schedules()


@pytest.mark.parametrize(
    "given",
    [
        pytest.param([CREATED, OrderStockItemConfirmed(product_id="cap")], id="read-again"),
        pytest.param(
            [CREATED, OrderCancelled(cause=CancelCause(code=OUT_OF_STOCK), items=ITEMS)],
            id="cancelled",
        ),
        pytest.param([CREATED], id="not-in-the-order"),
    ],
)
def test_a_confirmation_the_order_does_not_wait_for_changes_nothing(given: list[BaseModel]) -> None:
    product = "tee" if len(given) == 1 else "cap"
    result = spec.given(*given).when(ConfirmOrderStock(product_id=product))
    result.expect_no_commit().expect_events().expect_schedules()
    assert result.version == 1


def test_paying_cancels_the_payment_timeout() -> None:
    result = awaiting_payment.when(PayOrder())
    result.expect_events(OrderPaid()).expect_schedules(Cancelled(PAYMENT_GRACE_PERIOD))
    assert result.state.status == OrderStatus.PAID


def test_paying_before_the_stock_is_confirmed_is_refused() -> None:
    spec.given(CREATED).when(PayOrder()).expect_rejection("IllegalState", "not confirmed yet")


def test_a_cancellation_after_payment_is_refused() -> None:
    result = awaiting_payment.given(OrderPaid()).when(
        CancelOrder(cause=CancelCause(code=PAYMENT_TIMEOUT))
    )
    result.expect_rejection("IllegalState", "is paid")
    assert result.rejection is not None and result.rejection.status == 400
    assert result.state.status == OrderStatus.PAID  # unchanged


def test_the_timers_cancellation_names_its_timer_and_leaves_the_schedule() -> None:
    sent_by = spec.schedule_info(PAYMENT_GRACE_PERIOD, slot=1, due=1_764_470_000_000)
    assert sent_by.timer == "wow-timer:eshop-order.order:t1:42:payment-grace-period"
    result = awaiting_payment.when(
        CancelOrder(cause=CancelCause(code=PAYMENT_TIMEOUT)), schedule=sent_by
    )
    result.expect_events(
        OrderCancelled(cause=CancelCause(code=PAYMENT_TIMEOUT), items=ITEMS, timer=sent_by.timer)
    ).expect_schedules()
    assert result.state.status == OrderStatus.CANCELLED


def test_a_body_marked_sent_by_a_timer_counts_as_the_timers() -> None:
    sent_by = spec.schedule_info(PAYMENT_GRACE_PERIOD)
    awaiting_payment.when(
        CancelOrder(cause=CancelCause(code=PAYMENT_TIMEOUT)).sent_by(sent_by)
    ).expect_events(
        OrderCancelled(cause=CancelCause(code=PAYMENT_TIMEOUT), items=ITEMS, timer=sent_by.timer)
    )


def test_a_customers_cancellation_while_awaiting_payment_cancels_the_schedule() -> None:
    awaiting_payment.when(CancelOrder(cause=CancelCause(code="CUSTOMER"))).expect_events(
        OrderCancelled(cause=CancelCause(code="CUSTOMER"), items=ITEMS)
    ).expect_schedules(Cancelled(PAYMENT_GRACE_PERIOD))


def test_a_cancellation_before_the_stock_is_confirmed_has_no_schedule_to_cancel() -> None:
    spec.given(CREATED).when(CancelOrder(cause=CancelCause(code=OUT_OF_STOCK))).expect_events(
        OrderCancelled(cause=CancelCause(code=OUT_OF_STOCK), items=ITEMS)
    ).expect_schedules()


def test_refusals_name_the_cause_and_an_event_stored_with_a_reason_is_still_read() -> None:
    """A customer's cause says what and why; an `OrderCancelled` committed before causes were
    structured (`{"reason": ...}`) is sourced as a cause of that code, never lost."""
    cause = CancelCause(code="CUSTOMER", detail="changed my mind")
    cancelled = awaiting_payment.when(CancelOrder(cause=cause)).then()
    cancelled.when(PayOrder()).expect_rejection(
        "IllegalState", "it was cancelled (CUSTOMER: changed my mind)"
    )
    paid = awaiting_payment.given(OrderPaid()).when(CancelOrder(cause=cause))
    paid.expect_rejection("IllegalState", "cancellation (CUSTOMER: changed my mind) refused")
    old = {"reason": OUT_OF_STOCK, "items": [item.model_dump() for item in ITEMS]}
    stored = spec.given(CREATED)._given_commit([("eshop.order.OrderCancelled", old)])
    assert stored.current().state.cancel_cause == CancelCause(code=OUT_OF_STOCK)
    stored.when(PayOrder()).expect_rejection("IllegalState", "it was cancelled (OUT_OF_STOCK)")


def test_a_whole_order_step_by_step_with_then() -> None:
    created = spec.when(CreateOrder(items=ITEMS)).expect_events(CREATED).then()
    half = created.when(ConfirmOrderStock(product_id="cap")).expect_schedules().then()
    confirmed = half.when(ConfirmOrderStock(product_id="mug")).expect_schedules(TIMEOUT).then()
    paid = confirmed.when(PayOrder()).expect_events(OrderPaid).then()
    assert paid.current().version == 4
    paid.when(PayOrder()).expect_rejection("IllegalState", "already paid").then()
    assert paid.when(PayOrder()).then() is paid  # a rejection adds no commit


def test_a_spec_is_immutable() -> None:
    spec.given(CREATED)
    assert spec.commits == ()
    spec.when(PayOrder()).expect_rejection("NotFound")


# --- the refusals every aggregate gives ---------------------------------------------------------


def test_a_missing_aggregate_is_not_found_for_a_command_that_does_not_create_it() -> None:
    result = spec.when(ConfirmOrderStock(product_id="mug"))
    result.expect_rejection("NotFound", "eshop-order.order 42 (tenant t1) does not exist")
    assert result.rejection is not None and result.rejection.status == 404


def test_creating_twice_is_a_duplicate_aggregate_id() -> None:
    spec.given(CREATED).when(CreateOrder(items=ITEMS)).expect_rejection(
        "DuplicateAggregateId", "already exists (version 1)"
    )


def test_after_deletion_every_command_is_refused() -> None:
    for deleted in (spec.given(CREATED).given_deleted(), spec.given(CREATED, AggregateDeleted())):
        result = deleted.when(PayOrder())
        result.expect_rejection("IllegalAccessDeletedAggregate", "was deleted")
        assert result.rejection is not None and result.rejection.status == 410
        assert result.deleted
        deleted.when(CreateOrder(items=ITEMS)).expect_rejection("IllegalAccessDeletedAggregate")


def test_deleting_commits_aggregate_deleted() -> None:
    result = awaiting_payment.when(DeleteAggregate())
    result.expect_events(AggregateDeleted()).expect_schedules()
    assert result.deleted
    result.then().when(PayOrder()).expect_rejection("IllegalAccessDeletedAggregate")


@pytest.mark.parametrize(
    "body, why",
    [
        pytest.param({"items": []}, "items", id="empty"),
        pytest.param({}, "items", id="missing"),
        pytest.param({"items": [{"product_id": "mug", "quantity": 0}]}, "quantity", id="zero"),
        pytest.param(
            {"items": [{"product_id": "mug", "quantity": 1}] * 2}, "once", id="duplicate"
        ),
    ],
)
def test_a_bad_body_is_a_command_validation_error(body: dict[str, object], why: str) -> None:
    result = spec.when_json("eshop.order.CreateOrder", body)
    result.expect_rejection("CommandValidation", why)
    assert result.version == 0


def test_a_bad_model_body_is_refused_too() -> None:
    spec.when(CreateOrder.model_construct(items=[])).expect_rejection("CommandValidation")


def test_an_unknown_command_type_is_a_bad_request() -> None:
    spec.given(CREATED).when_json("eshop.order.Refund", {}).expect_rejection(
        "BadRequest", "has no command eshop.order.Refund"
    )
    spec.given(CREATED).when(ReceiveStock(quantity=1)).expect_rejection("BadRequest")


def test_a_missing_service_is_refused_as_the_host_refuses_it() -> None:
    with pytest.raises(ValueError, match=r"Order\.confirm_stock takes a PaymentPolicy"):
        aggregate_spec(Order, context="eshop-order")


def test_a_class_that_is_not_an_aggregate_is_refused() -> None:
    with pytest.raises(ValueError, match="@aggregate"):
        aggregate_spec(PaymentPolicy)


# --- system commands ----------------------------------------------------------------------------


def test_a_sagas_set_schedule_commits_the_schedule_alone() -> None:
    reminder = ScheduleRule.at(datetime(2026, 10, 20, 6, tzinfo=UTC))
    context = SagaContext(
        "eshop-order", function="Saga.remind", schedules=frozenset({CANCEL_ORDER})
    )
    command = context.schedule(
        "reminder", reminder, spec.ref, CancelOrder(cause=CancelCause(code="REMIND"))
    )
    assert command.type == "wow.schedule.Set"
    result = awaiting_payment.when(command.body)
    result.expect_events().expect_schedules(
        Scheduled("reminder", reminder, CancelOrder(cause=CancelCause(code="REMIND")))
    )
    # the command may be given as the wire carries it, too
    result.expect_schedules(
        Scheduled(
            "reminder",
            reminder,
            ScheduledCommand(type=CANCEL_ORDER, body={"cause": {"code": "REMIND", "detail": ""}}),
        )
    )


def test_a_set_schedule_for_a_missing_target_is_not_found() -> None:
    body = SetSchedule(
        key="reminder",
        rule=ScheduleRule.after(GRACE),
        command=ScheduledCommand(
            type=CANCEL_ORDER, body={"cause": {"code": "REMIND", "detail": ""}}
        ),
    )
    spec.when(body).expect_rejection("NotFound")


def test_a_sagas_cancel_schedule_commits_the_cancellation() -> None:
    awaiting_payment.when(CancelSchedule(key=PAYMENT_GRACE_PERIOD)).expect_events().expect_schedules(
        Cancelled(PAYMENT_GRACE_PERIOD)
    )


def test_a_bad_system_command_body_is_a_command_validation_error() -> None:
    awaiting_payment.when_json("wow.schedule.Set", {"key": "x y"}).expect_rejection(
        "CommandValidation", "wow.schedule.Set"
    )


# --- a function's own mistakes ------------------------------------------------------------------


class Ping(CommandBody):
    __wow_type__ = "test.Ping"


class Start(CommandBody):
    __wow_type__ = "test.Start"
    boom: bool = False


class Started(BaseModel):
    __wow_type__ = "test.Started"


class Undeclared(BaseModel):
    __wow_type__ = "test.Undeclared"


class GadgetState:
    def __init__(self) -> None:
        self.started = False

    @on_sourcing
    def on_started(self, event: Started) -> None:
        self.started = True


@aggregate("gadget")
class Gadget:
    """A small aggregate whose functions make the mistakes a spec must surface."""

    def __init__(self, state: GadgetState) -> None:
        self.state = state

    @on_command(produces=[Started], create=True)
    def start(self, command: Start) -> Decision:
        if command.boom:
            raise KeyError("a bug")
        return Decision.events(Started())

    @on_command(schedules=[Ping])
    def ping(self, command: Ping, scope: DecideScope) -> Decision:
        scope.schedule("later", ScheduleRule.after(GRACE), Undeclared())
        return Decision.NoOp


def test_scheduling_an_undeclared_command_type_raises_naming_function_and_type() -> None:
    gadget = aggregate_spec(Gadget).given(Started())
    with pytest.raises(UndeclaredError, match=r"Gadget\.ping scheduled test\.Undeclared") as raised:
        gadget.when(Ping())
    assert "declared: test.Ping" in str(raised.value)


def test_a_bug_in_a_function_propagates_out_of_when() -> None:
    gadget = aggregate_spec(Gadget)
    with pytest.raises(KeyError, match="a bug"):
        gadget.when(Start(boom=True))
    gadget.when(Start()).expect_events(Started())


def test_the_spec_uses_the_given_ids() -> None:
    gadget = aggregate_spec(Gadget, context="lab", tenant_id="acme", aggregate_id="g-7")
    assert gadget.ref == NamedAggregate("lab", "gadget").ref("acme", "g-7")
    gadget.when(Ping()).expect_rejection("NotFound", "lab.gadget g-7 (tenant acme)")


# --- the assertions fail with what was expected and what was decided ----------------------------


def _failure(check: object) -> str:
    assert callable(check)
    with pytest.raises(AssertionError) as raised:
        check()
    return str(raised.value)


def test_expect_events_shows_the_expected_and_the_actual_events() -> None:
    result = spec.given(CREATED, OrderStockItemConfirmed(product_id="mug")).when(
        ConfirmOrderStock(product_id="cap")
    )
    message = _failure(lambda: result.expect_events(OrderStockItemConfirmed(product_id="mug")))
    assert "events differ at #1" in message
    expected = 'expected events:\n  eshop.order.OrderStockItemConfirmed {"product_id": "mug"}'
    assert expected in message
    assert (
        'actual events:\n  eshop.order.OrderStockItemConfirmed {"product_id": "cap"}\n'
        "  eshop.order.OrderStockConfirmed {}"
    ) in message
    message = _failure(lambda: result.expect_events(OrderStockItemConfirmed, OrderPaid))
    assert "differ at #2" in message and "OrderPaid (any body)" in message
    message = _failure(lambda: result.expect_events())
    assert "expected events:\n  (none)" in message


def test_expect_schedules_shows_the_expected_and_the_actual_schedules() -> None:
    result = spec.given(CREATED, OrderStockItemConfirmed(product_id="mug")).when(
        ConfirmOrderStock(product_id="cap")
    )
    result.expect_schedules(  # the rule compares by value
        Scheduled(
            PAYMENT_GRACE_PERIOD, ScheduleRule.after(timedelta(seconds=1800)), TIMEOUT.command
        )
    )
    message = _failure(
        lambda: result.expect_schedules(
            Scheduled(
                PAYMENT_GRACE_PERIOD, ScheduleRule.after(timedelta(minutes=20)), TIMEOUT.command
            )
        )
    )
    assert "schedules differ at #1" in message
    assert (
        "expected schedules:\n  set payment-grace-period after PT20M: eshop.order.CancelOrder "
        '{"cause": {"code": "PAYMENT_TIMEOUT", "detail": ""}} -> itself'
    ) in message
    assert "actual schedules:\n  set payment-grace-period after PT30M:" in message
    wrong_body = Scheduled(
        PAYMENT_GRACE_PERIOD, TIMEOUT.rule, CancelOrder(cause=CancelCause(code="OTHER"))
    )
    assert '{"cause": {"code": "OTHER", "detail": ""}}' in _failure(
        lambda: result.expect_schedules(wrong_body)
    )
    other = NamedAggregate("eshop-order", "order").ref("t1", "43")
    elsewhere = Scheduled(TIMEOUT.key, TIMEOUT.rule, TIMEOUT.command, other)
    assert "-> eshop-order.order 43" in _failure(lambda: result.expect_schedules(elsewhere))
    assert "cancel payment-grace-period" in _failure(
        lambda: result.expect_schedules(Cancelled(PAYMENT_GRACE_PERIOD))
    )
    assert "expected schedules:\n  (none)" in _failure(lambda: result.expect_schedules())
    assert "actual schedules:\n  (none)" in _failure(
        lambda: awaiting_payment.when(
            CancelOrder(cause=CancelCause(code="X")),
            schedule=spec.schedule_info(PAYMENT_GRACE_PERIOD),
        ).expect_schedules(Cancelled(PAYMENT_GRACE_PERIOD))
    )


def test_expecting_events_of_a_rejected_command_shows_the_rejection() -> None:
    result = spec.when(PayOrder())
    message = _failure(lambda: result.expect_events(OrderPaid()))
    assert message == (
        "expected events, but eshop.order.PayOrder was rejected: NotFound: "
        "eshop-order.order 42 (tenant t1) does not exist"
    )
    assert "was rejected: NotFound" in _failure(lambda: result.expect_schedules())
    assert "was rejected: NotFound" in _failure(lambda: result.expect_no_commit())


def test_expect_rejection_fails_on_a_decision_or_another_code_or_message() -> None:
    message = _failure(lambda: awaiting_payment.when(PayOrder()).expect_rejection("IllegalState"))
    assert message.startswith("expected a rejection IllegalState, but eshop.order.PayOrder decided")
    assert "eshop.order.OrderPaid {}" in message and "cancel payment-grace-period" in message
    refused = spec.when(PayOrder())
    assert "expected a rejection IllegalState, but" in _failure(
        lambda: refused.expect_rejection("IllegalState")
    )
    assert "containing 'paid'" in _failure(lambda: refused.expect_rejection("NotFound", "paid"))


def test_expect_no_commit_fails_on_events() -> None:
    message = _failure(lambda: awaiting_payment.when(PayOrder()).expect_no_commit())
    assert message.startswith("expected no commit (NoOp), but eshop.order.PayOrder decided events:")


def test_expect_schedules_refuses_what_is_not_a_schedule() -> None:
    result = spec.given(CREATED).when(ConfirmOrderStock(product_id="mug"))
    with pytest.raises(TypeError, match="expect_schedules takes"):
        result.expect_schedules("payment-grace-period")  # type: ignore[arg-type]


def test_aggregate_spec_loads_no_temporal_test_server_and_schedule_spec_still_imports() -> None:
    probe = (
        "import sys\n"
        "from wow_temporal.testing import aggregate_spec\n"
        "heavy = ('temporalio.testing', 'wow_temporal.testing.schedule',"
        " 'wow_temporal.testing.time_skipping')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))\n"
        "from wow_temporal.testing import ScheduleSpec, schedule_spec, skip_time\n"
        "print(schedule_spec.__module__, ScheduleSpec.__module__, skip_time.__module__,"
        " 'temporalio.testing' in sys.modules)\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert ran.stdout.splitlines() == [
        "[]",
        "wow_temporal.testing.schedule wow_temporal.testing.schedule "
        "wow_temporal.testing.time_skipping True",
    ], ran.stdout + ran.stderr
