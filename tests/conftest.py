"""Shared fixtures: the two embedded Temporal servers, started lazily once per session; no
tracer provider outlives the test that installed it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio
from opentelemetry import trace
from opentelemetry.util._once import Once
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from wow_temporal import tracing
from wow_temporal.embedded import EmbeddedTemporal, start_time_skipping

pytest_plugins = ["tests.recording_host"]  # the `recording_host` fixture: a real HTTP Wow host


def reset_tracing() -> None:
    """Back to no tracer provider, as OpenTelemetry's own tests reset their globals."""
    trace._TRACER_PROVIDER = None
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    tracing._configured = False


@pytest.fixture(autouse=True)
def untraced_afterwards() -> Iterator[None]:
    """A command run in-process (`CliRunner`) installs the process's tracer provider; remove
    it after that test, so that the tests after it see no tracing they did not ask for."""
    before = trace.get_tracer_provider()
    yield
    if trace.get_tracer_provider() is not before:
        reset_tracing()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def time_skipping_env() -> AsyncIterator[WorkflowEnvironment]:
    """The Java time-skipping test server (pydantic data converter), shut down at session end."""
    env = await start_time_skipping()
    try:
        yield env
    finally:
        await env.shutdown()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def time_skipping_client(time_skipping_env: WorkflowEnvironment) -> Client:
    """A client on the time-skipping server; awaiting a result skips time."""
    return time_skipping_env.client


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def dev_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[EmbeddedTemporal]:
    """A headless `temporal server start-dev` on a session tmp dir, with the search attributes."""
    server = EmbeddedTemporal(tmp_path_factory.mktemp("temporal-dev"), headless=True)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def dev_client(dev_server: EmbeddedTemporal) -> Client:
    """A client (pydantic data converter) on the session dev server's namespace."""
    return await dev_server.connect()
