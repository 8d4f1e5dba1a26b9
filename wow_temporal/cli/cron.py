"""`wow-temporal cron`: check a Spring cron expression by printing its next fire times."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import typer

from wow_temporal.cli._common import _fail
from wow_temporal.cron import CronExpression, CronSyntaxError
from wow_temporal.model import InvalidScheduleError, zone_info


def cron(
    expression: Annotated[str, typer.Argument(help='Six fields, e.g. "0 0 6 * * *".')],
    zone: Annotated[str, typer.Option(help="The zone the expression is read in.")] = "UTC",
    from_: Annotated[
        str | None,
        typer.Option("--from", help="Start after this ISO instant (default: now)."),
    ] = None,
    count: Annotated[int, typer.Option(min=1, max=10_000, help="How many fire times.")] = 5,
) -> None:
    """Print the next fire times of a Spring six-field cron expression."""
    try:
        parsed = CronExpression.parse(expression)
        tz = zone_info(zone)
    except (CronSyntaxError, InvalidScheduleError) as error:
        raise _fail(str(error)) from None
    if from_ is None:
        start = datetime.now(tz)
    else:
        try:
            start = datetime.fromisoformat(from_.replace("Z", "+00:00"))
        except ValueError:
            raise _fail(f"--from: not an ISO-8601 instant: {from_!r}") from None
        start = start.replace(tzinfo=tz) if start.tzinfo is None else start.astimezone(tz)
    times = parsed.next_n(start, count)
    if not times:
        typer.echo(f"{expression!r} never fires after {start.isoformat()}", err=True)
        raise typer.Exit(1)
    for moment in times:
        typer.echo(moment.isoformat())

