"""The fake Wow host users and the benches get from `wow_temporal.testing`: scripted answers by
request id, command type and aggregate prefix, per request or per attempt; in a thread of its
own or in a process of its own, driven over HTTP."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.harness import HostProcess
from wow_temporal.model import AggregateRef, Commit
from wow_temporal.testing import Arrival, FakeWowHost
from wow_temporal.wire import (
    DUPLICATE_REQUEST_ID,
    ERROR_CODE_HEADER,
    OK,
    WireCommand,
    command_headers,
    origin_headers,
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
    return _answer(url, command)[:2]


def _answer(url: str, command: WireCommand) -> tuple[int, str, str]:
    """The status, code and message a command is answered with."""
    headers = command_headers(command)
    answer = httpx.post(f"{url}/wow/command/send", headers=headers, json=command.body)
    result = read_result(answer.content, answer.headers.get(ERROR_CODE_HEADER))
    return answer.status_code, result.code or "", result.message


T0 = 1_800_000_000_000
DUE = T0 + 60_000


def _commit(aggregate_id: str, version: int, created: int, event: dict[str, Any]) -> Commit:
    """One commit of `order` `aggregate_id` with one event `e0`."""
    return Commit.parse(
        {
            "id": f"{aggregate_id}-v{version}",
            "contextName": "eshop-order",
            "aggregateName": "order",
            "tenantId": "t1",
            "aggregateId": aggregate_id,
            "version": version,
            "createTime": created,
            "body": [{"id": "e0", **event}],
        }
    )


def _log(aggregate_id: str, stop: dict[str, Any], stopped: int) -> list[Commit]:
    """`aggregate_id`'s key `grace` set at T0 (due at DUE), then `stop` committed at `stopped`."""
    command = {"type": "x.Cancel", "body": {}}
    grace = {"key": "grace", "rule": {"after": "PT60S"}, "command": command}
    return [
        _commit(aggregate_id, 1, T0, {"name": "wow.ScheduleSet", "body": grace}),
        _commit(aggregate_id, 2, stopped, stop),
    ]


def _slot(request_id: str, aggregate_id: str) -> WireCommand:
    """The command a timer sends for slot 1 of `aggregate_id`'s set (version 1, event e0)."""
    owner = AggregateRef(
        context_name="eshop-order",
        aggregate_name="order",
        tenant_id="t1",
        aggregate_id=aggregate_id,
    )
    headers = {
        **origin_headers(owner, 1, "e0"),
        "upstream_id": f"{aggregate_id}-v1",
        "schedule_key": "grace",
        "schedule_due": str(DUE),
    }
    return dataclasses.replace(_command(request_id, aggregate_id), headers=headers)


CANCEL = {"name": "wow.ScheduleCancelled", "body": {"key": "grace"}}


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


def test_told_the_log_it_refuses_a_slot_the_log_stopped_before_it_was_due_and_again() -> None:
    """A host in another language's check (docs/delivery.md): a cancel committed before the
    slot was due refuses it, the refusal is answered again to its request id; a cancel at the
    due time (owed), an owner the log does not hold, or no origin headers: decided as usual."""
    with FakeWowHost() as host:
        host.log([*_log("stopped", CANCEL, DUE - 1), *_log("owed", CANCEL, DUE)])
        status, code, message = _answer(host.url, _slot("r1", "stopped"))
        again = _answer(host.url, _slot("r1", "stopped"))
        owed = _send(host.url, _slot("r2", "owed"))
        unknown = _send(host.url, _slot("r3", "not-in-the-log"))
        plain = _send(host.url, _command("r4", "stopped"))
        refused = [a.request_id for a in host.requests if a.error_code == "IllegalState"]
        delivered = [a.request_id for a in host.delivered()]
    assert (status, code) == (400, "IllegalState")
    assert message.startswith("the log no longer held this slot when it was due: commit ")
    assert "stopped-v2 (version 2, event e0) cancelled key grace" in message
    assert again == (400, "IllegalState", f"{message} (request r1, decided before)")
    assert owed == unknown == plain == (200, OK)
    assert (refused, delivered) == (["r1", "r1"], ["r2", "r3", "r4"])


async def test_a_host_in_its_own_process_is_told_the_log_over_http(tmp_path: Path) -> None:
    """`RemoteWowHost.log` sends the commits' JSON; a bad log is refused 400; a reset forgets
    the log."""
    host = HostProcess(tmp_path / "host.log")
    await host.start()
    try:
        deleted = {"name": "wow.AggregateDeleted", "body": {}}
        await host.log([c.model_dump(mode="json") for c in _log("gone", deleted, T0 + 1)])
        async with httpx.AsyncClient() as http:
            assert (await http.post(f"{host.url}/_log", json={"commits": 1})).status_code == 400
        assert _answer(host.url, _slot("g1", "gone"))[2].endswith(
            "before the slot was due at 2027-01-15T08:01:00.000+00:00; the schedule of "
            "version 1 is done"
        )
        await host.reset()
        assert _send(host.url, _slot("g2", "gone")) == (200, OK)
    finally:
        await host.stop()
