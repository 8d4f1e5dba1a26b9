"""What every command shares: the common options, the settings, the connection to Temporal,
running a command's coroutine with the errors a user can fix as one line and an exit code, the
`--app` Apps, and the process's logging, tracing and metrics."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from pydantic import BaseModel

from wow_temporal.model import InvalidCommitError, InvalidScheduleError
from wow_temporal.settings import Settings, SettingsError, load_settings

if TYPE_CHECKING:
    from temporalio.client import Client
    from temporalio.runtime import Runtime

    from wow_temporal.domain.app import App as DomainApp
    from wow_temporal.jobs.client import JobClient

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

_bridge_used = False
"""Set by `_run`, which runs a command on the Temporal client: `main` then leaves without
finalizing the interpreter (read it as `_common._bridge_used`, it is reassigned)."""


def _fail(message: str, code: int = 2) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


class _CommandError(Exception):
    """Raised inside a command's coroutine: `_run` prints `error: message`, exits `code`."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


async def _connect(settings: Settings, runtime: Runtime | None = None) -> Client:
    """Connect as `connect.connect` does (on `runtime`, exporting metrics, if given), Temporal's
    core logging through Python's; a `_CommandError` (exit 1) naming the address when
    Temporal does not answer."""
    from wow_temporal.connection import connect, connect_reason
    from wow_temporal.logs import configure_temporal_runtime

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
    input, a refusal) or 1 (Temporal unreachable, no worker answered)."""
    from temporalio.service import RPCError

    from wow_temporal.jobs.client import JobError, JobNotAnsweredError
    from wow_temporal.timers.client import TimerError, TimerNotAnsweredError

    global _bridge_used
    _bridge_used = True
    try:
        return asyncio.run(work())  # type: ignore[arg-type]
    except _CommandError as error:
        raise _fail(str(error), error.code) from None
    except (TimerNotAnsweredError, JobNotAnsweredError) as error:  # not bad input: no worker
        raise _fail(str(error), 1) from None
    except (
        TimerError, JobError, SettingsError, InvalidCommitError, InvalidScheduleError
    ) as error:
        raise _fail(str(error)) from None
    except RPCError as error:  # Temporal away is exit 1, as the API's 503; a refusal is 2
        raise _fail(f"Temporal: {error}", 1 if _temporal_away(error) else 2) from None
    except BrokenPipeError:
        raise  # stdout closed (`| head`): the entry point ends quietly
    except (ConnectionError, OSError) as error:
        raise _fail(f"cannot connect: {error}") from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def _temporal_away(error: Exception) -> bool:
    """Whether Temporal could not be asked (the API's 503 `TemporalUnavailable`), not refused."""
    from temporalio.service import RPCError, RPCStatusCode

    return isinstance(error, RPCError) and error.status in (
        RPCStatusCode.UNAVAILABLE,
        RPCStatusCode.DEADLINE_EXCEEDED,
        RPCStatusCode.RESOURCE_EXHAUSTED,
        RPCStatusCode.CANCELLED,
    )


def _echo_json(value: Any) -> None:
    if isinstance(value, BaseModel):
        typer.echo(value.model_dump_json(indent=2))
    else:
        typer.echo(json.dumps(value, indent=2, default=str))


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


def _jobs(client: Client, settings: Settings, domain: DomainApp | None) -> JobClient:
    from wow_temporal.jobs.client import JobClient
    from wow_temporal.jobs.overrides import host_rules
    rules = host_rules(settings, domain) if domain is not None else {}
    apps = [domain] if domain is not None else []
    return JobClient(client, apps, host_rules=rules, delivery=settings.timers.delivery)


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


def _check_metrics_port(settings: Settings, port: int, variable: str) -> None:
    """Refuse (exit 1) a metrics port in use, before anything starts (none is bound when the
    metrics are pushed over OTLP)."""
    from wow_temporal.dev.errors import PortInUseError
    from wow_temporal.dev.ports import port_is_free

    if settings.telemetry.metrics == "otlp":
        return
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



def cut_line(limit: int) -> str:
    """What a listing says when it was cut at `--limit` (timers and schedules alike)."""
    from wow_temporal.engine.listing import LIST_LIMIT

    more = (
        f"use --limit up to {LIST_LIMIT:,}, or narrow the filters"
        if limit < LIST_LIMIT
        else "narrow the filters"
    )
    return f"# … more: showing the first {limit:,}; {more}"
