"""The production processes, `worker` and `api`, and `setup`, which registers the search
attributes they query on their namespace."""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated

import typer
from pydantic import ValidationError

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
from wow_temporal.settings import Settings


def worker(
    app_ref: Annotated[
        str | None,
        typer.Option(
            "--app",
            help="module:attr of an App: run its recurring jobs too (and enable its SYSTEM jobs).",
        ),
    ] = None,
    health_port: Annotated[
        int | None,
        typer.Option(
            min=0, max=65535, show_default=False,
            help="/livez and /readyz port (WOW_WORKER_HEALTH_PORT, 8081; 0: none).",
        ),
    ] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            min=0, max=65535, show_default=False,
            help="Prometheus /metrics port (WOW_WORKER_METRICS_PORT, 9464; 0: none).",
        ),
    ] = None,
    address: _Address = None,
    namespace: _Namespace = None,
    log_format: _LogFormat = None,
) -> None:
    """Run the timer worker (and an App's jobs), delivering every command to WOW_HOST_URL,
    until SIGTERM or Ctrl-C, which let the deliveries in flight finish
    (WOW_WORKER_SHUTDOWN_TIMEOUT, 30 s). Health: /livez and /readyz on --health-port
    (8081); Prometheus metrics on --metrics-port (9464); spans on, exported to
    WOW_TELEMETRY_OTLP_ENDPOINT if set. While Temporal cannot be reached it stays up,
    unready, and keeps trying."""
    from wow_temporal.dev.errors import PortInUseError
    from wow_temporal.dev.ports import port_is_free
    from wow_temporal.worker import WorkerFailedError, run_worker

    fmt = _log_format(log_format)
    domain = _load_app(app_ref)
    settings = _with_ports(
        _settings(domain, address=address, namespace=namespace),
        "worker", health_port=health_port, metrics_port=metrics_port,
    )
    if settings.host_url is None:  # before connecting: the fix is here, not in Temporal
        raise _fail("WOW_HOST_URL (wow.host-url): the worker needs the domain host's URL")
    health_port = settings.worker.health_port
    every = "0.0.0.0"  # the health endpoints listen on every interface, for the probes
    if health_port and not port_is_free(health_port, every):
        choose = "--health-port or WOW_WORKER_HEALTH_PORT"
        raise _fail(str(PortInUseError("health", health_port, every, choose)), 1)
    _check_metrics_port(
        settings, settings.worker.metrics_port, "--metrics-port or WOW_WORKER_METRICS_PORT"
    )
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


def _with_ports(settings: Settings, section: str, **ports: int | None) -> Settings:
    """`settings` with the ports given by flags (None: the setting's) in `section`."""
    given = {name: port for name, port in ports.items() if port is not None}
    if not given:
        return settings
    part = getattr(settings, section)
    try:
        changed = type(part).model_validate({**part.model_dump(by_alias=False), **given})
    except ValidationError as error:  # health-port and metrics-port the same
        flags = " and ".join("--" + name.replace("_", "-") for name in given)
        reason = str(error.errors()[0]["msg"]).removeprefix("Value error, ")
        raise _fail(f"{flags}: {reason}") from None
    return settings.model_copy(update={section: changed})


def api(
    port: Annotated[
        int | None,
        typer.Option(
            min=0, max=65535, show_default=False,
            help="Port (WOW_API_PORT, 8088; 0: any free port, logged).",
        ),
    ] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            min=0, max=65535, show_default=False,
            help="Prometheus /metrics port (WOW_API_METRICS_PORT; 0, the default: none).",
        ),
    ] = None,
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
    from wow_temporal.dev.ports import free_port, port_is_free
    from wow_temporal.timers.client import TimerClient

    fmt = _log_format(log_format)
    domain = _load_app(app_ref)
    settings = _with_ports(
        _settings(domain, address=address, namespace=namespace), "api", metrics_port=metrics_port
    )
    listen = (settings.api_port if port is None else port) or free_port(host)
    if not port_is_free(listen, host):
        choose = "--port or WOW_API_PORT (0: any free port)"
        raise _fail(str(PortInUseError("control API", listen, host, choose)), 1)
    _check_metrics_port(
        settings, settings.api.metrics_port, "--metrics-port or WOW_API_METRICS_PORT"
    )
    _configure_logging(settings, log_format=fmt)
    _configure_tracing(settings, "wow-temporal-api")

    async def work() -> None:
        runtime = _metrics(
            settings, settings.api.metrics_port, "--metrics-port or WOW_API_METRICS_PORT"
        )
        client = await _connect(settings, runtime)
        timers = TimerClient.from_settings(client, settings)
        await serve(settings, timers, host=host, port=listen, jobs=_jobs(client, settings, domain))

    _run(work)


def setup(address: _Address = None, namespace: _Namespace = None) -> None:
    """Register the search attributes on TEMPORAL_NAMESPACE (idempotent) and say which were
    added and which were already there."""
    from wow_temporal.search_attributes import (
        SEARCH_ATTRIBUTES,
        SearchAttributeError,
        register_search_attributes,
    )

    settings = _settings(address=address, namespace=namespace)
    _configure_logging(settings, logging.WARNING)

    async def work() -> tuple[str, list[str]]:
        client = await _connect(settings)
        try:
            return client.namespace, await register_search_attributes(client, client.namespace)
        except SearchAttributeError as error:  # a name taken with another type
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

