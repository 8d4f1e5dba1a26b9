"""Spring-compatible six-field cron expressions (``second minute hour dom month dow``).

Semantics follow Spring Framework's ``org.springframework.scheduling.support.CronExpression``:
``CronExpression.parse(text).next(after)`` gives the first matching wall-clock time strictly
after ``after``, in ``after``'s zone, or ``None`` when no time ever matches.

Two engines share the parsed fields:

* a fast engine that searches naive wall-clock values field by field (month, day, hour,
  minute, second with carry) over precomputed lookup tables, used whenever no UTC-offset
  transition of the zone can influence the answer and Spring's day fields match a fixed set
  of days per month;
* a faithful emulation of Spring's ``ZonedDateTime`` algorithm (``with`` resolves local
  times with the previous offset preferred, time units add to the instant, date units to
  the local date-time, the fields are checked on ``after`` + 1 ns and rounded up to the
  whole second last, Quartz adjusters step for step), used near daylight-saving
  transitions and for the Quartz fields whose answer depends on where Spring's search
  stands (``1W``, ``nW`` with n >= 29, ``L-n`` with n >= 28, ``#n`` with n >= 6).

The module is pure: it depends on the standard library only.
"""

from __future__ import annotations

import calendar
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta, timezone, tzinfo
from functools import lru_cache
from typing import Final

from wow_temporal.errors import WowTemporalError

__all__ = ["CronExpression", "CronSyntaxError"]

_MAX_ATTEMPTS: Final = 366
"""Spring's bound on the outer fix-point loop and on each field's inner loop."""

_SEARCH_YEARS: Final = 400
"""The Gregorian calendar repeats every 400 years: nothing found in that span never matches."""

_CYCLE_START: Final = datetime(1970, 1, 1, tzinfo=UTC)
"""Where `ever_matches` looks from: the 400 years after it hold every year the calendar has
(by leap year and weekday), far from both ends of what ``datetime`` holds."""

_MAX_RESTARTS: Final = 4000
"""How often the search carries on after Spring landed back before its start."""

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

_JAVA_FOLD: Final = {"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"}
"""Non-ASCII characters that Java's ``equalsIgnoreCase`` takes for an ASCII letter."""

_FIELD_NAMES: Final = ("second", "minute", "hour", "day-of-month", "month", "day-of-week")
_RANGES: Final = ((0, 59), (0, 59), (0, 23), (1, 31), (1, 12), (0, 7))

_INT_MIN: Final = -(2**31)
_INT_MAX: Final = 2**31 - 1
_JAVA_WHITESPACE: Final = "".join(chr(i) for i in range(33))
"""What Java's ``String.trim()`` strips: every character up to and including the space."""


class CronSyntaxError(WowTemporalError, ValueError):
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
    """Parse a decimal integer the way Java's ``Integer.parseInt`` does: an optional sign, then
    decimal digits of any script in the Basic Multilingual Plane, within 32 bits."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or not all(c <= "\uffff" and c.isdecimal() for c in digits):
        raise _FieldError(f"{what} '{text}' is not a number")
    value = int(text)
    if not _INT_MIN <= value <= _INT_MAX:
        raise _FieldError(f"{what} '{text}' does not fit in 32 bits")
    return value


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
        if end + step <= _INT_MAX:
            for v in range(start, end + 1, step):
                bits |= 1 << v
        else:  # Java's int loop overflows and wraps; 1L << i keeps the low 6 bits of i
            v = start
            while v <= end:
                bits |= 1 << (v & 63)
                v = (v + step - _INT_MIN) % 2**32 + _INT_MIN
    if index == 5 and bits & 1:
        bits = (bits | (1 << 7)) & ~1  # 0 and 7 are both Sunday; keep 7 like java.time
    return bits


# Quartz elements, one per comma-separated part, as Spring keeps them: ("B", bits, 0) a plain
# part; day-of-month ("L", n, 0) last day minus n, ("LW", 0, 0), ("W", n, 0); day-of-week
# ("DL", iso_dow, 0) last such weekday, ("#", iso_dow, n) the n-th such weekday.
_Part = tuple[str, int, int]


def _parse_dom(value: str) -> tuple[int, tuple[_Part, ...], bool]:
    """Parse day-of-month into (bits of the plain parts, all parts if Quartz, is-wildcard)."""
    if value in ("?", "*"):
        return _parse_bits("*", 3), (), True
    if "L" not in value and "W" not in value:
        return _parse_bits(value, 3), (), False
    bits = 0
    parts: list[_Part] = []
    for part in value.split(","):
        if "L" not in part and "W" not in part:
            part_bits = _parse_bits("*" if part == "?" else part, 3)
            bits |= part_bits
            parts.append(("B", part_bits, 0))
            continue
        idx = part.rfind("L")
        if idx != -1:
            if idx != 0:
                raise _FieldError(f"unrecognized characters before 'L' in '{part}'")
            if part == "L":
                parts.append(("L", 0, 0))
            elif part == "LW":
                parts.append(("LW", 0, 0))
            else:  # Spring parses the rest, sign included, and wants it negative
                offset = _parse_int(part[1:], "offset")
                if offset >= 0:
                    raise _FieldError(f"offset in '{part}' must be negative, as in 'L-3'")
                parts.append(("L", -offset, 0))
            continue
        idx = part.rfind("W")
        if idx == 0:
            raise _FieldError(f"no day-of-month before 'W' in '{part}'")
        if idx != len(part) - 1:
            raise _FieldError(f"unrecognized characters after 'W' in '{part}'")
        day = _check(_parse_int(part[:idx], "day-of-month"), 1, 31)
        parts.append(("W", day, 0))
    return bits, tuple(parts), False


def _parse_dow_day(text: str) -> int:
    """Parse the weekday before ``L`` or ``#`` (0-7, Sunday 0 or 7) into ISO 1-7."""
    day = _check(_parse_int(text, "day-of-week"), 0, 7)
    return 7 if day == 0 else day


def _parse_dow(value: str) -> tuple[int, tuple[_Part, ...], bool]:
    """Parse day-of-week into (bits over ISO 1-7 of the plain parts, all parts if Quartz,
    is-wildcard)."""
    value = value.upper()
    for i, name in enumerate(_DAY_NAMES):
        value = value.replace(name, str(i + 1))
    if value in ("?", "*"):
        return _parse_bits("*", 5), (), True
    if "L" not in value and "#" not in value:
        return _parse_bits(value, 5), (), False
    bits = 0
    parts: list[_Part] = []
    for part in value.split(","):
        if "L" not in part and "#" not in part:
            part_bits = _parse_bits("*" if part == "?" else part, 5)
            bits |= part_bits
            parts.append(("B", part_bits, 0))
            continue
        idx = part.rfind("L")
        if idx != -1:
            if idx != len(part) - 1:
                raise _FieldError(f"unrecognized characters after 'L' in '{part}'")
            if idx == 0:
                raise _FieldError(f"no day-of-week before 'L' in '{part}'")
            parts.append(("DL", _parse_dow_day(part[:idx]), 0))
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
        parts.append(("#", day, ordinal))
    return bits, tuple(parts), False


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


def _dom_mask(bits: int, parts: tuple[_Part, ...], year: int, month: int) -> int:
    """Days of (year, month) matching the day-of-month field on its own, for the fields whose
    Spring behaviour does not depend on where the search stands (see ``_path_free``)."""
    first_dow, ndays = calendar.monthrange(year, month)  # first_dow: Monday == 0
    mask = bits & ((1 << (ndays + 1)) - 2)
    for kind, arg, _ in parts:
        if kind == "L":
            mask |= 1 << (ndays - arg)
        elif kind == "LW":
            wd = (first_dow + ndays - 1) % 7  # Monday == 0
            day = ndays - (wd - 4 if wd >= 5 else 0)
            mask |= 1 << day
        elif kind == "W":  # weekday nearest to day `arg`
            if arg > ndays:
                continue
            wd = (first_dow + arg - 1) % 7
            if wd == 5:  # Saturday: the Friday before (1W is not path-free)
                mask |= 1 << (arg - 1)
            elif wd == 6:  # Sunday: the Monday after; on the last day Spring moves to
                if arg < ndays:  # Monday the 1st, which it then does not accept: no fire
                    mask |= 1 << (arg + 1)
            else:
                mask |= 1 << arg
    return mask


def _dow_mask(bits: int, parts: tuple[_Part, ...], year: int, month: int) -> int:
    """Days of (year, month) matching the day-of-week field on its own (path-free fields)."""
    first_dow, ndays = calendar.monthrange(year, month)
    mask = 0
    if bits:
        for day in range(1, 8):
            if bits >> ((first_dow + day - 1) % 7 + 1) & 1:
                d = day
                while d <= ndays:
                    mask |= 1 << d
                    d += 7
    for kind, iso, ordinal in parts:
        if kind == "DL":
            first = (iso - 1 - first_dow) % 7 + 1
            mask |= 1 << (first + 7 * ((ndays - first) // 7))
        elif kind == "#":
            day = (iso - 1 - first_dow) % 7 + 1 + 7 * (ordinal - 1)
            if day <= ndays:
                mask |= 1 << day
    return mask


def _path_free(parts: tuple[_Part, ...]) -> bool:
    """True if Spring's Quartz parts match a fixed set of days per month whatever date the
    search stands on, so the mask engine gives Spring's answer. Not so: ``L-n`` with n >= 28
    (Spring counts back into the previous month), ``1W`` (from Sunday the 2nd Spring moves on
    to the next month), ``nW`` with n >= 29 (standing on Friday the (n-1)th Spring accepts it
    even when the month has no day n) and ``#n`` with n >= 6 (Spring retries in later
    months)."""
    for kind, arg, ordinal in parts:
        if (kind == "L" and arg >= 28) or (kind == "W" and not 2 <= arg <= 28) or ordinal >= 6:
            return False
    return True


# --------------------------------------------------------------------------------------------
# Zone transitions, to know when the fast wall-clock engine is exact
# --------------------------------------------------------------------------------------------

_Transition = tuple[datetime, date, date]  # (UTC instant, local date before, local date after)
_SAMPLE: Final = timedelta(hours=6)
_MARGIN: Final = timedelta(days=2)
"""Spring's search revisits the start and result days (``with`` moves back within a day and
resolves with the offset it carries), so transitions this close to the window also count."""
_transition_cache: dict[tuple[tzinfo, int], tuple[_Transition, ...]] = {}


def _clamped(utc: datetime, delta: timedelta) -> datetime:
    """``utc + delta``, held at the calendar's ends: a window around an answer near year 1 or
    9999 is cut there rather than raising OverflowError (no transition lies beyond)."""
    try:
        return utc + delta
    except OverflowError:
        return datetime.max if delta > _ZERO else datetime.min


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
            if utc_from < instant <= utc_to and not (
                first_day < min(before, after) and max(before, after) < last_day
            ):
                return False
    return True


# --------------------------------------------------------------------------------------------
# Emulation of Spring's ZonedDateTime algorithm (used near transitions)
# --------------------------------------------------------------------------------------------

_SEC, _MIN, _HOUR, _DOM, _MONTH, _DOW = range(6)
_Zdt = tuple[datetime, timedelta, int]
"""A ZonedDateTime: naive local date-time in whole seconds, UTC offset, nanosecond of second."""

_LOWER: Final = {
    _SEC: (),
    _MIN: (_SEC,),
    _HOUR: (_MIN, _SEC),
    _DOM: (_HOUR, _MIN, _SEC),
    _MONTH: (_DOM, _HOUR, _MIN, _SEC),
    _DOW: (_HOUR, _MIN, _SEC),
}
"""``Type.lowerOrders``, nanoseconds (always last) left out."""


class _Backward(Exception):
    """Internal: Spring's search went back beyond the dates Python can represent."""


def _add_months(local: datetime, months: int) -> datetime:
    """``LocalDateTime.plusMonths``: the day is clamped to the target month's length."""
    total = local.year * 12 + local.month - 1 + months
    year, month0 = divmod(total, 12)
    day = min(local.day, calendar.monthrange(year, month0 + 1)[1])
    return local.replace(year=year, month=month0 + 1, day=day)


def _key(t: _Zdt) -> tuple[datetime, int]:
    """``ZonedDateTime.compareTo`` within one zone: the instant, then the nanoseconds."""
    return t[0] - t[1], t[2]


class _Zoned:
    """Spring's field operations on ZonedDateTime values of one zone, as java.time does them:
    ``with`` and date units work on the local date-time and resolve it with the current
    offset preferred, time units add to the instant."""

    def __init__(self, tz: tzinfo) -> None:
        self.tz = tz
        self.fixed = tz.utcoffset(None) if isinstance(tz, timezone) else None

    def resolve(self, local: datetime, preferred: timedelta) -> tuple[datetime, timedelta]:
        """``ZonedDateTime.ofLocal``: gap shifts forward, overlap keeps the preferred offset.

        ``local``'s own ``fold`` is dropped first: the offset says which pass of an overlap
        is meant, and a ``fold=1`` kept from a start in an overlap (``replace`` carries it
        into every local derived from it) made both probes below read the same offset, so
        a wall time in a later gap was taken as existing (issue #38)."""
        local = local.replace(fold=0)
        if self.fixed is not None:
            return local, self.fixed
        tz = self.tz
        o0 = local.replace(tzinfo=tz).utcoffset()
        o1 = local.replace(tzinfo=tz, fold=1).utcoffset()
        assert o0 is not None and o1 is not None
        if o0 == o1:
            return local, o0
        if o1 > o0:  # gap: move forward by the gap length, take the later offset
            return local + (o1 - o0), o1
        return local, (preferred if preferred == o1 else o0)

    def local(self, local: datetime, t: _Zdt, ns: int) -> _Zdt:
        """A new local date-time resolved with ``t``'s offset preferred."""
        if self.fixed is not None:
            return local, self.fixed, ns
        moved, off = self.resolve(local, t[1])
        return moved, off, ns

    def plus_instant(self, t: _Zdt, delta: timedelta) -> _Zdt:
        """Time-based ``plus``: arithmetic on the instant."""
        if self.fixed is not None:
            return t[0] + delta, t[1], t[2]
        a = _to_local(self.tz, t[0] - t[1] + delta)
        off = a.utcoffset()
        assert off is not None
        return a.replace(tzinfo=None), off, t[2]

    def plus_days(self, t: _Zdt, days: int) -> _Zdt:
        """``plus(days, DAYS)``."""
        try:
            return self.local(t[0] + timedelta(days=days), t, t[2])
        except OverflowError:
            if days < 0:
                raise _Backward from None
            raise

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
        return self.local(local, t, t[2])

    def plus_base(self, kind: int, t: _Zdt, amount: int) -> _Zdt:
        """``field.getBaseUnit().addTo(temporal, amount)``."""
        if kind == _SEC:
            return self.plus_instant(t, timedelta(seconds=amount))
        if kind == _MIN:
            return self.plus_instant(t, timedelta(minutes=amount))
        if kind == _HOUR:
            return self.plus_instant(t, timedelta(hours=amount))
        if kind == _MONTH:
            return self.local(_add_months(t[0], amount), t, t[2])
        return self.plus_days(t, amount)

    def plus_higher(self, kind: int, t: _Zdt) -> _Zdt:
        """``higherOrder.addTo(temporal, 1)``: minutes, hours, days, months, years, weeks."""
        if kind == _SEC:
            return self.plus_instant(t, timedelta(minutes=1))
        if kind == _MIN:
            return self.plus_instant(t, timedelta(hours=1))
        if kind == _HOUR:
            return self.plus_days(t, 1)
        if kind == _DOM:
            return self.local(_add_months(t[0], 1), t, t[2])
        if kind == _MONTH:
            return self.local(_add_months(t[0], 12), t, t[2])
        return self.plus_days(t, 7)

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
        for lower in _LOWER[kind]:
            t = self.with_(lower, t, 1 if lower == _DOM else 0)
        return t[0], t[1], 0

    def at_midnight(self, t: _Zdt) -> _Zdt:
        """``with(NANO_OF_DAY, 0)``."""
        return self.local(t[0].replace(hour=0, minute=0, second=0), t, 0)

    def bits_next_or_same(self, kind: int, bits: int, t: _Zdt) -> _Zdt | None:
        """``BitsCronField.nextOrSame``."""
        get = self.get
        current = get(kind, t[0])
        nxt = _next_set_bit(bits, current)
        if nxt == -1:
            t = self.roll_forward(kind, t)
            nxt = _next_set_bit(bits, get(kind, t[0]))
            if nxt == -1:
                t = self.roll_forward(kind, t)
                nxt = _next_set_bit(bits, 0)
        if nxt == current:
            return t
        count = 0
        current = get(kind, t[0])
        while current != nxt:
            count += 1
            if count > _MAX_ATTEMPTS:
                break
            t = self.elapse_until(kind, t, nxt)
            current = get(kind, t[0])
            nxt = _next_set_bit(bits, current)
            if nxt == -1:
                t = self.roll_forward(kind, t)
                nxt = _next_set_bit(bits, get(kind, t[0]))
                if nxt == -1:
                    t = self.roll_forward(kind, t)
                    nxt = _next_set_bit(bits, 0)
                current = get(kind, t[0])
        if count >= _MAX_ATTEMPTS:
            return None
        return self.reset(kind, t)

    # ------------------------------------------------------------ Quartz adjusters

    def rollback_to_midnight(self, current: _Zdt, result: _Zdt) -> _Zdt:
        """Spring keeps ``current`` when the adjusted day has the same day-of-month number
        (even in another month), else takes midnight of the adjusted day."""
        if result[0].day == current[0].day:
            return current
        return self.at_midnight(result)

    def adjust(self, part: _Part, t: _Zdt) -> _Zdt | None:
        """One Quartz part's ``TemporalAdjuster``."""
        kind, arg, ordinal = part
        if kind == "W":
            return self.nearest_weekday(arg, t)
        if kind == "#":
            for _ in range(12):
                first = self.with_(_DOM, t, 1)
                diff = (arg - first[0].isoweekday()) % 7 + (ordinal - 1) * 7
                try:
                    result = self.plus_days(first, diff)
                except OverflowError:
                    return None
                if result[0].month == t[0].month:
                    return self.rollback_to_midnight(t, result)
                t = result  # past the month's end: try again in the month it reached
            return None
        last = self.with_(_DOM, t, self.range(_DOM, t[0])[1])
        if kind == "L":
            result = self.plus_days(last, -arg) if arg else last
        elif kind == "LW":
            wd = last[0].isoweekday()
            result = self.plus_days(last, -1 if wd == 6 else -2) if wd >= 6 else last
        else:  # "DL"
            diff = arg - last[0].isoweekday()
            result = self.plus_days(last, diff - 7 if diff > 0 else diff) if diff else last
        return self.rollback_to_midnight(t, result)

    def nearest_weekday(self, day: int, t: _Zdt) -> _Zdt | None:
        """``weekdayNearestTo(day)``, step for step."""
        current = t[0].day
        wd = t[0].isoweekday()
        if (
            (current == day and wd < 6)
            or (wd == 5 and current == day - 1)
            or (wd == 1 and current == day + 1)
            or (wd == 1 and day == 1 and current == 3)
        ):
            return t
        for _ in range(_MAX_ATTEMPTS):
            if current == day:
                wd = t[0].isoweekday()
                if wd == 6:
                    t = self.plus_days(t, -1 if day != 1 else 2)
                elif wd == 7:
                    t = self.plus_days(t, 1)
                return self.at_midnight(t)
            t = self.elapse_until(_DOM, t, day)
            current = t[0].day
        return None

    def quartz_next_or_same(self, kind: int, part: _Part, t: _Zdt) -> _Zdt | None:
        """``QuartzCronField.nextOrSame``: adjust; if that went back, adjust from the first of
        the next month (and do not check again: Spring may still answer a time before)."""
        result = self.adjust(part, t)
        if result is not None and _key(result) < _key(t):
            result = self.adjust(part, self.roll_forward(_DOM, t))
            if result is not None:
                result = self.reset(kind, result)
        return result

    def field_next_or_same(self, kind: int, parts: tuple[_Part, ...], t: _Zdt) -> _Zdt | None:
        """``CompositeCronField.nextOrSame``: the earliest answer of the parts."""
        result: _Zdt | None = None
        for part in parts:
            if part[0] == "B":
                candidate = self.bits_next_or_same(kind, part[1], t)
            else:
                candidate = self.quartz_next_or_same(kind, part, t)
            if result is None or (candidate is not None and _key(candidate) < _key(result)):
                result = candidate
        return result


# --------------------------------------------------------------------------------------------
# The expression
# --------------------------------------------------------------------------------------------


def _java_fold(text: str) -> str:
    """Fold ``text`` so that it equals a macro exactly when Java's ``equalsIgnoreCase``
    says so: ASCII letters, plus the few other characters whose case maps onto them."""
    return "".join(
        _JAVA_FOLD.get(c, c.lower() if c.isascii() else "\0") for c in text
    )


def _java_trim(text: str) -> str:
    """Java's ``String.trim()``."""
    return text.strip(_JAVA_WHITESPACE)


class CronExpression:
    """A parsed Spring cron expression; immutable, hashable, equal when the text is equal."""

    __slots__ = (
        "_dom_bits",
        "_dom_parts",
        "_dom_star",
        "_dow_bits",
        "_dow_parts",
        "_dow_star",
        "_emulate",
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
        "_steps",
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
            self._dom_bits, self._dom_parts, self._dom_star = _parse_dom(fields[3])
            index = 4
            self._month_bits = _parse_month(fields[4])
            index = 5
            self._dow_bits, self._dow_parts, self._dow_star = _parse_dow(fields[5])
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
        # Spring's fields in its order; a plain field matching every value is left out
        steps: list[tuple[int, int, tuple[_Part, ...]]] = []
        for kind, bits, parts, full in (
            (_DOW, self._dow_bits, self._dow_parts, 0xFE),
            (_MONTH, self._month_bits, (), 0x1FFE),
            (_DOM, self._dom_bits, self._dom_parts, 0xFFFFFFFE),
            (_HOUR, self._hour_bits, (), 0xFFFFFF),
            (_MIN, self._min_bits, (), 2**60 - 1),
            (_SEC, self._sec_bits, (), 2**60 - 1),
        ):
            if parts or bits != full:
                steps.append((kind, bits, parts))
        self._steps = tuple(steps)
        # the mask engine is exact unless Spring's answer depends on the path of its search
        self._emulate = not (
            _path_free(self._dom_parts)
            and _path_free(self._dow_parts)
            and all(bits & ~full == 0 for _, bits, _, full in (
                (0, self._sec_bits, 0, 2**60 - 1),
                (0, self._min_bits, 0, 2**60 - 1),
                (0, self._hour_bits, 0, 0xFFFFFF),
                (0, self._dom_bits, 0, 0xFFFFFFFE),
                (0, self._month_bits, 0, 0x1FFE),
                (0, self._dow_bits, 0, 0xFE),
            ))
        )

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
        """The first matching time strictly after ``after`` (aware), in its zone, or None.

        This is Spring's ``CronExpression.next(ZonedDateTime)``, with two deliberate
        differences, both where Spring answers a time that is not strictly after ``after``:
        in an overlap that does not start on the hour (Australia/Lord_Howe, Pacific/Chatham,
        America/St_Johns until 2011) we give the next existing wall-clock match instead,
        and where ``L-n`` (n >= 28) sends Spring back into an earlier month we carry on
        from the midnight after the furthest point Spring's search reached.
        """
        tz = after.tzinfo
        off = after.utcoffset() if tz is not None else None
        if tz is None or off is None:
            raise ValueError("next() needs a timezone-aware datetime (e.g. with a ZoneInfo)")
        utc = after.replace(tzinfo=None) - off
        if isinstance(tz, timezone):
            local = after.replace(tzinfo=None, microsecond=0)
            if self._emulate:
                return self._emulated(tz, local, off, after.microsecond)
            found = self._search(local + _ONE_SECOND)
            if found is None:
                return None
            return found.replace(tzinfo=tz)
        start = _to_local(tz, utc)  # normalise times in a gap, and fold
        local = start.replace(tzinfo=None, microsecond=0, fold=0)
        if self._emulate:
            naive = self._emulated(UTC, local, _ZERO, start.microsecond)
            if naive is None:
                return self._spring_next(tz, start)
            found = naive.replace(tzinfo=None)
            result = found.replace(tzinfo=tz)
            roff = result.utcoffset()
            assert roff is not None
            if _no_transition(tz, _clamped(utc, -_MARGIN), _clamped(found - roff, _MARGIN)):
                return result
            return self._spring_next(tz, start)
        found = self._search(local + _ONE_SECOND)
        if found is None:  # rare: let Spring's own search have its say (Pacific/Apia 2011)
            return self._spring_next(tz, start)
        result = found.replace(tzinfo=tz)
        roff = result.utcoffset()
        assert roff is not None
        utc_found = found - roff
        if utc_found > utc and _window_is_plain(
            tz, _clamped(utc, -_MARGIN), _clamped(utc_found, _MARGIN), start.date(), found.date()
        ):
            return result
        return self._spring_next(tz, start)

    def ever_matches(self) -> bool:
        """Whether any time matches at all (``0 0 0 30 2 *`` never does: no February has a
        30th), as Spring's ``next`` returning null from every start would say.

        Only the day fields can make an expression empty (each time field matches some value),
        and which days they match repeats with the Gregorian calendar every 400 years: a
        search of one cycle, in UTC (a zone's offsets move a match, they never take every
        match away), answers for every start and zone. The cost is bounded by that cycle:
        at most 4,800 months of the fast engine, or Spring's bounded emulation, a few ms."""
        return self.next(_CYCLE_START) is not None

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
                mask = _dom_mask(self._dom_bits, self._dom_parts, year, month)
            if not self._dow_star:
                mask &= _dow_mask(self._dow_bits, self._dow_parts, year, month)
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
        off = start.utcoffset()
        assert off is not None
        local = start.replace(tzinfo=None, microsecond=0, fold=0)
        if self._dom_parts or self._dow_parts:
            return self._emulated(tz, local, off, start.microsecond)
        z = _Zoned(tz)
        t0: _Zdt = (local, off, start.microsecond * 1000 + 1)  # Spring adds 1 ns first
        try:
            result, _ = self._spring_loop(z, t0)
        except (OverflowError, ValueError):
            return None
        if result is None:
            return None
        if _key(result) < _key(t0):
            # Spring can land back on (or before) its start in a half-hour overlap
            # (Australia/Lord_Howe); keep the promise "strictly after" instead.
            return self._wall_clock_next(tz, start)
        return _aware(tz, result)

    def _emulated(
        self, tz: tzinfo, local: datetime, off: timedelta, micro: int
    ) -> datetime | None:
        """Spring's ``next`` step for step from ``local`` (offset ``off``) plus ``micro``
        microseconds; when Spring lands at or before that start (``L-n`` counting back into
        an earlier month), carry on from the midnight after the furthest point it reached."""
        z = _Zoned(tz)
        t0: _Zdt = (local, off, micro * 1000 + 1)  # Spring adds 1 ns first
        floor = _key(t0)
        t = t0
        for _ in range(_MAX_RESTARTS):
            try:
                result, furthest = self._spring_loop(z, t)
            except _Backward as exc:
                furthest = exc.args[0]
            except (OverflowError, ValueError):
                return None
            else:
                if result is None:
                    return None
                if _key(result) >= floor:
                    return _aware(tz, result)
            day = furthest[0].replace(hour=0, minute=0, second=0) + timedelta(days=1)
            t = z.local(day, furthest, 0)
        return None

    def _spring_loop(self, z: _Zoned, t: _Zdt) -> tuple[_Zdt | None, _Zdt]:
        """``CronExpression.nextOrSame``: passes over the fields until one changes nothing;
        also the furthest value the passes reached."""
        furthest = t
        for _ in range(_MAX_ATTEMPTS):
            try:
                result = self._spring_pass(z, t)
            except _Backward:
                raise _Backward(furthest) from None
            if result is None or result == t:
                return result, furthest
            t = result
            if _key(t) > _key(furthest):
                furthest = t
        return None, furthest

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

    def _spring_pass(self, z: _Zoned, t: _Zdt) -> _Zdt | None:
        """One pass over the fields in Spring's order: dow, month, dom, hour, minute, second,
        then the zero-nanos field, which rounds up to the next whole second (on the instant)."""
        r: _Zdt | None = t
        for kind, bits, parts in self._steps:
            assert r is not None
            if parts:
                r = z.field_next_or_same(kind, parts, r)
            else:
                r = z.bits_next_or_same(kind, bits, r)
            if r is None:
                return None
        assert r is not None
        if r[2]:
            moved = z.plus_instant(r, _ONE_SECOND)
            r = moved[0], moved[1], 0
        return r


def _aware(tz: tzinfo, t: _Zdt) -> datetime:
    """The aware datetime of an emulated ZonedDateTime (fold picks the offset)."""
    aware = t[0].replace(tzinfo=tz, fold=0)
    if aware.utcoffset() != t[1]:
        aware = aware.replace(fold=1)
    return aware


def _no_transition(tz: tzinfo, utc_from: datetime, utc_to: datetime) -> bool:
    """True if ``tz`` changes its UTC offset nowhere in (utc_from, utc_to]."""
    for year in range(utc_from.year, min(utc_to.year, 9998) + 1):
        for instant, _, _ in _year_transitions(tz, year):
            if utc_from < instant <= utc_to:
                return False
    return True


@lru_cache(maxsize=512)
def _parse_cached(text: str) -> CronExpression:
    """Parse once per distinct text (expressions are immutable)."""
    if not isinstance(text, str):
        raise TypeError("a cron expression must be a str")
    trimmed = _java_trim(text)
    if not trimmed:
        raise CronSyntaxError(text, None, "the expression is empty")
    trimmed = _MACROS.get(_java_fold(trimmed), trimmed)
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
