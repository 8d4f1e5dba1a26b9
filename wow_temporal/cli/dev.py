"""`dev`, the whole stack on the embedded Temporal dev server, and `demo`, the walk through the
spec's e-shop on it."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from wow_temporal.cli._common import (
    _configure_logging,
    _configure_tracing,
    _fail,
    _jobs_app,
    _load_apps,
    _settings,
)

if TYPE_CHECKING:
    from wow_temporal.dev.ports import DevPort, DevPorts
    from wow_temporal.domain.app import App as DomainApp
    from wow_temporal.settings import Settings

_EXAMPLE_APP = "workers.eshop:apps"
"""The spec's e-shop (order and inventory), which `dev` runs when started in the repository."""

_AppOption = Annotated[
    str | None,
    typer.Option(
        "--app",
        help="module:attr of an App (or a list of them) to host and whose jobs to run "
        f"(default: the spec's e-shop, {_EXAMPLE_APP}, when run from the repository; "
        "'none' for the echo host alone).",
    ),
]


def _port_option(flag: str, what: str, default: str, *aliases: str) -> Any:
    """A port flag of `dev`: None takes the setting named in its help; 0: any free port."""
    return typer.Option(
        flag,
        *aliases,
        min=0,
        max=65535,
        show_default=False,
        help=f"{what} port ({default}; 0: any free port).",
    )


def dev(
    data_dir: Annotated[Path, typer.Option(help="Where the dev server keeps its database.")] = Path(
        ".wow-temporal"
    ),
    temporal_port: Annotated[
        int | None,
        _port_option("--temporal-port", "Temporal gRPC", "WOW_DEV_TEMPORAL_PORT, 7233", "--port"),
    ] = None,
    ui_port: Annotated[
        int | None, _port_option("--ui-port", "Temporal Web UI", "WOW_DEV_UI_PORT, 8233")
    ] = None,
    headless: Annotated[bool, typer.Option(help="No Web UI.")] = False,
    host_port: Annotated[
        int | None, _port_option("--host-port", "Domain host", "WOW_DEV_HOST_PORT, 8089")
    ] = None,
    api_port: Annotated[
        int | None, _port_option("--api-port", "Control API", "WOW_API_PORT, 8088")
    ] = None,
    metrics_port: Annotated[
        int | None,
        _port_option("--metrics-port", "Prometheus /metrics", "WOW_WORKER_METRICS_PORT, 9464"),
    ] = None,
    app_ref: _AppOption = None,
) -> None:
    """Run everything on the embedded default: Temporal dev server and Web UI, the timer
    worker, the job worker, the control API and the domain host, until Ctrl+C, SIGTERM or
    SIGHUP (exit 128 + the signal's number, nothing left running).

    Every port is a flag or a setting (0: any free port, printed); all are checked before
    anything starts. A port in use is refused, never swapped; so is a data directory another
    dev runs on."""
    try:
        stopped_by = _dev(
            data_dir, headless, app_ref,
            asked=(temporal_port, ui_port, host_port, api_port, metrics_port),
        )
    except KeyboardInterrupt:  # Ctrl+C before the stack took the signals over: nothing runs
        raise typer.Exit(128 + signal.SIGINT) from None
    if stopped_by is not None:
        raise typer.Exit(128 + stopped_by)


def _dev(
    data_dir: Path,
    headless: bool,
    app_ref: str | None,
    asked: tuple[int | None, int | None, int | None, int | None, int | None],
) -> signal.Signals | None:
    """`dev` once its flags are read: the signal that stopped it, if one did."""
    from wow_temporal.dev.errors import (
        EmbeddedTemporalError,
        TemporalBinaryNotFoundError,
        TemporalServerExitedError,
    )
    from wow_temporal.dev.services import default_services
    from wow_temporal.dev.stack import dev_main
    from wow_temporal.metrics import exporting_runtime
    from wow_temporal.tracing import client_interceptors

    apps, settings = _apps_and_settings(app_ref)
    ports = _ports(settings, headless, *asked)
    _configure_logging(settings)
    _configure_tracing(settings, "wow-temporal-dev")
    metrics = ports.metrics
    try:
        return dev_main(
            data_dir,
            port=ports.temporal.port or None,
            ui_port=ports.ui.port or None if ports.ui is not None else None,
            headless=headless,
            services=default_services(settings, apps, ports.host, ports.api),
            interceptors=client_interceptors(settings.telemetry),
            runtime=lambda: exporting_runtime(  # loopback, like every other dev port
                settings.telemetry,
                metrics.port if metrics is not None else 0,
                "--metrics-port or WOW_WORKER_METRICS_PORT",
                "127.0.0.1",
            ),
            metrics_url=_metrics_shown(settings, metrics),
            traces=_traces_shown(settings),
            checks=[metrics.check] if metrics is not None else [],
        )
    except TemporalServerExitedError:
        raise typer.Exit(1) from None  # run_dev has said so, in one line
    except (EmbeddedTemporalError, TemporalBinaryNotFoundError) as error:
        raise _fail(str(error), 1) from None
    except OSError as error:  # a service lost its port to another program since the check
        raise _fail(str(error), 1) from None


def _ports(
    settings: Settings,
    headless: bool,
    temporal: int | None,
    ui: int | None,
    host: int | None,
    api: int | None,
    metrics: int | None,
) -> DevPorts:
    """The stack's ports: each flag given, else its setting; any free port picked for the
    services (the Temporal server picks its own on start); two asking for one: exit 2."""
    from wow_temporal.dev.ports import clashing, dev_ports

    dev = settings.dev
    asked = dev_ports(
        temporal=dev.temporal_port if temporal is None else temporal,
        ui=None if headless else dev.ui_port if ui is None else ui,
        host=dev.host_port if host is None else host,
        api=settings.api_port if api is None else api,
        metrics=None
        if settings.telemetry.metrics == "otlp"
        else settings.worker.metrics_port if metrics is None else metrics,
    )
    problem = clashing(asked.all())
    if problem is not None:
        raise _fail(problem)
    return asked.chosen()


def _apps_and_settings(app_ref: str | None) -> tuple[list[DomainApp], Settings]:
    """The apps `--app` names (the e-shop by default in the repository, none for `none`) and
    the settings, checked against the jobs of the app whose jobs run."""
    if app_ref is None and Path("workers/eshop/__init__.py").is_file():
        app_ref = _EXAMPLE_APP
    reference = None if app_ref in (None, "none") else app_ref
    apps = _load_apps(reference)
    return apps, _settings(_jobs_app(apps, reference))


def _metrics_shown(settings: Settings, metrics: DevPort | None) -> str:
    """Where the metrics go, as the dev stack prints them."""
    telemetry = settings.telemetry
    if metrics is None:
        return f"OTLP to {telemetry.otlp_endpoint}"
    return f"http://127.0.0.1:{metrics.port}/metrics"


def _traces_shown(settings: Settings) -> str:
    """Where the traces go, as the dev stack prints them."""
    from wow_temporal.tracing import spans_recorded

    telemetry = settings.telemetry
    if not telemetry.tracing:
        return "off (wow.telemetry.tracing)"
    if telemetry.otlp_endpoint:
        return f"OTLP to {telemetry.otlp_endpoint}"
    if spans_recorded():
        return "to the application's tracer provider"
    return (
        "none made until WOW_TELEMETRY_OTLP_ENDPOINT names a collector "
        "(a commit's traceparent still reaches its command)"
    )


def demo(
    host_url: Annotated[
        str | None,
        typer.Option(help="The dev stack's domain host (default: on WOW_DEV_HOST_PORT, 8089)."),
    ] = None,
    api_url: Annotated[
        str | None, typer.Option(help="The control API (default: on WOW_API_PORT, 8088).")
    ] = None,
    ui_url: Annotated[
        str | None,
        typer.Option(help="The Temporal Web UI (default: on WOW_DEV_UI_PORT, 8233)."),
    ] = None,
) -> None:
    """Walk through the spec's e-shop on a running `./run dev` in about a minute: an order that
    cancels itself when not paid in time, one paid in time, and the morning job.

    Ctrl+C, SIGTERM or SIGHUP stop it at any step: what it changed (the morning job's rule)
    is put back first, it says so, and it exits 130 (128 + the signal's number)."""
    from wow_temporal.dev.demo import DemoError, run_demo

    settings = _settings()
    host = _dev_url(host_url, "--host-url", settings.dev.host_port, "WOW_DEV_HOST_PORT")
    api = _dev_url(api_url, "--api-url", settings.api_port, "WOW_API_PORT")
    ui = _dev_url(ui_url, "--ui-url", settings.dev.ui_port, "WOW_DEV_UI_PORT")
    caught: list[signal.Signals] = []
    walk = run_demo(host, api, ui, token=settings.api_token, say=_say)
    try:
        asyncio.run(_until_signalled(walk, caught))
    except DemoError as error:
        raise _fail(str(error), 1) from None
    except KeyboardInterrupt:
        typer.echo("demo: interrupted", err=True)
        raise typer.Exit(130) from None
    except asyncio.CancelledError:
        if not caught:
            raise
        typer.echo(f"demo: stopped by {caught[0].name}", err=True)
        raise typer.Exit(128 + caught[0]) from None


def _dev_url(given: str | None, flag: str, port: int, variable: str) -> str:
    """The URL given, else the dev stack's on the port its setting names; exit 2 when that
    is 0 (any free port: only the stack knows which it took)."""
    if given is not None:
        return given
    if port == 0:
        raise _fail(
            f"{flag}: {variable} is 0 (any free port); give the URL `wow-temporal dev` printed"
        )
    return f"http://127.0.0.1:{port}"


def _say(line: str) -> None:
    """Print a line of the demo at once: someone (or a test) waits for each step."""
    print(line, flush=True)


async def _until_signalled(walk: Coroutine[Any, Any, None], caught: list[signal.Signals]) -> None:
    """Run `walk`; SIGTERM or SIGHUP cancel it as Ctrl+C does (asyncio.run's own handling),
    so its `finally` blocks put back what it changed, and are recorded in `caught`."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None

    def cancel(sig: signal.Signals) -> None:
        caught.append(sig)
        task.cancel()

    handled = (signal.SIGTERM, signal.SIGHUP)
    for sig in handled:
        loop.add_signal_handler(sig, cancel, sig)
    try:
        await walk
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)

