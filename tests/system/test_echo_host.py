"""The dev echo host over real HTTP (uvicorn): its aggregate-id convention, as the timers'
delivery classifies each answer, and the line it prints for each."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest
import pytest_asyncio
import uvicorn

from tests.helpers.eventually import eventually
from wow_temporal.delivery import COMMAND_SEND_PATH, CommandSender, DeliveryFailure, DeliveryRequest
from wow_temporal.delivery import ScheduleDetails as Details
from wow_temporal.dev.ports import free_port
from wow_temporal.host.echo import create_echo_host, echo_fallback
from wow_temporal.host.server import create_host_app
from wow_temporal.host.service import CommandMessage, DomainHost
from wow_temporal.host.store import EventStore
from wow_temporal.model import AggregateRef, ScheduledCommand, Scope
from wow_temporal.wire import WireCommand, command_headers


@dataclass
class Echo:
    """A running echo host: the sender the timers deliver with, and the lines it printed."""

    sender: CommandSender
    url: str
    lines: list[str]


@pytest_asyncio.fixture(loop_scope="session")
async def echo() -> AsyncIterator[Echo]:
    """A fresh echo host on uvicorn, on 127.0.0.1 and a free port."""
    lines: list[str] = []
    port = free_port()
    config = uvicorn.Config(
        create_echo_host(lines.append), host="127.0.0.1", port=port, log_level="warning"
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    await eventually(lambda: server.started or serving.done(), within=10, what="serving")
    if serving.done():
        serving.result()
    url = f"http://127.0.0.1:{port}"
    try:
        async with CommandSender(url, timeout=5.0) as sender:
            yield Echo(sender, url, lines)
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, timeout=10)


_slots = itertools.count(1)


def cancel(aggregate_id: str, request_id: str = "") -> WireCommand:
    """CancelOrder to order `aggregate_id` as a Wow client sends it."""
    return WireCommand(
        type="eshop.order.CancelOrder",
        context_name="eshop-order",
        aggregate_name="order",
        aggregate_id=aggregate_id,
        tenant_id="t1",
        request_id=request_id,
    )


def request(aggregate_id: str, request_id: str | None = None) -> DeliveryRequest:
    """A timer's delivery of CancelOrder to order `aggregate_id` (a new request id by default)."""
    slot = next(_slots)
    return DeliveryRequest(
        command=ScheduledCommand(type="eshop.order.CancelOrder", body={"reason": "unpaid"}),
        target=AggregateRef(
            context_name="eshop-order",
            aggregate_name="order",
            tenant_id="t1",
            aggregate_id=aggregate_id,
        ),
        scope=Scope(tenant_id="t1"),
        request_id=request_id or f"timer-{slot}#1",
        upstream_id="commit-1",
        upstream_name="eshop-order.order",
        schedule=Details(timer=f"timer-{slot}", key="grace", slot=1, due=1_764_470_000_000),
    )


async def test_any_other_id_is_ok_once_then_a_duplicate(echo: Echo) -> None:
    delivery = request("42")
    first = await echo.sender.send(delivery)
    again = await echo.sender.send(delivery)
    assert (first.status, first.error_code, first.duplicate) == ("delivered", "Ok", False)
    assert (again.status, again.error_code, again.duplicate) == (
        "delivered",
        "DuplicateRequestId",
        True,
    )
    assert echo.lines[0].startswith("[echo host] Ok (a new request id) eshop.order.CancelOrder")
    assert f"eshop-order.order 42 (tenant t1, request {delivery.request_id})" in echo.lines[0]
    assert echo.lines[1].startswith("[echo host] DuplicateRequestId (this request id was already")


async def test_a_command_in_a_trace_says_which(echo: Echo) -> None:
    delivery = request("43").model_copy(
        update={"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
    )
    await echo.sender.send(delivery)
    assert (
        f"(tenant t1, request {delivery.request_id}, trace 4bf92f3577b34da6a3ce929d0e0e4736)"
        in echo.lines[0]
    )


async def test_reject_is_a_business_refusal_every_time(echo: Echo) -> None:
    delivery = request("reject-42")
    for _ in range(2):
        outcome = await echo.sender.send(delivery)
        assert (outcome.status, outcome.error_code, outcome.http_status) == (
            "rejected",
            "IllegalState",
            400,
        )
    assert len(echo.lines) == 2
    assert all(
        line.startswith("[echo host] Rejected 400 IllegalState (reject-…: always refused")
        for line in echo.lines
    )


async def test_fail_is_a_technical_failure_every_attempt(echo: Echo) -> None:
    delivery = request("fail-42")
    for _ in range(5):
        with pytest.raises(DeliveryFailure) as caught:
            await echo.sender.send(delivery)
        assert (caught.value.http_status, caught.value.error_code) == (503, "InternalServerError")
    assert echo.lines[0].startswith(
        "[echo host] Failed 503 InternalServerError (fail-…: always fails, attempt 1"
    )
    assert "attempt 5" in echo.lines[4]


async def test_flaky_fails_three_attempts_of_each_request_id_then_is_ok(echo: Echo) -> None:
    delivery = request("flaky-42")
    for _ in range(3):
        with pytest.raises(DeliveryFailure, match="HTTP 503"):
            await echo.sender.send(delivery)
    fourth = await echo.sender.send(delivery)
    assert (fourth.status, fourth.error_code, fourth.duplicate) == ("delivered", "Ok", False)
    fifth = await echo.sender.send(delivery)
    assert (fifth.error_code, fifth.duplicate) == ("DuplicateRequestId", True)
    # The next slot of the same aggregate is a new request id: it fails three times again.
    with pytest.raises(DeliveryFailure):
        await echo.sender.send(request("flaky-42"))
    assert echo.lines[2].startswith(
        "[echo host] Failed 503 InternalServerError (flaky-…: fails the first 3 attempts, this is 3"
    )
    assert echo.lines[3].startswith("[echo host] Ok (flaky-…: attempt 4 succeeds)")


@pytest.mark.parametrize(
    ("aggregate_id", "status", "code"),
    [
        ("42", 200, "Ok"),
        ("reject-1", 400, "IllegalState"),
        ("fail-1", 503, "InternalServerError"),
        ("flaky-1", 503, "InternalServerError"),
        ("rejected", 200, "Ok"),  # the prefix is `reject-`, with the dash
    ],
)
async def test_code_in_body_and_header(
    echo: Echo, aggregate_id: str, status: int, code: str
) -> None:
    headers = command_headers(cancel(aggregate_id, f"r-{aggregate_id}"))
    async with httpx.AsyncClient(base_url=echo.url) as http:
        response = await http.post(COMMAND_SEND_PATH, json={}, headers=headers)
    assert response.status_code == status
    assert response.headers["Wow-Error-Code"] == code
    result = response.json()
    assert (result["errorCode"], result["requestId"]) == (code, f"r-{aggregate_id}")
    assert (result["errorMsg"] == "") == (code == "Ok")


async def test_prints_to_stdout_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    transport = httpx.ASGITransport(app=create_echo_host())
    async with httpx.AsyncClient(transport=transport, base_url="http://echo") as http:
        headers = command_headers(cancel("fail-7", "r-7"))
        await http.post(COMMAND_SEND_PATH, json={"n": 1}, headers=headers)
    printed = capsys.readouterr().out
    assert printed.startswith("[echo host] Failed 503 InternalServerError (fail-…: always fails")
    assert printed.rstrip().endswith('{"n":1}')


async def test_a_command_wow_would_refuse_is_refused_as_wow_does() -> None:
    transport = httpx.ASGITransport(app=create_echo_host(lambda line: None))
    async with httpx.AsyncClient(transport=transport, base_url="http://echo") as http:
        headers = command_headers(cancel("42", "r-1"))
        del headers["Command-Type"]
        response = await http.post(COMMAND_SEND_PATH, json={}, headers=headers)
        assert (response.status_code, response.headers["Wow-Error-Code"]) == (400, "BadRequest")
        assert response.json()["errorMsg"] == "missing header Command-Type"
        assert response.json()["aggregateId"] == "42"
        # a command without a request id gets one, answered, so two such are not duplicates
        ids = []
        for _ in range(2):
            answer = await http.post(COMMAND_SEND_PATH, headers=command_headers(cancel("43")))
            assert answer.json()["errorCode"] == "Ok"
            ids.append(answer.json()["requestId"])
        assert len(set(ids)) == 2 and all(ids)


async def test_the_dev_domain_host_answers_the_convention_with_the_echo_hosts_statuses() -> None:
    """`wow-temporal dev`'s domain host answers unserved contexts by the convention: `fail-…`
    is 503 there too (not Wow's 500 for `InternalServerError`), as the README says."""
    lines: list[str] = []
    host = DomainHost([], EventStore(":memory:"), fallback=echo_fallback(lines.append))
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_host_app(host)))
    try:
        async with CommandSender("http://host", client=http) as sender:
            with pytest.raises(DeliveryFailure) as caught:
                await sender.send(request("fail-9"))
            failed = (caught.value.http_status, caught.value.error_code)
            assert failed == (503, "InternalServerError")
            rejected = await sender.send(request("reject-9"))
            assert (rejected.status, rejected.http_status) == ("rejected", 400)
            delivered = await sender.send(request("9"))
            assert (delivered.status, delivered.http_status) == ("delivered", 200)
    finally:
        host.close()
    assert lines[0].startswith("[echo host] Failed 503 InternalServerError (fail-…: always fails")


def test_the_fallback_answers_a_message_without_request_id_with_one_it_made() -> None:
    answer = echo_fallback(lambda line: None)
    ref = AggregateRef(
        context_name="elsewhere", aggregate_name="thing", tenant_id="t1", aggregate_id="flaky-1"
    )
    result = answer(CommandMessage(type="x.Do", ref=ref, body={}))
    assert (result.status, result.error_code) == (503, "InternalServerError")
    assert result.request_id
