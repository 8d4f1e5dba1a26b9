"""The domain API's edges: what the decorators and `App` refuse, decisions, sagas' discovery and
their schedule commands, schedule details on command bodies, the manifest, loading apps; and a
property of the e-shop order over random command sequences, through the pure core."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import workers.eshop
from workers.eshop.inventory import InventorySaga, SupplierFeed
from workers.eshop.order import (
    CANCEL_ORDER,
    ORDER,
    PAYMENT_GRACE_PERIOD,
    PAYMENT_TIMEOUT,
    CancelCause,
    CancelOrder,
    ConfirmOrderStock,
    CreateOrder,
    Order,
    OrderCreated,
    OrderItem,
    PaymentPolicy,
    PayOrder,
    order_app,
)
from workers.eshop.stock import STOCK, ReserveStock
from wow_temporal import (
    App,
    CommandBody,
    DecideScope,
    Decision,
    Rejected,
    SagaContext,
    ScheduleCancelled,
    ScheduleInfo,
    ScheduleRule,
    ScheduleSet,
    aggregate,
    on_command,
    on_event,
    on_rejected,
    on_sourcing,
)
from wow_temporal.domain import (
    AggregateModel,
    CancelSchedule,
    SetSchedule,
    UndeclaredError,
    command_type,
    load_app,
    load_apps,
)
from wow_temporal.domain.aggregate import Decided
from wow_temporal.domain.manifest import manifest
from wow_temporal.domain.saga import event_handlers, rejected_handlers


class Do(CommandBody):
    __wow_type__ = "test.Do"


class Done(BaseModel):
    __wow_type__ = "test.Done"


class State:
    pass


class Clock:
    """A service a function can take."""


# --- @aggregate, @on_command, @on_sourcing ------------------------------------------------------


@pytest.mark.parametrize("name", ["", "an order", "order.line", 7])
def test_aggregate_refuses_a_bad_name(name: Any) -> None:
    with pytest.raises(ValueError, match="@aggregate: invalid name"):
        aggregate(name)


def _app(cls: type, services: list[object] | None = None) -> App:
    return App("test", aggregates=[cls], services=services or [])


def test_an_aggregate_needs_a_name() -> None:
    class Unnamed:
        def __init__(self, state: State) -> None: ...

        @on_command(create=True)
        def do(self, command: Do) -> Decision:
            return Decision.NoOp

    with pytest.raises(ValueError, match=r'Unnamed: name the aggregate with @aggregate\("..."\)'):
        _app(Unnamed)
    with pytest.raises(ValueError, match="aggregates are classes"):
        App("test", aggregates=[Unnamed(State())])


def test_an_aggregate_needs_its_state_annotated() -> None:
    @aggregate("thing")
    class Thing:
        def __init__(self, state) -> None:  # type: ignore[no-untyped-def]
            self.state = state

        @on_command(create=True)
        def do(self, command: Do) -> Decision:
            return Decision.NoOp

    with pytest.raises(ValueError, match=r"Thing: its __init__ takes the state, annotated"):
        _app(Thing)


def test_an_aggregate_needs_a_command_that_creates_it() -> None:
    @aggregate("thing")
    class Thing:
        def __init__(self, state: State) -> None: ...

        @on_command()
        def do(self, command: Do) -> Decision:
            return Decision.NoOp

    with pytest.raises(ValueError, match=r"Thing: no command creates it: mark one"):
        _app(Thing)


def test_a_command_type_has_one_function() -> None:
    @aggregate("thing")
    class Thing:
        def __init__(self, state: State) -> None: ...

        @on_command(create=True)
        def do(self, command: Do) -> Decision:
            return Decision.NoOp

        @on_command()
        def do_again(self, command: Do) -> Decision:
            return Decision.NoOp

    with pytest.raises(ValueError, match=r"Thing\.do_again: command test\.Do is already handled"):
        _app(Thing)


def test_a_system_command_is_the_systems() -> None:
    @aggregate("thing")
    class Thing:
        def __init__(self, state: State) -> None: ...

        @on_command(create=True)
        def set(self, command: SetSchedule) -> Decision:
            return Decision.NoOp

    with pytest.raises(ValueError, match=r"wow\.schedule\.Set is already handled by the system"):
        _app(Thing)


def test_a_command_function_annotates_its_parameters() -> None:
    @aggregate("thing")
    class NoCommand:
        def __init__(self, state: State) -> None: ...

        @on_command(create=True)
        def do(self, command) -> Decision:  # type: ignore[no-untyped-def]
            return Decision.NoOp

    with pytest.raises(ValueError, match=r"NoCommand\.do: annotate its command parameter"):
        _app(NoCommand)

    @aggregate("thing")
    class NoService:
        def __init__(self, state: State) -> None: ...

        @on_command(create=True)
        def do(self, command: Do, clock) -> Decision:  # type: ignore[no-untyped-def]
            return Decision.NoOp

    with pytest.raises(ValueError, match=r"NoService\.do: annotate clock with its type"):
        _app(NoService)


def test_a_missing_service_is_refused_naming_it() -> None:
    @aggregate("thing")
    class Thing:
        def __init__(self, state: State) -> None: ...

        @on_command(create=True)
        def do(self, command: Do, clock: Clock, scope: DecideScope) -> Decision:
            return Decision.NoOp

    with pytest.raises(ValueError, match=r"Thing\.do takes a Clock: register one with App"):
        _app(Thing, [PaymentPolicy(timedelta(1))])
    clock = Clock()
    app = _app(Thing, [PaymentPolicy(timedelta(1)), clock])
    assert app.bound["thing"]["test.Do"] == (clock, DecideScope)


def test_on_command_refuses_create_with_allow_create_and_bad_declarations() -> None:
    with pytest.raises(ValueError, match="exclude each other"):
        on_command(create=True, allow_create=True)
    with pytest.raises(TypeError, match="produces lists pydantic model classes"):
        on_command(produces=[State])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="schedules lists"):
        on_command(schedules=[""])


class BadState:
    """A state whose sourcing method does not say which event it applies."""

    @on_sourcing
    def applied(self, event) -> None:  # type: ignore[no-untyped-def]
        pass


def test_a_sourcing_method_annotates_its_event() -> None:
    @aggregate("thing")
    class Thing:
        def __init__(self, state: BadState) -> None: ...

        @on_command(create=True)
        def do(self, command: Do) -> Decision:
            return Decision.NoOp

    with pytest.raises(ValueError, match=r"BadState\.applied: annotate its event parameter"):
        _app(Thing)


def test_the_model_reads_functions_and_sourcing() -> None:
    model = AggregateModel.of(Order, "eshop-order")
    assert str(model.named) == "eshop-order.order"
    assert sorted(model.functions) == [
        "eshop.order.CancelOrder",
        "eshop.order.ConfirmOrderStock",
        "eshop.order.CreateOrder",
        "eshop.order.PayOrder",
    ]
    confirm = model.functions["eshop.order.ConfirmOrderStock"]
    assert confirm.name == "Order.confirm_stock"
    assert confirm.schedules == (CANCEL_ORDER,)
    assert confirm.extras == (PaymentPolicy, DecideScope)
    assert model.functions["eshop.order.CreateOrder"].create
    assert "eshop.order.OrderCreated" in model.sourcing
    assert model.new("42").state.id == "42"  # the state takes the id
    assert model.new("42").version == 0


# --- Decision -----------------------------------------------------------------------------------


def test_decision_events_refuses_what_is_not_a_model() -> None:
    with pytest.raises(TypeError, match=r"Decision\.events takes pydantic models, not dict"):
        Decision.events({"name": "Done"})  # type: ignore[arg-type]
    assert Decision.events(Done(), Done()).produced == (Done(), Done())
    assert Decision.NoOp.is_noop and not Decision.events(Done()).is_noop


# --- sagas --------------------------------------------------------------------------------------


class Noticed(BaseModel):
    __wow_type__ = "test.Noticed"


class Watcher:
    """A saga: one handler for two events, one by annotation, and two rejection handlers."""

    @on_event(OrderCreated, Noticed)
    def on_either(self, event: BaseModel, context: SagaContext) -> None:
        return None

    @on_event(schedules=[CancelOrder])
    def on_done(self, event: Done, context: SagaContext) -> None:
        return None

    @on_rejected(ReserveStock, "eshop.inventory.ReleaseStock")
    def on_stock_rejected(self, rejected: Rejected, context: SagaContext) -> None:
        return None

    @on_rejected()
    def on_any_rejected(self, rejected: Rejected, context: SagaContext) -> None:
        return None

    def not_a_handler(self, event: Done, context: SagaContext) -> None:
        return None


def test_saga_handlers_are_discovered() -> None:
    handlers = {(h.name, h.event_name, h.schedules) for h in event_handlers(Watcher())}
    assert handlers == {
        ("Watcher.on_either", "eshop.order.OrderCreated", ()),
        ("Watcher.on_either", "test.Noticed", ()),
        ("Watcher.on_done", "test.Done", (CANCEL_ORDER,)),
    }
    rejected = {h.name: h for h in rejected_handlers(Watcher())}
    assert sorted(rejected) == ["Watcher.on_any_rejected", "Watcher.on_stock_rejected"]
    stock = rejected["Watcher.on_stock_rejected"]
    assert stock.command_types == ("eshop.inventory.ReserveStock", "eshop.inventory.ReleaseStock")
    assert stock.wants("eshop.inventory.ReserveStock") and not stock.wants(CANCEL_ORDER)
    assert rejected["Watcher.on_any_rejected"].wants(CANCEL_ORDER)
    app = App("test", sagas=[Watcher()])
    assert len(app.event_handlers) == 3 and len(app.rejected_handlers) == 2


def test_on_event_refuses_what_is_not_an_event_and_an_unknown_event() -> None:
    with pytest.raises(TypeError, match="@on_event takes event classes"):
        on_event(State)  # type: ignore[arg-type]

    class Vague:
        @on_event()
        def on_something(self, event, context: SagaContext) -> None:  # type: ignore[no-untyped-def]
            return None

    with pytest.raises(ValueError, match=r"Vague\.on_something: say which event it handles"):
        App("test", sagas=[Vague()])


def test_sagas_are_instances() -> None:
    with pytest.raises(ValueError, match="sagas are instances: pass Watcher"):
        App("test", sagas=[Watcher])


TARGET = ORDER.ref("t1", "42")


def _context(*schedules: str) -> SagaContext:
    source = STOCK.ref("t1", "mug")
    declared = frozenset(schedules)
    return SagaContext("eshop-order", source=source, function="S.on", schedules=declared)


def test_saga_context_schedule_builds_a_set_schedule_command() -> None:
    command = _context(CANCEL_ORDER).schedule(
        PAYMENT_GRACE_PERIOD,
        ScheduleRule.after(timedelta(minutes=30)),
        TARGET,
        CancelOrder(cause=CancelCause(code=PAYMENT_TIMEOUT)),
    )
    assert command.ref == TARGET
    assert command.type == "wow.schedule.Set"
    assert isinstance(command.body, SetSchedule)
    assert command.body.model_dump(mode="json") == {
        "key": "payment-grace-period",
        "rule": {"after": "PT30M"},
        "command": {
            "type": "eshop.order.CancelOrder",
            "body": {"cause": {"code": "PAYMENT_TIMEOUT", "detail": ""}},
            "revision": "2",
        },
    }
    assert command.scheduled().type == "wow.schedule.Set"
    assert command.scheduled().body["command"]["type"] == CANCEL_ORDER


def test_saga_context_schedule_refuses_an_undeclared_command_type() -> None:
    undeclared = r"S\.on scheduled eshop\.order\.CancelOrder"
    with pytest.raises(UndeclaredError, match=undeclared) as raised:
        _context().schedule(
            "k", ScheduleRule.after(timedelta(1)), TARGET, CancelOrder(cause=CancelCause(code="x"))
        )
    assert "declared: none" in str(raised.value)
    with pytest.raises(ValueError):
        _context(CANCEL_ORDER).schedule(
            "not a key",
            ScheduleRule.after(timedelta(1)),
            TARGET,
            CancelOrder(cause=CancelCause(code="x")),
        )
    with pytest.raises(TypeError, match="the rule is a ScheduleRule"):
        _context(CANCEL_ORDER).schedule(
            "k",
            timedelta(1),
            TARGET,
            CancelOrder(cause=CancelCause(code="x")),  # type: ignore[arg-type]
        )


def test_saga_context_cancel_builds_a_cancel_schedule_command() -> None:
    command = _context().cancel(PAYMENT_GRACE_PERIOD, TARGET)
    assert (command.ref, command.type) == (TARGET, "wow.schedule.Cancel")
    assert command.body == CancelSchedule(key=PAYMENT_GRACE_PERIOD)
    assert command.body.model_dump(mode="json") == {"key": "payment-grace-period"}


def test_saga_context_command_refuses_bad_refs_and_bodies() -> None:
    with pytest.raises(TypeError, match="a command's ref is an AggregateRef"):
        _context().command("42", PayOrder())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="a command's body is a pydantic model"):
        _context().command(TARGET, {"reason": "x"})  # type: ignore[type-var]


def test_decide_scope_schedules_and_cancels() -> None:
    scope = DecideScope(TARGET, "Order.confirm_stock", frozenset({CANCEL_ORDER}))
    scope.schedule(
        "k", ScheduleRule.after(timedelta(seconds=5)), CancelOrder(cause=CancelCause(code="x"))
    )
    scope.cancel_schedule("other")
    assert [type(c) for c in scope.changes] == [ScheduleSet, ScheduleCancelled]
    undeclared = r"Order\.confirm_stock scheduled eshop\.order\.PayOrder"
    with pytest.raises(UndeclaredError, match=undeclared):
        scope.schedule("k", ScheduleRule.after(timedelta(seconds=5)), PayOrder())


# --- schedule details on a command --------------------------------------------------------------


def test_a_command_body_is_sent_by_no_schedule_by_default() -> None:
    assert CancelOrder(cause=CancelCause(code="x")).schedule is None
    info = ScheduleInfo(timer="wow-timer:a", key="k", slot=2, due=1_000)
    marked = CancelOrder(cause=CancelCause(code="x")).sent_by(info)
    assert marked.schedule == info
    assert marked.model_dump() == {"cause": {"code": "x", "detail": ""}}  # not part of the body


def test_schedule_info_from_headers() -> None:
    headers = {
        "schedule_timer": "wow-timer:eshop-order.order:t1:42:payment-grace-period",
        "schedule_key": "payment-grace-period",
        "schedule_slot": "1",
        "schedule_due": "1764470000000",
        "trace_id": "t",
    }
    info = ScheduleInfo.from_headers(headers)
    assert info == ScheduleInfo(
        timer="wow-timer:eshop-order.order:t1:42:payment-grace-period",
        key="payment-grace-period",
        slot=1,
        due=1_764_470_000_000,
    )
    assert info.due_at == datetime(2025, 11, 30, 2, 33, 20, tzinfo=UTC)
    assert ScheduleInfo.from_headers({"trace_id": "t"}) is None
    assert ScheduleInfo.from_headers({**headers, "schedule_slot": "first"}) is None
    missing_due = {k: v for k, v in headers.items() if k != "schedule_due"}
    assert ScheduleInfo.from_headers(missing_due) is None


# --- manifest and loading -----------------------------------------------------------------------


def test_the_eshop_manifest() -> None:
    contexts = {c["context"]: c for c in manifest(workers.eshop.apps())["contexts"]}
    assert sorted(contexts) == ["eshop-inventory", "eshop-order"]
    (order,) = contexts["eshop-order"]["aggregates"]
    assert (order["aggregate"], order["class"], order["state"]) == (
        "eshop-order.order",
        "Order",
        "OrderState",
    )
    functions = {f["function"]: f for f in order["functions"]}
    assert sorted(functions) == ["Order.cancel", "Order.confirm_stock", "Order.create", "Order.pay"]
    assert functions["Order.confirm_stock"] == {
        "function": "Order.confirm_stock",
        "command": "eshop.order.ConfirmOrderStock",
        "creates": False,
        "takes": ["PaymentPolicy", "DecideScope"],
        "produces": ["eshop.order.OrderStockItemConfirmed", "eshop.order.OrderStockConfirmed"],
        "schedules": ["eshop.order.CancelOrder"],
    }
    assert functions["Order.create"]["creates"] is True
    assert functions["Order.pay"]["produces"] == ["eshop.order.OrderPaid"]
    assert "eshop.order.OrderPaid" in order["sourcing"]

    inventory = contexts["eshop-inventory"]
    (stock,) = inventory["aggregates"]
    assert stock["aggregate"] == "eshop-inventory.stock"
    assert {f["function"]: f["creates"] for f in stock["functions"]} == {
        "Stock.receive": True,
        "Stock.release": False,
        "Stock.reserve": False,
    }
    (saga,) = inventory["sagas"]
    assert saga["saga"] == "InventorySaga"
    handled = {f["function"]: f.get("event", f.get("rejected")) for f in saga["functions"]}
    assert handled == {
        "InventorySaga.on_order_created": "eshop.order.OrderCreated",
        "InventorySaga.on_stock_reserved": "eshop.inventory.StockReserved",
        "InventorySaga.on_stock_shortage": "eshop.inventory.StockShortage",
        "InventorySaga.on_order_cancelled": "eshop.order.OrderCancelled",
        "InventorySaga.on_reserve_rejected": ["eshop.inventory.ReserveStock"],
    }
    assert inventory["jobs"] == [
        {
            "name": "receive-deliveries",
            "function": "InventorySaga.on_schedule",
            "cron": "0 0 6 * * *",
            "zone": "UTC",
            "scope": "SYSTEM",
            "sharded": False,
            "misfire": "COALESCE",
        }
    ]


def test_load_apps_reads_the_eshop_factory() -> None:
    apps = load_apps("workers.eshop:apps")
    assert [app.context for app in apps] == ["eshop-order", "eshop-inventory"]
    assert sorted(apps[0].models) == ["order"] and sorted(apps[1].jobs) == ["receive-deliveries"]
    assert load_app("workers.eshop.inventory:app").context == "eshop-inventory"
    with pytest.raises(ValueError, match="names 2 apps, give one"):
        load_app("workers.eshop:apps")


@pytest.mark.parametrize(
    "reference, why",
    [
        ("workers.eshop", "give module:attr"),
        ("workers.nothing_here:app", "cannot import workers.nothing_here"),
        ("workers.eshop:nothing", "has no nothing"),
        ("workers.eshop.order:ORDER", "holds a NamedAggregate, not an App"),
    ],
)
def test_load_apps_says_what_is_wrong(reference: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        load_apps(reference)


def test_duplicate_aggregates_and_jobs_in_one_context_are_refused() -> None:
    policy = PaymentPolicy(timedelta(1))
    with pytest.raises(ValueError, match="aggregate order: declared twice"):
        App("eshop-order", aggregates=[Order, Order], services=[policy])
    saga = InventorySaga(SupplierFeed())
    with pytest.raises(ValueError, match="job receive-deliveries: declared twice"):
        App("eshop-inventory", sagas=[saga, InventorySaga(SupplierFeed())])


# --- a property of the order, through the pure core ---------------------------------------------

PRODUCTS = ("mug", "cap", "tee")
_app_order = order_app(PaymentPolicy(timedelta(minutes=5)))
_model = _app_order.model("order")
_services = _app_order.bound["order"]
_REF = ORDER.ref("t1", "o-1")
_TIMER = ScheduleInfo(
    timer="wow-timer:eshop-order.order:t1:o-1:payment-grace-period",
    key=PAYMENT_GRACE_PERIOD,
    slot=1,
    due=0,
)

Step = tuple[BaseModel, ScheduleInfo | None]

_CANCELS: list[Step] = [
    (CancelOrder(cause=CancelCause(code="CUSTOMER")), None),
    (CancelOrder(cause=CancelCause(code="OUT_OF_STOCK")), None),
    (CancelOrder(cause=CancelCause(code=PAYMENT_TIMEOUT)), _TIMER),
]
_KINDS = ["create", "confirm", "confirm", "confirm", "confirm", "pay", "pay", "cancel"]
"""The steps' weights: confirmations and payments more often, so runs reach the payment."""


@st.composite
def _runs(draw: st.DrawFn) -> list[Step]:
    """A random sequence of the order's commands; most runs start by creating the order, and
    most confirmations are of its own products (some of another, some again)."""
    products = draw(st.lists(st.sampled_from(PRODUCTS), min_size=1, max_size=3, unique=True))
    items = [OrderItem(product_id=p, quantity=1) for p in products]
    create: Step = (CreateOrder(items=items), None)
    steps: list[Step] = [create] if draw(st.integers(0, 3)) else []
    for kind in draw(st.lists(st.sampled_from(_KINDS), max_size=14)):
        if kind == "create":
            steps.append(create)
        elif kind == "confirm":
            product = draw(st.sampled_from([*products, *products, *PRODUCTS]))
            steps.append((ConfirmOrderStock(product_id=product), None))
        elif kind == "pay":
            steps.append((PayOrder(), None))
        else:
            steps.append(draw(st.sampled_from(_CANCELS)))
    return steps


def _names(commit: tuple[tuple[str, dict[str, Any]], ...]) -> list[str]:
    return [name for name, _ in commit]


def _count(commits: list[tuple[tuple[str, dict[str, Any]], ...]], name: str) -> int:
    return sum(_names(commit).count(name) for commit in commits)


@settings(max_examples=300, deadline=None)
@given(_runs())
def test_order_invariants_hold_for_any_command_sequence(steps: list[Step]) -> None:
    current = _model.new(_REF.aggregate_id)
    commits: list[tuple[tuple[str, dict[str, Any]], ...]] = []
    for command, sent_by in steps:
        body = command.model_dump(mode="json")
        outcome = _model.handle(current, _REF, command_type(command), body, _services, sent_by)
        if not isinstance(outcome, Decided):
            assert outcome.code in {"NotFound", "DuplicateAggregateId", "IllegalState"}, outcome
            continue
        if outcome.events:
            _model.source(current, current.version + 1, outcome.events)
            commits.append(outcome.events)

    cancelled = _count(commits, "eshop.order.OrderCancelled")
    paid = _count(commits, "eshop.order.OrderPaid")
    assert cancelled + paid <= 1  # at most one of them, ever, never both
    assert _count(commits, "eshop.order.OrderCreated") == min(1, len(commits))
    scheduled = False  # a commit before set the payment timeout
    for commit in commits:
        names = _names(commit)
        bodies = dict(commit)
        sets = [body for name, body in commit if name == "wow.ScheduleSet"]
        grace_set = any(body["key"] == PAYMENT_GRACE_PERIOD for body in sets)
        assert grace_set == ("eshop.order.OrderStockConfirmed" in names), names
        grace_cancelled = {"key": PAYMENT_GRACE_PERIOD} in [
            body for name, body in commit if name == "wow.ScheduleCancelled"
        ]
        if "eshop.order.OrderPaid" in names:
            assert grace_cancelled, names
        if "eshop.order.OrderCancelled" in names:
            by_timer = bodies["eshop.order.OrderCancelled"]["timer"] is not None
            # the timer's own cancellation leaves its schedule; another while it runs cancels it
            assert grace_cancelled == (scheduled and not by_timer), names
        scheduled = scheduled or grace_set
        if grace_set:
            assert sets == [
                {
                    "key": PAYMENT_GRACE_PERIOD,
                    "rule": {"after": "PT5M"},
                    "command": {
                        "type": CANCEL_ORDER,
                        "revision": "2",
                        "body": {"cause": {"code": PAYMENT_TIMEOUT, "detail": ""}},
                    },
                    "target": None,
                }
            ]
        # domain events come first, then the schedule events
        kinds = [name.startswith("wow.") for name in names]
        assert kinds == sorted(kinds), names


def _timeline(*steps: Step) -> list[list[str]]:
    current = _model.new(_REF.aggregate_id)
    commits = []
    for command, sent_by in steps:
        body = command.model_dump(mode="json")
        outcome = _model.handle(current, _REF, command_type(command), body, _services, sent_by)
        if isinstance(outcome, Decided) and outcome.events:
            _model.source(current, current.version + 1, outcome.events)
            commits.append(_names(outcome.events))
    return commits


def test_the_property_sees_a_schedule_cancelled_by_a_customer_while_awaiting_payment() -> None:
    """A sanity check of the property's vocabulary on one known run."""
    assert _timeline(
        (CreateOrder(items=[OrderItem(product_id="mug", quantity=1)]), None),
        (ConfirmOrderStock(product_id="mug"), None),
        (CancelOrder(cause=CancelCause(code="CUSTOMER")), None),
    ) == [
        ["eshop.order.OrderCreated"],
        [
            "eshop.order.OrderStockItemConfirmed",
            "eshop.order.OrderStockConfirmed",
            "wow.ScheduleSet",
        ],
        ["eshop.order.OrderCancelled", "wow.ScheduleCancelled"],
    ]
