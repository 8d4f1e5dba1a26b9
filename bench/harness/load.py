"""Load: jobs run with a bound on how many are in flight, and a steady pace."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

__all__ = ["TokenBucket", "pool", "sleep_until"]


async def pool(
    jobs: Iterable[Callable[[], Awaitable[Any]]],
    limit: int,
    done: Callable[[], Any] | None = None,
) -> float:
    """Run the jobs in order with at most `limit` in flight (`done()`, sync or async, after
    each); the seconds taken. A job that raises stops the others (a task group)."""
    queue = list(jobs)
    queue.reverse()

    async def one() -> None:
        while queue:
            await queue.pop()()
            if done is not None and inspect.isawaitable(after := done()):
                await after

    began = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        for _ in range(limit):
            group.create_task(one())
    return time.perf_counter() - began


async def sleep_until(epoch: float) -> None:
    """Sleep until the wall clock reads `epoch` (seconds)."""
    await asyncio.sleep(max(0.0, epoch - time.time()))


class TokenBucket:
    """`rate` tokens a second, at most `burst` saved up: `take()` paces a loop."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate = rate
        self.burst = burst
        self.tokens = 1.0
        self.last = time.perf_counter()

    async def take(self) -> None:
        while True:
            now = time.perf_counter()
            self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
            self.last = now
            if self.tokens >= 1:
                self.tokens -= 1
                return
            await asyncio.sleep((1 - self.tokens) / self.rate)
