"""The production processes, `worker` and `api`, and `setup`, which registers the search
attributes they query on their namespace."""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated

import typer

from wow_temporal.cli._common import (
    _Address,
    _check_metrics_port,
    _CommandError,
    _configure_logging,
    _configure_tracing,
    _connect,
    _fail,
    _jobs,
    _load_app,
    _log_format,
    _LogFormat,
    _metrics,
    _Namespace,
    _run,
    _settings,
)


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
    (8081); Prometheus metrics on WOW_WORKER_METRICS_PORT (9464); spans on, exported to
    WOW_TELEMETRY_OTLP_ENDPOINT if set. While Temporal cannot be reached it stays up,
    unready, and keeps trying."""
    from wow_temporal.dev.errors import PortInUseError
    from wow_temporal.dev.ports import port_is_free
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
    _check_metrics_port(settings, settings.worker.metrics_port, "WOW_WORKER_METRICS_PORT")
    _configure_logging(settings, log_format=fmt)
    _configure_tracing(settings, "wow-temporal-worker")
    log = logging.getLogger("wow_temporal.worker")

    async def work() -> None:
        from wow_temporal.logs import configure_temporal_runtime

        configure_temporal_runtime()
        try:
            await run_worker(settings, stop=_stop_on_signals(log), app=domain)
        except WorkerFailedError as error:
            raise _CommandError(str(error), 1) from None
        except OSError as error:  # the metrics port was taken since the check
            raise _CommandError(str(error), 1) from None

    _run(work)


def _stop_on_signals(log: logging.Logger) -> asyncio.Event:
    """An event SIGTERM or Ctrl-C sets (on the running loop): the worker stops on it, letting
    the deliveries in flight finish."""
    import signal

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
    return stop


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
    from wow_temporal.dev.errors import PortInUseError
    from wow_temporal.dev.ports import port_is_free
    from wow_temporal.timers.client import TimerClient

    fmt = _log_format(log_format)
    domain = _load_app(app_ref)
    settings = _settings(domain, address=address, namespace=namespace)
    listen = port or settings.api_port
    if not port_is_free(listen, host):
        error = PortInUseError("control API", listen, host, "--port or WOW_API_PORT")
        raise _fail(str(error), 1)
    _check_metrics_port(settings, settings.api.metrics_port, "WOW_API_METRICS_PORT")
    _configure_logging(settings, log_format=fmt)
    _configure_tracing(settings, "wow-temporal-api")

    async def work() -> None:
        runtime = _metrics(settings, settings.api.metrics_port, "wow.api.metrics-port")
        client = await _connect(settings, runtime)
        timers = TimerClient.from_settings(client, settings)
        await serve(settings, timers, host=host, port=listen, jobs=_jobs(client, settings, domain))

    _run(work)


def setup(address: _Address = None, namespace: _Namespace = None) -> None:
    """Register the search attributes on TEMPORAL_NAMESPACE (idempotent) and say which were
    added and which were already there."""
    from wow_temporal.dev.errors import EmbeddedTemporalError
    from wow_temporal.search_attributes import SEARCH_ATTRIBUTES, register_search_attributes

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

