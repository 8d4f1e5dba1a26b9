"""The fake Wow host in a process of its own (`python -m wow_temporal.testing.wow_host`), so its
CPU is not the bench's, and a client that reads what it recorded and scripts it."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench.harness.proc import Proc
from wow_temporal.dev.ports import free_port
from wow_temporal.testing.wow_host import Arrival, RemoteWowHost

__all__ = ["HostProcess"]


class HostProcess(RemoteWowHost):
    """A `FakeWowHost` serving on a free port in its own process."""

    def __init__(self, log: Path, *, remember_request_ids: bool = True) -> None:
        port = free_port("127.0.0.1")
        super().__init__(f"http://127.0.0.1:{port}")
        argv = [sys.executable, "-m", "wow_temporal.testing.wow_host", "--port", str(port)]
        if not remember_request_ids:
            argv.append("--forget-request-ids")
        self.proc = Proc("the fake Wow host", argv, log, lambda _: self.ready(), within=30)

    async def start(self) -> None:
        await self.proc.start()

    async def stop(self) -> None:
        await self.aclose()
        await self.proc.stop(grace=5)

    async def duplicates(self) -> int:
        """How many arrivals came again after their request id was decided."""
        return sum(a.behaviour == "duplicate" for a in await self.arrivals())

    async def delivered_matching(
        self, match: Callable[[Arrival], bool], count: int = 0, within: float = 0.0
    ) -> list[Arrival]:
        """The arrivals decided `Ok` that `match`, in order: once there are `count` of them, or
        as they are when `within` seconds have passed."""
        deadline = time.monotonic() + within
        while True:
            found = [a for a in await self.delivered() if match(a)]
            if len(found) >= count or time.monotonic() >= deadline:
                return found
            await asyncio.sleep(0.05)
