"""What a timer did with a change handed over to it: ingest answers `handed-over` without waiting
for a worker, and the timer notes what it did in its state's `last_change` once one runs it."""

from __future__ import annotations

import asyncio

from wow_temporal.timers.client import TimerClient


async def told(timers: TimerClient, workflow_id: str, version: int, *, within: float = 60) -> str:
    """The timer's `last_change` once it is about an event of `version` (shown by `timers show`
    and the current details); AssertionError after `within` s."""
    deadline = asyncio.get_running_loop().time() + within
    seen = ""
    while True:
        state = (await timers.show(workflow_id)).state
        seen = state.last_change if state is not None else "(no state)"
        if f" of version {version}" in seen:
            return seen
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{workflow_id} told nothing of version {version}: {seen!r}")
        await asyncio.sleep(0.05)
