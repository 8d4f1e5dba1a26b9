"""`wow-temporal cron`: check a Spring cron expression by printing its next fire times."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import typer

from wow_temporal.cli._common import _fail
from wow_temporal.cron import CronExpression, CronSyntaxError
from wow_temporal.engine.text import instant_text, zoned_text
from wow_temporal.model import InvalidScheduleError, zone_info
from wow_temporal.model.rules import EARLIEST_INSTANT, LATEST_INSTANT, fires_problem

_RANGE = f"{instant_text(EARLIEST_INSTANT)} and {instant_text(LATEST_INSTANT)}"
"""The instants `--from` takes, as every time is printed."""


def cron(
    expression: Annotated[str, typer.Argument(help='Six fields, e.g. "0 0 6 * * *".')],
    zone: Annotated[str, typer.Option(help="The zone the expression is read in.")] = "UTC",
    from_: Annotated[
        str | None,
        typer.Option(
            "--from",
            help=f"Start after this ISO-8601 instant, between {_RANGE} (default: now).",
        ),
    ] = None,
    count: Annotated[int, typer.Option(min=1, max=10_000, help="How many fire times.")] = 5,
) -> None:
    """Print the next fire times of a Spring six-field cron expression, in its zone
    (`2026-12-05T07:00:00.000+01:00`; `Z` in UTC).

    An expression that would never be due (no time matches it, or, from now, every match is
    in its zone's DST gap) is refused with exit 2, as a schedule rule of it is.

    The times stop at the end of the calendar (year 9999), said on stderr, when fewer than
    --count are left before it.
    """
    try:
        parsed = CronExpression.parse(expression)
        tz = zone_info(zone)
    except (CronSyntaxError, InvalidScheduleError) as error:
        raise _fail(str(error)) from None
    problem = fires_problem(expression, zone) if from_ is None else fires_problem(expression)
    if problem is not None:
        raise _fail(problem)
    if from_ is None:
        start = datetime.now(tz)
    else:
        try:
            start = datetime.fromisoformat(from_.replace("Z", "+00:00"))
        except ValueError:
            raise _fail(f"--from: not an ISO-8601 instant: {from_!r}") from None
        start = _within_range(start.replace(tzinfo=tz) if start.tzinfo is None else start, from_)
        start = start.astimezone(tz)
    printed = 0
    current: datetime | None = start
    while printed < count and current is not None:
        try:
            current = parsed.next(current)
        except (OverflowError, ValueError):  # the search ran past what a date holds
            current = None
        if current is not None:
            typer.echo(zoned_text(current, tz))
            printed += 1
    if printed < count:
        after = "" if printed == 0 else f" ({printed} of {count} shown)"
        typer.echo(f"no more fire times before the end of the calendar (9999){after}", err=True)


def _within_range(start: datetime, given: str) -> datetime:
    """`start` if it lies in the range of instants a rule takes, the same as `at`'s (where the
    cron search has every zone's dates on both sides); else the exit-2 `error:` saying so."""
    try:
        inside = EARLIEST_INSTANT <= start <= LATEST_INSTANT
    except OverflowError:
        inside = False
    if not inside:
        raise _fail(
            f"--from is between {_RANGE}, got {given!r}"
        )
    return start
