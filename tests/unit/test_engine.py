"""The shared engine (`wow_temporal.engine`): the one missed-slot algorithm, checked against a
brute-force walk of `CronExpression.next`, and what the package re-exports."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from unittest.mock import patch
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wow_temporal import engine
from wow_temporal.engine import Latest, NextAfter, latest_due, parsed_cron
from wow_temporal.engine import frozen as engine_frozen
from wow_temporal.engine import slots as engine_slots
from wow_temporal.engine import text as engine_text
from wow_temporal.jobs import core as job_core
from wow_temporal.timers import core as timer_core

T0 = datetime(2026, 1, 5, tzinfo=UTC)

EXPRESSIONS = (
    "* * * * * *",
    "*/7 * * * * *",
    "0 */15 * * * *",
    "0 30 9 * * MON-FRI",
    "0 0 0 1 1 *",
    "0 0 12 29 2 *",
    "* * 0-11 * * *",
    "0-9 0 */6 * * *",
    "0 0 0 L * *",
    "0 15,45 2 * * *",
    "0 0 0 1W * *",
)
ZONES = ("UTC", "Europe/Paris", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata")


def next_after(expression: str, zone: str) -> NextAfter:
    """The rule's due times in UTC, as both cores ask for them."""
    cron, tz = parsed_cron(expression), ZoneInfo(zone)

    def following(instant: datetime) -> datetime | None:
        found = cron.next(instant.astimezone(tz))
        return None if found is None else found.astimezone(UTC)

    return following


class Counting:
    """A rule that counts how often it is asked."""

    def __init__(self, rule: NextAfter) -> None:
        self.rule, self.calls = rule, 0

    def __call__(self, instant: datetime) -> datetime | None:
        self.calls += 1
        return self.rule(instant)


@settings(max_examples=100, deadline=None)
@given(
    expression=st.sampled_from(EXPRESSIONS),
    zone=st.sampled_from(ZONES),
    start=st.datetimes(datetime(2020, 1, 1), datetime(2035, 12, 31)),
    missed=st.integers(0, 150),
    fraction=st.floats(0, 0.999),
    cap=st.integers(0, 500),
)
def test_the_latest_due_and_its_skipped_count_match_a_brute_force_walk(
    expression: str, zone: str, start: datetime, missed: int, fraction: float, cap: int
) -> None:
    """Whatever the rule, zone, outage and cap: the latest due time by now (never one after
    now), `skipped` the number of due times before it up to the cap."""
    rule = next_after(expression, zone)
    first = rule(start.replace(tzinfo=UTC))
    assert first is not None
    dues = [first]
    while len(dues) < missed + 2:  # the brute force: every due time, one `next` at a time
        following = rule(dues[-1])
        assert following is not None
        dues.append(following)
    now = dues[missed] + (dues[missed + 1] - dues[missed]) * fraction
    now = min(now, dues[missed + 1] - timedelta(microseconds=1))
    with patch.object(engine_slots, "MAX_MISSED_COUNTED", cap):
        found = latest_due(rule, first, now)
    assert found == Latest(due=dues[missed], skipped=min(missed, cap))


@settings(max_examples=60, deadline=None)
@given(
    expression=st.sampled_from(EXPRESSIONS),
    zone=st.sampled_from(ZONES),
    years=st.integers(1, 399),
    seconds=st.integers(0, 365 * 86_400),
)
def test_past_the_cap_the_latest_is_found_in_logarithmic_calls(
    expression: str, zone: str, years: int, seconds: int
) -> None:
    """Past the cap the latest due time is probed back from now and bisected: a few dozen
    calls of `next` for centuries of missed due times, however dense the rule."""
    rule = Counting(next_after(expression, zone))
    first = rule(T0)
    assert first is not None
    now = first + timedelta(days=365 * years, seconds=seconds)
    with patch.object(engine_slots, "MAX_MISSED_COUNTED", 0):
        rule.calls = 0
        found = latest_due(rule, first, now)
    assert found.due <= now
    following = rule.rule(found.due)
    assert following is None or following > now, "nothing due by now after it"
    assert found.due >= first and found.skipped == 0
    assert rule.calls <= 2 * int((now - first).total_seconds()).bit_length() + 4


def test_a_dense_morning_seen_at_midnight_is_not_walked() -> None:
    """Every second of the morning, missed until just before midnight: the latest (11:59:59)
    in a few dozen calls, not the 43,200 a forward walk from the window's start would take."""
    rule = Counting(next_after("* * 0-11 * * *", "UTC"))
    first = T0 + timedelta(seconds=1)
    now = T0 + timedelta(hours=23, minutes=59)
    with patch.object(engine_slots, "MAX_MISSED_COUNTED", 3):
        found = latest_due(rule, first, now)
    assert found == Latest(due=T0 + timedelta(hours=11, minutes=59, seconds=59), skipped=3)
    assert rule.calls < 60


def test_within_the_cap_every_skipped_due_time_is_counted_once() -> None:
    """A one-second rule, ten minutes missed: 600 due times, the last runs, 599 skipped."""
    rule = Counting(next_after("* * * * * *", "UTC"))
    found = latest_due(rule, T0 + timedelta(seconds=1), T0 + timedelta(minutes=10, microseconds=5))
    assert found == Latest(due=T0 + timedelta(minutes=10), skipped=599)
    assert rule.calls == 600


def test_a_first_due_time_with_nothing_after_it_is_the_latest() -> None:
    """A rule with no next due time (or none by now): the first is the latest, none skipped."""
    assert latest_due(lambda _: None, T0, T0 + timedelta(days=1)) == Latest(due=T0, skipped=0)
    rule = next_after("0 0 0 1 1 *", "UTC")
    assert latest_due(rule, T0, T0 + timedelta(days=300)) == Latest(due=T0, skipped=0)


@pytest.mark.parametrize("name", engine.__all__)
def test_the_package_exports_its_modules_names(name: str) -> None:
    """`wow_temporal.engine` re-exports what its modules define (imported from it before it
    was a package)."""
    homes = (engine_frozen, engine_slots, engine_text)
    assert any(getattr(home, name, None) is getattr(engine, name) for home in homes)


def test_both_cores_use_the_one_cap() -> None:
    """No core keeps a cap of its own beside the engine's (they were 100,000 and 10,000)."""
    assert not hasattr(timer_core, "MAX_CATCH_UP_COUNT")
    assert not hasattr(job_core, "MAX_MISSED_COUNTED")
    assert timer_core.latest_due is job_core.latest_due is latest_due
