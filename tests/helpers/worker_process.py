"""`wow-temporal worker` in a subprocess on a test's dev server, for the fault tests to kill: the
harness's `Proc` (`bench.harness`), with a test's assertions."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest

from bench.harness import CLI, REPO, Proc, log_says, worker_env
from wow_temporal.dev.server import EmbeddedTemporal

__all__ = ["REPO", "WorkerProcess", "on_the_session_loop"]

on_the_session_loop = pytest.mark.asyncio(loop_scope="session")
"""The tests of a worker process run on the session's loop, as its dev server does."""


class WorkerProcess:
    """`wow-temporal worker [args]` in a subprocess, its log in a file; `ready` is the log
    line that says it is up."""

    def __init__(
        self,
        server: EmbeddedTemporal,
        host_url: str,
        log: Path,
        *args: str,
        ready: bytes = b"timer worker on task queue",
        env: dict[str, str] | None = None,
    ) -> None:
        self.log = log
        self.env = worker_env(server.address, server.namespace, host_url, **(env or {}))
        argv = [str(CLI), "worker", *args]
        self._worker = Proc("the worker", argv, log, log_says(log, ready), env=self.env)

    @property
    def proc(self) -> asyncio.subprocess.Process | None:
        return self._worker.proc

    async def start(self) -> None:
        """Start it and wait until its log says it is up."""
        await self._worker.start()

    async def kill(self) -> None:
        """SIGKILL it: it must have been running, and dies of the signal."""
        assert self._worker.running, "the worker died"
        assert await self._worker.kill() == -signal.SIGKILL

    async def stop(self) -> None:
        """SIGKILL it if it runs (a test has nothing in flight worth finishing)."""
        await self._worker.kill()
