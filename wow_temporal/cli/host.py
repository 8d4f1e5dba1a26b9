"""The domain host, `host`, which serves Apps and relays their schedules to the timers, and
`manifest`, what those Apps declare."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Annotated

import typer

from wow_temporal.cli._common import (
    _Address,
    _check_metrics_port,
    _CommandError,
    _configure_logging,
    _configure_tracing,
    _fail,
    _jobs_app,
    _load_apps,
    _log_format,
    _LogFormat,
    _metrics,
    _Namespace,
    _settings,
)

if TYPE_CHECKING:
    from wow_temporal.domain.app import App as DomainApp
    from wow_temporal.settings import Settings


def domain_host(
    app_ref: Annotated[
        str,
        typer.Option("--app", help="module:attr of an App, or a list of them, to serve."),
    ],
    db: Annotated[
        str | None,
        typer.Option(
            help="The event store: a SQLite file (one host per file) or a postgresql:// URI "
            "(any number of replicas, each named by WOW_HOST_REPLICA; password there, in "
            "PGPASSWORD or a PGPASSFILE). Default: wow.host.db "
            "(WOW_HOST_DB), else .wow-temporal/domain.db.",
            show_default=False,
        ),
    ] = None,
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

    from eventsourcing.persistence import PersistenceError

    from wow_temporal.dev.errors import PortInUseError
    from wow_temporal.dev.ports import port_is_free
    from wow_temporal.host.postgres import Dsn, DsnError, is_postgres
    from wow_temporal.host.runtime import StoreInUseError

    fmt = _log_format(log_format)
    apps = _load_apps(app_ref)
    settings = _settings(_jobs_app(apps, app_ref), address=address, namespace=namespace)
    where, location = ("--db", db) if db is not None else ("wow.host.db", settings.host.db)
    shown = location
    if is_postgres(location):
        try:
            shown = Dsn(location).shown
        except DsnError as error:
            raise _fail(f"{where} {error}") from None
    elif not location.strip():
        raise _fail(f"{where}: must be a SQLite file's path or a postgresql:// URI")
    if not port_is_free(port, host):
        raise _fail(str(PortInUseError("domain host", port, host, "--port")), 1)
    _check_metrics_port(settings, metrics_port, "--metrics-port")
    _configure_logging(settings, log_format=fmt)
    _configure_tracing(settings, "wow-temporal-host")
    try:
        asyncio.run(_serve(apps, location, shown, host, port, metrics_port, settings))
    except _CommandError as error:  # the metrics port was taken since the check
        raise _fail(str(error), error.code) from None
    except StoreInUseError as error:
        raise _fail(str(error), 1) from None
    except (OSError, PersistenceError, sqlite3.Error) as error:
        raise _fail(f"{where} {shown}: {error}", 1) from None
    except KeyboardInterrupt:
        pass


async def _serve(
    apps: list[DomainApp],
    db: str,
    shown: str,
    host: str,
    port: int,
    metrics_port: int,
    settings: Settings,
) -> None:
    """Serve `apps` over the store at `db` (`shown` in the log) until stopped; the relay
    connects to Temporal when it first hands over (and again after losing it), so commands
    never wait for Temporal."""
    import uvicorn

    from wow_temporal.connection import connect, connect_reason
    from wow_temporal.host.runtime import HostRuntime
    from wow_temporal.timers.client import TimerClient

    log = logging.getLogger("wow_temporal.host")
    runtime = _metrics(settings, metrics_port, "--metrics-port")  # binds the metrics port

    async def timers() -> TimerClient:
        try:
            client = await connect(settings, runtime)
        except RuntimeError as error:
            config = settings.temporal_connect_config()
            raise ConnectionError(
                f"cannot reach Temporal at {config['target_host']} (namespace "
                f"{config['namespace']}): {connect_reason(str(error))}"
            ) from None
        log.info("relay: connected to Temporal at %s", client.service_client.config.target_host)
        return TimerClient.from_settings(client, settings)

    hosting = HostRuntime(apps, db, timers, replica=settings.host.replica)
    hosting.start()
    log.info(
        "domain host for %s on http://%s:%d, store %s, replica %s",
        ", ".join(a.context for a in apps), host, port, shown, hosting.replica,
    )
    config = uvicorn.Config(hosting.asgi, host=host, port=port, log_level="warning")
    try:
        await uvicorn.Server(config).serve()
    finally:
        await hosting.stop()


def manifest(
    app_ref: Annotated[
        str, typer.Option("--app", help="module:attr of an App, or a list of them.")
    ],
) -> None:
    """Print JSON: each function with its command, the events it produces and the command types
    it schedules; each saga handler; every job with its rule and scope."""
    from wow_temporal.domain.manifest import manifest as build

    typer.echo(json.dumps(build(_load_apps(app_ref)), indent=2))

