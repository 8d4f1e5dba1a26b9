"""The services `wow-temporal dev` runs beside the embedded server: the domain host (the apps'
aggregates and sagas, with the relay to the timers), the timer worker, the job worker and the
control API, each in this process."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import replace

import uvicorn
from temporalio.worker import Worker

from wow_temporal.api.server import LoopServer
from wow_temporal.delivery import CommandSender
from wow_temporal.dev.ports import DevPort, dev_ports
from wow_temporal.dev.stack import DevContext, DevService
from wow_temporal.domain.app import App
from wow_temporal.engine import zoned_text
from wow_temporal.host.echo import create_echo_host, echo_fallback
from wow_temporal.host.relay import Timers
from wow_temporal.host.runtime import HostRuntime
from wow_temporal.jobs.client import JobClient, job_task_queue
from wow_temporal.jobs.overrides import host_rules
from wow_temporal.model import zone_info
from wow_temporal.settings import Settings
from wow_temporal.timers.client import TimerClient
from wow_temporal.worker import (
    count_parked,
    job_worker,
    pollers,
    timer_worker,
)

__all__ = [
    "DOMAIN_HOST_PORT",
    "ApiService",
    "DomainHostService",
    "EchoHostService",
    "JobWorkerService",
    "TimerWorkerService",
    "default_services",
]


def _asked(port: DevPort | int | None, default: DevPort) -> DevPort:
    """`port` as a `DevPort` (an int: that port of `default`'s kind; None: `default`), with
    any free port picked if it asks for one."""
    if isinstance(port, DevPort):
        return port.chosen()
    return replace(default, port=default.port if port is None else port).chosen()


_HOST_PORT = dev_ports(0, None, 8089, 0, None).host
_API_PORT = dev_ports(0, None, 0, 8088, None).api


class _Uvicorn:
    """An ASGI app served by uvicorn on a task of the running loop, on the port asked for."""

    def __init__(self, port: DevPort) -> None:
        self.asked = port
        self.port = port.port
        self.url = f"http://127.0.0.1:{self.port}"
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    def check(self) -> None:
        """Refuse the dev run, before anything starts, if the port is in use."""
        self.asked.check()

    async def serve(self, app: object, port: int) -> None:
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")  # type: ignore[arg-type]
        self._server = LoopServer(config)  # dev's loop owns the signals
        self._task = asyncio.create_task(self._server.serve())
        while not self._server.started:
            if self._task.done():
                self._task.result()  # raises why it could not start
                raise RuntimeError(f"could not serve on port {port}")
            await asyncio.sleep(0.02)

    async def shutdown(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


class EchoHostService(_Uvicorn):
    """The dev domain host: accepts every command and prints it (until a real domain runs)."""

    name = "domain host"

    def __init__(self, port: DevPort | int | None = None) -> None:
        """On `port` (an int or None: 0, any free port, unless a `DevPort` says otherwise)."""
        super().__init__(_asked(0 if port is None else port, _HOST_PORT))

    async def start(self, ctx: DevContext) -> str:
        await self.serve(create_echo_host(), self.port)
        return (
            f"{self.url}  (echo host: prints every command; refuses aggregate ids reject-…, "
            "fails fail-…, fails flaky-… 3 times first)"
        )

    async def stop(self) -> None:
        await self.shutdown()


DOMAIN_HOST_PORT = 8089
"""The dev domain host's port (`--host-port`, `wow.dev.host-port`), used or refused like the
control API's."""


class DomainHostService(_Uvicorn):
    """The domain host of `apps`: Wow's command API, the SQLite store in the data directory, the
    sagas and the relay to the timers. Other contexts' commands get the echo convention, so a
    commit typed by hand still shows every outcome."""

    name = "domain host"

    def __init__(
        self, settings: Settings, apps: Sequence[App], port: DevPort | int | None = None
    ) -> None:
        """On `port` (None: `wow.dev.host-port`; 0: any free port)."""
        super().__init__(_asked(port, replace(_HOST_PORT, port=settings.dev.host_port)))
        self.settings = settings
        self.apps = list(apps)
        self.runtime: HostRuntime | None = None

    async def start(self, ctx: DevContext) -> str:
        timers = TimerClient.from_settings(ctx.client, self.settings)

        async def connect() -> Timers:
            return timers

        db_path = ctx.data_dir / "domain.db"
        self.runtime = HostRuntime(self.apps, db_path, connect, fallback=echo_fallback())
        self.runtime.start()
        await self.serve(self.runtime.asgi, self.port)
        contexts = ", ".join(app.context for app in self.apps)
        return (
            f"{self.url}  ({contexts}; store {db_path}; followers at /wow/followers, OpenAPI "
            "/docs; other contexts: the echo convention, refusing aggregate ids reject-…, "
            "failing fail-…, failing flaky-… 3 times first)"
        )

    async def stop(self) -> None:
        await self.shutdown()
        if self.runtime is not None:
            await self.runtime.stop()


class _WorkerService:
    """A Temporal worker run on a task of the dev loop, sending to the host at `host_url`."""

    def __init__(self, settings: Settings, host_url: str) -> None:
        self.settings = settings
        self.host_url = host_url
        self._sender: CommandSender | None = None
        self._worker: Worker | None = None
        self._task: asyncio.Task[None] | None = None

    async def stop(self) -> None:
        if self._worker is not None and self._task is not None:
            await self._worker.shutdown()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._sender is not None:
            await self._sender.aclose()


class TimerWorkerService(_WorkerService):
    """The timer worker, delivering to the host at `host_url`."""

    name = "timer worker"

    def __init__(self, settings: Settings, host_url: str) -> None:
        super().__init__(settings, host_url)
        self._counting = asyncio.Event()
        self._counts: asyncio.Task[None] | None = None

    async def start(self, ctx: DevContext) -> str:
        self._sender = CommandSender(self.host_url)
        queue = self.settings.timers.task_queue
        self._worker = timer_worker(
            ctx.client,
            self._sender,
            task_queue=queue,
            late_after=self.settings.timers.poll_interval,
            workflow_pollers=pollers(self.settings.worker.workflow_pollers),
            activity_pollers=pollers(self.settings.worker.activity_pollers),
        )
        self._task = asyncio.create_task(self._worker.run())
        self._counts = asyncio.create_task(count_parked(ctx.client, self._counting))
        return f"task queue {queue}, delivering to {self.host_url}"

    async def stop(self) -> None:
        self._counting.set()
        if self._counts is not None:
            await self._counts
        await super().stop()



class JobWorkerService(_WorkerService):
    """The worker of an App's recurring jobs; at start it enables the SYSTEM jobs (unless the
    settings say `enabled: false`) and brings every instance to the host's overrides."""

    name = "job worker"

    def __init__(self, settings: Settings, host_url: str, app: App) -> None:
        super().__init__(settings, host_url)
        self.app = app

    async def start(self, ctx: DevContext) -> str:
        rules = host_rules(self.settings, self.app)
        self._sender = CommandSender(self.host_url)
        self._worker = job_worker(ctx.client, self.app, self._sender, host=rules)
        self._task = asyncio.create_task(self._worker.run())
        jobs = JobClient(
            ctx.client, self.app, host_rules=rules,
            delivery=self.settings.timers.delivery,
        )
        instances = await jobs.bring_to_settings(self.app)
        shown = ", ".join(
            f"{info.name} {info.status.lower()}"
            + (f" (next {zoned_text(info.next_due[0], zone_info(info.zone or 'UTC'))})"
               if info.next_due else "")
            for info in instances
        )
        return (
            f"{self.app.context} on task queue {job_task_queue(self.app.context)}: "
            f"{shown or 'no SYSTEM jobs'}"
        )



class ApiService:
    """The HTTP control API, on `--api-port` / `WOW_API_PORT` (8088) or refused: never moved to
    another port, or the README's `curl localhost:8088` would reach nothing or another
    program."""

    name = "control API"

    def __init__(
        self, settings: Settings, port: DevPort | int | None = None, app: App | None = None
    ) -> None:
        """Serve on `port` if given, else on the settings' port; 0 picks a free one; `app`'s
        TENANT job instances can be created through it."""
        self.settings = settings
        self.app = app
        self.asked = _asked(port, replace(_API_PORT, port=settings.api_port))
        self.port = self.asked.port
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def check(self) -> None:
        """Refuse the dev run, before anything starts, if the port is in use."""
        self.asked.check()

    async def start(self, ctx: DevContext) -> str:
        from wow_temporal.api import serve

        delivery = self.settings.timers.delivery
        timers = TimerClient.from_settings(ctx.client, self.settings)
        apps = [self.app] if self.app is not None else []
        rules = host_rules(self.settings, self.app) if self.app is not None else {}
        jobs = JobClient(ctx.client, apps, host_rules=rules, delivery=delivery)
        self._task = asyncio.create_task(
            serve(
                self.settings, timers, port=self.port, stop=self._stop, jobs=jobs, signals=False
            )
        )
        await asyncio.sleep(0.3)
        if self._task.done():
            self._task.result()
        auth = "bearer WOW_API_TOKEN" if self.settings.api_token else "no token (dev)"
        return f"http://127.0.0.1:{self.port}  (OpenAPI /openapi.json, docs /docs; {auth})"

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def default_services(
    settings: Settings,
    apps: Sequence[App] = (),
    host_port: DevPort | int | None = None,
    api_port: DevPort | int | None = None,
) -> list[DevService]:
    """Domain host (of `apps`; the echo host when there are none; none when WOW_HOST_URL names
    one), timer worker, a job worker per app with jobs, control API; the ports None come from
    the settings (`wow.dev.host-port`, `wow.api.port`)."""
    services: list[DevService] = []
    host_url = settings.host_url
    host = replace(_HOST_PORT, port=settings.dev.host_port) if host_port is None else host_port
    if host_url is None and apps:
        domain = DomainHostService(settings, apps, host)
        services.append(domain)
        host_url = domain.url
    elif host_url is None:
        echo = EchoHostService(host)
        services.append(echo)
        host_url = echo.url
    services.append(TimerWorkerService(settings, host_url))
    with_jobs = [app for app in apps if app.jobs]
    for app in with_jobs:
        services.append(JobWorkerService(settings, host_url, app))
    services.append(ApiService(settings, api_port, app=with_jobs[0] if with_jobs else None))
    return services
