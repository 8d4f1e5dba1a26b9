"""wow_temporal.cron against answers of Spring's own CronExpression (Java, run once by hand):
Quartz day fields step for step, the +1 ns start, transitions off the hour, Java parsing."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from wow_temporal.cron import CronExpression


def nxt(expr: str, zone: str, after: str) -> str | None:
    """Our next() as ISO text with the offset, from an ISO ``after`` taken in ``zone``."""
    start = datetime.fromisoformat(after).astimezone(ZoneInfo(zone))
    result = CronExpression.parse(expr).next(start)
    return None if result is None else result.isoformat()


# (expression, zone, after, Spring's answer)
SPRING: list[tuple[str, str, str, str | None]] = [
    # (a) nW on a Sunday that is the month's last day: Spring moves to Monday the 1st and
    # does not accept it there, so that month has no fire (Spring's quartzWeekdayNearestTo31)
    ("0 0 0 31W * ?", "UTC", "2020-03-31T00:00+00:00", "2020-07-31T00:00:00+00:00"),
    ("0 0 0 28W * *", "UTC", "2021-02-01T00:00+00:00", "2021-03-29T00:00:00+00:00"),
    # nW, n >= 29: standing on Friday the (n-1)th Spring accepts it even without a day n
    ("0 0 12 31W * *", "UTC", "2010-04-30T06:00+00:00", "2010-04-30T12:00:00+00:00"),
    ("0 0 12 31W * *", "UTC", "2010-04-29T06:00+00:00", "2010-05-31T12:00:00+00:00"),
    ("43 * 12 L-7,31W APR 5L", "Asia/Kolkata", "2004-10-06T15:26:22+05:30",
     "2010-04-30T12:00:43+05:30"),
    # (b) 1W from Sunday the 2nd of a month starting on Saturday: on to the next month
    ("0 0 0 1W * *", "UTC", "2020-02-02T16:46:11+00:00", "2020-03-02T00:00:00+00:00"),
    ("0 0 0 1W * *", "UTC", "2020-02-01T16:46:11+00:00", "2020-02-03T00:00:00+00:00"),
    # (c) L-n with n >= 28 counts back into the previous month
    ("0 0 0 L-28 * *", "America/Sao_Paulo", "2038-01-03T00:00-03:00",
     "2038-01-31T00:00:00-03:00"),
    ("0 0 0 L-28 * *", "UTC", "2038-01-03T00:00+00:00", "2038-01-31T00:00:00+00:00"),
    ("0 0 0 L-31 * *", "UTC", "2021-03-01T00:00+00:00", "2021-03-30T00:00:00+00:00"),
    ("0 0 0 L-40 * *", "UTC", "2021-03-01T00:00+00:00", "2021-03-21T00:00:00+00:00"),
    # (d) fields checked on after + 1 ns, the whole second only last: near offset changes
    # off the hour the minute roll-forward adds an hour to the instant
    ("0 45 * * * *", "Pacific/Chatham", "2021-09-26T01:59:59.5+12:45",
     "2021-09-26T04:45:00+13:45"),
    ("0 38/12,16-49/25,*/40 * * * *", "Australia/Lord_Howe", "1995-10-29T01:59:59+10:30",
     "1995-10-29T03:00:00+11:00"),
    # a backward change at 00:01 (St. John's until 2011): the day is not skipped wholesale
    ("* * */18,14-19,2 * * ?", "America/St_Johns", "1990-10-27T23:30:00-02:30",
     "1990-10-28T00:00:00-03:30"),
    ("0 5 23 ? * *", "America/St_Johns", "2001-10-28T00:00:59.429739-02:30",
     "2001-10-28T23:05:00-03:30"),
    # (e) Cairo 2027-04-30T00:00 does not exist (DST starts at midnight): 2029, like Spring
    ("0 0 0 30W 2,4 *", "Africa/Cairo", "2027-01-01T00:00+02:00", "2029-04-30T00:00:00+03:00"),
    ("0 0 0 30W 2,4 *", "Africa/Cairo", "2027-04-29T12:00+02:00", "2029-04-30T00:00:00+03:00"),
    # (e') a start in the second pass of an overlap (fold=1): the search still skips a wall
    # time in a gap later on, as Spring does (issue #38: the gap time 02:19:56 was answered;
    # Cairo 2014-08-01T00:00 does not exist, so that month's 1W is gone)
    ("56 19-48/31 2-21/11 * Apr ?", "America/Los_Angeles", "2000-10-29T01:00-08:00",
     "2001-04-01T13:19:56-07:00"),
    ("0 0 0 1W 8-8 *", "Africa/Cairo", "2014-06-26T23:15:46+02:00",
     "2015-08-03T00:00:00+02:00"),
    # a day-of-week no day-of-month allows, but Samoa skipped 2011-12-30: Spring finds one
    ("19,51/40 * */5 LW * 6/5", "Pacific/Apia", "2009-06-19T02:33:52-11:00",
     "2011-12-31T00:00:19+14:00"),
    # Java's int loop for a step past 2^31 - 1 wraps and sets other bits
    ("5/2147483647 * * * * *", "UTC", "2021-03-01T00:00:10+00:00", "2021-03-01T00:01:00+00:00"),
]


@pytest.mark.parametrize(("expr", "zone", "after", "expected"), SPRING)
def test_spring_answers(expr: str, zone: str, after: str, expected: str | None) -> None:
    assert nxt(expr, zone, after) == expected


def test_l_minus_n_landing_back_moves_on() -> None:
    # Spring answers 2038-01-31T00:00, not after `after`; we keep the next real match
    assert nxt("0 0 0 L-28 * *", "America/Sao_Paulo", "2038-01-31T00:00-03:00") == (
        "2038-03-03T00:00:00-03:00")
    got = CronExpression.parse("0 0 * L-30 * *").next_n(datetime(2021, 1, 1, tzinfo=UTC), 40)
    assert all(a < b for a, b in itertools.pairwise(got))


@pytest.mark.parametrize("zone", ["Africa/Cairo", "America/Santiago", "America/Havana",
                                  "Asia/Beirut", "America/Sao_Paulo"])
@pytest.mark.parametrize("expr", ["0 0 0 30W 2,4 *", "0 0 0 * * *", "0 0 0 L * *",
                                  "0 0 0 1W * *", "0 30 0 * * FRI"])
def test_never_a_wall_time_in_a_gap(zone: str, expr: str) -> None:
    tz = ZoneInfo(zone)
    e = CronExpression.parse(expr)
    current: datetime | None = datetime(2010, 1, 1, tzinfo=tz)
    for _ in range(150):
        assert current is not None
        current = e.next(current)
        if current is None:
            break
        back = current.astimezone(UTC).astimezone(tz)
        assert back.replace(tzinfo=None) == current.replace(tzinfo=None), current


# ------------------------------------------------------------------------------ (f) parsing


@pytest.mark.parametrize(
    ("text", "valid"),
    [
        ("*/2147483648 * * * * *", False),  # past Integer.MAX_VALUE
        ("*/2147483647 * * * * *", True),
        ("0 0 0 L-2147483649 * *", False),
        ("\u0663 * * * * *", True),  # Arabic-Indic three
        ("\uff15 * * * * *", True),  # fullwidth five
        ("\U0001d7d1 * * * * *", False),  # outside the BMP: Java sees two surrogates
        ("\u00b2 * * * * *", False),  # superscript two is no decimal digit
        ("+5 * * * * *", True),
        ("@DA\u0130LY", True),  # equalsIgnoreCase, char by char
        ("@da\u0131ly", True),
        ("@WEE\u212aLY", True),
        ("@daily\u017f", False),
        ("0 0 0 L-+3 * *", False),  # Spring parses "-+3", which is no number
        ("0 0 0 L--3 * *", False),
        ("0 0 0 ?,L * *", True),  # '?' as one part of a Quartz list
        ("0 0 0 * * ?,5L", True),
    ],
)
def test_java_parsing(text: str, valid: bool) -> None:
    assert CronExpression.is_valid(text) is valid


def test_unicode_digits_and_macros_evaluate() -> None:
    assert nxt("\u0663 * * * * *", "UTC", "2021-03-01T00:00:10+00:00") == (
        "2021-03-01T00:01:03+00:00")
    assert nxt("@DA\u0130LY", "UTC", "2021-03-01T00:00:10+00:00") == "2021-03-02T00:00:00+00:00"
