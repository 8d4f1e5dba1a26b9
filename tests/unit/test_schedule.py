"""The scheduling model: refs, rules and their wire JSON, commits round-tripped exactly, the tick,
and validation at the edge with messages that say what was wrong."""

from __future__ import annotations

import copy
import json
import re
from datetime import UTC, datetime, timedelta, timezone
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from wow_temporal.model import (
    MAX_COMMAND_BODY_BYTES,
    AggregateDeleted,
    AggregateRef,
    Commit,
    CommitEvent,
    InvalidCommitError,
    InvalidScheduleError,
    Misfire,
    NamedAggregate,
    ScheduleCancelled,
    ScheduledCommand,
    ScheduleRule,
    ScheduleSet,
    ScheduleTick,
    Scope,
    validate_key,
    validate_zone,
)

DESIGN_COMMIT: dict[str, Any] = {
    "id": "commit-7",
    "contextName": "eshop-order",
    "aggregateName": "order",
    "tenantId": "t1",
    "aggregateId": "42",
    "ownerId": "",
    "spaceId": "",
    "version": 3,
    "createTime": 1764470000000,
    "requestId": "r-9",
    "commandId": "c-9",
    "header": {"trace_id": "abc"},
    "body": [
        {
            "id": "e-1",
            "name": "wow.ScheduleSet",
            "body": {
                "key": "payment-grace-period",
                "rule": {"after": "PT30M"},
                "command": {
                    "type": "eshop.order.CancelOrder",
                    "body": {"reason": "PAYMENT_TIMEOUT"},
                },
                "target": None,
            },
        },
        {"id": "e-2", "name": "wow.ScheduleCancelled", "body": {"key": "reminder"}},
        {"id": "e-3", "name": "wow.AggregateDeleted", "body": {}},
    ],
}

BAD_NAMES = ["", "x" * 65, "a b", "a/b", "ключ", "naïve", "a.b", "a\n", " a"]
GOOD_NAMES = ["a", "x" * 64, "payment-grace-period", "Receive_Deliveries-2", "0"]


def commit_with(*events: dict[str, Any]) -> dict[str, Any]:
    """The design commit with its events replaced."""
    data = copy.deepcopy(DESIGN_COMMIT)
    data["body"] = list(events)
    return data


def schedule_set(**body: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "key": "k",
        "rule": {"after": "PT1M"},
        "command": {"type": "eshop.order.CancelOrder", "body": {}},
    }
    base.update(body)
    return {"id": "e-1", "name": "wow.ScheduleSet", "body": base}


# --- aggregates ----------------------------------------------------------------------------


def test_named_aggregate_positional_and_str() -> None:
    stock = NamedAggregate("eshop-inventory", "stock")
    assert stock.context_name == "eshop-inventory"
    assert stock.aggregate_name == "stock"
    assert str(stock) == "eshop-inventory.stock"
    assert stock == NamedAggregate(context_name="eshop-inventory", aggregate_name="stock")
    assert stock.model_dump(mode="json") == {
        "contextName": "eshop-inventory",
        "aggregateName": "stock",
    }
    assert NamedAggregate.model_validate_json(stock.model_dump_json()) == stock


def test_named_aggregate_ref() -> None:
    ref = NamedAggregate("eshop-inventory", "stock").ref("t1", "sku-9")
    assert ref == AggregateRef(
        context_name="eshop-inventory", aggregate_name="stock", tenant_id="t1", aggregate_id="sku-9"
    )
    assert ref.named == NamedAggregate("eshop-inventory", "stock")
    assert str(ref) == "eshop-inventory.stock sku-9"
    assert json.loads(ref.model_dump_json()) == {
        "contextName": "eshop-inventory",
        "aggregateName": "stock",
        "tenantId": "t1",
        "aggregateId": "sku-9",
    }


def test_named_aggregate_needs_names() -> None:
    with pytest.raises(ValueError, match=r"context_name|contextName"):
        NamedAggregate("", "stock")
    with pytest.raises(ValueError, match=r"aggregate_id|aggregateId"):
        NamedAggregate("eshop-inventory", "stock").ref("t1", "")


def test_models_are_frozen() -> None:
    stock = NamedAggregate("eshop-inventory", "stock")
    with pytest.raises(ValidationError):
        stock.aggregate_name = "other"  # type: ignore[misc]


# --- rules and their JSON ------------------------------------------------------------------


def test_rule_at() -> None:
    instant = datetime(2025, 11, 30, 8, 0, tzinfo=UTC)
    rule = ScheduleRule.at(instant)
    assert rule.kind == "at"
    assert json.loads(rule.model_dump_json()) == {"at": "2025-11-30T08:00:00Z"}
    assert rule.first_due(datetime(2025, 1, 1, tzinfo=UTC)) == instant
    assert ScheduleRule.model_validate_json(rule.model_dump_json()) == rule


def test_rule_at_with_offset_is_written_in_utc() -> None:
    amsterdam_winter = timezone(timedelta(hours=1))
    rule = ScheduleRule.at(datetime(2025, 11, 30, 9, 0, 0, 500000, tzinfo=amsterdam_winter))
    assert rule.model_dump(mode="json") == {"at": "2025-11-30T08:00:00.500000Z"}
    assert ScheduleRule.model_validate_json(rule.model_dump_json()) == rule


def test_rule_after() -> None:
    rule = ScheduleRule.after(timedelta(minutes=30))
    assert rule.kind == "after"
    assert json.loads(rule.model_dump_json()) == {"after": "PT30M"}
    committed = datetime(2025, 1, 1, tzinfo=UTC)
    assert rule.first_due(committed) == committed + timedelta(minutes=30)
    assert rule.describe() == "after PT30M"
    assert ScheduleRule.model_validate_json(rule.model_dump_json()) == rule


@pytest.mark.parametrize(
    ("delay", "text"),
    [
        (timedelta(hours=36), "PT36H"),
        (timedelta(milliseconds=500), "PT0.5S"),
        (timedelta(seconds=90), "PT1M30S"),
        (timedelta(microseconds=1), "PT0.000001S"),
        (timedelta(days=1, hours=2, minutes=3, seconds=4), "PT26H3M4S"),
    ],
)
def test_rule_after_durations_as_java_writes_them(delay: timedelta, text: str) -> None:
    rule = ScheduleRule.after(delay)
    assert rule.model_dump(mode="json") == {"after": text}
    assert ScheduleRule.model_validate({"after": text}).after_delay == delay


def test_rule_cron() -> None:
    rule = ScheduleRule.cron("0 0 6 * * *")
    assert rule.kind == "cron"
    assert json.loads(rule.model_dump_json()) == {
        "cron": "0 0 6 * * *",
        "zone": "UTC",
        "misfire": "COALESCE",
    }
    assert ScheduleRule.model_validate_json(rule.model_dump_json()) == rule


def test_rule_cron_with_zone_and_misfire() -> None:
    rule = ScheduleRule.cron("0 0 6 * * MON-FRI", zone="Europe/Amsterdam", misfire=Misfire.CATCH_UP)
    wire = {"cron": "0 0 6 * * MON-FRI", "zone": "Europe/Amsterdam", "misfire": "CATCH_UP"}
    assert rule.model_dump(mode="json") == wire
    assert ScheduleRule.model_validate(wire) == rule
    assert ScheduleRule.model_validate_json(rule.model_dump_json()) == rule
    assert rule.describe() == "cron 0 0 6 * * MON-FRI (Europe/Amsterdam, CATCH_UP)"


def test_rule_cron_first_due_reads_the_zone() -> None:
    rule = ScheduleRule.cron("0 0 6 * * *", zone="Europe/Amsterdam")
    committed = datetime(2025, 1, 15, 12, 0, tzinfo=UTC)
    # 06:00 in Amsterdam in winter (UTC+1) is 05:00 UTC, the next day.
    assert rule.first_due(committed) == datetime(2025, 1, 16, 5, 0, tzinfo=UTC)


@pytest.mark.parametrize("mode", ["validation", "serialization"])
def test_rule_json_schema_is_its_three_wire_forms(mode: Any) -> None:
    schema = ScheduleRule.model_json_schema(mode=mode)
    forms = schema["oneOf"]
    assert [form["required"] for form in forms] == [["at"], ["after"], ["cron"]]
    written = [
        ScheduleRule.at(datetime(2026, 1, 1, tzinfo=UTC)),
        ScheduleRule.after(timedelta(minutes=30)),
        ScheduleRule.cron("0 0 6 * * *", zone="Europe/Amsterdam", misfire=Misfire.CATCH_UP),
    ]
    for form, rule in zip(forms, written, strict=True):
        assert set(rule.model_dump(mode="json")) <= set(form["properties"])
        assert form["additionalProperties"] is False
        for example in form["examples"]:
            assert ScheduleRule.model_validate(example).kind == form["title"]
    misfire = forms[2]["properties"]["misfire"]["$ref"].rsplit("/", 1)[-1]
    assert schema["$defs"][misfire]["enum"] == ["COALESCE", "CATCH_UP"]


def test_commit_json_schema_names_each_event_body() -> None:
    schema = Commit.model_json_schema()
    events = schema["$defs"]["CommitEvent"]["oneOf"]
    bodies = {
        form["properties"]["name"].get("const"): form["properties"]["body"] for form in events
    }
    assert bodies.pop(None) == {
        "type": "object",
        "additionalProperties": True,
        "description": "The event's own JSON object",
    }
    assert {name: body["$ref"].rsplit("/", 1)[-1] for name, body in bodies.items()} == {
        "wow.ScheduleSet": "ScheduleSet",
        "wow.ScheduleCancelled": "ScheduleCancelled",
        "wow.AggregateDeleted": "AggregateDeleted",
    }
    key = schema["$defs"]["ScheduleSet"]["properties"]["key"]
    assert key["pattern"] == "^[A-Za-z0-9_-]{1,64}$"
    assert all(re.fullmatch(key["pattern"][1:-1], name) for name in GOOD_NAMES)
    assert not any(re.fullmatch(key["pattern"][1:-1], name) for name in BAD_NAMES)
    example = Commit.parse(schema["examples"][0])
    assert [event.name for event, _ in example.schedule_events()] == [
        "wow.ScheduleSet",
        "wow.ScheduleCancelled",
    ]


@settings(max_examples=200)
@given(
    st.datetimes(
        min_value=datetime(1970, 1, 2),
        max_value=datetime(9999, 12, 30),
        timezones=st.sampled_from(
            [UTC, timezone(timedelta(hours=-7)), timezone(timedelta(hours=5, minutes=30))]
        ),
    )
)
def test_rule_at_round_trip(instant: datetime) -> None:
    rule = ScheduleRule.at(instant)
    again = ScheduleRule.model_validate_json(rule.model_dump_json())
    assert again == rule
    assert again.model_dump(mode="json") == rule.model_dump(mode="json")


@settings(max_examples=200)
@given(st.timedeltas(min_value=timedelta(microseconds=1), max_value=timedelta(days=10_000)))
def test_rule_after_round_trip(delay: timedelta) -> None:
    rule = ScheduleRule.after(delay)
    assert ScheduleRule.model_validate_json(rule.model_dump_json()) == rule


# --- commits -------------------------------------------------------------------------------


def test_design_commit_round_trips_exactly() -> None:
    commit = Commit.parse(DESIGN_COMMIT)
    assert commit.model_dump(mode="json") == DESIGN_COMMIT
    assert json.loads(commit.model_dump_json()) == DESIGN_COMMIT
    assert Commit.parse(json.dumps(DESIGN_COMMIT)) == commit
    assert Commit.parse(json.dumps(DESIGN_COMMIT).encode()) == commit


def test_unknown_fields_on_commit_and_events_are_kept() -> None:
    data = copy.deepcopy(DESIGN_COMMIT)
    data["upstream"] = {"contextName": "eshop-gateway", "ids": [1, 2.5, None, True]}
    data["isFirstCommit"] = False
    data["body"][0]["revision"] = "1.0"
    data["body"][0]["bodyType"] = "me.ahoo.wow.ScheduleSet"
    data["body"][2]["sequence"] = 3
    data["body"].append(
        {"id": "e-4", "name": "eshop.order.OrderCreated", "body": {"items": [{"sku": "a"}]}}
    )
    commit = Commit.parse(json.dumps(data))
    assert commit.model_dump(mode="json") == data
    assert json.loads(commit.model_dump_json()) == data


def test_design_commit_fields_and_events() -> None:
    commit = Commit.parse(DESIGN_COMMIT)
    assert commit.aggregate == NamedAggregate("eshop-order", "order").ref("t1", "42")
    assert commit.scope == Scope(tenant_id="t1")
    assert commit.created_at == datetime.fromtimestamp(1764470000, UTC)
    events = [event for _, event in commit.schedule_events()]
    assert events == [
        ScheduleSet(
            key="payment-grace-period",
            rule=ScheduleRule.after(timedelta(minutes=30)),
            command=ScheduledCommand(
                type="eshop.order.CancelOrder", body={"reason": "PAYMENT_TIMEOUT"}
            ),
        ),
        ScheduleCancelled(key="reminder"),
        AggregateDeleted(),
    ]
    assert [envelope.id for envelope, _ in commit.schedule_events()] == ["e-1", "e-2", "e-3"]
    assert events[0].command.simple_name == "CancelOrder"  # type: ignore[union-attr]


def test_domain_events_are_not_schedule_events() -> None:
    commit = Commit.parse(
        commit_with({"id": "e-9", "name": "eshop.order.OrderPaid", "body": {"amount": 10}})
    )
    assert commit.schedule_events() == []


def test_commit_event_of_schedule_event() -> None:
    event = ScheduleSet(
        key="reminder",
        rule=ScheduleRule.at(datetime(2026, 1, 1, tzinfo=UTC)),
        command=ScheduledCommand(type="eshop.order.Remind"),
        target=NamedAggregate("eshop-customer", "customer").ref("t1", "c-1"),
    )
    envelope = CommitEvent.of(event, "e-1")
    assert envelope.model_dump(mode="json") == {
        "id": "e-1",
        "name": "wow.ScheduleSet",
        "body": {
            "key": "reminder",
            "rule": {"at": "2026-01-01T00:00:00Z"},
            "command": {"type": "eshop.order.Remind", "body": {}},
            "target": {
                "contextName": "eshop-customer",
                "aggregateName": "customer",
                "tenantId": "t1",
                "aggregateId": "c-1",
            },
        },
    }
    assert envelope.schedule_event() == event
    assert CommitEvent.of(AggregateDeleted(), "e-2").body == {}


# --- hypothesis: generated commits round-trip ----------------------------------------------

_COMMIT_FIELDS = set(Commit.model_fields) | {
    field.alias for field in Commit.model_fields.values() if field.alias
}
_EVENT_FIELDS = set(CommitEvent.model_fields)

text = st.text(max_size=12)
names = st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
json_objects = st.dictionaries(text, json_values, max_size=4)
instants = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
).map(lambda d: d.isoformat().replace("+00:00", "Z"))
rules = st.one_of(
    instants.map(lambda at: {"at": at}),
    st.sampled_from(["PT30M", "PT1S", "PT36H", "PT0.5S", "P1D"]).map(lambda d: {"after": d}),
    st.builds(
        lambda cron, zone, misfire: {"cron": cron, "zone": zone, "misfire": misfire},
        st.sampled_from(["0 0 6 * * *", "0 */5 * * * *", "0 30 9 * * MON-FRI"]),
        st.sampled_from(["UTC", "Europe/Amsterdam", "Asia/Tokyo"]),
        st.sampled_from(["COALESCE", "CATCH_UP"]),
    ),
)
commands = st.builds(
    lambda type_, body: {"type": type_, "body": body},
    st.from_regex(r"[a-z]{1,5}(\.[A-Za-z]{1,8}){0,3}", fullmatch=True),
    json_objects,
)
targets = st.none() | st.builds(
    lambda c, a, t, i: {"contextName": c, "aggregateName": a, "tenantId": t, "aggregateId": i},
    names,
    names,
    text,
    names,
)
event_extras = st.dictionaries(
    st.text(min_size=1, max_size=10).filter(lambda k: k not in _EVENT_FIELDS),
    json_values,
    max_size=2,
)


def _event(name: str, body: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[Any]:
    return st.builds(
        lambda event_id, event_body, extra: {
            **extra,
            "id": event_id,
            "name": name,
            "body": event_body,
        },
        text,
        body,
        event_extras,
    )


events = st.one_of(
    _event(
        "wow.ScheduleSet",
        st.builds(
            lambda key, rule, command, target: {
                "key": key,
                "rule": rule,
                "command": command,
                "target": target,
            },
            names,
            rules,
            commands,
            targets,
        ),
    ),
    _event("wow.ScheduleCancelled", st.builds(lambda key: {"key": key}, names)),
    _event("wow.AggregateDeleted", st.just({})),
    st.builds(
        lambda event_id, name, body, extra: {**extra, "id": event_id, "name": name, "body": body},
        text,
        st.from_regex(r"[a-z]{1,6}\.[A-Za-z]{1,12}", fullmatch=True).filter(
            lambda n: not n.startswith("wow.")
        ),
        json_objects,
        event_extras,
    ),
)
commits = st.builds(
    lambda fields, extra: {**extra, **fields},
    st.fixed_dictionaries(
        {
            "id": st.text(min_size=1, max_size=12),
            "contextName": st.text(min_size=1, max_size=12),
            "aggregateName": st.text(min_size=1, max_size=12),
            "tenantId": text,
            "aggregateId": st.text(min_size=1, max_size=12),
            "ownerId": text,
            "spaceId": text,
            "version": st.integers(min_value=1, max_value=2**31),
            "createTime": st.integers(min_value=10**12, max_value=2**45),
            "requestId": text,
            "commandId": text,
            "header": st.dictionaries(text, text, max_size=3),
            "body": st.lists(events, max_size=4),
        }
    ),
    st.dictionaries(
        st.text(min_size=1, max_size=10).filter(lambda k: k not in _COMMIT_FIELDS),
        json_values,
        max_size=3,
    ),
)


@settings(max_examples=150, deadline=None)
@given(commits)
def test_generated_commits_round_trip_exactly(data: dict[str, Any]) -> None:
    commit = Commit.parse(data)
    assert commit.model_dump(mode="json") == data
    from_text = Commit.parse(json.dumps(data))
    assert from_text == commit
    assert json.loads(from_text.model_dump_json()) == data
    kinds = [event["name"] for event in data["body"] if event["name"].startswith("wow.")]
    assert [envelope.name for envelope, _ in commit.schedule_events()] == kinds


# --- the tick ------------------------------------------------------------------------------


def test_schedule_tick_fields_and_json() -> None:
    due = datetime(2025, 11, 30, 6, 0, tzinfo=UTC)
    tick = ScheduleTick(tenant_id="t1", slot=3, due=int(due.timestamp() * 1000), skipped=2)
    assert tick.due_at == due
    assert json.loads(tick.model_dump_json()) == {
        "tenantId": "t1",
        "slot": 3,
        "due": 1764482400000,
        "skipped": 2,
        "partition": None,
    }
    assert ScheduleTick.model_validate_json(tick.model_dump_json()) == tick
    wire = {"tenantId": "", "slot": 1, "due": 0, "skipped": 0, "partition": 4}
    assert ScheduleTick.model_validate(wire).model_dump(mode="json") == wire
    assert ScheduleTick(tenant_id="", slot=1, due=0).skipped == 0


@pytest.mark.parametrize(("fields", "field"), [({"slot": 0}, "slot"), ({"skipped": -1}, "skipped")])
def test_schedule_tick_validation(fields: dict[str, int], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        ScheduleTick(**{"tenant_id": "t1", "slot": 1, "due": 0, **fields})


# --- validation at the edge ----------------------------------------------------------------


@pytest.mark.parametrize("name", GOOD_NAMES)
def test_good_keys(name: str) -> None:
    assert validate_key(name) == name
    assert ScheduleCancelled(key=name).key == name


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_keys(name: str) -> None:
    with pytest.raises(InvalidScheduleError, match=r"invalid key .*1 to 64 letters, digits"):
        validate_key(name)
    with pytest.raises(InvalidScheduleError, match=r"invalid job name"):
        validate_key(name, "job name")
    with pytest.raises(ValueError, match=r"invalid key"):
        ScheduleCancelled(key=name)


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_key_in_commit(name: str) -> None:
    with pytest.raises(
        InvalidCommitError, match=r"event 0 \('e-1', wow\.ScheduleSet\): key: invalid key"
    ):
        Commit.parse(commit_with(schedule_set(key=name)))


def test_zone_that_does_not_exist() -> None:
    assert validate_zone("Europe/Amsterdam") == "Europe/Amsterdam"
    with pytest.raises(InvalidScheduleError, match=r"unknown time zone 'Mars/Olympus_Mons'"):
        validate_zone("Mars/Olympus_Mons")
    with pytest.raises(ValueError, match=r"unknown time zone 'Mars/Olympus_Mons'"):
        ScheduleRule.model_validate({"after": "PT1M", "zone": "Mars/Olympus_Mons"})
    with pytest.raises(ValueError, match=r"unknown time zone 'Mars/Olympus_Mons'"):
        ScheduleRule.cron("0 0 6 * * *", zone="Mars/Olympus_Mons")


def test_zone_that_is_a_directory() -> None:
    with pytest.raises(InvalidScheduleError, match=r"unknown time zone 'Europe'"):
        validate_zone("Europe")


MACHINE_ZONES = [
    ("localtime", r"'localtime' depends on the machine; use an IANA zone such as Europe/Amsterdam"),
    ("Factory", r"'Factory' is tzdata's placeholder .*; use an IANA zone such as Europe/Amsterdam"),
    ("posixrules", r"'posixrules' is a template .*, not a zone"),
    ("posix/Europe/Amsterdam", r"the posix/ copies .* machine's zone files; use Europe/Amsterdam"),
    ("right/Europe/Amsterdam", r"the right/ copies .* machine's zone files; use Europe/Amsterdam"),
    ("right/UTC", r"the right/ copies .*; use UTC"),
    ("posix/Mars/Olympus_Mons", r"the posix/ copies .*; use an IANA zone such as Europe/Amsterdam"),
]


@pytest.mark.parametrize(("zone", "why"), MACHINE_ZONES, ids=[zone for zone, _ in MACHINE_ZONES])
def test_machine_dependent_zones_are_refused_saying_why(zone: str, why: str) -> None:
    message = rf"unknown time zone '{zone}': {why}"
    with pytest.raises(InvalidScheduleError, match=message):
        validate_zone(zone)
    with pytest.raises(InvalidScheduleError, match=message):
        ScheduleRule.cron("0 0 6 * * *", zone=zone)
    rule = {"cron": "0 0 6 * * *", "zone": zone, "misfire": "COALESCE"}
    with pytest.raises(InvalidCommitError, match=rf"wow\.ScheduleSet\): rule\.zone: {message}"):
        Commit.parse(json.dumps(commit_with(schedule_set(rule=rule))))


def test_zones_are_the_tzdata_package_list_not_the_machines() -> None:
    listed = (resources.files("tzdata") / "zones").read_text(encoding="utf-8").split()
    assert "Europe/Amsterdam" in listed
    assert "Factory" in listed  # in tzdata's list, and still refused: it is not a place
    for zone in listed:
        if zone != "Factory":
            assert validate_zone(zone) == zone
    for zone in ("EST5EDT", "Etc/GMT+5", "America/Argentina/Buenos_Aires", "GMT", "UTC"):
        rule = ScheduleRule.cron("0 0 6 * * *", zone=zone)
        assert ScheduleRule.model_validate_json(rule.model_dump_json()) == rule


def test_at_needs_an_aware_instant() -> None:
    with pytest.raises(ValueError, match=r"timezone-aware instant, got naive 2025-01-01T08:00:00"):
        ScheduleRule.at(datetime(2025, 1, 1, 8, 0))


@pytest.mark.parametrize("delay", [timedelta(0), timedelta(seconds=-1), timedelta(days=-3)])
def test_after_needs_a_positive_duration(delay: timedelta) -> None:
    with pytest.raises(ValueError, match=r"ScheduleRule\.after needs a positive duration"):
        ScheduleRule.after(delay)


@pytest.mark.parametrize(
    "build",
    [
        lambda: ScheduleRule.at(datetime(2025, 1, 1)),
        lambda: ScheduleRule.after(timedelta(0)),
        lambda: ScheduleRule.cron("0 0 6 * *"),
    ],
    ids=["at", "after", "cron"],
)
def test_rule_constructors_raise_invalid_schedule_error(build: Any) -> None:
    with pytest.raises(InvalidScheduleError):
        build()


@pytest.mark.parametrize(
    "rule",
    [{}, {"at": "2025-01-01T00:00:00Z", "after": "PT1M"}, {"zone": "UTC"}],
)
def test_rule_is_exactly_one_kind(rule: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"exactly one of 'at', 'after' or 'cron'"):
        ScheduleRule.model_validate(rule)


@pytest.mark.parametrize(
    "expression", ["0 0 0 30 2 *", "0 0 0 31 6 *", "0 0 0 31W 2 *", "0 0 0 L-30 2 *"]
)
def test_cron_that_no_time_ever_matches_is_refused_by_the_constructor(expression: str) -> None:
    """Issue #38: `ScheduleRule.cron` refuses, naming the expression and why; the model still
    validates it, since the inputs of timers started before this check are read with it."""
    with pytest.raises(InvalidScheduleError) as caught:
        ScheduleRule.cron(expression, zone="America/New_York")
    assert str(caught.value).startswith(f"cron {expression!r} never fires: no time ever matches")
    stored = ScheduleRule.model_validate({"cron": expression})
    assert stored.first_due(datetime(2026, 12, 1, tzinfo=UTC)) is None


@pytest.mark.parametrize("expression", ["0 0 6 * *", "0 0 25 * * *", "", "every day"])
def test_cron_that_does_not_parse(expression: str) -> None:
    with pytest.raises(ValueError) as caught:
        ScheduleRule.cron(expression)
    assert "cron" in str(caught.value)  # the field that was wrong
    with pytest.raises(InvalidCommitError, match=r"wow\.ScheduleSet\): rule\.cron: "):
        Commit.parse(commit_with(schedule_set(rule={"cron": expression})))


@pytest.mark.parametrize(
    ("body", "kind"),
    [([1, 2], "list"), ("text", "str"), (3, "int"), (2.5, "float"), (None, "NoneType")],
)
def test_command_body_must_be_an_object(body: Any, kind: str) -> None:
    with pytest.raises(ValueError, match=rf"a command body must be a JSON object, got {kind}"):
        ScheduledCommand(type="eshop.order.CancelOrder", body=body)


def test_command_body_size_limit() -> None:
    overhead = len('{"x":""}')
    largest = {"x": "a" * (MAX_COMMAND_BODY_BYTES - overhead)}
    assert ScheduledCommand(type="a.B", body=largest).body == largest
    with pytest.raises(ValueError, match=r"262145 bytes as JSON, more than the 262144 bytes"):
        ScheduledCommand(type="a.B", body={"x": "a" * (MAX_COMMAND_BODY_BYTES - overhead + 1)})
    # Counted in UTF-8 bytes, not characters.
    with pytest.raises(ValueError, match=r"more than the 262144 bytes \(256 KiB\)"):
        ScheduledCommand(type="a.B", body={"x": "é" * (MAX_COMMAND_BODY_BYTES // 2)})


def test_command_body_in_commit() -> None:
    event = schedule_set(command={"type": "a.B", "body": ["not", "an", "object"]})
    with pytest.raises(
        InvalidCommitError, match=r"command\.body: a command body must be a JSON object"
    ):
        Commit.parse(commit_with(event))


@pytest.mark.parametrize("type_", ["", "1abc", "a b", "a/b"])
def test_command_type(type_: str) -> None:
    with pytest.raises(ValueError, match="type"):
        ScheduledCommand(type=type_)


def test_unknown_system_event() -> None:
    event = {"id": "e-5", "name": "wow.ScheduleFoo", "body": {}}
    with pytest.raises(
        InvalidCommitError,
        match=r"commit 'commit-7', event 0 \('e-5'\): unknown system event 'wow\.ScheduleFoo'; "
        r"known: wow\.AggregateDeleted, wow\.ScheduleCancelled, wow\.ScheduleSet",
    ):
        Commit.parse(commit_with(event))
    # Through plain pydantic the same message arrives wrapped in a ValidationError.
    with pytest.raises(ValidationError, match=r"unknown system event 'wow\.ScheduleFoo'"):
        Commit.model_validate(commit_with(event))


@pytest.mark.parametrize(
    ("event", "message"),
    [
        (
            {
                "id": "e-1",
                "name": "wow.ScheduleSet",
                "body": {"rule": {"after": "PT1M"}, "command": {"type": "a.B"}},
            },
            r"event 0 \('e-1', wow\.ScheduleSet\): key: Field required",
        ),
        (
            schedule_set(rule={"after": "PT0S"}),
            r"rule\.after: ScheduleRule\.after needs a positive",
        ),
        (schedule_set(rule={"at": "2025-01-01T00:00:00"}), r"rule\.at: .*timezone-aware"),
        (schedule_set(rule={"every": "PT1M"}), r"rule\.every: Extra inputs are not permitted"),
        (schedule_set(rule={"after": "soon"}), r"rule\.after: "),
        (schedule_set(rule="PT1M"), r"rule: "),
        (schedule_set(key="a/b"), r"key: invalid key 'a/b'"),
        (schedule_set(command={"body": {}}), r"command\.type: Field required"),
        (
            schedule_set(target={"contextName": "x", "aggregateName": "y", "tenantId": "t"}),
            r"target\.aggregateId: Field required",
        ),
        ({"id": "e-1", "name": "wow.ScheduleCancelled", "body": {}}, r"key: Field required"),
        (
            {"id": "e-1", "name": "wow.ScheduleCancelled", "body": {"key": ""}},
            r"key: invalid key ''",
        ),
        ({"id": "e-1", "name": "wow.ScheduleSet", "body": ["x"]}, r"body\.0\.body: "),
    ],
)
def test_malformed_schedule_events(event: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidCommitError, match=message):
        Commit.parse(commit_with(event))


def test_malformed_event_is_named_by_position() -> None:
    good = {"id": "e-0", "name": "eshop.order.OrderCreated", "body": {}}
    bad = {"id": "e-1", "name": "wow.ScheduleCancelled", "body": {}}
    with pytest.raises(InvalidCommitError, match=r"commit 'commit-7', event 1 \('e-1'"):
        Commit.parse(commit_with(good, bad))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"version": 0}, r"version"),
        ({"createTime": -1}, r"createTime"),
        ({"aggregateId": ""}, r"aggregateId"),
        ({"header": {"n": 1}}, r"header\.n"),
    ],
)
def test_malformed_commit_envelope(change: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidCommitError, match=rf"^invalid commit: .*{message}"):
        Commit.parse({**DESIGN_COMMIT, **change})


@pytest.mark.parametrize("data", ["", "{", "[]", b"not json", '{"id": "x"}'])
def test_commit_that_is_not_a_commit(data: str | bytes) -> None:
    with pytest.raises(InvalidCommitError, match=r"^invalid commit: "):
        Commit.parse(data)


def test_the_docs_commit_json_is_what_the_model_reads() -> None:
    section = (Path(__file__).parents[2] / "docs" / "commits.md").read_text(encoding="utf-8")
    example, error = re.findall(r"```json\n(.*?)```", section, re.S)
    commit = Commit.parse(example)
    assert [event.name for event, _ in commit.schedule_events()] == [
        "wow.ScheduleSet",
        "wow.ScheduleSet",
        "wow.ScheduleCancelled",
        "wow.AggregateDeleted",
    ]
    kinds = [
        event.rule.kind for _, event in commit.schedule_events() if isinstance(event, ScheduleSet)
    ]
    assert kinds == ["after", "cron"]
    rules = re.findall(r'`(\{"(?:at|after|cron)".*?\})`', section)
    assert [ScheduleRule.model_validate_json(rule).kind for rule in rules] == [
        "at",
        "after",
        "cron",
    ]
    assert set(json.loads(error)) == {"error", "message"}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("createTime", False),
        ("createTime", "1796000000000"),
        ("createTime", 1.796e12),
        ("version", "3"),
        ("version", 3.0),
        ("version", True),
    ],
)
def test_a_commit_takes_integers_as_integers_only(field: str, value: Any) -> None:
    """A boolean is not a timestamp, nor a string a version: the wire model is strict."""
    data = commit_with()
    data[field] = value
    with pytest.raises(InvalidCommitError, match=rf"{field}: Input should be a valid integer"):
        Commit.parse(json.dumps(data))
    with pytest.raises(InvalidCommitError, match=rf"{field}: Input should be a valid integer"):
        Commit.parse(data)


# --- strict at the edge: every field, every missing field at once --------------------------


def test_a_commit_missing_several_fields_names_them_all_at_once() -> None:
    data = {"body": [{"name": "eshop.order.OrderCreated"}]}
    with pytest.raises(InvalidCommitError) as raised:
        Commit.parse(data)
    assert str(raised.value) == (
        "invalid commit: missing required fields: id, contextName, aggregateName, tenantId, "
        "aggregateId, version, createTime, body.0.id"
    )
    event = schedule_set()
    del event["body"]["key"], event["body"]["command"]
    with pytest.raises(InvalidCommitError, match=r"missing required fields: key, command$"):
        Commit.parse(commit_with(event))


def _at(data: Any, path: tuple[str | int, ...]) -> Any:
    for step in path:
        data = data[step]
    return data


_WIRE_FIELDS: list[tuple[tuple[str | int, ...], list[Any]]] = [
    (("id",), [7, True, None, ["c"]]),
    (("contextName",), [7, False, None]),
    (("aggregateName",), [7, True]),
    (("tenantId",), [1, True, None]),
    (("aggregateId",), [42, 4.2, True]),
    (("ownerId",), [0, False]),
    (("spaceId",), [0, True]),
    (("version",), [True, "3", 3.0, 3.5, None]),
    (("createTime",), [False, True, "1764470000000", 1764470000000.0, "2025-11-30T02:33:20Z"]),
    (("requestId",), [9, True]),
    (("commandId",), [9, False]),
    (("header",), [[], "trace", True]),
    (("header", "trace_id"), [1, True, None]),
    (("body",), [{}, "e-1", True]),
    (("body", 0, "id"), [1, True, None]),
    (("body", 0, "name"), [1, True, None]),
    (("body", 0, "body"), [[], "x", True]),
    (("body", 0, "body", "key"), [1, True, None]),
    (("body", 0, "body", "rule"), ["PT30M", True, []]),
    (("body", 0, "body", "rule", "after"), [1800, 1800.0, True, "1800", "30 minutes", "P1M"]),
    (("body", 0, "body", "command"), ["eshop.order.CancelOrder", True]),
    (("body", 0, "body", "command", "type"), [1, True]),
    (("body", 0, "body", "command", "body"), ["x", [], True, 0]),
    (("body", 0, "body", "target"), ["42", True, 42]),
    (("body", 1, "body", "key"), [1, False]),
]
"""Each field a commit carries, with values of the wrong JSON type (or a lax reading of one:
a number as text, a boolean as 0 or 1, a whole float): every one is refused."""


@pytest.mark.parametrize(
    ("path", "value"),
    [(path, value) for path, values in _WIRE_FIELDS for value in values],
    ids=lambda item: ".".join(map(str, item)) if isinstance(item, tuple) else repr(item),
)
def test_the_wire_model_is_strict_a_value_of_another_type_is_refused(
    path: tuple[str | int, ...], value: Any
) -> None:
    data = copy.deepcopy(DESIGN_COMMIT)
    _at(data, path[:-1])[path[-1]] = value
    for sent in (data, json.dumps(data)):
        with pytest.raises(InvalidCommitError) as raised:
            Commit.parse(sent)
        assert f"{path[-1]}:" in str(raised.value), str(raised.value)  # it names the field


@pytest.mark.parametrize(
    ("rule", "said"),
    [
        ({"at": True}, "ScheduleRule.at is an ISO-8601 instant such as 2026-12-01T10:30:00Z, "
         "got True"),
        ({"at": 1764470000}, "got 1764470000"),
        ({"at": "2026-12-01"}, "got '2026-12-01'"),
        ({"cron": 5}, "rule.cron: Input should be a valid string"),
        ({"cron": "0 0 6 * * *", "zone": 0}, "rule.zone: Input should be a valid string"),
        ({"cron": "0 0 6 * * *", "misfire": True}, "rule.misfire: Input should be 'COALESCE'"),
        ({"cron": "0 0 6 * * *", "misfire": "coalesce"}, "Input should be 'COALESCE'"),
    ],
)
def test_a_rule_takes_only_its_documented_forms(rule: dict[str, Any], said: str) -> None:
    with pytest.raises(InvalidCommitError) as raised:
        Commit.parse(commit_with(schedule_set(rule=rule)))
    assert said in str(raised.value)


_TAKEN = (
    "an ISO-8601 duration of weeks, days, hours, minutes and seconds, such as PT30M, PT36H, "
    "P1DT12H or PT0.5S (no months or years: they have no fixed length)"
)


@pytest.mark.parametrize(
    ("after", "said"),
    [
        ("-PT1M", "ScheduleRule.after needs a positive duration such as PT30M, got '-PT1M'"),
        ("-P1D", "ScheduleRule.after needs a positive duration such as PT30M, got '-P1D'"),
        ("PT0S", "ScheduleRule.after needs a positive duration such as PT30M, got 'PT0S'"),
        (
            "PT0.0000001S",
            "ScheduleRule.after needs a positive duration such as PT30M, got 'PT0.0000001S' "
            "(less than the microsecond kept)",
        ),
        ("30 minutes", f"ScheduleRule.after is {_TAKEN}, got '30 minutes'"),
        ("P1M", f"ScheduleRule.after is {_TAKEN}, got 'P1M'"),
        ("PT30M ", f"ScheduleRule.after is {_TAKEN}, got 'PT30M '"),
        (1800, f"ScheduleRule.after is {_TAKEN}, got 1800"),
        (
            "PT99999999999H",
            "ScheduleRule.after is at most 100 years (PT876600H), got 'PT99999999999H'",
        ),
    ],
)
def test_a_duration_error_says_what_was_given_and_what_is_taken(after: Any, said: str) -> None:
    with pytest.raises(InvalidCommitError) as raised:
        Commit.parse(commit_with(schedule_set(rule={"after": after})))
    assert str(raised.value).endswith(f"rule.after: {said}"), str(raised.value)


@pytest.mark.parametrize(
    ("text", "delay"),
    [
        ("pt30m", timedelta(minutes=30)),  # Java's Duration.parse takes any case
        ("+PT30M", timedelta(minutes=30)),
        ("P1W2D", timedelta(days=9)),
        ("P1DT12H", timedelta(hours=36)),
        ("PT1H30M0.25S", timedelta(hours=1, minutes=30, seconds=0.25)),
        ("PT876600H", timedelta(days=36_525)),
    ],
)
def test_durations_as_java_parses_them_are_taken(text: str, delay: timedelta) -> None:
    assert ScheduleRule.model_validate({"after": text}).after_delay == delay
