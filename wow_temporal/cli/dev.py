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
    app_ref: _AppOption = None,
) -> None:
    """Run everything on the embedded default: Temporal dev server and Web UI, the timer
    worker, the job worker, the control API (WOW_API_PORT, 8088) and the domain host
    (--host-port, 8089), until Ctrl-C.

    A port in use is refused, never swapped; so is a data directory another dev runs on."""
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
    _configure_logging(settings)
    _configure_tracing(settings, "wow-temporal-dev")
    metrics_port = settings.worker.metrics_port
    metrics_url, traces = _telemetry_shown(settings)
    try:
        dev_main(
            data_dir,
            port=port or None,
            ui_port=ui_port or None,
            headless=headless,
            services=default_services(settings, apps, host_port),
            interceptors=client_interceptors(settings.telemetry),
            runtime=lambda: exporting_runtime(  # loopback, like every other dev port
                settings.telemetry, metrics_port, "WOW_WORKER_METRICS_PORT", "127.0.0.1"
            ),
            metrics_url=metrics_url,
            traces=traces,
        )
    except TemporalServerExitedError:
        raise typer.Exit(1) from None  # run_dev has said so, in one line
    except (EmbeddedTemporalError, TemporalBinaryNotFoundError) as error:
        raise _fail(str(error), 1) from None
    except OSError as error:  # a service lost its port to another program since the check
        raise _fail(str(error), 1) from None


def _apps_and_settings(app_ref: str | None) -> tuple[list[DomainApp], Settings]:
    """The apps `--app` names (the e-shop by default in the repository, none for `none`) and
    the settings, checked against the jobs of the app whose jobs run."""
    if app_ref is None and Path("workers/eshop/__init__.py").is_file():
        app_ref = _EXAMPLE_APP
    reference = None if app_ref in (None, "none") else app_ref
    apps = _load_apps(reference)
    return apps, _settings(_jobs_app(apps, reference))


def _telemetry_shown(settings: Settings) -> tuple[str, str]:
    """Where the metrics and the traces go, as the dev stack prints them."""
    telemetry = settings.telemetry
    metrics_url = (
        f"OTLP to {telemetry.otlp_endpoint}" if telemetry.metrics == "otlp"
        else f"http://127.0.0.1:{settings.worker.metrics_port}/metrics"
    )
    traces = (
        "off (wow.telemetry.tracing)" if not telemetry.tracing
        else f"OTLP to {telemetry.otlp_endpoint}" if telemetry.otlp_endpoint
        else "on, not exported (WOW_TELEMETRY_OTLP_ENDPOINT to send them to a collector)"
    )
    return metrics_url, traces


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
    cancels itself when not paid in time, one paid in time, and the morning job.

    Ctrl+C, SIGTERM or SIGHUP stop it at any step: what it changed (the morning job's rule)
    is put back first, it says so, and it exits 130 (128 + the signal's number)."""
    from wow_temporal.dev.demo import DemoError, run_demo

    settings = _settings()
    api = api_url or f"http://127.0.0.1:{settings.api_port}"
    caught: list[signal.Signals] = []
    walk = run_demo(host_url, api, ui_url, token=settings.api_token, say=_say)
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

