"""Engine of `wow-temporal dev`: the embedded Temporal server plus the project's services.

Claims the data directory, starts the server (Web UI on), then each `DevService` in order,
prints where everything is, waits for SIGINT/SIGTERM/SIGHUP (or the server's death) and stops the
services in reverse order and then the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TextIO, runtime_checkable
from urllib.parse import quote

from temporalio.client import Client, Interceptor
from temporalio.runtime import Runtime

from wow_temporal.dev.errors import TemporalServerExitedError
from wow_temporal.dev.server import DEFAULT_DATA_DIR, EmbeddedTemporal
from wow_temporal.engine.listing import quoted

__all__ = ["READY_LINE", "STOP_SIGNALS", "DevContext", "DevService", "dev_main", "run_dev"]

READY_LINE = "wow-temporal dev is ready (Ctrl+C to stop)"
"""Printed once everything is up; scripts and tests wait for it."""

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""The signals that stop `wow-temporal dev` cleanly: Ctrl+C, a supervisor, a closed terminal."""


@dataclass(frozen=True)
class DevContext:
    """What a dev service gets to start against: the running server and a connected client."""

    client: Client
    address: str
    namespace: str
    data_dir: Path
    ui_url: str | None


@runtime_checkable
class DevService(Protocol):
    """A process-local service run by `wow-temporal dev` (worker, control API, example host).

    A service may also have a `check() -> None` method: called before the server starts, it
    raises (`PortInUseError`, ...) to refuse the whole run before anything is started.
    """

    @property
    def name(self) -> str:
        """Short label printed next to the service's description."""
        ...

    async def start(self, ctx: DevContext) -> str:
        """Start serving; return where it is (a URL or a one-line description) to print."""
        ...

    async def stop(self) -> None:
        """Stop serving and release everything started by `start`."""
        ...


def _print(out: TextIO, line: str = "") -> None:
    """Print and flush at once so a supervising process sees each line immediately."""
    out.write(line + "\n")
    out.flush()


async def run_dev(
    data_dir: Path = DEFAULT_DATA_DIR,
    *,
    port: int | None = None,
    ui_port: int | None = None,
    headless: bool = False,
    namespace: str = "default",
    services: Sequence[DevService] = (),
    stop_event: asyncio.Event | None = None,
    out: TextIO | None = None,
    interceptors: Sequence[Interceptor] = (),
    runtime: Callable[[], Runtime | None] | None = None,
    metrics_url: str | None = None,
    traces: str | None = None,
    checks: Sequence[Callable[[], None]] = (),
) -> signal.Signals | None:
    """Run the server and `services` until SIGINT/SIGTERM/SIGHUP (or `stop_event`), then stop
    all; the signal that stopped it, if one did.

    A signal (or `stop_event`) while starting stops at once too: what was started stops and
    the ready line is never printed. Services stop in reverse order, then the server; a
    failure while starting stops what was already started and re-raises. Refusals come
    before anything starts: `DataDirInUseError` (another dev runs on `data_dir`),
    `PortInUseError` (from the server's or a service's `check`, or one of `checks`). If the
    server exits while running, one line says so, everything stops and
    `TemporalServerExitedError` is raised. The services' client has `interceptors` (tracing)
    and runs on the runtime `runtime` makes once the server is up (exporting metrics, served
    at `metrics_url`; it raises `OSError` if it cannot bind its port); `traces` says where
    the spans go.
    """
    out = out if out is not None else sys.stdout
    stop = stop_event if stop_event is not None else asyncio.Event()
    server = EmbeddedTemporal(
        data_dir, port=port, ui_port=ui_port, headless=headless, namespace=namespace
    )
    started: list[DevService] = []
    caught: list[signal.Signals] = []

    async def start() -> None:
        await _claim(server, services, checks)
        await server.start()
        made = runtime() if runtime is not None else None
        _print_where(out, server, metrics_url if made is not None else None, traces)
        ctx = DevContext(
            client=await server.connect(interceptors=interceptors, runtime=made),
            address=server.address,
            namespace=server.namespace,
            data_dir=server.data_dir,
            ui_url=server.ui_url,
        )
        await _start_services(services, ctx, started, out)

    with _signals_set(stop, caught):
        try:
            if await _unless_stopped(start(), stop):
                _print(out, READY_LINE)
                await _until_stop_or_exit(stop, server, out)
            _print(out, "wow-temporal dev: stopping")
        finally:
            await _stop_all(started, server, out)
    _print(out, "wow-temporal dev: stopped")
    return caught[0] if caught else None


async def _unless_stopped(starting: Coroutine[Any, Any, None], stop: asyncio.Event) -> bool:
    """Run `starting` unless `stop` is set first, then cancel it (it unwinds what it began);
    whether it finished. Its failure is raised."""
    task = asyncio.ensure_future(starting)
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await stopping
        await _cancelled(task)
    return not task.cancelled() and not stop.is_set()


async def _cancelled(task: asyncio.Future[None]) -> None:
    """Cancel `task` until it is done (a no-op once it is), then raise its failure, if any.

    Cancelled again and again: an SDK call may take the cancellation for a timeout of its own
    (Temporal's update RPC does) and the start would go on to the next service."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=0.05)
    if not task.cancelled():
        task.result()


@contextlib.contextmanager
def _signals_set(stop: asyncio.Event, caught: list[signal.Signals]) -> Iterator[None]:
    """While inside, SIGINT, SIGTERM and SIGHUP set `stop` (and are recorded in `caught`)
    instead of interrupting.

    SIGHUP (the terminal closed) must stop the stack like Ctrl+C: by default it would end this
    process at once, skipping `_stop_all`, and the server, in a session of its own, would run
    on with no worker."""
    loop = asyncio.get_running_loop()
    handled: list[signal.Signals] = []

    def on_signal(sig: signal.Signals) -> None:
        caught.append(sig)
        stop.set()

    for sig in STOP_SIGNALS:
        # Not possible outside the main thread or on Windows; stop_event still works there.
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, on_signal, sig)
            handled.append(sig)
    try:
        yield
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)


async def _claim(
    server: EmbeddedTemporal,
    services: Sequence[DevService],
    checks: Sequence[Callable[[], None]],
) -> None:
    """Take the data directory and run every service's `check` and `checks`: refusals before
    any start."""
    await server.claim()
    for service in services:
        check: Callable[[], None] | None = getattr(service, "check", None)
        if check is not None:
            check()
    for check in checks:
        check()


def _print_where(
    out: TextIO, server: EmbeddedTemporal, metrics_url: str | None, traces: str | None
) -> None:
    """Print where the server is, its files, and where metrics and traces go."""
    _print(out, "wow-temporal dev")
    _print(out, f"  Temporal gRPC:   {server.address}")
    _print(out, f"  Temporal Web UI: {server.ui_url or '(headless)'}")
    if server.ui_url:  # the default list shows a parked timer as Running: one click to them
        parked = quote(f"WowStatus={quoted('Parked')}", safe="")
        listing = f"{server.ui_url}/namespaces/{quote(server.namespace, safe='')}/workflows"
        _print(out, f"  Parked timers:   {listing}?query={parked}")
    _print(out, f"  Namespace:       {server.namespace}")
    _print(out, f"  Database:        {server.db_path}")
    _print(out, f"  Server log:      {server.log_path}")
    if metrics_url is not None:
        _print(out, f"  Metrics:         {metrics_url}")
    if traces is not None:
        _print(out, f"  Traces:          {traces}")


async def _start_services(
    services: Sequence[DevService],
    ctx: DevContext,
    started: list[DevService],
    out: TextIO,
) -> None:
    """Start `services` in order, adding each to `started` and printing where it is; one
    cancelled while starting is added too, so that stopping releases what it began."""
    for service in services:
        try:
            description = await service.start(ctx)
        except asyncio.CancelledError:
            started.append(service)
            raise
        started.append(service)
        _print(out, f"  {service.name + ':':<16} {description}")


async def _stop_all(started: list[DevService], server: EmbeddedTemporal, out: TextIO) -> None:
    """Stop the started services in reverse order, then the server, whichever fails."""
    try:
        for service in reversed(started):
            try:
                await service.stop()
            except Exception as err:  # keep stopping the others and the server
                _print(out, f"  {service.name}: error while stopping: {err!r}")
    finally:
        await server.stop()


async def _until_stop_or_exit(stop: asyncio.Event, server: EmbeddedTemporal, out: TextIO) -> None:
    """Wait for `stop`; if the server exits first, say so in one line and raise."""
    pid = server.pid
    stopping = asyncio.ensure_future(stop.wait())
    exiting = asyncio.ensure_future(server.wait())
    try:
        await asyncio.wait({stopping, exiting}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (stopping, exiting):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    if stop.is_set() or not exiting.done() or exiting.cancelled():
        return
    code = exiting.result()
    how = f"was killed by {_signal_name(-code)}" if code < 0 else f"exited with code {code}"
    message = (
        f"the Temporal server (pid {pid}) {how} while wow-temporal dev was running; "
        f"stopping everything (server log: {server.log_path})"
    )
    _print(out, f"wow-temporal dev: {message}")
    raise TemporalServerExitedError(message)


def _signal_name(number: int) -> str:
    """SIGKILL for 9; the number itself for a signal Python does not name."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def dev_main(
    data_dir: Path = DEFAULT_DATA_DIR,
    *,
    port: int | None = None,
    ui_port: int | None = None,
    headless: bool = False,
    namespace: str = "default",
    services: Sequence[DevService] = (),
    interceptors: Sequence[Interceptor] = (),
    runtime: Callable[[], Runtime | None] | None = None,
    metrics_url: str | None = None,
    traces: str | None = None,
    checks: Sequence[Callable[[], None]] = (),
) -> signal.Signals | None:
    """Synchronous entry point for the CLI: `asyncio.run(run_dev(...))`, the signal that
    stopped it if one did."""
    return asyncio.run(
        run_dev(
            data_dir,
            port=port,
            ui_port=ui_port,
            headless=headless,
            namespace=namespace,
            services=services,
            interceptors=interceptors,
            runtime=runtime,
            metrics_url=metrics_url,
            traces=traces,
            checks=checks,
        )
    )
