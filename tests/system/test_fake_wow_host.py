"""The fake Wow host users and the benches get from `wow_temporal.testing`: scripted answers by
request id, command type and aggregate prefix, per request or per attempt; in a thread of its
own or in a process of its own, driven over HTTP."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from bench.harness import HostProcess
from wow_temporal.testing import Arrival, FakeWowHost
from wow_temporal.wire import (
    DUPLICATE_REQUEST_ID,
    ERROR_CODE_HEADER,
    OK,
    WireCommand,
    command_headers,
    read_result,
)


def _command(request_id: str, aggregate_id: str = "order-1", kind: str = "x.Cancel") -> WireCommand:
    return WireCommand(
        type=kind,
        context_name="eshop-order",
        aggregate_name="order",
        aggregate_id=aggregate_id,
        tenant_id="t1",
        request_id=request_id,
        body={"n": 1},
    )


def _send(url: str, command: WireCommand) -> tuple[int, str]:
    headers = command_headers(command)
    answer = httpx.post(f"{url}/wow/command/send", headers=headers, json=command.body)
    result = read_result(answer.content, answer.headers.get(ERROR_CODE_HEADER))
    return answer.status_code, result.code


def test_a_decided_request_id_is_a_duplicate_and_the_arrival_is_recorded_whole() -> None:
    with FakeWowHost() as host:
        assert _send(host.url, _command("r1")) == (200, OK)
        assert _send(host.url, _command("r1")) == (409, DUPLICATE_REQUEST_ID)
        first, again = host.for_request_id("r1")
    assert (first.behaviour, again.behaviour) == ("ok", "duplicate")
    assert (first.command_type, first.aggregate_id, first.body) == ("x.Cancel", "order-1", {"n": 1})
    assert [a.request_id for a in host.delivered()] == ["r1"]


def test_rules_match_by_aggregate_prefix_and_count_attempts_per_request_id() -> None:
    with FakeWowHost() as host:
        host.behave("fail", aggregate_prefix="flaky", attempts=2, status=503)
        host.behave("reject", command_type="x.Refused")
        flaky = [_send(host.url, _command("f1", "flaky-1")) for _ in range(3)]
        other = [_send(host.url, _command("f2", "flaky-2")) for _ in range(3)]
        steady = _send(host.url, _command("s1", "steady-1"))
        refused = _send(host.url, _command("x1", "steady-2", "x.Refused"))
    fail = (503, "InternalServerError")
    assert flaky == other == [fail, fail, (200, OK)]
    assert steady == (200, OK)
    assert refused == (400, "IllegalState")


def test_unbehave_heals_and_times_runs_out() -> None:
    with FakeWowHost() as host:
        host.behave("fail", aggregate_prefix="fail")
        host.behave("reject", times=1)
        assert _send(host.url, _command("a", "fail-1"))[0] == 500
        assert _send(host.url, _command("b", "ok-1")) == (400, "IllegalState")
        assert _send(host.url, _command("c", "ok-2")) == (200, OK)  # `times` ran out
        host.unbehave(aggregate_prefix="fail")
        assert _send(host.url, _command("a", "fail-1")) == (200, OK)


def test_an_unknown_behaviour_or_count_is_refused() -> None:
    host = FakeWowHost()
    with pytest.raises(ValueError, match="unknown behaviour"):
        host.behave("explode")
    with pytest.raises(ValueError, match="at least 1"):
        host.behave("fail", attempts=0)


async def test_a_host_in_its_own_process_is_scripted_and_read_over_http(tmp_path: Path) -> None:
    host = HostProcess(tmp_path / "host.log")
    await host.start()
    try:
        assert host.proc.running
        await host.behave("hang", aggregate_prefix="slow", delay=[0.05, 0.1])
        async with httpx.AsyncClient() as http:
            for request_id, aggregate_id in (("s1", "slow-1"), ("s1", "slow-1"), ("o1", "o-1")):
                command = _command(request_id, aggregate_id)
                await http.post(
                    f"{host.url}/wow/command/send",
                    headers=command_headers(command),
                    json=command.body,
                )
        arrivals = await host.arrivals()
        assert [(a.request_id, a.behaviour) for a in arrivals] == [
            ("s1", "hang"),
            ("s1", "duplicate"),
            ("o1", "ok"),
        ]
        assert await host.duplicates() == 1
        ones = await host.delivered_matching(lambda a: a.aggregate_id == "o-1", 1, within=5)
        assert [a.request_id for a in ones] == ["o1"]
        async with httpx.AsyncClient() as other:  # another client starts the host over
            assert (await other.post(f"{host.url}/_reset")).is_success
            assert (
                await other.post(f"{host.url}/_behave", json={"behaviour": "x"})
            ).status_code == 400
            assert await host.arrivals() == []
            await host.behave("reject")
            await other.post(
                f"{host.url}/wow/command/send", headers=command_headers(_command("n1")), json={}
            )
        assert [(a.request_id, a.behaviour) for a in await host.arrivals()] == [("n1", "reject")]
    finally:
        await host.stop()
    assert not host.proc.running


def test_a_bad_delay_is_refused_where_the_rule_is_made() -> None:
    host = FakeWowHost()
    for bad in ([1, 2, 3], (2, 1), -1, ("a", 1), True):
        with pytest.raises(ValueError, match="delay"):
            host.behave("hang", delay=bad)  # type: ignore[arg-type]


def test_an_arrival_round_trips_through_json_byte_for_byte() -> None:
    with FakeWowHost() as host:
        httpx.post(
            f"{host.url}/wow/command/send",
            headers=command_headers(_command("r1")),
            content=b"\xff\xfe{not json",
        )
        (arrival,) = host.requests
    assert arrival.body is None and arrival.raw_body == b"\xff\xfe{not json"
    assert Arrival.from_json(json.loads(json.dumps(arrival.to_json()))) == arrival


def test_a_hang_is_a_decision_and_attempts_count_only_for_a_request_id() -> None:
    with FakeWowHost() as host:
        host.behave("hang", request_id="slow", delay=0.01)
        host.behave("fail", command_type="x.Nameless", attempts=1)
        assert _send(host.url, _command("slow")) == (200, OK)
        nameless = [_send(host.url, _command("", kind="x.Nameless"))[0] for _ in range(2)]
    assert [a.request_id for a in host.delivered()] == ["slow"]
    assert nameless == [500, 500]  # each request without an id is a first attempt
