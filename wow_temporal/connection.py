"""Connecting to Temporal as the settings say: `connect` gives a client, `connect_timers` the
timers on it as `wow.timers.*` configure them (task queue, delivery retries), and `probe` asks
whether Temporal answers (the worker's `/readyz` and the control API's `/ready`).

    timers = await connect_timers(load_settings())
"""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta

from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
from temporalio.client import Client
from temporalio.runtime import Runtime

from wow_temporal.settings import Settings
from wow_temporal.timers.client import TimerClient
from wow_temporal.tracing import client_interceptors

__all__ = ["PROBE_TIMEOUT", "connect", "connect_reason", "connect_timers", "probe"]

PROBE_TIMEOUT = timedelta(seconds=2)
"""How long a probe waits for Temporal's answer before it says Temporal does not answer."""


async def connect(settings: Settings, runtime: Runtime | None = None) -> Client:
    """A client on the Temporal namespace the settings name (pydantic data converter, tracing
    interceptor unless `wow.telemetry.tracing` is off), on `runtime` (the worker's, exporting
    metrics) or the process's default one."""
    config = settings.temporal_connect_config()
    config["interceptors"] = client_interceptors(settings.telemetry)
    if runtime is not None:
        config["runtime"] = runtime
    return await Client.connect(**config)


async def connect_timers(settings: Settings, runtime: Runtime | None = None) -> TimerClient:
    """The timers of the namespace the settings name, started on `wow.timers.task-queue` (the
    queue the workers poll) with the delivery retries of `wow.timers.*`."""
    return TimerClient.from_settings(await connect(settings, runtime), settings)


_REASONS = (
    re.compile(r'message: "([^"]+)" \}'),  # an OS error: Connection refused, ...
    re.compile(r'error: "([^"]+)"'),  # a custom one: failed to lookup address information ...
    re.compile(r'Status \{ code: (\w+), message: "([^"]*)"'),  # the server answered, oddly
)


def connect_reason(text: str) -> str:
    """The readable part of the SDK's `Failed client connect: <Rust debug output>`."""
    for pattern in _REASONS:
        found = pattern.search(text)
        if found:
            return ": ".join(part for part in found.groups() if part)
    rest = " ".join(text.removeprefix("Failed client connect:").split())
    return rest if len(rest) <= 200 else rest[:199] + "…"


async def probe(client: Client, within: timedelta = PROBE_TIMEOUT) -> str | None:
    """None when Temporal answers a cheap call (its system info) within `within`; else why
    not, in one line."""
    where = f"Temporal at {client.service_client.config.target_host} (namespace {client.namespace})"
    try:
        await asyncio.wait_for(
            client.workflow_service.get_system_info(
                GetSystemInfoRequest(), retry=False, timeout=within
            ),
            within.total_seconds() + 1,
        )
    except TimeoutError:
        return f"{where} did not answer within {within.total_seconds():g}s"
    except Exception as error:  # any failure (RuntimeError: a lazy client cannot connect)
        detail = " ".join(str(getattr(error, "message", "") or error).split())
        return f"{where} is unavailable: {detail[:200] or type(error).__name__}"
    return None
