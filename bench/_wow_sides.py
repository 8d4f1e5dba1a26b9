"""wow-temporal's two sides in `bench.rivals`: the dev server and one `wow-temporal worker`, with
commits handed over by a front process of their own: `wow`, the control API (`POST /commits`),
and `wow-relay`, `bench._wow_relay` (straight to `TimerClient.apply_many`, as the host's relay)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path

import httpx

from bench._bare_side import DevServer, Timer
from bench.harness import (
    CLI,
    Proc,
    answers,
    commit,
    cpu_seconds,
    iso_ms,
    schedule_set,
    tree_cpu_seconds,
    worker_env,
)
from wow_temporal.dev.ports import free_port


class Wow:
    """The dev server, one `wow-temporal worker`, the control API; commits via `POST /commits`."""

    name = "wow"
    front = "api"
    """The name of the process commits go through (its CPU is counted under it)."""

    def __init__(self, tmp: Path, host_url: str, settings: dict[str, str] | None = None) -> None:
        self.tmp = tmp
        self.host_url = host_url
        self.settings = settings or {}  # `--wow-env`: the worker's and the front's
        self.http = httpx.AsyncClient(timeout=120)

    async def start(self) -> None:
        self.server = DevServer(self.tmp / "temporal")
        await self.server.start()
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        env = worker_env(self.server.address, self.server.namespace, self.host_url, **self.settings)
        self.worker = Proc.worker(self.tmp / "worker.log", env)
        self.process = self._front(port, env)
        await asyncio.gather(self.worker.start(), self.process.start())

    def _front(self, port: int, env: dict[str, str]) -> Proc:
        ready = answers(self.url + "/ready")
        env = {**env, "WOW_API_PORT": str(port)}
        return Proc("the control API", [str(CLI), "api"], self.tmp / "api.log", ready, env=env)

    async def hand(self, timers: list[Timer]) -> None:
        commits = [commit(key, schedule_set({"at": iso_ms(due)})) for key, due in timers]
        body = commits[0] if len(commits) == 1 else commits
        (await self.http.post(self.url + "/commits", json=body)).raise_for_status()

    def cpu(self) -> dict[str, float]:
        assert self.server.pid is not None
        return {
            "server": tree_cpu_seconds(self.server.pid),
            "worker": cpu_seconds(self.worker.pid),
            self.front: cpu_seconds(self.process.pid),
        }

    async def counters(self) -> dict[str, float]:
        return await self.server.counters()

    async def stop(self) -> None:
        await self.http.aclose()
        with contextlib.suppress(AttributeError):
            await asyncio.gather(self.process.stop(grace=10), self.worker.stop(grace=10))
        with contextlib.suppress(AttributeError):
            await self.server.stop()


class WowRelay(Wow):
    """The same, its commits handed by `bench._wow_relay` to `TimerClient.apply_many`."""

    name = "wow-relay"
    front = "relay"

    def _front(self, port: int, env: dict[str, str]) -> Proc:
        argv = [sys.executable, "-m", "bench._wow_relay", "--port", str(port)]
        ready = answers(self.url + "/ready")
        return Proc("the relay", argv, self.tmp / "relay.log", ready, env=env)

    async def hand(self, timers: list[Timer]) -> None:
        body = [{"key": key, "due_ms": due} for key, due in timers]
        (await self.http.post(self.url + "/timers", json=body)).raise_for_status()
