"""The `wow-temporal` command line: run the worker, the control API and the embedded dev stack,
check cron expressions, hand over commits and operate timers.

Errors a user can act on end in one line on stderr, `error: ...`: exit 2 for bad input
(arguments, settings, commits), exit 1 when the world is not as needed (Temporal unreachable,
a port or the dev data directory in use, the dev server gone).
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from wow_temporal.cli import _common, cron, dev, host, schedules, serve, timers

__all__ = ["app", "main"]

app = typer.Typer(
    name="wow-temporal",
    no_args_is_help=True,
    add_completion=False,
    help="Wow-style scheduled commands and recurring jobs, run durably on Temporal.",
)
# Registered here, in the order `wow-temporal --help` lists them; the groups come last.
app.command()(cron.cron)
app.command()(serve.worker)
app.command()(serve.api)
app.command()(serve.setup)
app.command()(dev.dev)
app.command("host")(host.domain_host)
app.command()(host.manifest)
app.command()(dev.demo)
app.command("apply")(timers.apply_commits)
app.add_typer(timers.timers_app, name="timers")
app.add_typer(schedules.schedule_app, name="schedule")


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"wow-temporal {version('wow-temporal')}")
        except PackageNotFoundError:
            typer.echo("wow-temporal (not installed: no version)")
        raise typer.Exit(0)


@app.callback()
def _main(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_version, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Wow-style scheduled commands and recurring jobs, run durably on Temporal."""


def main() -> None:
    """Entry point of the console script."""
    try:
        app()
    except SystemExit as done:
        if not _common._bridge_used:
            raise
        # The Temporal client's native threads can abort the interpreter while it finalizes
        # (PyGILState_Release); once the command has finished, leave without finalizing,
        # after sending the spans still batched (atexit hooks do not run).
        from wow_temporal.tracing import flush_spans

        flush_spans()
        sys.stdout.flush()
        sys.stderr.flush()
        code = done.code
        os._exit(code if isinstance(code, int) else (0 if code is None else 1))

