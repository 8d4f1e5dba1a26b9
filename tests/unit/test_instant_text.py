"""The one time format (issue #38: times were printed four ways across CLI, demo and UI)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from wow_temporal.engine.text import Instant, instant_text, zoned_text

UTC_TEXT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
ZONED_TEXT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(Z|[+-]\d\d:\d\d)")
AMSTERDAM = ZoneInfo("Europe/Amsterdam")
instants = st.datetimes(
    min_value=datetime(1970, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
)


def test_an_instant_is_utc_to_the_millisecond() -> None:
    assert instant_text(datetime(2026, 12, 5, 6, tzinfo=UTC)) == "2026-12-05T06:00:00.000Z"
    assert instant_text(datetime(2026, 12, 5, 7, tzinfo=AMSTERDAM)) == "2026-12-05T06:00:00.000Z"
    at = datetime(2026, 12, 5, 6, 1, 2, 345_999, tzinfo=UTC)
    assert instant_text(at) == "2026-12-05T06:01:02.345Z"  # cut, not rounded


def test_a_zoned_instant_carries_its_zones_offset_at_that_instant() -> None:
    winter = datetime(2026, 12, 5, 6, tzinfo=UTC)
    summer = datetime(2026, 7, 5, 6, tzinfo=UTC)
    assert zoned_text(winter, AMSTERDAM) == "2026-12-05T07:00:00.000+01:00"
    assert zoned_text(summer, AMSTERDAM) == "2026-07-05T08:00:00.000+02:00"
    assert zoned_text(winter.astimezone(AMSTERDAM)) == "2026-12-05T07:00:00.000+01:00"
    assert zoned_text(winter) == "2026-12-05T06:00:00.000Z"  # UTC is Z, never +00:00
    assert zoned_text(winter, timezone(timedelta(hours=-5, minutes=-30))) == (
        "2026-12-05T00:30:00.000-05:30"
    )


@given(instants)
def test_the_text_reads_back_as_the_instant_cut_to_the_millisecond(at: datetime) -> None:
    text = instant_text(at)
    assert UTC_TEXT.fullmatch(text)
    back = datetime.fromisoformat(text)
    assert back == at.replace(microsecond=at.microsecond // 1000 * 1000)


@given(instants, st.sampled_from(["Europe/Amsterdam", "America/New_York", "Asia/Kolkata"]))
def test_a_zoned_text_is_the_same_instant(at: datetime, zone: str) -> None:
    text = zoned_text(at, ZoneInfo(zone))
    assert ZONED_TEXT.fullmatch(text)
    assert datetime.fromisoformat(text) == datetime.fromisoformat(instant_text(at))


class _Shown(BaseModel):
    at: Instant


def test_an_instant_field_is_written_so_in_json_and_kept_in_python() -> None:
    at = datetime(2026, 12, 5, 7, 0, 0, 500, tzinfo=AMSTERDAM)
    shown = _Shown(at=at)
    assert shown.model_dump()["at"] is at
    assert shown.model_dump(mode="json") == {"at": "2026-12-05T06:00:00.000Z"}
    assert shown.model_dump_json() == '{"at":"2026-12-05T06:00:00.000Z"}'
    assert _Shown.model_validate_json(shown.model_dump_json()).at == at.replace(microsecond=0)


def test_a_job_instance_answers_its_times_in_the_one_format() -> None:
    """Issue #38 (review): a job's `recent` ticks answered microseconds; every time of a job
    instance's JSON is `instant_text`'s, as a timer's are."""
    from wow_temporal.jobs.client import JobInfo
    from wow_temporal.jobs.core import TickRecord

    t = datetime(2026, 12, 5, 6, 0, 0, 123456, tzinfo=UTC)
    tick = TickRecord(slot=1, due=t, skipped=0, outcome="handled", at=t)
    shown = JobInfo(
        workflow_id="w", context="c", name="n", status="Enabled", next_due=[t], recent=[tick]
    ).model_dump(mode="json")
    assert shown["nextDue"] == ["2026-12-05T06:00:00.123Z"]
    assert (shown["recent"][0]["due"], shown["recent"][0]["at"]) == (
        "2026-12-05T06:00:00.123Z", "2026-12-05T06:00:00.123Z"
    )
