"""The `wow-temporal` command line: run the worker, the control API and the embedded dev stack,
check cron expressions, hand over commits and operate timers.

Errors a user can act on end in one line on stderr, `error: ...`: exit 2 for bad input
(arguments, settings, commits), exit 1 when the world is not as needed (Temporal unreachable,
a port or the dev data directory in use, the dev server gone). A closed stdout (`| head`) ends
quietly with 141, as a SIGPIPE ends other tools.
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
    rich_markup_mode="markdown",  # a docstring's paragraphs reflow to the terminal
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


def _run_app() -> None:
    """Run the command line; a usage error is one `error:` line (exit 2) like every other, and
    a closed stdout (`| head`) ends quietly, as other tools do."""
    try:  # typer vendors click from 0.24 on; before, it is click's own
        from typer._click import exceptions as click_errors
    except ImportError:  # pragma: no cover - older typer
        from click import exceptions as click_errors  # type: ignore[no-redef]

    try:
        code = app(standalone_mode=False)
    except SystemExit as done:
        # Typer's and rich's own answer to a closed stdout (exit 1, raised while handling the
        # BrokenPipeError): end as every other closed stdout ends here instead.
        if isinstance(done.__context__, BrokenPipeError):
            _quiet_closed_stdout()
        raise
    except click_errors.UsageError as error:
        if not error.format_message():  # no arguments: the help was printed
            raise SystemExit(2) from None
        where = error.ctx.command_path if error.ctx is not None else _command_path(sys.argv[1:])
        typer.echo(f"error: {error.format_message()} (see `{where} --help`)", err=True)
        raise SystemExit(2) from None
    except click_errors.ClickException as error:
        typer.echo(f"error: {error.format_message()}", err=True)
        raise SystemExit(error.exit_code) from None
    except typer.Abort:
        raise SystemExit(130) from None
    except BrokenPipeError:
        _quiet_closed_stdout()
    raise SystemExit(code if isinstance(code, int) else 0)


def _command_path(args: list[str]) -> str:
    """The command the words of `args` name (`wow-temporal timers list`), for a usage error
    the parser raises without saying whose option it was (`--running=x`)."""
    command: object = typer.main.get_command(app)
    path = ["wow-temporal"]
    for word in args:
        commands: dict[str, object] = getattr(command, "commands", {})
        found = commands.get(word)
        if found is None:
            break
        path.append(word)
        command = found
    return " ".join(path)


CLOSED_STDOUT_EXIT = 141
"""The exit when the reader of stdout went away (`| head`): 128 + SIGPIPE, what a shell reports
for `yes | head` or `git log | head`; nothing is printed."""


def _quiet_closed_stdout() -> None:
    """The reader of stdout went away: say nothing more, exit as a SIGPIPE would."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.__stdout__.fileno() if sys.__stdout__ is not None else 1)
    raise SystemExit(CLOSED_STDOUT_EXIT)


def main() -> None:
    """Entry point of the console script."""
    try:
        _run_app()
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

