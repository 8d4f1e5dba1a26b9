"""`wow-temporal worker` in a subprocess on a test's dev server, for the fault tests to kill."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from wow_temporal.dev.server import EmbeddedTemporal

__all__ = ["REPO", "WorkerProcess", "on_the_session_loop"]

REPO = Path(__file__).resolve().parents[2]
on_the_session_loop = pytest.mark.asyncio(loop_scope="session")
"""The tests of a worker process run on the session's loop, as its dev server does."""

_WORKER_SCRIPT = Path(sys.executable).parent / "wow-temporal"


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
        inherited = {k: v for k, v in os.environ.items() if not k.startswith(("WOW_", "TEMPORAL_"))}
        self.env = {
            **inherited,
            "TEMPORAL_ADDRESS": server.address,
            "TEMPORAL_NAMESPACE": server.namespace,
            "WOW_HOST_URL": host_url,
            "WOW_WORKER_HEALTH_PORT": "0",  # no health server: workers here would share 8081
            "WOW_WORKER_METRICS_PORT": "0",  # nor metrics: they would share 9464
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p
            ),
            **(env or {}),
        }
        self.args = args
        self.ready = ready
        self.log = log
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        """Start it and wait until its log says it is up."""
        assert self.proc is None or self.proc.returncode is not None, "already running"
        offset = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as out:
            self.proc = await asyncio.create_subprocess_exec(
                str(_WORKER_SCRIPT),
                "worker",
                *self.args,
                cwd=REPO,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 30
        while self.ready not in self.log.read_bytes()[offset:]:
            assert self.proc.returncode is None, self.log.read_text()[-3000:]
            assert time.monotonic() < deadline, "the worker did not start in 30s"
            await asyncio.sleep(0.05)

    async def kill(self) -> None:
        assert self.proc is not None and self.proc.returncode is None, "the worker died"
        os.kill(self.proc.pid, signal.SIGKILL)
        assert await self.proc.wait() == -signal.SIGKILL

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            await self.proc.wait()
