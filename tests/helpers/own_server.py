"""A dev server of a test module's own, for the tests that stop, kill and restart it (same
database), never the session's: import `own_server` and `server` into the module."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from wow_temporal.dev.server import EmbeddedTemporal


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def own_server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[EmbeddedTemporal]:
    """The module's server (its default task queue the CLI worker may take)."""
    server = EmbeddedTemporal(tmp_path_factory.mktemp("temporal-own"), headless=True)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest_asyncio.fixture(loop_scope="session")
async def server(own_server: EmbeddedTemporal) -> EmbeddedTemporal:
    """The module's server, running (a test before may have stopped it)."""
    await own_server.start()
    return own_server
