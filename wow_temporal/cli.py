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
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from pydantic import BaseModel, ValidationError

from wow_temporal.cron import CronExpression, CronSyntaxError
from wow_temporal.schedule import (
    InvalidCommitError,
    InvalidScheduleError,
    explain,
    validate_key,
    zone_info,
)
from wow_temporal.settings import Settings, SettingsError, load_settings

if TYPE_CHECKING:
    from temporalio.client import Client
    from temporalio.runtime import Runtime

    from wow_temporal.domain.app import App as DomainApp
    from wow_temporal.jobs.client import JobClient, JobInfo

app = typer.Typer(
    name="wow-temporal",
    no_args_is_help=True,
    add_completion=False,
    help="Wow-style scheduled commands and recurring jobs, run durably on Temporal.",
)
timers_app = typer.Typer(no_args_is_help=True, help="List, show, retry and cancel timers.")
app.add_typer(timers_app, name="timers")
schedule_app = typer.Typer(
    no_args_is_help=True,
    help="List, show, enable, disable, reschedule and retry recurring job instances.",
)
app.add_typer(schedule_app, name="schedule")

T = TypeVar("T")

_Address = Annotated[
    str | None,
    typer.Option(
        "--address",
        help="Temporal frontend host:port (default TEMPORAL_ADDRESS, localhost:7233).",
        show_default=False,
    ),
]
_Namespace = Annotated[
    str | None,
    typer.Option(
        "--namespace",
        help="Temporal namespace (default TEMPORAL_NAMESPACE, default).",
        show_default=False,
    ),
]
_LogFormat = Annotated[
    str | None,
    typer.Option(
        "--log-format",
        help="text (one plain line per record) or json (one object per line); "
        "default WOW_LOG_FORMAT, text.",
        show_default=False,
    ),
]


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

_EXAMPLE_APP = "workers.eshop:apps"
"""The spec's e-shop (order and inventory), which `dev` runs when started in the repository."""


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


async def _connect(settings: Settings, runtime: Runtime | None = None) -> Client:
    """Connect as `worker.connect` does (on `runtime`, exporting metrics, if given), Temporal's
    core logging through Python's; a `_CommandError` (exit 1) naming the address when
    Temporal does not answer."""
    from wow_temporal.logs import configure_temporal_runtime
    from wow_temporal.worker import connect, connect_reason

    if runtime is None:
        configure_temporal_runtime()
    try:
        return await connect(settings, runtime)
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
            f"cannot reach Temporal at {where}: {connect_reason(text)}", 1
        ) from None


def _settings(
    domain: DomainApp | None = None,
    *,
    address: str | None = None,
    namespace: str | None = None,
) -> Settings:
    """The settings (exit 2 naming a bad key); with an App, its jobs' overrides checked.

    `--address` and `--namespace` win over TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE and a profile.
    """
    known = list(domain.jobs) if domain is not None else []
    environ = dict(os.environ)
    for flag, value, var in (
        ("--address", address, "TEMPORAL_ADDRESS"),
        ("--namespace", namespace, "TEMPORAL_NAMESPACE"),
    ):
        if value is not None:
            if not value.strip():
                raise _fail(f"{flag}: must not be empty")
            environ[var] = value.strip()
    try:
        settings = load_settings(environ=environ, known_jobs=known)
        if domain is not None:
            from wow_temporal.jobs.overrides import host_rules

            host_rules(settings, domain)
        return settings
    except SettingsError as error:
        raise _fail(str(error)) from None


def _run(work: Callable[[], Awaitable[T]]) -> T:
    """Run an async command, turning the errors a user can fix into one line and exit 2 (bad
    input) or 1 (Temporal unreachable)."""
    from temporalio.service import RPCError

    from wow_temporal.jobs.client import JobError
    from wow_temporal.timers.client import TimerError

    global _bridge_used
    _bridge_used = True
    try:
        return asyncio.run(work())  # type: ignore[arg-type]
    except _CommandError as error:
        raise _fail(str(error), error.code) from None
    except (
        TimerError, JobError, SettingsError, InvalidCommitError, InvalidScheduleError
    ) as error:
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


# --- running ----------------------------------------------------------------------------------


@app.command()
def worker(
    app_ref: Annotated[
        str | None,
        typer.Option(
            "--app",
            help="module:attr of an App: run its recurring jobs too (and enable its SYSTEM jobs).",
        ),
    ] = None,
    address: _Address = None,
    namespace: _Namespace = None,
    log_format: _LogFormat = None,
) -> None:
    """Run the timer worker (and an App's jobs), delivering every command to WOW_HOST_URL,
    until SIGTERM or Ctrl-C, which let the deliveries in flight finish
    (WOW_WORKER_SHUTDOWN_TIMEOUT, 30 s). Health: /livez and /readyz on WOW_WORKER_HEALTH_PORT
    (8081). While Temporal cannot be reached it stays up, unready, and keeps trying."""
    import signal

    from wow_temporal.embedded import PortInUseError, port_is_free
    from wow_temporal.worker import WorkerFailedError, run_worker

    fmt = _log_format(log_format)
    domain = _load_app(app_ref)
    settings = _settings(domain, address=address, namespace=namespace)
    if settings.host_url is None:  # before connecting: the fix is here, not in Temporal
        raise _fail("WOW_HOST_URL (wow.host-url): the worker needs the domain host's URL")
    health_port = settings.worker.health_port
    every = "0.0.0.0"  # the health endpoints listen on every interface, for the probes
    if health_port and not port_is_free(health_port, every):
        error = PortInUseError("health", health_port, every, "WOW_WORKER_HEALTH_PORT")
        raise _fail(str(error), 1)
    metrics_port = settings.worker.metrics_port
    if metrics_port and not port_is_free(metrics_port, every):
        error = PortInUseError("metrics", metrics_port, every, "WOW_WORKER_METRICS_PORT")
        raise _fail(str(error), 1)
    _configure_logging(settings, log_format=fmt)
    _configure_tracing(settings, "wow-temporal-worker")
    log = logging.getLogger("wow_temporal.worker")

    async def work() -> None:
        from wow_temporal.logs import configure_temporal_runtime

        configure_temporal_runtime()
        stop = asyncio.Event()

        def on_signal(name: str) -> None:
            if stop.is_set():
                log.info("%s: already stopping", name)
                return
            log.info("%s: stopping", name)
            stop.set()

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal, sig.name)
        try:
            await run_worker(settings, stop=stop, app=domain)
        except WorkerFailedError as error:
            raise _CommandError(str(error), 1) from None
        except OSError as error:  # the metrics port was taken since the check
            raise _CommandError(str(error), 1) from None

    _run(work)


def _load_apps(reference: str | None) -> list[DomainApp]:
    """The Apps of `--app module:attr` (one, or a list of them); exit 2 with what is wrong."""
    if reference is None:
        return []
    from wow_temporal.domain.app import load_apps

    try:
        return load_apps(reference)
    except ValueError as error:
        raise _fail(str(error)) from None


def _jobs_app(apps: list[DomainApp], reference: str | None) -> DomainApp | None:
    """The one app whose jobs a worker runs (the only one with jobs, or the only one)."""
    with_jobs = [app for app in apps if app.jobs]
    if len(with_jobs) > 1:
        contexts = ", ".join(app.context for app in with_jobs)
        raise _fail(f"--app {reference}: several apps have jobs ({contexts}): run one per worker")
    if with_jobs:
        return with_jobs[0]
    return apps[0] if len(apps) == 1 else None


def _load_app(reference: str | None) -> DomainApp | None:
    """The App whose jobs `--app module:attr` names; exit 2 with what is wrong."""
    return _jobs_app(_load_apps(reference), reference)


@app.command()
def api(
    port: Annotated[int | None, typer.Option(help="Port (default WOW_API_PORT, 8088).")] = None,
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    app_ref: Annotated[
        str | None,
        typer.Option(
            "--app",
            help="module:attr of an App whose job instances the API may create (TENANT jobs).",
        ),
    ] = None,
    address: _Address = None,
    namespace: _Namespace = None,
    log_format: _LogFormat = None,
) -> None:
    """Serve the HTTP control API (bearer token: WOW_API_TOKEN)."""
    from wow_temporal.api import serve
    from wow_temporal.embedded import PortInUseError, port_is_free
    from wow_temporal.worker import delivery_settings

    fmt = _log_format(log_format)
    domain = _load_app(app_ref)
    settings = _settings(domain, address=address, namespace=namespace)
    listen = port or settings.api_port
    if not port_is_free(listen, host):
        error = PortInUseError("control API", listen, host, "--port or WOW_API_PORT")
        raise _fail(str(error), 1)
    _check_metrics_port(settings.api.metrics_port, "WOW_API_METRICS_PORT")
    _configure_logging(settings, log_format=fmt)
    _configure_tracing(settings, "wow-temporal-api")

    async def work() -> None:
        from wow_temporal.timers.client import TimerClient

        runtime = _metrics(settings, settings.api.metrics_port, "wow.api.metrics-port")
        client = await _connect(settings, runtime)
        timers = TimerClient(client, delivery=delivery_settings(settings.timers))
        await serve(settings, timers, host=host, port=listen, jobs=_jobs(client, settings, domain))

    _run(work)


def _jobs(client: Client, settings: Settings, domain: DomainApp | None) -> JobClient:
    from wow_temporal.jobs.client import JobClient
    from wow_temporal.jobs.overrides import host_rules
    from wow_temporal.worker import delivery_settings

    rules = host_rules(settings, domain) if domain is not None else {}
    apps = [domain] if domain is not None else []
    return JobClient(client, apps, host_rules=rules, delivery=delivery_settings(settings.timers))


@app.command()
def setup(address: _Address = None, namespace: _Namespace = None) -> None:
    """Register the search attributes on TEMPORAL_NAMESPACE (idempotent) and say which were
    added and which were already there."""
    from wow_temporal.embedded import (
        SEARCH_ATTRIBUTES,
        EmbeddedTemporalError,
        register_search_attributes,
    )

    settings = _settings(address=address, namespace=namespace)
    _configure_logging(settings, logging.WARNING)

    async def work() -> tuple[str, list[str]]:
        client = await _connect(settings)
        try:
            return client.namespace, await register_search_attributes(client, client.namespace)
        except EmbeddedTemporalError as error:  # a name taken with another type
            raise _CommandError(str(error), 1) from None

    where, added = _run(work)
    kept = [name for name in SEARCH_ATTRIBUTES if name not in added]
    if added:
        typer.echo(
            f"namespace {where}: registered "
            + ", ".join(f"{name} ({SEARCH_ATTRIBUTES[name]})" for name in added)
        )
    if kept:
        typer.echo(f"namespace {where}: search attributes already there: {', '.join(kept)}")


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
    host_port: Annotated[
        int,
        typer.Option(min=0, max=65535, help="Domain host port, used or refused; 0: any free."),
    ] = 8089,
    app_ref: Annotated[
        str | None,
        typer.Option(
            "--app",
            help="module:attr of an App (or a list of them) to host and whose jobs to run "
            f"(default: the spec's e-shop, {_EXAMPLE_APP}, when run from the repository; "
            "'none' for the echo host alone).",
        ),
    ] = None,
) -> None:
    """Run everything on the embedded default: Temporal dev server and Web UI, the timer
    worker, the job worker, the control API (WOW_API_PORT, 8088) and the domain host
    (--host-port, 8089), until Ctrl-C.

    A port in use is refused, never swapped; so is a data directory another dev runs on."""
    from wow_temporal.dev import dev_main
    from wow_temporal.dev_services import default_services
    from wow_temporal.embedded import (
        EmbeddedTemporalError,
        TemporalBinaryNotFoundError,
        TemporalServerExitedError,
    )
    from wow_temporal.metrics import exporting_runtime
    from wow_temporal.tracing import client_interceptors

    if app_ref is None and Path("workers/eshop/__init__.py").is_file():
        app_ref = _EXAMPLE_APP
    reference = None if app_ref in (None, "none") else app_ref
    apps = _load_apps(reference)
    settings = _settings(_jobs_app(apps, reference))
    metrics_port = settings.worker.metrics_port
    _configure_logging(settings)
    _configure_tracing(settings, "wow-temporal-dev")
    pushed = settings.telemetry.metrics == "otlp"
    try:
        dev_main(
            data_dir,
            port=port or None,
            ui_port=ui_port or None,
            headless=headless,
            services=default_services(settings, apps, host_port),
            interceptors=client_interceptors(settings.telemetry),
            runtime=lambda: exporting_runtime(
                settings.telemetry, metrics_port, "WOW_WORKER_METRICS_PORT"
            ),
            metrics_url=(
                f"OTLP to {settings.telemetry.otlp_endpoint}" if pushed
                else f"http://127.0.0.1:{metrics_port}/metrics"
            ),
        )
    except TemporalServerExitedError:
        raise typer.Exit(1) from None  # run_dev has said so, in one line
    except (EmbeddedTemporalError, TemporalBinaryNotFoundError) as error:
        raise _fail(str(error), 1) from None
    except OSError as error:  # a service lost its port to another program since the check
        raise _fail(str(error), 1) from None


@app.command("host")
def domain_host(
    app_ref: Annotated[
        str,
        typer.Option("--app", help="module:attr of an App, or a list of them, to serve."),
    ],
    db: Annotated[
        Path, typer.Option(help="The SQLite event store file (one host per file).")
    ] = Path(".wow-temporal/domain.db"),
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to serve on.")] = 8089,
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    metrics_port: Annotated[
        int,
        typer.Option(
            min=0, max=65535,
            help="Serve Prometheus metrics (the relay's lag, commits handed over) here; 0: off.",
        ),
    ] = 0,
    address: _Address = None,
    namespace: _Namespace = None,
    log_format: _LogFormat = None,
) -> None:
    """Serve an App's aggregates over Wow's command API, run its sagas, and relay the schedules
    its commits set to the timers on TEMPORAL_ADDRESS (commands never wait for Temporal)."""
    import sqlite3

    import uvicorn
    from eventsourcing.persistence import PersistenceError

    from wow_temporal.embedded import PortInUseError, port_is_free
    from wow_temporal.host.runtime import HostRuntime, StoreInUseError
    from wow_temporal.timers.client import TimerClient
    from wow_temporal.worker import connect, connect_reason, delivery_settings

    fmt = _log_format(log_format)
    apps = _load_apps(app_ref)
    settings = _settings(_jobs_app(apps, app_ref), address=address, namespace=namespace)
    if not port_is_free(port, host):
        raise _fail(str(PortInUseError("domain host", port, host, "--port")), 1)
    _check_metrics_port(metrics_port, "--metrics-port")
    _configure_logging(settings, log_format=fmt)
    _configure_tracing(settings, "wow-temporal-host")
    log = logging.getLogger("wow_temporal.host")
    runtime: list[Runtime | None] = [None]  # set once serving: it binds the metrics port

    async def timers() -> TimerClient:
        try:
            client = await connect(settings, runtime[0])
        except RuntimeError as error:
            config = settings.temporal_connect_config()
            raise ConnectionError(
                f"cannot reach Temporal at {config['target_host']} (namespace "
                f"{config['namespace']}): {connect_reason(str(error))}"
            ) from None
        log.info("relay: connected to Temporal at %s", client.service_client.config.target_host)
        return TimerClient(client, delivery=delivery_settings(settings.timers))

    async def serve() -> None:
        runtime[0] = _metrics(settings, metrics_port, "--metrics-port")
        hosting = HostRuntime(apps, db, timers)
        hosting.start()
        log.info(
            "domain host for %s on http://%s:%d, store %s",
            ", ".join(a.context for a in apps), host, port, db,
        )
        config = uvicorn.Config(hosting.asgi, host=host, port=port, log_level="warning")
        try:
            await uvicorn.Server(config).serve()
        finally:
            await hosting.stop()

    try:
        asyncio.run(serve())
    except _CommandError as error:  # the metrics port was taken since the check
        raise _fail(str(error), error.code) from None
    except StoreInUseError as error:
        raise _fail(str(error), 1) from None
    except (OSError, PersistenceError, sqlite3.Error) as error:
        raise _fail(f"--db {db}: {error}", 1) from None
    except KeyboardInterrupt:
        pass


@app.command()
def manifest(
    app_ref: Annotated[
        str, typer.Option("--app", help="module:attr of an App, or a list of them.")
    ],
) -> None:
    """Print JSON: each function with its command, the events it produces and the command types
    it schedules; each saga handler; every job with its rule and scope."""
    from wow_temporal.domain.manifest import manifest as build

    typer.echo(json.dumps(build(_load_apps(app_ref)), indent=2))


@app.command()
def demo(
    host_url: Annotated[
        str, typer.Option(help="The dev stack's domain host.")
    ] = "http://127.0.0.1:8089",
    api_url: Annotated[
        str | None, typer.Option(help="The control API (default: WOW_API_PORT).")
    ] = None,
    ui_url: Annotated[str, typer.Option(help="The Temporal Web UI.")] = "http://127.0.0.1:8233",
) -> None:
    """Walk through the spec's e-shop on a running `./run dev` in about a minute: an order that
    cancels itself when not paid in time, one paid in time, and the morning job."""
    from wow_temporal.demo import DemoError, run_demo

    settings = _settings()
    api = api_url or f"http://127.0.0.1:{settings.api_port}"
    try:
        asyncio.run(run_demo(host_url, api, ui_url, token=settings.api_token))
    except DemoError as error:
        raise _fail(str(error), 1) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def _log_format(value: str | None) -> str | None:
    """`--log-format`, checked (exit 2): text or json, any case; None: the setting's."""
    if value is None:
        return None
    if value.strip().lower() not in ("text", "json"):
        raise _fail(f"--log-format: use text or json, got {value!r}")
    return value.strip().lower()


def _configure_logging(
    settings: Settings, level: int = logging.INFO, log_format: str | None = None
) -> None:
    """One log line per record on stderr, the Temporal core's among them (no ANSI): plain
    text, or JSON objects with `--log-format json` or `wow.log-format: json`."""
    from wow_temporal.logs import configure_logging

    configure_logging(level, log_format="json" if (log_format or settings.log_format) == "json"
                      else "text")


def _check_metrics_port(port: int, variable: str) -> None:
    """Refuse (exit 1) a metrics port in use, before anything starts."""
    from wow_temporal.embedded import PortInUseError, port_is_free

    if port and not port_is_free(port, "0.0.0.0"):
        raise _fail(str(PortInUseError("metrics", port, "0.0.0.0", variable)), 1)


def _metrics(settings: Settings, port: int, key: str) -> Runtime | None:
    """The runtime exporting this process's metrics (`exporting_runtime`); exit 1 if the port
    was taken since the check."""
    from wow_temporal.metrics import exporting_runtime

    try:
        return exporting_runtime(settings.telemetry, port, key)
    except OSError as error:
        raise _CommandError(str(error), 1) from None


def _configure_tracing(settings: Settings, service: str) -> None:
    """Spans on, named `service`, exported where `wow.telemetry` says (exit 2 if it cannot)."""
    from wow_temporal.tracing import configure_tracing

    try:
        configure_tracing(settings.telemetry, service)
    except SettingsError as error:
        raise _fail(str(error)) from None


# --- commits ----------------------------------------------------------------------------------


@app.command("apply")
def apply_commits(
    files: Annotated[
        list[Path], typer.Argument(help="JSON files of commits (one commit or a list); - is stdin.")
    ],
    address: _Address = None,
    namespace: _Namespace = None,
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
    settings = _settings(address=address, namespace=namespace)
    _configure_logging(settings, logging.WARNING)

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
    address: _Address = None,
    namespace: _Namespace = None,
) -> None:
    """List timers matching the filters (the same query works in the Web UI)."""
    from wow_temporal.timers.client import TimerClient, TimerFilter

    settings = _settings(address=address, namespace=namespace)
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
    _configure_logging(settings, logging.WARNING)

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
def timers_show(workflow_id: str, address: _Address = None, namespace: _Namespace = None) -> None:
    """Show one timer with its full state."""
    from wow_temporal.timers.client import TimerClient

    settings = _settings(address=address, namespace=namespace)
    _configure_logging(settings, logging.WARNING)

    async def work() -> None:
        client = await _connect(settings)
        _echo_json(await TimerClient(client).show(workflow_id))

    _run(work)


@timers_app.command("retry")
def timers_retry(
    workflow_id: str, address: _Address = None, namespace: _Namespace = None
) -> None:
    """Retry a parked timer's delivery now (same request id)."""
    _operate(workflow_id, "retry", address, namespace)


@timers_app.command("cancel")
def timers_cancel(
    workflow_id: str, address: _Address = None, namespace: _Namespace = None
) -> None:
    """Cancel a pending or parked timer."""
    _operate(workflow_id, "cancel", address, namespace)


def _operate(
    workflow_id: str, operation: str, address: str | None, namespace: str | None
) -> None:
    from wow_temporal.timers.client import TimerClient

    settings = _settings(address=address, namespace=namespace)
    _configure_logging(settings, logging.WARNING)

    async def work() -> None:
        timers = TimerClient(await _connect(settings))
        state = await getattr(timers, operation)(workflow_id)
        typer.echo(f"{workflow_id}: {state.status.value}")

    _run(work)


# --- recurring jobs ---------------------------------------------------------------------------

_Context = Annotated[str, typer.Argument(help="The bounded context, e.g. eshop-inventory.")]
_Name = Annotated[str, typer.Argument(help="The job's name, e.g. receive-deliveries.")]
_Tenant = Annotated[
    str | None, typer.Option(help="The tenant of a TENANT job's instance.")
]
_Partition = Annotated[
    int | None, typer.Option(min=0, help="The partition of a sharded job's instance.")
]
_Json = Annotated[bool, typer.Option("--json", help="Print the instance as JSON.")]
_AppRef = Annotated[
    str | None,
    typer.Option("--app", help="module:attr of the App, to create an instance that is not there."),
]


@schedule_app.command("list")
def schedule_list(
    context: Annotated[str | None, typer.Option(help="Only this context's jobs.")] = None,
    name: Annotated[str | None, typer.Option("--job", help="Only this job.")] = None,
    tenant: _Tenant = None,
    status: Annotated[str | None, typer.Option(help="Enabled, Disabled or Parked.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=10_000)] = 100,
    as_json: _Json = False,
    address: _Address = None,
    namespace: _Namespace = None,
) -> None:
    """List the running job instances (as visibility lists them: it may lag a second)."""
    from wow_temporal.jobs.core import JobStatus

    if status is not None and status.lower() not in {s.value.lower() for s in JobStatus}:
        known = ", ".join(s.value for s in JobStatus)
        raise _fail(f"--status {status!r}: use one of {known}")
    settings = _settings(address=address, namespace=namespace)
    _configure_logging(settings, logging.WARNING)

    async def work() -> None:
        jobs = _jobs(await _connect(settings), settings, None)
        found = await jobs.list(
            context=context, name=name, tenant=tenant, status=status, limit=limit
        )
        if as_json:
            _echo_json([info.model_dump(mode="json") for info in found])
            return
        for info in found:
            typer.echo(f"{info.status:<9} {info.workflow_id}")

    _run(work)


@schedule_app.command("show")
def schedule_show(
    context: _Context, name: _Name, tenant: _Tenant = None, partition: _Partition = None,
    as_json: _Json = False,
    address: _Address = None, namespace: _Namespace = None,
) -> None:
    """Show one instance: the rule in force and where it comes from, next due times, last ticks."""
    _job_operation(
        "show", context, name, tenant, partition, None, as_json, None,
        address=address, namespace=namespace,
    )


@schedule_app.command("enable")
def schedule_enable(
    context: _Context, name: _Name, tenant: _Tenant = None, partition: _Partition = None,
    as_json: _Json = False,
    address: _Address = None, namespace: _Namespace = None, app_ref: _AppRef = None,
) -> None:
    """Enable an instance (wow.schedule.enable): ticks from the next due time after now."""
    _job_operation(
        "enable", context, name, tenant, partition, None, as_json, app_ref,
        address=address, namespace=namespace,
    )


@schedule_app.command("disable")
def schedule_disable(
    context: _Context, name: _Name, tenant: _Tenant = None, partition: _Partition = None,
    as_json: _Json = False,
    address: _Address = None, namespace: _Namespace = None,
) -> None:
    """Disable an instance (wow.schedule.disable): in force when this returns."""
    _job_operation(
        "disable", context, name, tenant, partition, None, as_json, None,
        address=address, namespace=namespace,
    )


@schedule_app.command("reschedule")
def schedule_reschedule(
    context: _Context,
    name: _Name,
    expression: Annotated[
        str | None, typer.Option(help='Six-field Spring cron, e.g. "0 0 6 * * *".')
    ] = None,
    zone: Annotated[str | None, typer.Option(help="IANA zone the expression is read in.")] = None,
    misfire: Annotated[str | None, typer.Option(help="COALESCE or CATCH_UP.")] = None,
    tenant: _Tenant = None,
    partition: _Partition = None,
    as_json: _Json = False,
    address: _Address = None,
    namespace: _Namespace = None,
) -> None:
    """Give an instance its own rule (wow.schedule.reschedule): any of expression, zone, misfire."""
    from wow_temporal.jobs.core import RuleLayer, reschedule_refusal

    try:
        rule = RuleLayer.model_validate(
            {"expression": expression, "zone": zone, "misfire": misfire and misfire.upper()}
        )
    except ValidationError as error:
        raise _fail(explain(error)) from None
    problem = "give at least one of --expression, --zone or --misfire" if rule.empty else (
        reschedule_refusal(rule)
    )
    if problem is not None:
        raise _fail(problem)
    _job_operation(
        "reschedule", context, name, tenant, partition, rule, as_json, None,
        address=address, namespace=namespace,
    )


@schedule_app.command("retry")
def schedule_retry(
    context: _Context, name: _Name, tenant: _Tenant = None, partition: _Partition = None,
    as_json: _Json = False,
    address: _Address = None, namespace: _Namespace = None,
) -> None:
    """Retry an instance's parked tick (same request ids); later slots follow by the policy."""
    _job_operation(
        "retry", context, name, tenant, partition, None, as_json, None,
        address=address, namespace=namespace,
    )


def _job_operation(
    operation: str,
    context: str,
    name: str,
    tenant: str | None,
    partition: int | None,
    rule: Any,
    as_json: bool,
    app_ref: str | None,
    *,
    address: str | None,
    namespace: str | None,
) -> None:
    try:
        validate_key(name, "job name")
    except InvalidScheduleError as error:
        raise _fail(str(error)) from None
    domain = _load_app(app_ref)
    if domain is not None and domain.context != context:
        raise _fail(f"--app {app_ref}: its context is {domain.context}, not {context}")
    settings = _settings(domain, address=address, namespace=namespace)
    _configure_logging(settings, logging.WARNING)

    async def work() -> None:
        jobs = _jobs(await _connect(settings), settings, domain)
        where: dict[str, Any] = {"tenant": tenant, "partition": partition}
        if rule is not None:
            info = await jobs.reschedule(context, name, rule, **where)
        else:
            info = await getattr(jobs, operation)(context, name, **where)
        _echo_job(info, as_json)

    _run(work)


def _echo_job(info: JobInfo, as_json: bool) -> None:
    if as_json:
        _echo_json(info)
        return
    typer.echo(f"{info.workflow_id}: {info.status}")
    if info.expression is not None:
        sources = info.sources
        typer.echo(
            f"  rule      {info.expression} ({sources.get('expression')}), zone {info.zone} "
            f"({sources.get('zone')}), misfire {info.misfire} ({sources.get('misfire')})"
        )
    if info.processor:
        typer.echo(f"  handler   {info.processor}, next slot {info.next_slot}")
    for due in info.next_due:
        typer.echo(f"  next      {due.astimezone(UTC).isoformat()}")
    if info.parked:
        typer.echo(f"  parked    {info.parked}")
    for record in info.recent[-5:]:
        typer.echo(
            f"  slot {record.slot:<4} {record.due.astimezone(UTC).isoformat()} "
            f"{record.outcome} ({record.commands} commands, skipped {record.skipped})"
            + (f": {record.detail}" if record.detail else "")
        )
    for text in info.notices:
        typer.echo(f"  notice    {text}")
    if info.note:
        typer.echo(f"  note      {info.note}")


if __name__ == "__main__":
    main()
