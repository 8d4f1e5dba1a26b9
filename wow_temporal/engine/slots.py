"""Slots over a cron rule: parsing it (over `CronExpression.parse`, the one cache), and the one
misfire algorithm both cores use (of the due times missed by now, the latest, and how many it
skips)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from wow_temporal.cron import CronExpression

__all__ = ["MAX_MISSED_COUNTED", "Latest", "NextAfter", "latest_due", "parsed_cron"]

NextAfter = Callable[[datetime], datetime | None]
"""A rule's due times: the first strictly after an instant, or None when none ever is."""

MAX_MISSED_COUNTED = 10_000
"""A misfire counts at most this many skipped due times one by one (a one-second rule after
almost three hours down); past that `skipped` reads this number, the due times beyond it go
uncounted and unnumbered, and the latest is still found, by probing back from now. Counting
stays well under the SDK's 2 s limit on a workflow task (about 7 µs a due time)."""

_SECOND = timedelta(seconds=1)


def parsed_cron(expression: str) -> CronExpression:
    """A six-field Spring cron expression (raises `CronSyntaxError`), parsed once per process:
    `CronExpression.parse` keeps the one cache of parsed expressions."""
    return CronExpression.parse(expression)


@dataclass(frozen=True, slots=True)
class Latest:
    """The due time to run after a misfire, and how many due times before it are skipped."""

    due: datetime
    skipped: int
    """Exact up to `MAX_MISSED_COUNTED`; that number when more were skipped."""


def latest_due(next_after: NextAfter, first: datetime, now: datetime) -> Latest:
    """Of the due times from `first` (due by `now`) on, the latest due by `now`, and how many
    before it are skipped: `min(missed, MAX_MISSED_COUNTED)`. A slot numbered `skipped` after
    `first`'s keeps numbers increasing and never past the true count; nothing is ever early.

    It walks the due times one by one up to the cap (exact, and cheap for a short outage).
    Past the cap it probes back from `now` over doubling spans until one holds a due time, then
    halves that span down to a second, where at most one due time lies (cron times are whole
    seconds): O(log(now - first)) calls of `next_after`, however dense the rule (400 years of
    a one-second rule take some 70), where walking forward would visit each due time.
    """
    cap = MAX_MISSED_COUNTED
    due, skipped = first, 0
    while True:
        following = _due_by(next_after, due, now)
        if following is None:
            return Latest(due, skipped)
        if skipped >= cap:
            return Latest(_probed_back(next_after, due, now), cap)
        due, skipped = following, skipped + 1


def _probed_back(next_after: NextAfter, floor: datetime, now: datetime) -> datetime:
    """The latest due time by `now`, given one after `floor` is: `low` always has a due time
    in (`low`, `now`], `high` none in (`high`, `now`]; the first by doubling back from now,
    then both by halving until they are a second apart."""
    low, high, span = floor, now, _SECOND
    while now - span > low:
        if _due_by(next_after, now - span, now) is not None:
            low = now - span
            break
        high, span = now - span, span * 2
    while high - low > _SECOND:
        middle = low + (high - low) / 2
        if _due_by(next_after, middle, now) is not None:
            low = middle
        else:
            high = middle
    latest = _due_by(next_after, low, now)
    assert latest is not None, "low always has a due time by now after it"
    # one due time at most lies in (low, high]; this only moves where `next_after` is not
    # monotonic (Spring's answers in a few zones' overlaps), so the answer stays the latest
    while (following := _due_by(next_after, latest, now)) is not None:
        latest = following
    return latest


def _due_by(next_after: NextAfter, instant: datetime, now: datetime) -> datetime | None:
    """The first due time after `instant`, if it is due by `now`."""
    found = next_after(instant)
    return found if found is not None and found <= now else None
