"""One process a bench or a test starts: started and waited for until ready, SIGKILLed, started
again, stopped with SIGTERM (it lets its work in flight finish), its output appended to a log."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path

import httpx

__all__ = ["CLI", "REPO", "Proc", "answers", "log_says", "worker_env"]

REPO = Path(__file__).resolve().parents[2]
CLI = Path(sys.executable).parent / "wow-temporal"
"""The `wow-temporal` command of the interpreter running this."""

Ready = Callable[[int], Awaitable[bool]]
"""Whether a start is done, given the log's size when it began."""


def log_says(log: Path, line: bytes) -> Ready:
    """Ready once `line` is in the log past where the start began."""

    def since(offset: int) -> bytes:
        with log.open("rb") as file:
            file.seek(offset)
            return file.read()

    async def probe(offset: int) -> bool:
        return line in await asyncio.to_thread(since, offset)

    return probe


def answers(url: str) -> Ready:
    """Ready once `url` answers 2xx."""

    async def probe(_: int) -> bool:
        try:  # no TLS context: building one costs ~30 ms of CPU a probe, for a local http URL
            async with httpx.AsyncClient(timeout=2, verify=False) as http:
                return (await http.get(url)).is_success
        except httpx.HTTPError:
            return False

    return probe


def worker_env(address: str, namespace: str, host_url: str, **extra: str) -> dict[str, str]:
    """The environment of a `wow-temporal worker` on a dev server: this one's, without any
    `WOW_*`/`TEMPORAL_*` of its own, no health or metrics ports (several share a machine), the
    repository importable (the domains under tests/ and bench/)."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("WOW_", "TEMPORAL_"))}
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {
        **inherited,
        "TEMPORAL_ADDRESS": address,
        "TEMPORAL_NAMESPACE": namespace,
        "WOW_HOST_URL": host_url,
        "WOW_WORKER_HEALTH_PORT": "0",
        "WOW_WORKER_METRICS_PORT": "0",
        "PYTHONPATH": path,
        **extra,
    }


class Proc:
    """A subprocess (`argv`, in `REPO`), its output appended to `log`; `ready` says when a
    start is done (`within` seconds at most)."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log: Path,
        ready: Ready,
        *,
        env: Mapping[str, str] | None = None,
        within: float = 90.0,
    ) -> None:
        self.name = name
        self.argv = [str(a) for a in argv]
        self.log = log
        self.ready = ready
        self.env = dict(os.environ if env is None else env)
        self.within = within
        self.proc: asyncio.subprocess.Process | None = None
        self.starts = 0

    @classmethod
    def worker(
        cls, log: Path, env: Mapping[str, str], *args: str, name: str = "the worker"
    ) -> Proc:
        """`wow-temporal worker [args]`, ready once it says its timer worker polls."""
        ready = log_says(log, b"timer worker on task queue")
        return cls(name, [str(CLI), "worker", *args], log, ready, env=env)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    @property
    def pid(self) -> int | None:
        """The last start's process id, alive or not (None before the first start): what it
        used reads NaN once it is gone, never this process's figures."""
        return self.proc.pid if self.proc is not None else None

    async def start(self) -> None:
        """Start it and wait until it is ready; RuntimeError with its log's tail if it ends
        or is not ready in time."""
        assert not self.running, f"{self.name} is already running"
        self.log.parent.mkdir(parents=True, exist_ok=True)
        offset = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as out:
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv,
                cwd=REPO,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.starts += 1
        deadline = time.monotonic() + self.within
        while not await self.ready(offset):
            if self.proc.returncode is not None or time.monotonic() > deadline:
                tail = self.log.read_bytes()[offset:].decode(errors="replace")[-3000:]
                await self.kill()
                raise RuntimeError(f"{self.name} did not start:\n{tail}")
            await asyncio.sleep(0.05)

    async def kill(self) -> int | None:
        """SIGKILL it and reap it; its exit status (None if it was not running)."""
        if not self.running or self.proc is None:
            return None
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGKILL)
        return await self.proc.wait()

    async def stop(self, grace: float = 45.0) -> None:
        """SIGTERM, then SIGKILL past `grace` seconds; reaped either way."""
        if not self.running or self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGTERM)
        try:
            async with asyncio.timeout(grace):
                await self.proc.wait()
        except TimeoutError:
            await self.kill()

    async def restart(self, pause: float = 0.0) -> None:
        """SIGKILL, wait `pause` seconds, start again."""
        await self.kill()
        await asyncio.sleep(pause)
        await self.start()
