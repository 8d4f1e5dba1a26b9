"""The `wow-temporal` command line: run the worker, the control API and the embedded dev stack,
check cron expressions, hand over commits and operate timers.

Errors a user can act on end in one line on stderr, `error: ...`: exit 2 for bad input
(arguments, settings, commits), exit 1 when the world is not as needed (Temporal unreachable,
a port or the dev data directory in use, the dev server gone).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar
from zoneinfo import ZoneInfo

import typer
from pydantic import BaseModel, ValidationError

from wow_temporal.cron import CronExpression, CronSyntaxError
from wow_temporal.schedule import (
    InvalidCommitError,
    InvalidScheduleError,
    explain,
    validate_zone,
)
from wow_temporal.settings import Settings, SettingsError, load_settings

if TYPE_CHECKING:
    from temporalio.client import Client

app = typer.Typer(
    name="wow-temporal",
    no_args_is_help=True,
    add_completion=False,
    help="Wow-style scheduled commands and recurring jobs, run durably on Temporal.",
)
timers_app = typer.Typer(no_args_is_help=True, help="List, show, retry and cancel timers.")
app.add_typer(timers_app, name="timers")

T = TypeVar("T")


_bridge_used = False


def main() -> None:
    """Entry point of the console script."""
    try:
        app()
    except SystemExit as done:
        if not _bridge_used:
            raise
        # The Temporal client's native threads can abort the interpreter while it finalizes
        # (PyGILState_Release); once the command has finished, leave without finalizing.
        sys.stdout.flush()
        sys.stderr.flush()
        code = done.code
        os._exit(code if isinstance(code, int) else (0 if code is None else 1))


def _fail(message: str, code: int = 2) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


class _CommandError(Exception):
    """Raised inside a command's coroutine: `_run` prints `error: message`, exits `code`."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


async def _connect(settings: Settings) -> Client:
    """Connect as `worker.connect` does, Temporal's core logging through Python's; a
    `_CommandError` (exit 1) naming the address when Temporal does not answer."""
    from wow_temporal.logs import configure_temporal_runtime
    from wow_temporal.worker import connect

    configure_temporal_runtime()
    try:
        return await connect(settings)
    except SettingsError:
        raise
    except (RuntimeError, ValueError) as error:
        config = settings.temporal_connect_config()
        where = f"{config['target_host']} (namespace {config['namespace']})"
        text = str(error)
        if isinstance(error, ValueError):  # the SDK refuses the address itself
            raise _CommandError(f"invalid Temporal address {where}: {text}", 2) from None
        if not text.startswith("Failed client connect"):
            raise
        raise _CommandError(
            f"cannot reach Temporal at {where}: {_connect_reason(text)}", 1
        ) from None


_REASONS = (
    re.compile(r'message: "([^"]+)" \}'),  # an OS error: Connection refused, ...
    re.compile(r'error: "([^"]+)"'),  # a custom one: failed to lookup address information ...
    re.compile(r'Status \{ code: (\w+), message: "([^"]*)"'),  # the server answered, oddly
)


def _connect_reason(text: str) -> str:
    """The readable part of the SDK's `Failed client connect: <Rust debug output>`."""
    for pattern in _REASONS:
        found = pattern.search(text)
        if found:
            return ": ".join(part for part in found.groups() if part)
    rest = " ".join(text.removeprefix("Failed client connect:").split())
    return rest if len(rest) <= 200 else rest[:199] + "…"


def _settings() -> Settings:
    try:
        return load_settings()
    except SettingsError as error:
        raise _fail(str(error)) from None


def _run(work: Callable[[], Awaitable[T]]) -> T:
    """Run an async command, turning the errors a user can fix into one line and exit 2 (bad
    input) or 1 (Temporal unreachable)."""
    from temporalio.service import RPCError

    from wow_temporal.timers.client import TimerError

    global _bridge_used
    _bridge_used = True
    try:
        return asyncio.run(work())  # type: ignore[arg-type]
    except _CommandError as error:
        raise _fail(str(error), error.code) from None
    except (TimerError, SettingsError, InvalidCommitError, InvalidScheduleError) as error:
        raise _fail(str(error)) from None
    except RPCError as error:
        raise _fail(f"Temporal: {error}") from None
    except (ConnectionError, OSError) as error:
        raise _fail(f"cannot connect: {error}") from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def _echo_json(value: Any) -> None:
    if isinstance(value, BaseModel):
        typer.echo(value.model_dump_json(indent=2))
    else:
        typer.echo(json.dumps(value, indent=2, default=str))


# --- cron -------------------------------------------------------------------------------------


@app.command()
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
        tz = ZoneInfo(validate_zone(zone))
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


# --- running ----------------------------------------------------------------------------------


@app.command()
def worker(
    app_ref: Annotated[
        str | None,
        typer.Option(
            "--app",
            help="module:attr of an App (its aggregates, sagas and jobs); jobs are not built yet.",
        ),
    ] = None,
) -> None:
    """Run the timer worker, delivering every due command to WOW_HOST_URL."""
    from wow_temporal.worker import run_worker

    if app_ref is not None:
        raise _fail("--app: recurring jobs and App are not available in this version yet")
    settings = _settings()
    if settings.host_url is None:  # before connecting: the fix is here, not in Temporal
        raise _fail("WOW_HOST_URL (wow.host-url): the worker needs the domain host's URL")
    _configure_logging()

    async def work() -> None:
        await run_worker(settings, client=await _connect(settings))

    _run(work)


@app.command()
def api(
    port: Annotated[int | None, typer.Option(help="Port (default WOW_API_PORT, 8088).")] = None,
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
) -> None:
    """Serve the HTTP control API (bearer token: WOW_API_TOKEN)."""
    from wow_temporal.api import serve
    from wow_temporal.embedded import PortInUseError, port_is_free
    from wow_temporal.worker import delivery_settings

    settings = _settings()
    listen = port or settings.api_port
    if not port_is_free(listen, host):
        error = PortInUseError("control API", listen, host, "--port or WOW_API_PORT")
        raise _fail(str(error), 1)
    _configure_logging()

    async def work() -> None:
        from wow_temporal.timers.client import TimerClient

        client = await _connect(settings)
        timers = TimerClient(client, delivery=delivery_settings(settings.timers))
        await serve(settings, timers, host=host, port=listen)

    _run(work)


@app.command()
def setup() -> None:
    """Register the search attributes on TEMPORAL_NAMESPACE (idempotent)."""
    from wow_temporal.embedded import register_search_attributes

    settings = _settings()
    _configure_logging(logging.WARNING)

    async def work() -> list[str]:
        client = await _connect(settings)
        return await register_search_attributes(client, client.namespace)

    added = _run(work)
    typer.echo(f"registered: {', '.join(added)}" if added else "search attributes already there")


@app.command()
def dev(
    data_dir: Annotated[Path, typer.Option(help="Where the dev server keeps its database.")] = Path(
        ".wow-temporal"
    ),
    port: Annotated[
        int,
        typer.Option(min=0, max=65535, help="Temporal gRPC port, used or refused; 0: any free."),
    ] = 7233,
    ui_port: Annotated[
        int,
        typer.Option(min=0, max=65535, help="Web UI port, used or refused; 0: any free."),
    ] = 8233,
    headless: Annotated[bool, typer.Option(help="No Web UI.")] = False,
) -> None:
    """Run everything on the embedded default: Temporal dev server and Web UI, the timer
    worker, the control API (WOW_API_PORT, 8088) and a domain host, until Ctrl-C.

    A port in use is refused, never swapped; so is a data directory another dev runs on."""
    from wow_temporal.dev import dev_main
    from wow_temporal.dev_services import default_services
    from wow_temporal.embedded import (
        EmbeddedTemporalError,
        TemporalBinaryNotFoundError,
        TemporalServerExitedError,
    )

    settings = _settings()
    _configure_logging()
    try:
        dev_main(
            data_dir,
            port=port or None,
            ui_port=ui_port or None,
            headless=headless,
            services=default_services(settings),
        )
    except TemporalServerExitedError:
        raise typer.Exit(1) from None  # run_dev has said so, in one line
    except (EmbeddedTemporalError, TemporalBinaryNotFoundError) as error:
        raise _fail(str(error), 1) from None
    except OSError as error:  # a service lost its port to another program since the check
        raise _fail(str(error), 1) from None


def _configure_logging(level: int = logging.INFO) -> None:
    """Plain one-line log records on stderr; the Temporal core's among them (no ANSI)."""
    from wow_temporal.logs import configure_logging

    configure_logging(level)


# --- commits ----------------------------------------------------------------------------------


@app.command("apply")
def apply_commits(
    files: Annotated[
        list[Path], typer.Argument(help="JSON files of commits (one commit or a list); - is stdin.")
    ],
) -> None:
    """Hand commits' schedule events to the timers (as a host's relay would)."""
    from wow_temporal.schedule import Commit
    from wow_temporal.timers.client import TimerClient
    from wow_temporal.worker import delivery_settings

    commits: list[Commit] = []
    for path in files:
        try:
            text = sys.stdin.read() if str(path) == "-" else path.read_text()
            data = json.loads(text)
        except (OSError, json.JSONDecodeError) as error:
            raise _fail(f"{path}: {error}") from None
        for item in data if isinstance(data, list) else [data]:
            try:
                commits.append(Commit.parse(item))
            except InvalidCommitError as error:
                raise _fail(f"{path}: {error}") from None
    settings = _settings()
    _configure_logging(logging.WARNING)

    async def work() -> None:
        client = await _connect(settings)
        timers = TimerClient(client, delivery=delivery_settings(settings.timers))
        for answers in await timers.apply_many(commits):
            for applied in answers:
                typer.echo(
                    f"{applied.outcome:<9} {applied.kind:<6} {applied.workflow_id}  "
                    f"{applied.reason}".rstrip()
                )

    _run(work)


# --- timers -----------------------------------------------------------------------------------


@timers_app.command("list")
def timers_list(
    aggregate: Annotated[str | None, typer.Option(help="context.aggregate")] = None,
    aggregate_id: Annotated[str | None, typer.Option("--aggregate-id")] = None,
    tenant: Annotated[str | None, typer.Option()] = None,
    key: Annotated[str | None, typer.Option()] = None,
    status: Annotated[
        str | None, typer.Option(help="Scheduled, Parked, Delivered, Rejected, Cancelled, …")
    ] = None,
    running: Annotated[bool | None, typer.Option("--running/--closed")] = None,
    limit: Annotated[int, typer.Option(min=1, max=10_000)] = 100,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """List timers matching the filters (the same query works in the Web UI)."""
    from wow_temporal.timers.client import TimerClient, TimerFilter

    settings = _settings()
    try:
        where = TimerFilter(
            aggregate=aggregate,
            aggregate_id=aggregate_id,
            tenant=tenant,
            key=key,
            status=status,  # any case of a Status name
            running=running,
        )
    except ValidationError as error:
        raise _fail(explain(error)) from None
    _configure_logging(logging.WARNING)

    async def work() -> None:
        client = await _connect(settings)
        found = await TimerClient(client).list(where, limit=limit)
        if as_json:
            _echo_json([info.model_dump(mode="json") for info in found])
            return
        typer.echo(f"# {where.query()}", err=True)
        for info in found:
            due = info.due.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if info.due else "-"
            typer.echo(f"{info.status:<10} {due:<21} {info.workflow_id}")

    _run(work)


@timers_app.command("show")
def timers_show(workflow_id: str) -> None:
    """Show one timer with its full state."""
    from wow_temporal.timers.client import TimerClient

    settings = _settings()
    _configure_logging(logging.WARNING)

    async def work() -> None:
        client = await _connect(settings)
        _echo_json(await TimerClient(client).show(workflow_id))

    _run(work)


@timers_app.command("retry")
def timers_retry(workflow_id: str) -> None:
    """Retry a parked timer's delivery now (same request id)."""
    _operate(workflow_id, "retry")


@timers_app.command("cancel")
def timers_cancel(workflow_id: str) -> None:
    """Cancel a pending or parked timer."""
    _operate(workflow_id, "cancel")


def _operate(workflow_id: str, operation: str) -> None:
    from wow_temporal.timers.client import TimerClient

    settings = _settings()
    _configure_logging(logging.WARNING)

    async def work() -> None:
        timers = TimerClient(await _connect(settings))
        state = await getattr(timers, operation)(workflow_id)
        typer.echo(f"{workflow_id}: {state.status.value}")

    _run(work)


if __name__ == "__main__":
    main()
