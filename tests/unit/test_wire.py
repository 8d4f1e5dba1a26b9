"""Wow's command wire (`wow_temporal.wire`): what a sender puts on a request is what a host
reads back from it; what Wow refuses is refused, saying what is wrong; `CommandResult` is
strict and camelCase as Wow writes it."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from starlette.datastructures import Headers

from wow_temporal.delivery import CommandSender, DeliveryRequest, ScheduleDetails
from wow_temporal.domain.messages import ScheduleInfo
from wow_temporal.model import AggregateRef, ScheduledCommand, Scope
from wow_temporal.wire import (
    DEFAULT_TENANT,
    PROCESSED,
    REQUIRED_HEADERS,
    WAIT_STAGES,
    CommandResult,
    WireCommand,
    WireError,
    command_headers,
    encode_header_value,
    error_status,
    parse_command,
    read_result,
    require_headers,
)

# Visible ASCII without surrounding spaces: sent verbatim, so read back as sent.
_visible = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=40)
_spaced = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=1, max_size=40)
visible = (_visible | _spaced.filter(lambda v: v == v.strip())).filter(lambda v: len(v) <= 256)
required = visible.filter(bool)
keys = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz_0123456789"), min_size=1, max_size=20)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)

commands = st.builds(
    WireCommand,
    type=required,
    context_name=required,
    aggregate_name=required,
    aggregate_id=visible,
    tenant_id=visible,
    request_id=visible,
    owner_id=visible,
    space_id=visible,
    expected_version=st.none() | st.integers(min_value=-(2**63), max_value=2**63),
    wait_stage=st.none() | st.sampled_from(sorted(WAIT_STAGES)) | st.just("processed"),
    headers=st.dictionaries(keys, visible, max_size=5),
    traceparent=st.none() | required,
    body=st.dictionaries(st.text(max_size=8), json_values, max_size=4),
)


def encoded(body: Any) -> bytes:
    return json.dumps(body).encode()


def cancel(**fields: Any) -> WireCommand:
    values: dict[str, Any] = {
        "type": "eshop.order.CancelOrder",
        "context_name": "eshop-order",
        "aggregate_name": "order",
        "aggregate_id": "o-1",
        "tenant_id": "t1",
        "request_id": "r-1",
        **fields,
    }
    return WireCommand(**values)


# --- what is sent is what is read -----------------------------------------------------------


@given(commands)
def test_a_host_reads_back_every_command_a_sender_writes(command: WireCommand) -> None:
    headers = command_headers(command)
    assert parse_command(headers, encoded(command.body)) == command


@given(commands, st.randoms(use_true_random=False))
def test_header_names_are_read_in_any_case_as_a_server_gives_them(
    command: WireCommand, random: Any
) -> None:
    sent = command_headers(command)
    shuffled = {
        "".join(c.upper() if random.random() < 0.5 else c.lower() for c in name): value
        for name, value in sent.items()
    }
    assert parse_command(shuffled, encoded(command.body)) == command
    # as a Starlette request holds them: lower-case names, raw bytes
    raw = [(name.lower().encode(), value.encode()) for name, value in sent.items()]
    assert parse_command(Headers(raw=raw), encoded(command.body)) == command


def test_what_a_command_without_ids_sends_and_how_it_is_read() -> None:
    bare = WireCommand(type="x.Create", context_name="ctx", aggregate_name="thing")
    assert command_headers(bare) == {
        "Command-Type": "x.Create",
        "Command-Aggregate-Context": "ctx",
        "Command-Aggregate-Name": "thing",
        "Command-Aggregate-Id": "",
        "Command-Tenant-Id": DEFAULT_TENANT,
        "Command-Owner-Id": "",
        "Wow-Space-Id": "",
        "Command-Wait-Stage": PROCESSED,
    }
    routing = {
        name: value for name, value in command_headers(bare).items() if name != "Command-Tenant-Id"
    }
    read = parse_command(routing, b"")
    assert (read.tenant_id, read.aggregate_id, read.request_id) == (DEFAULT_TENANT, "", "")
    assert (read.body, read.headers, read.traceparent) == ({}, {}, None)
    assert read.expected_version is None


def test_the_first_of_a_repeated_header_is_read() -> None:
    raw = [
        (b"command-type", b"a.First"),
        (b"command-type", b"a.Second"),
        (b"command-aggregate-context", b"ctx"),
        (b"command-aggregate-name", b"thing"),
    ]
    assert parse_command(Headers(raw=raw), b"{}").type == "a.First"


def test_values_that_are_not_visible_ascii_are_sent_percent_encoded() -> None:
    for value in ("café", "a\tb", " padded ", "新しい", "50%"):
        sent = encode_header_value(value)
        assert sent.isascii() and sent.isprintable() and sent == sent.strip()
        assert unquote(sent) == value  # a percent sign too: `%25`, read back as `%`
    assert encode_header_value("plain-ascii_1.2:3") == "plain-ascii_1.2:3"
    headers = command_headers(cancel(aggregate_id="café", headers={"note": "ü"}))
    assert (headers["Command-Aggregate-Id"], headers["Command-Header-note"]) == (
        "caf%C3%A9",
        "%C3%BC",
    )


def test_a_delivery_is_read_by_the_host_as_the_timer_meant_it() -> None:
    """The contract between the timers' delivery and a domain host, over the wire."""
    request = DeliveryRequest(
        command=ScheduledCommand(type="eshop.order.CancelOrder", body={"reason": "unpaid"}),
        target=AggregateRef(
            context_name="eshop-order", aggregate_name="order", tenant_id="t1", aggregate_id="o-7"
        ),
        scope=Scope(tenant_id="t1", owner_id="alice", space_id=""),
        request_id="timer-1#3",
        upstream_id="commit-9",
        upstream_name="eshop-order.order",
        trace_id="trace-5",
        traceparent="00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        schedule=ScheduleDetails(timer="timer-1", key="grace", slot=3, due=1_764_470_000_000),
    )
    headers = CommandSender("http://host").headers(request)
    read = parse_command(headers, encoded(request.command.body))
    assert (read.type, read.context_name, read.aggregate_name, read.tenant_id) == (
        "eshop.order.CancelOrder", "eshop-order", "order", "t1",
    )  # fmt: skip
    assert (read.aggregate_id, read.request_id, read.owner_id, read.space_id) == (
        "o-7", "timer-1#3", "alice", "",
    )  # fmt: skip
    assert (read.wait_stage, read.traceparent, read.body) == (
        PROCESSED, request.traceparent, {"reason": "unpaid"},
    )  # fmt: skip
    assert read.headers["upstream_id"] == "commit-9"
    assert read.headers["trace_id"] == "trace-5"
    schedule = ScheduleInfo.from_headers(dict(read.headers))
    assert schedule is not None
    assert (schedule.timer, schedule.key, schedule.slot, schedule.due) == (
        "timer-1", "grace", 3, 1_764_470_000_000,
    )  # fmt: skip
    assert headers["Wow-Space-Id"] == "", "every id header goes, empty or not, as Wow sends it"


# --- what Wow refuses -----------------------------------------------------------------------


@given(st.sets(st.sampled_from(REQUIRED_HEADERS), min_size=1))
def test_missing_required_headers_are_all_named(missing: set[str]) -> None:
    headers = {n: v for n, v in command_headers(cancel()).items() if n not in missing}
    named = [name for name in REQUIRED_HEADERS if name in missing]
    plural = "s" if len(named) > 1 else ""
    for check in (lambda: require_headers(headers), lambda: parse_command(headers, b"{}")):
        with pytest.raises(WireError) as caught:
            check()
        assert (caught.value.code, caught.value.message) == (
            "BadRequest",
            f"missing header{plural} {', '.join(named)}",
        )


@pytest.mark.parametrize(
    ("replaced", "code", "message"),
    [
        ({"Command-Type": ""}, "BadRequest", "Command-Type: 1 to 256 printable characters"),
        (
            {"Command-Aggregate-Name": "x" * 257},
            "BadRequest",
            "Command-Aggregate-Name: 1 to 256 printable characters",
        ),
        (
            {"Command-Request-Id": "a\tb"},
            "BadRequest",
            "Command-Request-Id: 0 to 256 printable characters",
        ),
        ({"Wow-Space-Id": "a\x7fb"}, "BadRequest", "Wow-Space-Id: 0 to 256 printable characters"),
        (
            {"Command-Aggregate-Version": "one"},
            "BadRequest",
            "Command-Aggregate-Version 'one' is not a number",
        ),
        ({"Command-Wait-Stage": "EVENTUALLY"}, "BadRequest", "Command-Wait-Stage 'EVENTUALLY'"),
    ],
)
def test_a_malformed_header_is_refused_naming_it(
    replaced: dict[str, str], code: str, message: str
) -> None:
    headers = {**command_headers(cancel()), **replaced}
    with pytest.raises(WireError) as caught:
        parse_command(headers, b"{}")
    assert caught.value.code == code
    assert caught.value.message.startswith(message)


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [
        (b'{"count": ', "BadRequest", "the body is not JSON"),
        (b'{"count": "\xff"}', "BadRequest", "the body is not JSON"),
        (b"[1, 2]", "CommandValidation", "the body is a JSON object, not list"),
        (b'"count"', "CommandValidation", "the body is a JSON object, not str"),
        (b"null", "CommandValidation", "the body is a JSON object, not NoneType"),
    ],
)
def test_a_body_that_is_no_json_object_is_refused(body: bytes, code: str, message: str) -> None:
    with pytest.raises(WireError) as caught:
        parse_command(command_headers(cancel()), body)
    assert (caught.value.code, caught.value.message[: len(message)]) == (code, message)


def test_an_empty_body_is_an_empty_object() -> None:
    assert parse_command(command_headers(cancel()), b"  \n").body == {}


# --- Wow's CommandResult --------------------------------------------------------------------


def test_the_result_is_camel_case_and_answers_the_request_id_or_else_the_command_id() -> None:
    ref = AggregateRef(context_name="c", aggregate_name="a", tenant_id="t", aggregate_id="1")
    result = CommandResult.of(ref, command_id="cmd-1", request_id="", code="Ok", version=2)
    dumped = result.model_dump(mode="json")
    assert dumped["requestId"] == dumped["commandId"] == dumped["id"] == "cmd-1"
    assert (dumped["aggregateVersion"], dumped["errorCode"], dumped["stage"]) == (
        2,
        "Ok",
        PROCESSED,
    )
    assert dumped["function"]["functionKind"] == "COMMAND"
    assert CommandResult.model_validate_json(result.model_dump_json()) == result
    assert (result.status, result.ok) == (200, True)


def test_the_result_is_strict() -> None:
    good = CommandResult.of(
        AggregateRef(context_name="c", aggregate_name="a", tenant_id="t", aggregate_id="1"),
        command_id="x",
        request_id="r",
        code="Ok",
    ).model_dump(mode="json")
    for field, lax in (("aggregateVersion", "1"), ("signalTime", True), ("bindingErrors", ())):
        with pytest.raises(ValidationError):
            CommandResult.model_validate({**good, field: lax})
    with pytest.raises(ValidationError):
        CommandResult.model_validate_json(json.dumps({**good, "signalTime": "1"}))


def test_the_status_is_wows_for_the_code_unless_told_another() -> None:
    ref = AggregateRef(context_name="c", aggregate_name="a", tenant_id="t", aggregate_id="1")
    assert error_status("InternalServerError") == 500
    assert error_status("SomethingNew") == 400
    failed = CommandResult.of(ref, command_id="x", request_id="r", code="InternalServerError")
    assert failed.status == 500
    unavailable = CommandResult.of(
        ref, command_id="x", request_id="r", code="InternalServerError", status=503
    )
    assert (unavailable.status, unavailable.model_copy().status) == (503, 503)
    assert "status" not in unavailable.model_dump()


def test_a_refusal_names_the_aggregate_and_request_its_headers_name() -> None:
    headers = {"command-aggregate-context": "ctx", "Command-Request-Id": "r-9"}
    result = CommandResult.refusing(
        headers, WireError("BadRequest", "missing header Command-Type"), command_id="c-1"
    )
    assert (result.context_name, result.aggregate_name, result.aggregate_id) == ("ctx", "", "")
    assert (result.tenant_id, result.request_id, result.command_id) == (
        DEFAULT_TENANT,
        "r-9",
        "c-1",
    )
    assert (result.error_code, result.error_msg, result.status) == (
        "BadRequest",
        "missing header Command-Type",
        400,
    )


@pytest.mark.parametrize(
    ("content", "header", "expected"),
    [
        (b'{"errorCode": "Ok", "errorMsg": ""}', None, ("Ok", "")),
        (b'{"errorCode": "IllegalState", "errorMsg": "no"}', "Ok", ("IllegalState", "no")),
        (b'{"errorCode": "", "errorMsg": "x"}', "NotFound", ("NotFound", "x")),
        (b'{"errorCode": 7}', None, (None, "")),
        (b"<html>", "TooManyRequests", ("TooManyRequests", "")),
        (b"[]", None, (None, "")),
        (b"", "", (None, "")),
    ],
)
def test_any_answer_is_read_for_its_code_and_message(
    content: bytes, header: str | None, expected: tuple[str | None, str]
) -> None:
    read = read_result(content, header)
    assert (read.code, read.message) == expected
    assert (read.body is None) == (not content.startswith(b"{"))


@pytest.mark.parametrize("value", ["✓", "café 1", "a%41", "50%", "订单-1 ü", "%E2%9C%93"])
def test_a_percent_encoded_value_is_read_as_the_id_it_encodes(value: str) -> None:
    """What a sender percent-encodes (non-ASCII, spaces, `%`) is read back as the id itself,
    the one the aggregate's URL path names, also from a Starlette request's raw headers."""
    command = cancel(aggregate_id=value, tenant_id=value, headers={"note": value})
    sent = command_headers(command)
    raw = [(name.lower().encode(), text.encode()) for name, text in sent.items()]
    assert parse_command(Headers(raw=raw), b"{}") == command


@pytest.mark.parametrize(
    "header", ["Command-Aggregate-Id", "Command-Tenant-Id", "Command-Header-note"]
)
def test_raw_utf8_in_a_header_is_refused_naming_it(header: str) -> None:
    """An ASGI server decodes header bytes as Latin-1: raw UTF-8 `✓` would be read as
    `â\x9c\x93`, another id; it is refused, saying to percent-encode."""
    sent = command_headers(cancel())
    raw = [(name.lower().encode(), text.encode()) for name, text in sent.items()]
    raw = [(n, v) for n, v in raw if n != header.lower().encode()]
    raw.append((header.lower().encode(), "✓".encode()))
    with pytest.raises(WireError, match="percent-encoded") as refused:
        parse_command(Headers(raw=raw), b"{}")
    assert header.lower() in str(refused.value).lower()
    bad = [(n, v) for n, v in raw if n != header.lower().encode()] + [
        (header.lower().encode(), b"%E2%9C")  # not UTF-8 once decoded
    ]
    with pytest.raises(WireError, match="not UTF-8"):
        parse_command(Headers(raw=bad), b"{}")
