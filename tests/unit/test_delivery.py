"""Delivery over real HTTP against the FakeWowHost: headers, body, and the classification."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta

import pytest
import pytest_asyncio
from opentelemetry.sdk.trace import TracerProvider
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory
from temporalio.testing import ActivityEnvironment

from tests.helpers.builders import make_request
from tests.helpers.wow_host import shared_wow_host
from wow_temporal.delivery import (
    DELIVERY_FAILURE,
    DELIVERY_PARKED,
    EARLY_DELIVERY,
    CommandSender,
    DeliveryActivities,
    DeliveryFailure,
    DeliveryOutcome,
    DeliveryRequest,
    UnreadableCommand,
    activity_clock,
    encode_header_value,
)
from wow_temporal.model import AggregateRef
from wow_temporal.settings.delivery import DeliverySettings
from wow_temporal.testing.wow_host import FakeWowHost

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.fixture
def host() -> Iterator[FakeWowHost]:
    """The shared fake Wow host, reset for this test."""
    recording = shared_wow_host()
    yield recording
    recording.reset()


@pytest_asyncio.fixture(loop_scope="session")
async def sender(host: FakeWowHost) -> AsyncIterator[CommandSender]:
    """A sender on the fake Wow host with a short timeout, so a hang fails fast."""
    async with CommandSender(host.url, timeout=0.5) as command_sender:
        yield command_sender


async def test_every_header_and_the_body_arrive(host: FakeWowHost, sender: CommandSender) -> None:
    request = make_request()
    outcome = await sender.send(request)
    assert outcome == DeliveryOutcome(status="delivered", http_status=200)
    [got] = host.requests
    assert got.body == {"reason": "unpaid", "n": [1, 2]}
    assert got.headers["content-type"] == "application/json"
    expected = {
        "command-type": "eshop.order.CancelOrder",
        "command-aggregate-context": "eshop-order",
        "command-aggregate-name": "order",
        "command-aggregate-id": "order-1",
        "command-tenant-id": "tenant-t",
        "command-owner-id": "owner-7",
        "wow-space-id": "space-3",
        "command-request-id": request.request_id,
        "command-wait-stage": "PROCESSED",
        "command-header-upstream_id": "commit-42",
        "command-header-upstream_name": "eshop-cart.cart",
        "command-header-trace_id": "trace-99",
        "command-header-schedule_timer": request.schedule.timer,
        "command-header-schedule_key": "cancel-unpaid",
        "command-header-schedule_slot": str(request.schedule.slot),
        "command-header-schedule_due": str(request.schedule.due),
        "command-header-schedule_skipped": "2",
    }
    assert {name: got.headers.get(name) for name in expected} == expected
    assert "traceparent" not in got.headers
    assert host.delivered() == [got]


async def test_a_repeated_request_id_is_delivered_as_duplicate(
    host: FakeWowHost, sender: CommandSender
) -> None:
    request = make_request()
    first = await sender.send(request)
    again = await sender.send(request)
    assert (first.status, first.duplicate) == ("delivered", False)
    assert again == DeliveryOutcome(
        status="delivered",
        error_code="DuplicateRequestId",
        error_msg="duplicate request id",
        http_status=409,
        duplicate=True,
    )
    assert len(host.requests) == 2
    assert len(host.delivered()) == 1


async def test_duplicate_on_200_is_delivered_too(
    host: FakeWowHost, sender: CommandSender
) -> None:
    host.behave("duplicate", status=200)
    outcome = await sender.send(make_request())
    assert (outcome.status, outcome.duplicate, outcome.http_status) == ("delivered", True, 200)


@pytest.mark.parametrize(("code", "status"), [("CommandValidation", 400), ("BadRequest", 400)])
async def test_a_command_the_host_cannot_read_is_no_guard(
    host: FakeWowHost, sender: CommandSender, code: str, status: int
) -> None:
    """An invalid body or an unknown type says a deploy changed the command: not a refusal
    that ends the timer, but one it parks on with the host's reason."""
    host.behave("reject", error_code=code, status=status, error_msg="reason: field required")
    with pytest.raises(UnreadableCommand, match=r"cannot read .*reason: field required"):
        await sender.send(make_request())


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("NotFound", 404),
        ("IllegalAccessDeletedAggregate", 410),
        ("IllegalState", 409),
        ("IllegalArgument", 400),
        ("EventVersionConflict", 409),
        ("CommandExpectVersionConflict", 409),
        ("AggregateVersionConflict", 409),
        # A business code on a 2xx is a refusal as well.
        ("IllegalState", 200),
        ("NotFound", 200),
    ],
)
async def test_business_error_codes_are_rejected(
    host: FakeWowHost, sender: CommandSender, code: str, status: int
) -> None:
    host.behave("reject", error_code=code, status=status, error_msg="no such order")
    outcome = await sender.send(make_request())
    assert outcome == DeliveryOutcome(
        status="rejected", error_code=code, error_msg="no such order", http_status=status
    )
    assert host.delivered() == []


@pytest.mark.parametrize("status", [400, 403, 404, 409, 410, 422, 413])
async def test_refusing_statuses_are_rejected_whatever_the_code(
    host: FakeWowHost, sender: CommandSender, status: int
) -> None:
    host.behave("reject", status=status, error_code="SomethingUnheardOf")
    outcome = await sender.send(make_request())
    assert (outcome.status, outcome.http_status, outcome.error_code) == (
        "rejected",
        status,
        "SomethingUnheardOf",
    )


async def test_a_4xx_without_a_result_is_rejected_with_an_http_code(
    host: FakeWowHost, sender: CommandSender
) -> None:
    host.behave("garbage", status=404)
    outcome = await sender.send(make_request())
    assert (outcome.status, outcome.error_code, outcome.http_status) == ("rejected", "Http404", 404)


@pytest.mark.parametrize("status", [500, 502, 503, 504, 429, 408, 401])
async def test_technical_statuses_fail(
    host: FakeWowHost, sender: CommandSender, status: int
) -> None:
    host.behave("fail", status=status, error_code="Whatever")
    with pytest.raises(DeliveryFailure) as caught:
        await sender.send(make_request())
    assert caught.value.http_status == status
    assert caught.value.error_code == "Whatever"


async def test_an_unparseable_2xx_fails(host: FakeWowHost, sender: CommandSender) -> None:
    host.behave("garbage")
    with pytest.raises(DeliveryFailure, match="no CommandResult") as caught:
        await sender.send(make_request())
    assert caught.value.http_status == 200


async def test_an_unknown_code_on_a_2xx_fails(host: FakeWowHost, sender: CommandSender) -> None:
    host.behave("reject", status=200, error_code="SomethingUnheardOf")
    with pytest.raises(DeliveryFailure, match="unknown outcome"):
        await sender.send(make_request())


async def test_a_hang_past_the_timeout_fails(host: FakeWowHost, sender: CommandSender) -> None:
    host.behave("hang", delay=5)  # longer than the sender's timeout: only it can end the send
    with pytest.raises(DeliveryFailure, match="timed out") as caught:
        await sender.send(make_request())
    assert caught.value.http_status is None


async def test_a_refused_connection_fails() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with CommandSender(f"http://127.0.0.1:{port}", timeout=2) as closed:
        with pytest.raises(DeliveryFailure, match="ConnectError"):
            await closed.send(make_request())


async def test_fail_twice_then_ok_is_delivered_on_the_third_attempt(
    host: FakeWowHost, sender: CommandSender
) -> None:
    host.behave("fail", times=2)
    request = make_request()
    for _ in range(2):
        with pytest.raises(DeliveryFailure):
            await sender.send(request)
    assert (await sender.send(request)).status == "delivered"
    assert [r.behaviour for r in host.requests] == ["fail", "fail", "ok"]


async def test_the_traceparent_arrives(host: FakeWowHost, sender: CommandSender) -> None:
    await sender.send(make_request(traceparent=TRACEPARENT))
    assert host.requests[0].headers["traceparent"] == TRACEPARENT


@pytest.mark.parametrize(
    "traceparent",
    ["not-a-traceparent", f"00-{'0' * 32}-00f067aa0ba902b7-01", f"00-{'a' * 32}-{'0' * 16}-01"],
    ids=["garbage", "zero-trace-id", "zero-span-id"],
)
async def test_a_malformed_traceparent_is_not_sent(
    host: FakeWowHost, sender: CommandSender, traceparent: str
) -> None:
    await sender.send(make_request(traceparent=traceparent))
    assert "traceparent" not in host.requests[0].headers


async def test_the_active_span_is_propagated(host: FakeWowHost, sender: CommandSender) -> None:
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("deliver") as span:
        await sender.send(make_request(traceparent=TRACEPARENT))
    trace_id = format(span.get_span_context().trace_id, "032x")
    span_id = format(span.get_span_context().span_id, "016x")
    flags = format(span.get_span_context().trace_flags, "02x")
    assert host.requests[0].headers["traceparent"] == f"00-{trace_id}-{span_id}-{flags}"


async def test_non_ascii_ids_are_percent_encoded(
    host: FakeWowHost, sender: CommandSender
) -> None:
    await sender.send(make_request(aggregate_id="订单-1 ü"))
    assert host.requests[0].headers["command-aggregate-id"] == "%E8%AE%A2%E5%8D%95-1%20%C3%BC"
    assert encode_header_value("plain-ascii_1.2:3") == "plain-ascii_1.2:3"
    assert encode_header_value(" padded") == "%20padded"


def test_the_request_round_trips_through_the_pydantic_data_converter() -> None:
    request = make_request(traceparent=TRACEPARENT)
    converter = pydantic_data_converter.payload_converter
    [payload] = converter.to_payloads([request])
    assert b'"requestId"' in payload.data
    [back] = converter.from_payloads([payload], [DeliveryRequest])
    assert back == request
    outcome = DeliveryOutcome(status="rejected", error_code="NotFound", http_status=404)
    [back_outcome] = converter.from_payloads(converter.to_payloads([outcome]), [DeliveryOutcome])
    assert back_outcome == outcome


async def test_the_activity_delivers(host: FakeWowHost, sender: CommandSender) -> None:
    activities = DeliveryActivities(sender)
    outcome = await ActivityEnvironment().run(activities.deliver, make_request())
    assert outcome.status == "delivered"
    assert len(host.delivered()) == 1


async def test_the_activity_returns_a_rejection(host: FakeWowHost, sender: CommandSender) -> None:
    host.behave("reject", error_code="NotFound", status=404)
    outcome = await ActivityEnvironment().run(DeliveryActivities(sender).deliver, make_request())
    assert (outcome.status, outcome.error_code) == ("rejected", "NotFound")


async def test_the_activity_raises_a_retryable_delivery_failure(
    host: FakeWowHost, sender: CommandSender
) -> None:
    host.behave("fail", status=503)
    with pytest.raises(ApplicationError) as caught:
        await ActivityEnvironment().run(DeliveryActivities(sender).deliver, make_request())
    assert caught.value.type == DELIVERY_FAILURE
    assert not caught.value.non_retryable
    assert "503" in str(caught.value)


async def test_the_activity_refuses_an_early_delivery(
    host: FakeWowHost, sender: CommandSender
) -> None:
    due = int(time.time() * 1000) + 60_000
    with pytest.raises(ApplicationError, match="early") as caught:
        await ActivityEnvironment().run(DeliveryActivities(sender).deliver, make_request(due=due))
    assert caught.value.type == EARLY_DELIVERY
    assert not caught.value.non_retryable
    assert caught.value.next_retry_delay is not None
    assert host.requests == []


async def test_the_activity_clock_follows_skipped_time(
    host: FakeWowHost, sender: CommandSender
) -> None:
    due = int(time.time() * 1000) + 3_600_000
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info,
        current_attempt_scheduled_time=datetime.fromtimestamp(due / 1000 + 1, UTC),
    )
    activities = DeliveryActivities(sender, clock=activity_clock)
    outcome = await env.run(activities.deliver, make_request(due=due))
    assert outcome.status == "delivered"


async def test_the_fake_wow_host_waits_for_a_condition(
    host: FakeWowHost, sender: CommandSender
) -> None:
    await sender.send(make_request(command_type="eshop.order.Ship"))
    [got] = await host.wait_for(lambda h: h.delivered(), timeout=1)
    assert got.command_type == "eshop.order.Ship"
    with pytest.raises(TimeoutError):
        await host.wait_for(lambda h: len(h.requests) > 1, timeout=0.1)


async def test_fake_wow_host_rules_by_request_id_and_command_type(
    host: FakeWowHost, sender: CommandSender
) -> None:
    host.behave("reject", command_type="eshop.order.Ship")
    host.behave("ok", request_id="special#1", command_type="eshop.order.Ship")
    assert (await sender.send(make_request(command_type="eshop.order.Ship"))).status == "rejected"
    special = make_request(command_type="eshop.order.Ship", request_id="special#1")
    assert (await sender.send(special)).status == "delivered"
    assert (await sender.send(make_request())).status == "delivered"


def test_a_fake_wow_host_starts_and_stops_on_its_own() -> None:
    with FakeWowHost() as own:
        assert own.url.startswith("http://127.0.0.1:")
    with socket.socket() as sock, pytest.raises(OSError):
        sock.settimeout(1)
        sock.connect(("127.0.0.1", own.port))


# --- the parking budget, the deletion check, a cancel while sending ---------------------------


def attempt(env: ActivityEnvironment, number: int, failures: int | None) -> ActivityEnvironment:
    """`env` as Temporal starts attempt `number`, with the heartbeat details kept so far."""
    env.info = dataclasses.replace(
        env.info,
        attempt=number,
        heartbeat_details=[] if failures is None else [failures],
        heartbeat_timeout=timedelta(seconds=3),
    )
    return env


async def test_host_failures_are_counted_across_attempts_and_park_at_the_budget(
    host: FakeWowHost, sender: CommandSender
) -> None:
    host.behave("fail", status=503)
    request = make_request().model_copy(update={"max_failures": 3})
    recorded: list[int] = []
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *details: recorded.append(details[0])
    kept: int | None = None
    for number in (1, 2):
        with pytest.raises(ApplicationError) as caught:
            await attempt(env, number, kept).run(DeliveryActivities(sender).deliver, request)
        assert caught.value.type == DELIVERY_FAILURE
        assert not caught.value.non_retryable
        assert caught.value.category is ApplicationErrorCategory.BENIGN, "no SDK traceback"
        kept = recorded[-1]
        assert kept == number, "the failures so far go to the next attempt"
    with pytest.raises(ApplicationError) as caught:
        await attempt(env, 3, kept).run(DeliveryActivities(sender).deliver, request)
    assert caught.value.type == DELIVERY_PARKED
    assert caught.value.non_retryable
    assert "attempt 3 of 3 failed: the host failed all 3; last: " in str(caught.value)


async def test_an_attempt_lost_with_its_worker_is_one_of_the_budgets_attempts(
    host: FakeWowHost, sender: CommandSender
) -> None:
    """Attempt 2 died with its worker (no failure recorded): attempt 3 of 3 is the last the
    Web UI shows, and it parks the slot saying how many the host failed."""
    host.behave("fail", status=503)
    request = make_request().model_copy(update={"max_failures": 3})
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *details: None
    with pytest.raises(ApplicationError) as caught:
        await attempt(env, 2, None).run(DeliveryActivities(sender).deliver, request)
    assert caught.value.type == DELIVERY_FAILURE, "attempt 2 of 3: not parked yet"
    with pytest.raises(ApplicationError) as caught:
        await attempt(env, 3, 1).run(DeliveryActivities(sender).deliver, request)
    assert caught.value.type == DELIVERY_PARKED
    assert caught.value.non_retryable
    assert caught.value.message.startswith(
        "attempt 3 of 3 failed: the host failed 2 of them; 1 lost with a worker, timed out or "
        "started early; last: "
    )


def test_the_retry_policy_allows_exactly_the_parking_budget() -> None:
    """What the Web UI shows as `Attempt n / max` is the budget the activity parks at."""
    policy = DeliverySettings(max_attempts=7).retry_policy(DELIVERY_PARKED)
    assert policy.maximum_attempts == 7
    assert policy.non_retryable_error_types == [DELIVERY_PARKED]


class Deleted:
    """A deletion check that says the aggregate was deleted at `order` (or never)."""

    def __init__(self, order: tuple[int, int] | None) -> None:
        self.order = order
        self.asked: list[AggregateRef] = []

    async def deleted_at(self, aggregate: AggregateRef) -> tuple[int, int] | None:
        self.asked.append(aggregate)
        return self.order


@pytest.mark.parametrize(
    ("deleted", "sent"),
    [(None, True), ((3, 0), True), ((4, 0), False), ((3, 2), False)],
    ids=["never-deleted", "deleted-before-the-set", "deleted-after", "later-event-of-the-set's"],
)
async def test_nothing_is_sent_for_an_aggregate_deleted_after_the_set(
    host: FakeWowHost, sender: CommandSender, deleted: tuple[int, int] | None, sent: bool
) -> None:
    owner = AggregateRef(
        context_name="eshop-cart", aggregate_name="cart", tenant_id="t", aggregate_id="c1"
    )
    request = make_request().model_copy(update={"owner": owner, "set_order": (3, 1)})
    check = Deleted(deleted)
    outcome = await ActivityEnvironment().run(
        DeliveryActivities(sender, deletions=check).deliver, request
    )
    assert check.asked == [owner]
    if sent:
        assert outcome.status == "delivered"
        assert len(host.requests) == 1
    else:
        assert (outcome.status, outcome.error_code) == ("cancelled", "AggregateDeleted")
        assert outcome.error_msg == f"eshop-cart.cart c1 was deleted at version {deleted[0]}"  # type: ignore[index]
        assert host.requests == []


async def test_a_cancel_while_sending_lets_the_send_finish(
    host: FakeWowHost, sender: CommandSender
) -> None:
    """The host may have the command already: the attempt ends with its real outcome."""
    host.behave("hang", delay=0.35)
    env = ActivityEnvironment()
    beats: list[int] = []
    env.on_heartbeat = lambda *details: beats.append(details[0])
    env.info = dataclasses.replace(env.info, heartbeat_timeout=timedelta(milliseconds=150))
    running = asyncio.ensure_future(env.run(DeliveryActivities(sender).deliver, make_request()))
    await host.wait_for(lambda h: h.requests, timeout=5)
    env.cancel()
    outcome = await running
    assert outcome.status == "delivered"
    assert beats, "a slow send heartbeats, so a lost worker is noticed"
