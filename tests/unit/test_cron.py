"""Tests for wow_temporal.cron: parsing, refusals, Spring's own test cases, DST behaviour."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from wow_temporal.cron import CronExpression, CronSyntaxError

UTC = UTC
AMS = ZoneInfo("Europe/Amsterdam")
NY = ZoneInfo("America/New_York")
SYD = ZoneInfo("Australia/Sydney")
KOL = ZoneInfo("Asia/Kolkata")
LHI = ZoneInfo("Australia/Lord_Howe")


def u(*args: int) -> datetime:
    """A UTC datetime."""
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def seq(expr: str, start: datetime, n: int) -> list[datetime]:
    """``n`` consecutive next() results."""
    return CronExpression.parse(expr).next_n(start, n)


def iso(dt: datetime | None) -> str | None:
    """ISO text with the offset, so fold/offset differences are visible."""
    return None if dt is None else dt.isoformat()


# ------------------------------------------------------------------------------ parsing


@pytest.mark.parametrize(
    "text",
    [
        "* * * * * *",
        "0 0 9 * * MON-FRI",
        "  0   0  9 *  * *  ",
        "0 0 0 * * *\t",
        "*/5 * * * * *",
        "5/15 * * * * *",
        "10-40/10 * * * * *",
        "0 0 0-23/6 * * *",
        "1,2,3-5,*/20 * * * * *",
        "0 0 0 ? * *",
        "0 0 0 * * ?",
        "0 0 0 1 jan,Feb,MAR *",
        "0 0 0 * JAN-DEC *",
        "0 0 0 * * sun-fri",
        "0 0 0 * * 0,7",
        "0 0 0 * * 0-7",
        "0 0 0 5-5 * *",
        "0 0 0 L * *",
        "0 0 0 L-3 * *",
        "0 0 0 LW * *",
        "0 0 0 15W * *",
        "0 0 0 1W,15,LW * *",
        "0 0 0 1W,*/10 * *",
        "0 0 0 * * 5L",
        "0 0 0 * * FRIL",
        "0 0 0 * * friL",
        "0 0 0 * * 0L",
        "0 0 0 * * FRI#2",
        "0 0 0 * * 1#6",
        "0 0 0 * * MON#1,WED",
        "0 0 0 * * THU#1,THU#3,THU#5",
        "@yearly",
        "@ANNUALLY",
        "@monthly",
        "@weekly",
        "@Daily",
        "@midnight",
        "@hourly",
        " @hourly ",
    ],
)
def test_accepts(text: str) -> None:
    assert CronExpression.is_valid(text)
    CronExpression.parse(text)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("0 0 25 * * *", "hour"),
        ("60 * * * * *", "second"),
        ("* 60 * * * *", "minute"),
        ("* * * 0 * *", "day-of-month"),
        ("* * * 32 * *", "day-of-month"),
        ("* * * * 0 *", "month"),
        ("* * * * 13 *", "month"),
        ("* * * * * 8", "day-of-week"),
        ("0 0 0 * * FRI-MON", "day-of-week"),
        ("0 0 0 * DEC-JAN *", "month"),
        ("0 0 10-5 * * *", "hour"),
        ("*/0 * * * * *", "second"),
        ("*/ * * * * *", "second"),
        ("1/2/3 * * * * *", "second"),
        ("a * * * * *", "second"),
        ("1, * * * * *", "second"),
        ("? * * * * *", "second"),
        ("* ? * * * *", "minute"),
        ("* * * 1,? * *", "day-of-month"),
        ("* * * * ? *", "month"),
        ("0 0 0 l * *", "day-of-month"),
        ("0 0 0 w * *", "day-of-month"),
        ("0 0 0 1L * *", "day-of-month"),
        ("0 0 0 LL * *", "day-of-month"),
        ("0 0 0 W * *", "day-of-month"),
        ("0 0 0 W1 * *", "day-of-month"),
        ("0 0 0 32W * *", "day-of-month"),
        ("0 0 0 0W * *", "day-of-month"),
        ("0 0 0 L3 * *", "day-of-month"),
        ("0 0 0 L-0 * *", "day-of-month"),
        ("0 0 0 L- * *", "day-of-month"),
        ("0 0 0 1W2 * *", "day-of-month"),
        ("0 0 0 * * L", "day-of-week"),
        ("0 0 0 * * L1", "day-of-week"),
        ("0 0 0 * * 8L", "day-of-week"),
        ("0 0 0 * * #", "day-of-week"),
        ("0 0 0 * * 1#", "day-of-week"),
        ("0 0 0 * * #1", "day-of-week"),
        ("0 0 0 * * 8#1", "day-of-week"),
        ("0 0 0 * * FRI#-1", "day-of-week"),
        ("0 0 0 * * FRI#0", "day-of-week"),
        ("0 0 0 * * 1W", "day-of-week"),
        ("0 0 0 * * FRIDAY", "day-of-week"),
        ("0 0 0 * JANUARY *", "month"),
        ("0\t0 0 0 * * *", "second"),
    ],
)
def test_refuses_naming_the_field(text: str, field: str) -> None:
    with pytest.raises(CronSyntaxError) as info:
        CronExpression.parse(text)
    message = str(info.value)
    assert info.value.field == field
    assert f"{field}:" in message
    assert text.strip() in message
    assert isinstance(info.value, ValueError)
    assert not CronExpression.is_valid(text)


@pytest.mark.parametrize(
    "text", ["", "   ", "*", "* * * * *", "* * * * * * *", "0 0 0 * * * 2020", "@often"]
)
def test_refuses_wrong_field_count(text: str) -> None:
    with pytest.raises(CronSyntaxError) as info:
        CronExpression.parse(text)
    assert info.value.field is None
    assert "Invalid cron expression" in str(info.value)


def test_error_message_format() -> None:
    with pytest.raises(ValueError, match=r'^Invalid cron expression "0 0 25 \* \* \*": hour: '
                                         r"value 25 is out of range 0-23$"):
        CronExpression.parse("0 0 25 * * *")


@pytest.mark.parametrize(
    ("macro", "expanded"),
    [
        ("@yearly", "0 0 0 1 1 *"),
        ("@annually", "0 0 0 1 1 *"),
        ("@monthly", "0 0 0 1 * *"),
        ("@weekly", "0 0 0 * * 0"),
        ("@daily", "0 0 0 * * *"),
        ("@midnight", "0 0 0 * * *"),
        ("@HOURLY", "0 0 * * * *"),
    ],
)
def test_macros(macro: str, expanded: str) -> None:
    e = CronExpression.parse(macro)
    assert e == CronExpression.parse(expanded)
    start = u(2021, 5, 17, 13, 14, 15)
    assert e.next_n(start, 5) == CronExpression.parse(expanded).next_n(start, 5)


def test_value_semantics() -> None:
    a = CronExpression.parse("0 0 9 * * MON-FRI")
    b = CronExpression.parse("  0 0 9 * * MON-FRI ")
    assert str(a) == "0 0 9 * * MON-FRI"
    assert a == b and hash(a) == hash(b)
    assert a != CronExpression.parse("0 0 9 * * *")
    assert len({a, b}) == 1
    assert "0 0 9" in repr(a)


# ------------------------------------------------------------------------------ next() contract


def test_naive_refused() -> None:
    with pytest.raises(ValueError):
        CronExpression.parse("* * * * * *").next(datetime(2020, 1, 1))


def test_strictly_after_and_zero_micros() -> None:
    e = CronExpression.parse("* * * * * *")
    assert e.next(u(2020, 1, 1, 10, 0, 0)) == u(2020, 1, 1, 10, 0, 1)
    r = e.next(u(2020, 1, 1, 10, 0, 0).replace(microsecond=500_000))
    assert r == u(2020, 1, 1, 10, 0, 1) and r is not None and r.microsecond == 0
    r = e.next(u(2020, 1, 1, 10, 0, 0).replace(microsecond=999_999))
    assert r == u(2020, 1, 1, 10, 0, 1)


def test_result_keeps_zone() -> None:
    r = CronExpression.parse("0 0 9 * * *").next(datetime(2021, 6, 1, 12, tzinfo=AMS))
    assert r is not None and r.tzinfo is AMS
    assert iso(r) == "2021-06-02T09:00:00+02:00"
    fixed = timezone(timedelta(hours=-3))
    r = CronExpression.parse("0 0 9 * * *").next(datetime(2021, 6, 1, 12, tzinfo=fixed))
    assert r is not None and r.tzinfo is fixed and iso(r) == "2021-06-02T09:00:00-03:00"


def test_accepts_other_zone_instants() -> None:
    # the same instant given in another representation gives the same answer
    e = CronExpression.parse("0 */10 * * * *")
    a = e.next(datetime(2021, 6, 1, 12, 3, tzinfo=AMS))
    b = e.next(datetime(2021, 6, 1, 10, 3, tzinfo=ZoneInfo("UTC")))
    assert a is not None and b is not None and a.timestamp() == b.timestamp()


@pytest.mark.parametrize(
    "text", ["0 0 0 31 6 *", "0 0 0 30 2 *", "0 0 0 31 4,6,9,11 *", "0 0 0 * * 1#6",
             "0 0 0 31W 2 *", "0 0 0 30 2 ?"]
)
def test_never_matches(text: str) -> None:
    assert CronExpression.parse(text).next(u(2020, 3, 10)) is None


@pytest.mark.parametrize(
    "text", ["0 0 0 31 6 *", "0 0 0 30 2 *", "0 0 0 * * 1#6", "0 0 0 31W 2 *", "0 0 0 L-30 2 *"]
)
def test_ever_matches_is_false_for_an_expression_no_time_matches(text: str) -> None:
    assert not CronExpression.parse(text).ever_matches()


@pytest.mark.parametrize(
    "text", ["0 0 6 * * *", "0 0 0 29 2 MON", "0 0 0 ? 2 MON#5", "0 0 0 L-28 2 *", "0 0 0 1W * *"]
)
def test_ever_matches_is_true_for_an_expression_some_time_matches(text: str) -> None:
    """`0 0 0 29 2 MON` matches once in years (1988, 2016, 2044), `MON#5` in February only in
    a leap year whose February starts on a Monday."""
    assert CronExpression.parse(text).ever_matches()


@pytest.mark.parametrize("zone", ["UTC", "America/New_York", "Pacific/Kiritimati", "Etc/GMT+12"])
def test_next_runs_to_the_end_of_the_calendar_without_overflowing(zone: str) -> None:
    """Issue #38: near year 9999 the check of the window around an answer overflowed (an
    OverflowError out of `next`); the times that exist are given, then None."""
    start = datetime(9999, 12, 29, tzinfo=UTC).astimezone(ZoneInfo(zone))
    got = CronExpression.parse("0 0 6 * * *").next_n(start, 5)
    assert 1 <= len(got) < 5
    assert [(t.year, t.hour, t.minute) for t in got] == [(9999, 6, 0)] * len(got)
    assert got[-1].day == 31


def test_iter_and_next_n() -> None:
    e = CronExpression.parse("0 0 0 29 2 *")
    got = e.next_n(u(2007, 2, 10), 3)
    assert got == [u(2008, 2, 29), u(2012, 2, 29), u(2016, 2, 29)]
    it = e.iter(u(2007, 2, 10))
    assert next(it) == u(2008, 2, 29)
    assert CronExpression.parse("0 0 0 31 6 *").next_n(u(2020, 1, 1), 3) == []


# ------------------------------------------------------------------------------ constructs


@pytest.mark.parametrize(
    ("expr", "start", "expected"),
    [
        # day-of-week steps run over Spring's 1-7 (Monday first)
        ("0 0 0 * * */2", u(2021, 2, 28, 12), ["2021-03-01", "2021-03-03", "2021-03-05",
                                          "2021-03-07", "2021-03-08"]),
        ("0 0 0 * * 0/2", u(2021, 3, 1), ["2021-03-02", "2021-03-04", "2021-03-06",
                                          "2021-03-07", "2021-03-09"]),
        ("0 0 0 * * SUN-FRI", u(2021, 2, 25, 15), ["2021-02-26", "2021-02-28", "2021-03-01"]),
        ("0 0 0 * * 0", u(2021, 3, 1), ["2021-03-07", "2021-03-14"]),
        ("0 0 0 * * 7", u(2021, 3, 1), ["2021-03-07", "2021-03-14"]),
        ("0 0 0 13 * FRI", u(2021, 1, 1), ["2021-08-13", "2022-05-13", "2023-01-13"]),
        ("0 0 0 5-5 * *", u(2021, 1, 1), ["2021-01-05", "2021-02-05"]),
        ("0 0 0 L * *", u(2021, 1, 1), ["2021-01-31", "2021-02-28", "2021-03-31",
                                        "2021-04-30"]),
        ("0 0 0 L-2 * *", u(2021, 1, 1), ["2021-01-29", "2021-02-26", "2021-03-29"]),
        ("0 0 0 LW * *", u(2021, 1, 1), ["2021-01-29", "2021-02-26", "2021-03-31",
                                         "2021-04-30", "2021-05-31", "2021-06-30",
                                         "2021-07-30"]),
        # Saturday 1st -> Monday 3rd; Sunday last day -> Friday before
        ("0 0 0 1W * *", u(2022, 1, 1), ["2022-01-03", "2022-02-01", "2022-03-01"]),
        # May 31st 2020 is a Sunday and the last day: Spring moves to June 1st, no fire
        ("0 0 0 31W * *", u(2020, 1, 1), ["2020-01-31", "2020-03-31", "2020-07-31",
                                          "2020-08-31", "2020-10-30", "2020-12-31"]),
        ("0 0 0 15W * *", u(2021, 5, 1), ["2021-05-14", "2021-06-15", "2021-07-15",
                                          "2021-08-16"]),
        ("0 0 0 30W * *", u(2021, 1, 1), ["2021-01-29", "2021-03-30", "2021-04-30"]),
        ("0 0 0 * * 5L", u(2021, 1, 1), ["2021-01-29", "2021-02-26", "2021-03-26"]),
        ("0 0 0 * * FRIL", u(2021, 1, 1), ["2021-01-29", "2021-02-26"]),
        ("0 0 0 * * 0L", u(2021, 1, 1), ["2021-01-31", "2021-02-28", "2021-03-28"]),
        ("0 0 0 * * MON#1,WED", u(2021, 2, 28, 12), ["2021-03-01", "2021-03-03", "2021-03-10",
                                                "2021-03-17"]),
        ("0 0 0 ? * 3#5", u(2020, 1, 1), ["2020-01-29", "2020-04-29", "2020-07-29",
                                          "2020-09-30", "2020-12-30"]),
        ("0 0 0 L 2 *", u(2019, 3, 1), ["2020-02-29", "2021-02-28"]),
        ("0 0 0 1W,15,LW * ?", u(2019, 12, 30), ["2019-12-31", "2020-01-01", "2020-01-15",
                                                 "2020-01-31"]),
    ],
)
def test_day_constructs(expr: str, start: datetime, expected: list[str]) -> None:
    got = [d.date().isoformat() for d in seq(expr, start, len(expected))]
    assert got == expected


def test_31w_never_in_short_months() -> None:
    got = seq("0 0 0 31W * *", u(2021, 1, 1), 12)
    assert all(d.month in (1, 3, 5, 7, 8, 10, 12) for d in got)


# ------------------------------------------------------------------------------ Spring's tests


SPRING_CASES: list[tuple[str, datetime, list[datetime]]] = [
    ("* * * * * *", u(2020, 1, 1, 10, 0, 58), [u(2020, 1, 1, 10, 0, 59)]),
    ("10 * * * * *", u(2020, 1, 1, 10, 0, 9), [u(2020, 1, 1, 10, 0, 10)]),
    ("11 * * * * *", u(2020, 1, 1, 10, 0, 10), [u(2020, 1, 1, 10, 0, 11)]),
    ("10 * * * * *", u(2020, 1, 1, 10, 0, 11), [u(2020, 1, 1, 10, 1, 10)]),
    ("0 * * * * *", u(2020, 1, 1, 10, 10, 3), [u(2020, 1, 1, 10, 11), u(2020, 1, 1, 10, 12)]),
    ("0 11 * * * *", u(2020, 1, 1, 10, 10), [u(2020, 1, 1, 10, 11)]),
    ("0 10 * * * *", u(2020, 1, 1, 10, 11), [u(2020, 1, 1, 11, 10)]),
    ("0 0 * * * *", u(2020, 10, 30, 11, 1), [u(2020, 10, 30, 12), u(2020, 10, 30, 13)]),
    ("0 0 * * * *", u(2020, 9, 10, 23, 1), [u(2020, 9, 11)]),
    ("0 0 0 * * *", u(2020, 5, 1, 13), [u(2020, 5, 2), u(2020, 5, 3)]),
    ("* * * 10 * *", u(2020, 5, 9, 13), [u(2020, 5, 10)]),
    ("* * * 10 * *", u(2020, 5, 11, 13), [u(2020, 6, 10)]),
    ("0 0 0 * * *", u(2020, 9, 30, 13), [u(2020, 10, 1), u(2020, 10, 2)]),
    ("0 0 0 * * *", u(2020, 8, 30, 13), [u(2020, 8, 31), u(2020, 9, 1)]),
    ("0 0 0 1 * *", u(2020, 10, 30, 13), [u(2020, 11, 1), u(2020, 12, 1)]),
    ("0 0 0 1 * *", u(2010, 12, 31, 13), [u(2011, 1, 1), u(2011, 2, 1)]),
    ("0 0 0 31 * *", u(2020, 10, 30, 13), [u(2020, 10, 31)]),
    ("* * * * * 2", u(2020, 3, 2, 13), [u(2020, 3, 3)]),  # Monday -> Tuesday
    ("* * * * * 2", u(2020, 3, 4, 13), [u(2020, 3, 10)]),  # Wednesday -> next Tuesday
    ("55 5 * * * *", u(2020, 1, 1, 10, 4, 54), [u(2020, 1, 1, 10, 5, 55),
                                                u(2020, 1, 1, 11, 5, 55)]),
    ("55 * 10 * * *", u(2020, 1, 1, 9, 4, 54), [u(2020, 1, 1, 10, 0, 55),
                                                u(2020, 1, 1, 10, 1, 55)]),
    ("* 5 10 * * *", u(2020, 1, 1, 9, 4, 54), [u(2020, 1, 1, 10, 5), u(2020, 1, 1, 10, 5, 1)]),
    ("55 * * 3 * *", u(2020, 1, 2, 9, 4, 54), [u(2020, 1, 3, 0, 0, 55),
                                               u(2020, 1, 3, 0, 1, 55)]),
    ("* * * 3 11 *", u(2020, 10, 2, 9, 4, 54), [u(2020, 11, 3), u(2020, 11, 3, 0, 0, 1)]),
    ("0 0 0 29 2 *", u(2007, 2, 10, 5), [u(2008, 2, 29), u(2012, 2, 29)]),
    ("0 0 7 ? * MON-FRI", u(2009, 9, 26, 13, 14), [u(2009, 9, 28, 7), u(2009, 9, 29, 7),
                                                   u(2009, 9, 30, 7)]),
    ("0 30 23 30 1/3 ?", u(2010, 12, 30, 13, 14), [u(2011, 1, 30, 23, 30),
                                                   u(2011, 4, 30, 23, 30),
                                                   u(2011, 7, 30, 23, 30)]),
    ("0 0 0 1W * ?", u(2019, 12, 31), [u(2020, 1, 1), u(2020, 2, 3), u(2020, 3, 2),
                                       u(2020, 4, 1)]),
    ("0 0 0 ? * 5#2", u(2020, 1, 1), [u(2020, 1, 10), u(2020, 2, 14), u(2020, 3, 13),
                                      u(2020, 4, 10)]),
    ("0 0 0 ? * FRI#2", u(2020, 1, 1), [u(2020, 1, 10), u(2020, 2, 14)]),
    ("0 0 0 ? * THU#1,THU#3,THU#5", u(2019, 12, 31), [u(2020, 1, 2), u(2020, 1, 16),
                                                      u(2020, 1, 30)]),
    ("0 0 * L * *", u(2021, 1, 30, 0, 1), [u(2021, 1, 31)]),
    ("0 0 * L * *", u(2021, 1, 31, 1), [u(2021, 1, 31, 2)]),
    ("0 0 * L-1 * *", u(2021, 1, 29, 0, 1), [u(2021, 1, 30)]),
    ("0 0 * L-1 * *", u(2021, 1, 30, 1), [u(2021, 1, 30, 2)]),
    ("0 0 * 1W * *", u(2021, 1, 31, 0, 1), [u(2021, 2, 1)]),
    ("0 0 * 1W * *", u(2021, 2, 1, 1), [u(2021, 2, 1, 2)]),
    ("0 0 * LW * *", u(2021, 1, 28, 0, 1), [u(2021, 1, 29)]),
    ("0 0 * LW * *", u(2021, 1, 29, 1), [u(2021, 1, 29, 2)]),
    ("0 0 * ? * FRI#5", u(2021, 1, 28, 0, 1), [u(2021, 1, 29)]),
    ("0 0 * ? * FRI#5", u(2021, 1, 29, 1), [u(2021, 1, 29, 2)]),
    ("0 0 * ? * FRIL", u(2021, 1, 28, 0, 1), [u(2021, 1, 29)]),
    ("0 0 * ? * FRIL", u(2021, 1, 29, 1), [u(2021, 1, 29, 2)]),
    ("0 0 0 ? * SUN-FRI", u(2021, 2, 25, 15), [u(2021, 2, 26), u(2021, 2, 28)]),
    ("0 0 0 L * *", u(2020, 1, 1), [u(2020, 1, 31), u(2020, 2, 29), u(2020, 3, 31)]),
    ("0 0 0 LW * *", u(2020, 1, 1), [u(2020, 1, 31), u(2020, 2, 28), u(2020, 3, 31)]),
]


@pytest.mark.parametrize(("expr", "start", "expected"), SPRING_CASES)
def test_spring_cases(expr: str, start: datetime, expected: list[datetime]) -> None:
    assert seq(expr, start, len(expected)) == expected


# ------------------------------------------------------------------------------ daylight saving


def offsets(expr: str, start: datetime, n: int) -> list[str | None]:
    """ISO strings (with offsets) of n results."""
    return [iso(d) for d in seq(expr, start, n)]


def test_dst_spring_amsterdam() -> None:
    # Spring's daylightSaving test
    assert offsets("0 0 9 * * *", datetime(2021, 3, 27, 9, tzinfo=AMS), 1) == [
        "2021-03-28T09:00:00+02:00"]
    assert offsets("0 0 9 * * *", datetime(2021, 10, 30, 9, tzinfo=AMS), 1) == [
        "2021-10-31T09:00:00+01:00"]
    assert offsets("0 10 2 * * *", datetime(2013, 3, 31, 1, 9, tzinfo=AMS), 1) == [
        "2013-04-01T02:10:00+02:00"]
    # issue 28038: the day after the gap is not skipped
    assert offsets("0 5 0 * * *", datetime(2021, 3, 28, 1, tzinfo=AMS), 1) == [
        "2021-03-29T00:05:00+02:00"]


def test_dst_gap_hourly_amsterdam() -> None:
    assert offsets("0 0 * * * *", datetime(2013, 3, 31, 0, 30, tzinfo=AMS), 3) == [
        "2013-03-31T01:00:00+01:00", "2013-03-31T03:00:00+02:00", "2013-03-31T04:00:00+02:00"]
    assert offsets("0 30 * * * *", datetime(2013, 3, 31, 1, 45, tzinfo=AMS), 1) == [
        "2013-03-31T03:30:00+02:00"]


def test_dst_overlap_amsterdam() -> None:
    assert offsets("0 30 2 * * *", datetime(2013, 10, 26, 12, tzinfo=AMS), 3) == [
        "2013-10-27T02:30:00+02:00", "2013-10-27T02:30:00+01:00", "2013-10-28T02:30:00+01:00"]
    assert offsets("0 0 * * * *", datetime(2013, 10, 27, 1, 30, tzinfo=AMS), 4) == [
        "2013-10-27T02:00:00+02:00", "2013-10-27T02:00:00+01:00",
        "2013-10-27T03:00:00+01:00", "2013-10-27T04:00:00+01:00"]
    second = datetime(2013, 10, 27, 2, 30, fold=1, tzinfo=AMS)
    assert iso(CronExpression.parse("0 30 2 * * *").next(second)) == "2013-10-28T02:30:00+01:00"
    assert iso(CronExpression.parse("0 */20 * * * *").next(second)) == (
        "2013-10-27T02:40:00+01:00")


def test_dst_new_york() -> None:
    assert offsets("0 30 2 * * *", datetime(2021, 3, 13, 12, tzinfo=NY), 2) == [
        "2021-03-15T02:30:00-04:00", "2021-03-16T02:30:00-04:00"]
    assert offsets("0 30 1 * * *", datetime(2021, 11, 6, 12, tzinfo=NY), 3) == [
        "2021-11-07T01:30:00-04:00", "2021-11-07T01:30:00-05:00", "2021-11-08T01:30:00-05:00"]
    assert offsets("0 0 9 * * MON-FRI", datetime(2021, 3, 12, 10, tzinfo=NY), 2) == [
        "2021-03-15T09:00:00-04:00", "2021-03-16T09:00:00-04:00"]


def test_dst_sydney_southern_hemisphere() -> None:
    # spring forward in October (02:00 -> 03:00), fall back in April (03:00 -> 02:00)
    assert offsets("0 30 2 * * *", datetime(2021, 10, 2, 12, tzinfo=SYD), 2) == [
        "2021-10-04T02:30:00+11:00", "2021-10-05T02:30:00+11:00"]
    assert offsets("0 30 2 * * *", datetime(2021, 4, 3, 12, tzinfo=SYD), 3) == [
        "2021-04-04T02:30:00+11:00", "2021-04-04T02:30:00+10:00", "2021-04-05T02:30:00+10:00"]
    assert offsets("0 0 9 * * *", datetime(2021, 4, 3, 9, tzinfo=SYD), 2) == [
        "2021-04-04T09:00:00+10:00", "2021-04-05T09:00:00+10:00"]


def test_zone_without_dst_kolkata() -> None:
    assert offsets("0 30 2 * * *", datetime(2021, 3, 27, 12, tzinfo=KOL), 3) == [
        "2021-03-28T02:30:00+05:30", "2021-03-29T02:30:00+05:30", "2021-03-30T02:30:00+05:30"]
    assert offsets("0 0 0 L * *", datetime(2021, 1, 1, tzinfo=KOL), 2) == [
        "2021-01-31T00:00:00+05:30", "2021-02-28T00:00:00+05:30"]


def test_lord_howe_half_hour_shift() -> None:
    # spring forward 02:00 -> 02:30 (+10:30 -> +11:00): 02:10 does not exist, 02:40 does
    assert offsets("0 10 2 * * *", datetime(2021, 10, 2, 12, tzinfo=LHI), 1) == [
        "2021-10-04T02:10:00+11:00"]
    assert offsets("0 40 2 * * *", datetime(2021, 10, 2, 12, tzinfo=LHI), 1) == [
        "2021-10-03T02:40:00+11:00"]
    # fall back 02:00 -> 01:30 (+11:00 -> +10:30): 01:45 happens twice, but Spring's minute
    # roll-forward adds one hour to the instant (01:46+11:00 -> 02:16+10:30) and so never
    # sees the second 01:45; we reproduce Spring
    assert offsets("0 45 1 * * *", datetime(2021, 4, 3, 12, tzinfo=LHI), 2) == [
        "2021-04-04T01:45:00+11:00", "2021-04-05T01:45:00+10:30"]
    # the whole half hour 01:30-02:00 repeats for a per-minute expression
    got = offsets("0 * 1 * * *", datetime(2021, 4, 4, 1, 58, tzinfo=LHI), 3)
    assert got == ["2021-04-04T01:59:00+11:00", "2021-04-04T01:30:00+10:30",
                   "2021-04-04T01:31:00+10:30"]


def test_lord_howe_hourly_is_strictly_after() -> None:
    # Spring's algorithm would land back on 01:00+11:00 here; we still move forward
    e = CronExpression.parse("0 0 * * * *")
    start = datetime(2013, 4, 7, 1, tzinfo=LHI)
    r = e.next(start)
    assert r is not None and r.timestamp() > start.timestamp()
    assert iso(r) == "2013-04-07T02:00:00+10:30"


@pytest.mark.parametrize("zone", ["Europe/Amsterdam", "America/New_York", "Australia/Sydney",
                                  "Australia/Lord_Howe", "Asia/Kolkata", "America/Havana"])
@pytest.mark.parametrize("expr", ["0 0 * * * *", "0 */20 * * * *", "0 30 1 * * *",
                                  "0 30 2 * * *", "0 0 0 * * *", "0 0 3 * * SUN"])
def test_dst_year_walk_is_monotonic(zone: str, expr: str) -> None:
    """Walking a whole year: strictly increasing instants, whole seconds, wall-clock match."""
    tz = ZoneInfo(zone)
    e = CronExpression.parse(expr)
    current = datetime(2021, 1, 1, tzinfo=tz)
    for _ in range(400 if "* * * *" not in expr else 2000):
        nxt = e.next(current)
        assert nxt is not None
        assert nxt.timestamp() > current.timestamp()
        assert nxt.microsecond == 0 and nxt.second == 0
        assert nxt.tzinfo is tz
        # the result is a real (existing) local time
        roundtrip = nxt.astimezone(UTC).astimezone(tz)
        assert roundtrip.replace(tzinfo=None) == nxt.replace(tzinfo=None)
        current = nxt
