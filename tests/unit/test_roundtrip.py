"""Whatever the edge accepts, the workflow can always read (issue #29): a commit the wire model
accepts becomes timer inputs and changes that round-trip through the project's data converter
(the pydantic one Temporal uses) unchanged, whatever hostile values it was built from; so does
a reschedule body the control API accepts, as the job workflow's update argument and as the
state it carries across continue-as-new."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from temporalio.contrib.pydantic import pydantic_data_converter as DATA_CONVERTER

from wow_temporal.api.jobs import RescheduleRequest
from wow_temporal.jobs import core as job_core
from wow_temporal.jobs.client import _payload
from wow_temporal.jobs.core import JobRule
from wow_temporal.jobs.workflow import JobInput
from wow_temporal.model import (
    LATEST_INSTANT,
    LONGEST_DELAY,
    Commit,
    InvalidCommitError,
    iso_duration,
)
from wow_temporal.timers import core
from wow_temporal.timers.changes import KeyChange, changes_of
from wow_temporal.timers.core import TimerChange
from wow_temporal.timers.deletion import DeletionRecord
from wow_temporal.timers.workflow import TimerInput

DAY_MS = 86_400_000
ZONES = [UTC, timezone(timedelta(hours=14)), timezone(-timedelta(hours=12))]


def mostly(valid: st.SearchStrategy[Any], *junk: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """`valid` four times in five, else one of `junk`: most commits are accepted, so what is
    accepted is checked, and hostile values still come."""
    return st.integers(0, 4).flatmap(lambda n: valid if n else st.one_of(*junk))


durations = mostly(
    st.timedeltas(min_value=timedelta(microseconds=1), max_value=LONGEST_DELAY).map(iso_duration),
    st.timedeltas(min_value=LONGEST_DELAY, max_value=timedelta(days=999_999)).map(iso_duration),
    st.integers(),
    st.integers(min_value=10**9, max_value=10**13),  # seconds for centuries
    st.floats(allow_nan=True),
    st.floats(min_value=1e9, max_value=1e13),
    st.booleans(),
    st.text(max_size=12),
    st.sampled_from(["PT11797176H", "-PT1M", "P1D", "PT0S", "P100Y", "PT0.000001S"]),
)
instants = mostly(
    st.datetimes(
        min_value=datetime(1960, 1, 1),
        max_value=datetime(9999, 12, 30),
        timezones=st.sampled_from(ZONES),
    ).map(lambda d: d.isoformat()),
    st.integers(),
    st.text(max_size=12),
)
rules = st.one_of(
    durations.map(lambda d: {"after": d}),
    instants.map(lambda i: {"at": i}),
    st.sampled_from(
        [
            {"cron": "0 0 6 * * *", "zone": "Europe/Amsterdam"},
            {"cron": "*/5 * * * * *"},
            {"cron": "0 0 0 30 2 *"},  # never matches: never due
            {"cron": "0 30 2 * * SUN", "zone": "America/New_York", "misfire": "CATCH_UP"},
        ]
    ),
)
create_times = mostly(
    st.integers(min_value=10**12, max_value=4 * 10**12),
    st.integers(min_value=0, max_value=int(LATEST_INSTANT.timestamp() * 1000)),
    st.integers(),
    st.booleans(),
    st.floats(),
    st.text(max_size=14),
)
versions = mostly(st.integers(1, 10**12), st.integers(), st.text(max_size=3), st.floats())
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=12,
)


def _nested(depth: int) -> dict[str, Any]:
    body: dict[str, Any] = {}
    for _ in range(depth):
        body = {"a": [body]}
    return body


command_bodies = mostly(
    st.dictionaries(st.text(max_size=5), json_values, max_size=4),
    st.integers(20, 400).map(_nested),  # deep enough that the converter cannot read it back
    st.just({"x": float("nan")}),
)
ids = mostly(st.text(min_size=1, max_size=30), st.text(max_size=3000))


def commit_of(
    rule: dict[str, Any],
    created: Any,
    version: Any,
    body: Any = None,
    commit_id: str = "c-1",
) -> dict[str, Any]:
    return {
        "id": commit_id,
        "contextName": "eshop-order",
        "aggregateName": "order",
        "tenantId": "t1",
        "aggregateId": "42",
        "version": version,
        "createTime": created,
        "body": [
            {
                "id": "e-1",
                "name": "wow.ScheduleSet",
                "body": {
                    "key": "grace",
                    "rule": rule,
                    "command": {
                        "type": "eshop.order.CancelOrder",
                        "body": {"n": 1} if body is None else body,
                    },
                },
            },
            {"id": "e-2", "name": "wow.ScheduleCancelled", "body": {"key": "other"}},
            {"id": "e-3", "name": "wow.AggregateDeleted", "body": {}},
        ],
    }


def round_trip(value: Any, kind: type[Any]) -> Any:
    async def go() -> Any:
        payloads = await DATA_CONVERTER.encode([value])
        (decoded,) = await DATA_CONVERTER.decode(payloads, [kind])
        return decoded

    return asyncio.run(go())


@settings(max_examples=300, deadline=None)
@given(rules, create_times, versions, command_bodies, ids)
def test_whatever_a_commit_accepts_round_trips_into_the_workflow(
    rule: dict[str, Any], created: Any, version: Any, body: Any, commit_id: str
) -> None:
    try:
        commit = Commit.parse(commit_of(rule, created, version, body, commit_id))
    except InvalidCommitError:
        event("refused")
        return  # refused at the edge, with a message: nothing reaches a workflow
    event(f"accepted: {next(iter(rule))}")
    for item in changes_of(commit):
        change = item.change
        assert round_trip(change, TimerChange) == change  # the `apply` signal's payload
        if isinstance(item, KeyChange) and change.kind == "set":
            timer = TimerInput(state=core.initial(change))
            assert round_trip(timer, TimerInput) == timer  # the start input
            again = round_trip(commit, Commit)
            assert again == commit
    record = DeletionRecord(aggregate=commit.aggregate, version=commit.version)
    assert round_trip(record, DeletionRecord) == record


def test_the_1346_year_delay_given_in_seconds_is_refused_at_the_edge() -> None:
    for rule in ({"after": 42469833600}, {"after": "PT11797176H"}):
        try:
            Commit.parse(commit_of(rule, 1796000000000, 1))
        except InvalidCommitError as error:
            assert "rule.after" in str(error)
        else:
            raise AssertionError(f"{rule} was accepted")


def test_a_create_time_in_seconds_is_refused_saying_so() -> None:
    try:
        Commit.parse(commit_of({"after": "PT1M"}, 1796000000, 1))
    except InvalidCommitError as error:
        assert "reads as a time in seconds" in str(error)
        assert "send 1796000000000" in str(error)
    else:
        raise AssertionError("a createTime in seconds was accepted")


def test_the_longest_delay_from_the_latest_commit_still_has_a_due_time() -> None:
    latest_ms = int((LATEST_INSTANT - LONGEST_DELAY).timestamp() * 1000) // DAY_MS * DAY_MS
    commit = Commit.parse(commit_of({"after": "PT876600H"}, latest_ms, 1))
    (first, *_) = changes_of(commit)
    assert first.change.spec is not None and first.change.spec.first_due is not None


reschedule_bodies = st.fixed_dictionaries(
    {},
    optional={
        "expression": mostly(
            st.sampled_from(["0 0 6 * * *", "*/5 * * * * *", "@daily", "0 0 0 29 2 *"]),
            st.text(max_size=40),
            st.integers(),
            st.none(),
        ),
        "zone": mostly(
            st.sampled_from(["UTC", "Europe/Amsterdam", "Pacific/Kiritimati"]),
            st.text(max_size=40),
            st.sampled_from(["localtime", "posix/UTC", "Factory"]),
            st.none(),
        ),
        "misfire": mostly(
            st.sampled_from(["COALESCE", "CATCH_UP"]), st.text(max_size=10), st.booleans()
        ),
    },
).flatmap(lambda body: mostly(st.just(body), st.just({**body, "zon": "UTC"})))


@settings(max_examples=300, deadline=None)
@given(
    reschedule_bodies, st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2200, 1, 1))
)
def test_whatever_a_reschedule_accepts_round_trips_into_the_job_workflow(
    body: dict[str, Any], now: datetime
) -> None:
    try:
        request = RescheduleRequest.model_validate(body)
    except ValidationError:
        event("refused")
        return  # a 400 at the edge: nothing reaches a workflow
    event("accepted")
    change = request.change()
    sent = round_trip(_payload(change), dict)  # the reschedule update's argument, as sent
    assert job_core.read_change(sent) == change  # the workflow reads what the API accepted
    assert job_core.reschedule_refusal(change) is None  # the workflow's validator takes it
    state = job_core.initial("ctx", "nightly", JobRule(expression="0 0 3 * * *"))
    state = job_core.enable(state, now.replace(tzinfo=UTC))
    state = job_core.reschedule(state, change, now.replace(tzinfo=UTC))
    carried = JobInput(state=state)
    assert round_trip(carried, JobInput) == carried  # what continue-as-new carries
