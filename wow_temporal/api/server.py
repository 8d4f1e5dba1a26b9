"""`serve`: the control API on uvicorn, until told to stop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator, Mapping

import uvicorn

from wow_temporal.api.app import create_app
from wow_temporal.jobs.client import JobClient
from wow_temporal.settings import Settings
from wow_temporal.timers.client import TimerClient

log = logging.getLogger(__name__)


class LoopServer(uvicorn.Server):
    """A uvicorn server that leaves the process's signals to the loop it runs on.

    uvicorn's own `serve` replaces the SIGINT/SIGTERM handlers while it runs and, once
    stopped, raises the signals it caught again: inside a process that already handles them
    (`wow-temporal dev` runs two of them and the workers on one loop), which server's handler
    is in force depends on start and stop order, and a re-raised SIGINT that lands on Python's
    default handler interrupts the clean stop with `KeyboardInterrupt` (a `CancelledError`
    traceback). This one is stopped through `should_exit` only.
    """

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """Capture nothing: the owner of the loop handles signals and sets `should_exit`."""
        yield


async def serve(
    settings: Settings,
    timers: TimerClient,
    *,
    host: str = "127.0.0.1",
    port: int | None = None,
    stop: asyncio.Event | None = None,
    tenant_tokens: Mapping[str, str] | None = None,
    jobs: JobClient | None = None,
    signals: bool = True,
) -> None:
    """Serve the control API on uvicorn until `stop` is set (or SIGINT/SIGTERM, or forever).

    With `signals` false it leaves SIGINT/SIGTERM alone (see `LoopServer`): for a process that
    handles them itself and sets `stop`.

    The tenants' tokens are `settings.api_tenant_tokens` (`wow.api.tenant-tokens[-file]`)
    unless `tenant_tokens` (token -> tenant) is given.
    """
    tokens = settings.api_tenant_tokens if tenant_tokens is None else tenant_tokens
    app = create_app(timers, token=settings.api_token, tenant_tokens=tokens, jobs=jobs)
    listen = settings.api_port if port is None else port
    server = (uvicorn.Server if signals else LoopServer)(
        uvicorn.Config(app, host=host, port=listen, log_config=None, lifespan="off")
    )
    log.info("control API on http://%s:%d (OpenAPI at /openapi.json)", host, listen)

    async def run() -> None:
        try:
            await server.serve()
        except SystemExit:  # uvicorn exits when it cannot start (the port is taken, ...)
            raise OSError(f"the control API could not listen on {host}:{listen}") from None

    running = asyncio.ensure_future(run())
    stopping = asyncio.ensure_future(stop.wait()) if stop is not None else None
    try:
        waiting = {running} if stopping is None else {running, stopping}
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if not running.done():
            server.should_exit = True
        await running
    finally:
        if stopping is not None:
            stopping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await stopping
        if not running.done():
            server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await running
