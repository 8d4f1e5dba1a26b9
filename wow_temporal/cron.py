"""Spring-compatible six-field cron expressions (``second minute hour dom month dow``).

Semantics follow Spring Framework's ``org.springframework.scheduling.support.CronExpression``:
``CronExpression.parse(text).next(after)`` gives the first matching wall-clock time strictly
after ``after``, in ``after``'s zone, or ``None`` when no time ever matches.

Two engines share the parsed fields:

* a fast engine that searches naive wall-clock values field by field (month, day, hour,
  minute, second with carry) over precomputed lookup tables, used whenever no UTC-offset
  transition of the zone can influence the answer;
* a faithful emulation of Spring's ``ZonedDateTime`` algorithm (``with`` resolves local
  times with the previous offset preferred, time units add to the instant, date units to
  the local date-time), used near daylight-saving transitions so that gaps are skipped and
  overlaps fire the way Spring fires them.

The module is pure: it depends on the standard library only.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable, Iterator
from datetime import date, datetime, timedelta, timezone, tzinfo
from functools import lru_cache
from typing import Final

__all__ = ["CronExpression", "CronSyntaxError"]

_MAX_ATTEMPTS: Final = 366
"""Spring's bound on the outer fix-point loop and on each field's inner loop."""

_SEARCH_YEARS: Final = 400
"""The Gregorian calendar repeats every 400 years: nothing found in that span never matches."""

_ONE_SECOND: Final = timedelta(seconds=1)
_ZERO: Final = timedelta(0)

_MACROS: Final[dict[str, str]] = {
    "@yearly": "0 0 0 1 1 *",
    "@annually": "0 0 0 1 1 *",
    "@monthly": "0 0 0 1 * *",
    "@weekly": "0 0 0 * * 0",
    "@daily": "0 0 0 * * *",
    "@midnight": "0 0 0 * * *",
    "@hourly": "0 0 * * * *",
}

_MONTH_NAMES: Final = (
    "JAN",
    "FEB",
    "MAR",
    "APR",
    "MAY",
    "JUN",
    "JUL",
    "AUG",
    "SEP",
    "OCT",
    "NOV",
    "DEC",
)
_DAY_NAMES: Final = ("MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN")

_FIELD_NAMES: Final = ("second", "minute", "hour", "day-of-month", "month", "day-of-week")
_RANGES: Final = ((0, 59), (0, 59), (0, 23), (1, 31), (1, 12), (0, 7))

_INT_RE: Final = re.compile(r"[+-]?[0-9]+")
_JAVA_WHITESPACE: Final = "".join(chr(i) for i in range(33))
"""What Java's ``String.trim()`` strips: every character up to and including the space."""


class CronSyntaxError(ValueError):
    """A cron expression that Spring would refuse; the message names the field and the rule."""

    def __init__(self, expression: str, field: str | None, reason: str) -> None:
        where = f"{field}: " if field else ""
        super().__init__(f'Invalid cron expression "{expression}": {where}{reason}')
        self.expression = expression
        self.field = field
        self.reason = reason


class _FieldError(Exception):
    """Internal: a refusal inside one field, wrapped into CronSyntaxError by the parser."""


# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------


def _parse_int(text: str, what: str) -> int:
    """Parse a decimal integer the way Java's ``Integer.parseInt`` accepts it (ASCII only)."""
    if not _INT_RE.fullmatch(text):
        raise _FieldError(f"{what} '{text}' is not a number")
    return int(text)


def _check(value: int, lo: int, hi: int) -> int:
    """Refuse a value outside the field's range."""
    if not lo <= value <= hi:
        raise _FieldError(f"value {value} is out of range {lo}-{hi}")
    return value


def _parse_bits(value: str, index: int) -> int:
    """Parse a comma list of ``*``, ``n``, ``a-b``, ``*/s``, ``n/s``, ``a-b/s`` into a bitmask."""
    lo, hi = _RANGES[index]
    type_lo = 1 if index == 5 else lo  # Spring steps day-of-week over java.time's 1-7
    bits = 0
    for part in value.split(","):
        if part == "":
            raise _FieldError(f"empty element in list '{value}'")
        slash = part.find("/")
        range_text = part if slash == -1 else part[:slash]
        if range_text == "*":
            start, end = type_lo, hi
        elif "-" in range_text:
            hyphen = range_text.index("-")
            start = _check(_parse_int(range_text[:hyphen], "range start"), lo, hi)
            end = _check(_parse_int(range_text[hyphen + 1 :], "range end"), lo, hi)
            if index == 5 and start == 7:
                start = 0  # as the start of a range, Sunday means 0
            if start > end:
                raise _FieldError(
                    f"range {range_text} is reversed: the start must not exceed the end"
                )
        else:
            start = end = _check(_parse_int(range_text, "value"), lo, hi)
        step = 1
        if slash != -1:
            step = _parse_int(part[slash + 1 :], "step")
            if step <= 0:
                raise _FieldError(f"step {step} in '{part}' must be 1 or higher")
            if "-" not in range_text:
                end = hi
        for v in range(start, end + 1, step):
            bits |= 1 << v
    if index == 5 and bits & 1:
        bits = (bits | (1 << 7)) & ~1  # 0 and 7 are both Sunday; keep 7 like java.time
    return bits


# Quartz day-of-month elements: ("L", n) last day minus n, ("LW", 0), ("W", n).
# Quartz day-of-week elements: ("DL", iso_dow) last such weekday, ("#", iso_dow * 100 + n).
_Quartz = tuple[str, int]


def _parse_dom(value: str) -> tuple[int, tuple[_Quartz, ...], bool]:
    """Parse day-of-month into (bits over 1-31, quartz elements, is-wildcard)."""
    if value in ("?", "*"):
        return _parse_bits("*", 3), (), True
    if "L" not in value and "W" not in value:
        return _parse_bits(value, 3), (), False
    bits = 0
    quartz: list[_Quartz] = []
    for part in value.split(","):
        if "L" not in part and "W" not in part:
            bits |= _parse_bits(part, 3)
            continue
        idx = part.rfind("L")
        if idx != -1:
            if idx != 0:
                raise _FieldError(f"unrecognized characters before 'L' in '{part}'")
            if part == "L":
                quartz.append(("L", 0))
            elif part == "LW":
                quartz.append(("LW", 0))
            else:
                rest = part[1:]
                if not rest.startswith("-"):
                    raise _FieldError(f"'{part}': only 'L', 'LW' or 'L-n' may start with 'L'")
                offset = _parse_int(rest[1:], "offset")
                if offset <= 0:
                    raise _FieldError(f"offset in '{part}' must be 1 or higher")
                quartz.append(("L", offset))
            continue
        idx = part.rfind("W")
        if idx == 0:
            raise _FieldError(f"no day-of-month before 'W' in '{part}'")
        if idx != len(part) - 1:
            raise _FieldError(f"unrecognized characters after 'W' in '{part}'")
        day = _check(_parse_int(part[:idx], "day-of-month"), 1, 31)
        quartz.append(("W", day))
    return bits, tuple(quartz), False


def _parse_dow_day(text: str) -> int:
    """Parse the weekday before ``L`` or ``#`` (0-7, Sunday 0 or 7) into ISO 1-7."""
    day = _check(_parse_int(text, "day-of-week"), 0, 7)
    return 7 if day == 0 else day


def _parse_dow(value: str) -> tuple[int, tuple[_Quartz, ...], bool]:
    """Parse day-of-week into (bits over ISO 1-7, quartz elements, is-wildcard)."""
    if value == "?":
        value = "*"
    value = value.upper()
    for i, name in enumerate(_DAY_NAMES):
        value = value.replace(name, str(i + 1))
    if value == "*":
        return _parse_bits("*", 5), (), True
    if "L" not in value and "#" not in value:
        return _parse_bits(value, 5), (), False
    bits = 0
    quartz: list[_Quartz] = []
    for part in value.split(","):
        if "L" not in part and "#" not in part:
            bits |= _parse_bits(part, 5)
            continue
        idx = part.rfind("L")
        if idx != -1:
            if idx != len(part) - 1:
                raise _FieldError(f"unrecognized characters after 'L' in '{part}'")
            if idx == 0:
                raise _FieldError(f"no day-of-week before 'L' in '{part}'")
            quartz.append(("DL", _parse_dow_day(part[:idx])))
            continue
        idx = part.rfind("#")
        if idx == 0:
            raise _FieldError(f"no day-of-week before '#' in '{part}'")
        if idx == len(part) - 1:
            raise _FieldError(f"no ordinal after '#' in '{part}'")
        day = _parse_dow_day(part[:idx])
        ordinal = _parse_int(part[idx + 1 :], "ordinal")
        if ordinal <= 0:
            raise _FieldError(f"ordinal {ordinal} in '{part}' must be 1 or higher")
        quartz.append(("#", day * 1000 + min(ordinal, 6)))  # beyond 5 never fires
    return bits, tuple(quartz), False


def _parse_month(value: str) -> int:
    """Parse the month field, names JAN-DEC allowed anywhere a number may stand."""
    value = value.upper()
    for i, name in enumerate(_MONTH_NAMES):
        value = value.replace(name, str(i + 1))
    return _parse_bits(value, 4)


def _next_table(bits: int, size: int) -> tuple[int, ...]:
    """table[i] = smallest set bit >= i, or -1; one extra slot so table[size] == -1."""
    table = [-1] * (size + 1)
    nxt = -1
    for i in range(size - 1, -1, -1):
        if bits >> i & 1:
            nxt = i
        table[i] = nxt
    return tuple(table)


def _next_set_bit(bits: int, start: int) -> int:
    """Java's ``nextSetBit`` on a Python int: the lowest set bit >= start, or -1."""
    rem = bits >> start
    if not rem:
        return -1
    return start + (rem & -rem).bit_length() - 1


# --------------------------------------------------------------------------------------------
# Day masks (bit d set = day d of the month matches), shared by both engines
# --------------------------------------------------------------------------------------------


def _dom_mask(bits: int, quartz: tuple[_Quartz, ...], year: int, month: int) -> int:
    """Days of (year, month) matching the day-of-month field on its own."""
    first_dow, ndays = calendar.monthrange(year, month)  # first_dow: Monday == 0
    mask = bits & ((1 << (ndays + 1)) - 2)
    for kind, arg in quartz:
        if kind == "L":
            day = ndays - arg
            if day >= 1:
                mask |= 1 << day
        elif kind == "LW":
            wd = (first_dow + ndays - 1) % 7  # Monday == 0
            day = ndays - (wd - 4 if wd >= 5 else 0)
            mask |= 1 << day
        else:  # "W": weekday nearest to day `arg`, never leaving the month
            if arg > ndays:
                continue
            wd = (first_dow + arg - 1) % 7
            if wd == 5:  # Saturday: Friday before, or Monday the 3rd for the 1st
                day = arg - 1 if arg > 1 else 3
            elif wd == 6:  # Sunday: Monday after, or Friday before on the last day
                day = arg + 1 if arg < ndays else arg - 2
            else:
                day = arg
            mask |= 1 << day
    return mask


def _dow_mask(bits: int, quartz: tuple[_Quartz, ...], year: int, month: int) -> int:
    """Days of (year, month) matching the day-of-week field on its own."""
    first_dow, ndays = calendar.monthrange(year, month)
    mask = 0
    if bits:
        for day in range(1, 8):
            if bits >> ((first_dow + day - 1) % 7 + 1) & 1:
                d = day
                while d <= ndays:
                    mask |= 1 << d
                    d += 7
    for kind, arg in quartz:
        if kind == "DL":
            first = (arg - 1 - first_dow) % 7 + 1
            mask |= 1 << (first + 7 * ((ndays - first) // 7))
        else:  # "#": the n-th such weekday
            iso, ordinal = divmod(arg, 1000)
            day = (iso - 1 - first_dow) % 7 + 1 + 7 * (ordinal - 1)
            if day <= ndays:
                mask |= 1 << day
    return mask


# --------------------------------------------------------------------------------------------
# Zone transitions, to know when the fast wall-clock engine is exact
# --------------------------------------------------------------------------------------------

_Transition = tuple[datetime, date, date]  # (UTC instant, local date before, local date after)
_SAMPLE: Final = timedelta(hours=6)
_MARGIN: Final = timedelta(days=2)
"""Spring's search revisits the start and result days (``with`` moves back within a day and
resolves with the offset it carries), so transitions this close to the window also count."""
_transition_cache: dict[tuple[tzinfo, int], tuple[_Transition, ...]] = {}


def _to_local(tz: tzinfo, utc: datetime) -> datetime:
    """The aware local datetime in ``tz`` of the naive UTC instant ``utc``."""
    return tz.fromutc(utc.replace(tzinfo=tz))


def _year_transitions(tz: tzinfo, year: int) -> tuple[_Transition, ...]:
    """UTC-offset changes of ``tz`` during UTC year ``year`` (sampled every 6 h, bisected)."""
    key = (tz, year)
    cached = _transition_cache.get(key)
    if cached is not None:
        return cached
    found: list[_Transition] = []
    t = datetime(year, 1, 1)
    end = datetime(year + 1, 1, 1) if year < 9999 else datetime(9999, 12, 31)
    prev = _to_local(tz, t).utcoffset()
    while t < end:
        nxt = min(t + _SAMPLE, end)
        off = _to_local(tz, nxt).utcoffset()
        if off != prev:
            lo, hi = t, nxt  # offset(lo) == prev != offset(hi)
            while hi - lo > _ONE_SECOND:
                mid = lo + (hi - lo) // 2
                mid = mid.replace(microsecond=0)
                if mid <= lo:
                    mid = lo + _ONE_SECOND
                if _to_local(tz, mid).utcoffset() == prev:
                    lo = mid
                else:
                    hi = mid
            before = _to_local(tz, hi - _ONE_SECOND).date()
            after = _to_local(tz, hi).date()
            found.append((hi, before, after))
            prev = off
        t = nxt
    result = tuple(found)
    if len(_transition_cache) > 4096:
        _transition_cache.clear()
    _transition_cache[key] = result
    return result


def _window_is_plain(
    tz: tzinfo, utc_from: datetime, utc_to: datetime, first_day: date, last_day: date
) -> bool:
    """True if every offset change in (utc_from, utc_to] lies on days strictly between
    ``first_day`` and ``last_day``, days Spring's search skips wholesale with date
    arithmetic; then the naive wall-clock answer is Spring's answer."""
    for year in range(utc_from.year, utc_to.year + 1):
        for instant, before, after in _year_transitions(tz, year):
            if utc_from < instant <= utc_to and not (first_day < before and after < last_day):
                return False
    return True


# --------------------------------------------------------------------------------------------
# Emulation of Spring's ZonedDateTime algorithm (used near transitions)
# --------------------------------------------------------------------------------------------

_SEC, _MIN, _HOUR, _DOM, _MONTH, _DOW = range(6)
_Zdt = tuple[datetime, timedelta]  # (naive local date-time, UTC offset)


def _add_months(local: datetime, months: int) -> datetime:
    """``LocalDateTime.plusMonths``: the day is clamped to the target month's length."""
    total = local.year * 12 + local.month - 1 + months
    year, month0 = divmod(total, 12)
    day = min(local.day, calendar.monthrange(year, month0 + 1)[1])
    return local.replace(year=year, month=month0 + 1, day=day)


class _Zoned:
    """Spring's field operations on a (local, offset) pair in a fixed zone, as java.time does."""

    def __init__(self, tz: tzinfo) -> None:
        self.tz = tz

    def resolve(self, local: datetime, preferred: timedelta) -> _Zdt:
        """``ZonedDateTime.ofLocal``: gap shifts forward, overlap keeps the preferred offset."""
        tz = self.tz
        o0 = local.replace(tzinfo=tz).utcoffset()
        o1 = local.replace(tzinfo=tz, fold=1).utcoffset()
        assert o0 is not None and o1 is not None
        if o0 == o1:
            return local, o0
        if o1 > o0:  # gap: move forward by the gap length, take the later offset
            return local + (o1 - o0), o1
        return local, (preferred if preferred == o1 else o0)

    def plus_instant(self, t: _Zdt, delta: timedelta) -> _Zdt:
        """Time-based ``plus``: arithmetic on the instant."""
        a = _to_local(self.tz, t[0] - t[1] + delta)
        off = a.utcoffset()
        assert off is not None
        return a.replace(tzinfo=None), off

    @staticmethod
    def get(kind: int, local: datetime) -> int:
        """``temporal.get(field)``."""
        if kind == _SEC:
            return local.second
        if kind == _MIN:
            return local.minute
        if kind == _HOUR:
            return local.hour
        if kind == _DOM:
            return local.day
        if kind == _MONTH:
            return local.month
        return local.isoweekday()

    @staticmethod
    def range(kind: int, local: datetime) -> tuple[int, int]:
        """``temporal.range(field)``."""
        if kind in (_SEC, _MIN):
            return 0, 59
        if kind == _HOUR:
            return 0, 23
        if kind == _DOM:
            return 1, calendar.monthrange(local.year, local.month)[1]
        if kind == _MONTH:
            return 1, 12
        return 1, 7

    def with_(self, kind: int, t: _Zdt, value: int) -> _Zdt:
        """``temporal.with(field, value)``, resolved with the current offset preferred."""
        local = t[0]
        if kind == _SEC:
            local = local.replace(second=value)
        elif kind == _MIN:
            local = local.replace(minute=value)
        elif kind == _HOUR:
            local = local.replace(hour=value)
        elif kind == _DOM:
            local = local.replace(day=value)
        elif kind == _MONTH:
            ndays = calendar.monthrange(local.year, value)[1]
            local = local.replace(month=value, day=min(local.day, ndays))
        else:
            local = local + timedelta(days=value - local.isoweekday())
        return self.resolve(local, t[1])

    def plus_base(self, kind: int, t: _Zdt, amount: int) -> _Zdt:
        """``field.getBaseUnit().addTo(temporal, amount)``."""
        if kind == _SEC:
            return self.plus_instant(t, timedelta(seconds=amount))
        if kind == _MIN:
            return self.plus_instant(t, timedelta(minutes=amount))
        if kind == _HOUR:
            return self.plus_instant(t, timedelta(hours=amount))
        if kind == _MONTH:
            return self.resolve(_add_months(t[0], amount), t[1])
        return self.resolve(t[0] + timedelta(days=amount), t[1])

    def plus_higher(self, kind: int, t: _Zdt) -> _Zdt:
        """``higherOrder.addTo(temporal, 1)``: minutes, hours, days, months, years, weeks."""
        if kind == _SEC:
            return self.plus_instant(t, timedelta(minutes=1))
        if kind == _MIN:
            return self.plus_instant(t, timedelta(hours=1))
        if kind == _HOUR:
            return self.resolve(t[0] + timedelta(days=1), t[1])
        if kind == _DOM:
            return self.resolve(_add_months(t[0], 1), t[1])
        if kind == _MONTH:
            return self.resolve(_add_months(t[0], 12), t[1])
        return self.resolve(t[0] + timedelta(days=7), t[1])

    def roll_forward(self, kind: int, t: _Zdt) -> _Zdt:
        """``Type.rollForward``: one higher-order unit on, then this field to its minimum."""
        t = self.plus_higher(kind, t)
        return self.with_(kind, t, self.range(kind, t[0])[0])

    def elapse_until(self, kind: int, t: _Zdt, goal: int) -> _Zdt:
        """``Type.elapseUntil``."""
        current = self.get(kind, t[0])
        lo, hi = self.range(kind, t[0])
        if current < goal:
            if lo <= goal <= hi:
                return self.with_(kind, t, goal)
            return self.plus_base(kind, t, hi - current + 1)
        return self.plus_base(kind, t, goal + hi - current + 1 - lo)

    def reset(self, kind: int, t: _Zdt) -> _Zdt:
        """``Type.reset``: every lower-order field to its minimum, one ``with`` at a time."""
        if kind == _MONTH:
            t = self.with_(_DOM, t, 1)
        if kind in (_MONTH, _DOM, _DOW):
            t = self.with_(_HOUR, t, 0)
        if kind != _SEC:
            if kind != _MIN:
                t = self.with_(_MIN, t, 0)
            t = self.with_(_SEC, t, 0)
        return t

    def bits_next_or_same(self, kind: int, bits: int, t: _Zdt) -> _Zdt | None:
        """``BitsCronField.nextOrSame`` (after a roll-forward it matches from the value the
        field actually has, so a gap at the start of a period does not skip the period)."""
        current = self.get(kind, t[0])
        nxt = _next_set_bit(bits, current)
        if nxt == -1:
            t = self.roll_forward(kind, t)
            nxt = _next_set_bit(bits, self.get(kind, t[0]))
            if nxt == -1:
                nxt = _next_set_bit(bits, 0)
        if nxt == current:
            return t
        count = 0
        current = self.get(kind, t[0])
        while current != nxt:
            count += 1
            if count > _MAX_ATTEMPTS:
                return None
            t = self.elapse_until(kind, t, nxt)
            current = self.get(kind, t[0])
            nxt = _next_set_bit(bits, current)
            if nxt == -1:
                t = self.roll_forward(kind, t)
                current = self.get(kind, t[0])
                nxt = _next_set_bit(bits, current)
                if nxt == -1:
                    nxt = _next_set_bit(bits, 0)
        return self.reset(kind, t)

    def days_next_or_same(self, mask_of: Callable[[int, int], int], t: _Zdt) -> _Zdt | None:
        """A Quartz day field (``L``, ``W``, ``#``...): the next matching date at midnight,
        or the temporal itself when its own date matches."""
        local = t[0]
        year, month, day = local.year, local.month, local.day
        for _ in range(_SEARCH_YEARS * 12):
            rem = mask_of(year, month) >> day
            if rem:
                found = day + (rem & -rem).bit_length() - 1
                if found == local.day and month == local.month and year == local.year:
                    return t
                moved = self.resolve(local.replace(year=year, month=month, day=found), t[1])
                return self.reset(_DOM, moved)
            day = 1
            month += 1
            if month == 13:
                month = 1
                year += 1
                if year > 9999:
                    return None
        return None


# --------------------------------------------------------------------------------------------
# The expression
# --------------------------------------------------------------------------------------------


def _java_trim(text: str) -> str:
    """Java's ``String.trim()``."""
    return text.strip(_JAVA_WHITESPACE)


class CronExpression:
    """A parsed Spring cron expression; immutable, hashable, equal when the text is equal."""

    __slots__ = (
        "_dom_bits",
        "_dom_quartz",
        "_dom_star",
        "_dow_bits",
        "_dow_quartz",
        "_dow_star",
        "_h0",
        "_hour_bits",
        "_m0",
        "_masks",
        "_min_bits",
        "_month_bits",
        "_month_next",
        "_nh",
        "_nm",
        "_ns",
        "_s0",
        "_sec_bits",
        "_text",
    )

    def __init__(self, text: str, fields: tuple[str, ...]) -> None:
        """Build from the six trimmed field texts; use :meth:`parse` instead."""
        index = 0
        try:
            self._sec_bits = _parse_bits(fields[0], 0)
            index = 1
            self._min_bits = _parse_bits(fields[1], 1)
            index = 2
            self._hour_bits = _parse_bits(fields[2], 2)
            index = 3
            self._dom_bits, self._dom_quartz, self._dom_star = _parse_dom(fields[3])
            index = 4
            self._month_bits = _parse_month(fields[4])
            index = 5
            self._dow_bits, self._dow_quartz, self._dow_star = _parse_dow(fields[5])
        except _FieldError as exc:
            raise CronSyntaxError(text, _FIELD_NAMES[index], str(exc)) from None
        self._text = text
        self._ns = _next_table(self._sec_bits, 60)
        self._nm = _next_table(self._min_bits, 60)
        self._nh = _next_table(self._hour_bits, 24)
        self._s0, self._m0, self._h0 = self._ns[0], self._nm[0], self._nh[0]
        month_next = list(_next_table(self._month_bits, 13))
        month_next[13] = -1
        self._month_next = tuple(month_next)
        self._masks: dict[int, int] = {}

    # ---------------------------------------------------------------- construction

    @classmethod
    def parse(cls, text: str) -> CronExpression:
        """Parse six space-separated fields or a macro; raise CronSyntaxError if Spring would."""
        return _parse_cached(text)

    @staticmethod
    def is_valid(text: str) -> bool:
        """True if :meth:`parse` accepts ``text``."""
        try:
            _parse_cached(text)
        except CronSyntaxError:
            return False
        return True

    # ---------------------------------------------------------------- value semantics

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"CronExpression.parse({self._text!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CronExpression):
            return NotImplemented
        return self._text == other._text

    def __hash__(self) -> int:
        return hash(self._text)

    # ---------------------------------------------------------------- evaluation

    def next(self, after: datetime) -> datetime | None:
        """The first matching time strictly after ``after`` (aware), in its zone, or None."""
        tz = after.tzinfo
        off = after.utcoffset() if tz is not None else None
        if tz is None or off is None:
            raise ValueError("next() needs a timezone-aware datetime (e.g. with a ZoneInfo)")
        utc = after.replace(tzinfo=None) - off
        if isinstance(tz, timezone):
            local = after.replace(tzinfo=None, microsecond=0) + _ONE_SECOND
            found = self._search(local)
            if found is None:
                return None
            return found.replace(tzinfo=tz)
        start = _to_local(tz, utc)  # normalise times in a gap, and fold
        local = start.replace(tzinfo=None, microsecond=0) + _ONE_SECOND
        found = self._search(local)
        if found is None:
            return None
        result = found.replace(tzinfo=tz)
        roff = result.utcoffset()
        assert roff is not None
        utc_found = found - roff
        if utc_found > utc and _window_is_plain(
            tz, utc - _MARGIN, utc_found + _MARGIN, start.date(), found.date()
        ):
            return result
        return self._spring_next(tz, start)

    def next_n(self, after: datetime, n: int) -> list[datetime]:
        """Up to ``n`` consecutive matching times after ``after``."""
        out: list[datetime] = []
        current: datetime | None = after
        while len(out) < n:
            assert current is not None
            current = self.next(current)
            if current is None:
                break
            out.append(current)
        return out

    def iter(self, after: datetime) -> Iterator[datetime]:
        """Every matching time after ``after``, in order, until none is left."""
        current = self.next(after)
        while current is not None:
            yield current
            current = self.next(current)

    # ---------------------------------------------------------------- fast engine

    def _month_mask(self, year: int, month: int) -> int:
        """Days of (year, month) matching both day fields (cached)."""
        key = year * 12 + month
        mask = self._masks.get(key)
        if mask is None:
            if self._dom_star:
                mask = (1 << (calendar.monthrange(year, month)[1] + 1)) - 2
            else:
                mask = _dom_mask(self._dom_bits, self._dom_quartz, year, month)
            if not self._dow_star:
                mask &= _dow_mask(self._dow_bits, self._dow_quartz, year, month)
            if len(self._masks) > 8192:
                self._masks.clear()
            self._masks[key] = mask
        return mask

    def _search(self, local: datetime) -> datetime | None:
        """The first matching naive wall-clock time at or after ``local`` (whole seconds)."""
        year, month, day = local.year, local.month, local.day
        h, m, s = local.hour, local.minute, local.second
        month_next = self._month_next
        nh, nm, ns = self._nh, self._nm, self._ns
        last_year = min(year + _SEARCH_YEARS, 9999)
        fresh = False  # True once we moved to a later day: take the first time of day
        while year <= last_year:
            nxt = month_next[month]
            if nxt != month:
                if nxt == -1:
                    year += 1
                    if year > last_year:
                        return None
                    month = month_next[1]
                else:
                    month = nxt
                day = 1
                fresh = True
            rem = self._month_mask(year, month) >> day
            if not rem:
                month += 1
                day = 1
                fresh = True
                continue
            found = day + (rem & -rem).bit_length() - 1
            if fresh or found != day:
                return datetime(year, month, found, self._h0, self._m0, self._s0)
            # same day: the time-of-day search with carry
            hh = nh[h]
            if hh == h:
                mm = nm[m]
                if mm == m:
                    ss = ns[s]
                    if ss >= 0:
                        return datetime(year, month, day, h, m, ss)
                    mm = nm[m + 1]
                    if mm >= 0:
                        return datetime(year, month, day, h, mm, self._s0)
                elif mm > m:
                    return datetime(year, month, day, h, mm, self._s0)
                hh = nh[h + 1]
            if hh >= 0:
                return datetime(year, month, day, hh, self._m0, self._s0)
            day += 1
            fresh = True
        return None

    # ---------------------------------------------------------------- Spring emulation

    def _spring_next(self, tz: tzinfo, start: datetime) -> datetime | None:
        """Spring's ``next`` step for step on java.time semantics (for transition windows)."""
        z = _Zoned(tz)
        off = start.utcoffset()
        assert off is not None
        # +1 ns, then the zero-nanos field rolls forward to the next whole second (instant)
        t: _Zdt | None = z.plus_instant(
            (start.replace(tzinfo=None, microsecond=0), off), _ONE_SECOND
        )
        assert t is not None
        for _ in range(_MAX_ATTEMPTS):
            result = self._spring_internal(z, t)
            if result is None or result == t:
                break
            t = result
        else:
            return None
        if result is None:
            return None
        local, roff = result
        if local - roff <= start.replace(tzinfo=None) - off:
            # Spring can land back on (or before) its start in a half-hour overlap
            # (Australia/Lord_Howe); keep the promise "strictly after" instead.
            return self._wall_clock_next(tz, start)
        aware = local.replace(tzinfo=tz)
        if aware.utcoffset() != roff:
            aware = aware.replace(fold=1)
        return aware

    def _wall_clock_next(self, tz: tzinfo, start: datetime) -> datetime | None:
        """Fallback: the first existing wall-clock match (either fold) after ``start``."""
        off = start.utcoffset()
        assert off is not None
        utc_start = start.replace(tzinfo=None) - off
        local: datetime | None = start.replace(tzinfo=None, microsecond=0)
        for _ in range(100_000):
            assert local is not None
            local = self._search(local + _ONE_SECOND)
            if local is None:
                return None
            for fold in (0, 1):
                aware = local.replace(tzinfo=tz, fold=fold)
                utc = local - (aware.utcoffset() or _ZERO)
                back = _to_local(tz, utc)
                if back.replace(tzinfo=None) == local and utc > utc_start:
                    return back
        return None

    def _spring_internal(self, z: _Zoned, t: _Zdt) -> _Zdt | None:
        """One pass over the fields in Spring's order: dow, month, dom, hour, minute, second."""
        r: _Zdt | None = t
        if self._dow_quartz:
            r = z.days_next_or_same(
                lambda y, m: _dow_mask(self._dow_bits, self._dow_quartz, y, m), t
            )
        elif not self._dow_star:
            r = z.bits_next_or_same(_DOW, self._dow_bits, t)
        if r is None:
            return None
        r = z.bits_next_or_same(_MONTH, self._month_bits, r)
        if r is None:
            return None
        if self._dom_quartz:
            r = z.days_next_or_same(
                lambda y, m: _dom_mask(self._dom_bits, self._dom_quartz, y, m), r
            )
        elif not self._dom_star:
            r = z.bits_next_or_same(_DOM, self._dom_bits, r)
        if r is None:
            return None
        for kind, bits in (
            (_HOUR, self._hour_bits),
            (_MIN, self._min_bits),
            (_SEC, self._sec_bits),
        ):
            r = z.bits_next_or_same(kind, bits, r)
            if r is None:
                return None
        return r


@lru_cache(maxsize=512)
def _parse_cached(text: str) -> CronExpression:
    """Parse once per distinct text (expressions are immutable)."""
    if not isinstance(text, str):
        raise TypeError("a cron expression must be a str")
    trimmed = _java_trim(text)
    if not trimmed:
        raise CronSyntaxError(text, None, "the expression is empty")
    trimmed = _MACROS.get(trimmed.lower(), trimmed)
    fields = tuple(_java_trim(f) for f in trimmed.split(" ") if f)
    fields = tuple(f for f in fields if f)
    if len(fields) != 6:
        raise CronSyntaxError(
            trimmed,
            None,
            f"a cron expression has exactly 6 fields separated by spaces "
            f"(second minute hour day-of-month month day-of-week), found {len(fields)}",
        )
    return CronExpression(trimmed, fields)
