"""The suite's one poll-until: for what a test cannot be told of (a listing that lags, a host's
answer, a process's log), poll until it holds instead of sleeping for a fixed time."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any


async def eventually(
    probe: Callable[[], Any],
    *,
    within: float,
    what: str,
    interval: float = 0.02,
    holds: Callable[[Any], object] = bool,
) -> Any:
    """Await `probe()` (sync or async) until `holds` of its value (by default: it is truthy),
    and return that value; AssertionError saying `what` was not reached, with the last value,
    once `within` seconds have passed."""
    deadline = time.monotonic() + within
    while True:
        value = probe()
        if inspect.isawaitable(value):
            value = await value
        if holds(value):
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"not reached in {within:g}s: {what} (last: {value!r})")
        await asyncio.sleep(interval)
