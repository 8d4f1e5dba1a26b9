"""Property tests for wow_temporal.cron: differential against croniter (UTC, common subset)
and the fast wall-clock engine against the Spring emulation near DST transitions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wow_temporal.cron import CronExpression, _year_transitions

croniter_mod = pytest.importorskip("croniter")
croniter = croniter_mod.croniter



def _element(lo: int, hi: int) -> st.SearchStrategy[str]:
    """One plain list element: n, a-b (a < b), */s, n/s."""
    num = st.integers(lo, hi)
    rng = st.tuples(num, num).filter(lambda p: p[0] < p[1]).map(lambda p: f"{p[0]}-{p[1]}")
    star_step = st.integers(1, max(1, hi - lo)).map(lambda s: f"*/{s}")
    num_step = st.tuples(num, st.integers(1, max(1, hi - lo))).map(lambda p: f"{p[0]}/{p[1]}")
    return st.one_of(num.map(str), rng, star_step, num_step)


def _field(lo: int, hi: int, star_weight: int = 1) -> st.SearchStrategy[str]:
    """A plain field: '*' or a comma list of plain elements."""
    lists = st.lists(_element(lo, hi), min_size=1, max_size=3).map(",".join)
    return st.one_of(*([st.just("*")] * star_weight), lists)


@st.composite
def plain_expressions(draw: st.DrawFn) -> str:
    """Expressions from constructs where Spring and croniter agree."""
    sec = draw(_field(0, 59))
    minute = draw(_field(0, 59))
    hour = draw(_field(0, 23))
    month = draw(_field(1, 12, star_weight=2))
    if draw(st.booleans()):
        dom, dow = draw(_field(1, 31, star_weight=2)), "*"
    else:
        # day-of-week: plain numbers and ranges (no steps: croniter steps differently)
        day = st.integers(0, 6)
        rng = st.tuples(day, day).filter(lambda p: p[0] < p[1]).map(lambda p: f"{p[0]}-{p[1]}")
        dow = draw(st.one_of(st.just("*"), st.lists(st.one_of(day.map(str), rng), min_size=1,
                                                    max_size=3).map(",".join)))
        dom = "*"
    return f"{sec} {minute} {hour} {dom} {month} {dow}"


instants = st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2060, 12, 31)).map(
    lambda d: d.replace(tzinfo=UTC)
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=plain_expressions(), start=instants)
def test_matches_croniter_in_utc(expr: str, start: datetime) -> None:
    ours = CronExpression.parse(expr).next(start)
    # croniter needs a whole-second start to be "strictly after" in Spring's sense
    base = start.replace(microsecond=0)
    theirs = croniter(expr, base, second_at_beginning=True, day_or=False).get_next(datetime)
    assert ours == theirs, (expr, start)


@settings(max_examples=100, deadline=None)
@given(expr=plain_expressions(), start=instants)
def test_chained_matches_croniter(expr: str, start: datetime) -> None:
    e = CronExpression.parse(expr)
    base = start.replace(microsecond=0)
    it = croniter(expr, base, second_at_beginning=True, day_or=False)
    current = base
    for _ in range(5):
        nxt = e.next(current)
        assert nxt == it.get_next(datetime)
        assert nxt is not None
        current = nxt


DST_ZONES = ["Europe/Amsterdam", "America/New_York", "Australia/Sydney", "Australia/Lord_Howe",
             "Africa/Cairo", "America/Havana", "America/Santiago", "Asia/Beirut"]
DST_EXPRS = ["0 0 * * * *", "0 30 2 * * *", "0 */15 * * * *", "*/7 * * * * *", "0 0 2 * * *",
             "0 0 0 * * *", "0 0 */2 * * ?", "0 45 1 * * *", "0 15,45 2 * * *", "0 0 0 L * *",
             "0 0 3 ? * SUN", "0 0 0 1W,15,LW * ?", "0 0 12 ? * FRI#2", "0 0 0 * * 5L",
             "0 0 0 1 1 *", "0 0 1 * * *", "0 10 2 * * *", "0 0,30 0-3 * * *",
             "59 59 23 * * *", "30 * * * * *", "0 0 0 * * SUN", "0 0 23 * * *"]


@settings(max_examples=600, deadline=None)
@given(
    zone=st.sampled_from(DST_ZONES),
    expr=st.sampled_from(DST_EXPRS),
    year=st.integers(2005, 2030),
    which=st.integers(0, 3),
    shift=st.integers(-3 * 86400, 86400),
)
def test_fast_engine_agrees_with_spring_emulation(
    zone: str, expr: str, year: int, which: int, shift: int
) -> None:
    """Near transitions the public next() equals a step-by-step emulation of Spring."""
    tz = ZoneInfo(zone)
    transitions = _year_transitions(tz, year)
    if not transitions:
        return
    instant = transitions[which % len(transitions)][0] + timedelta(seconds=shift)
    start = instant.replace(tzinfo=UTC).astimezone(tz)
    e = CronExpression.parse(expr)
    got = e.next(start)
    want = e._spring_next(tz, start)
    assert got is not None
    assert got.timestamp() > start.timestamp()
    if want is not None and want.timestamp() > start.timestamp():
        assert (got.replace(tzinfo=None), got.utcoffset()) == (
            want.replace(tzinfo=None), want.utcoffset())
