"""What a timer did with a change handed over to it: ingest answers `handed-over` without waiting
for a worker, and the timer notes what it did in its state's `last_change` once one runs it."""

from __future__ import annotations

from tests.helpers.eventually import eventually
from wow_temporal.timers.client import TimerClient


async def told(timers: TimerClient, workflow_id: str, version: int, *, within: float = 60) -> str:
    """The timer's `last_change` once it is about an event of `version` (shown by `timers show`
    and the current details); AssertionError after `within` s."""

    async def last_change() -> str:
        state = (await timers.show(workflow_id)).state
        return state.last_change if state is not None else "(no state)"

    seen: str = await eventually(
        last_change,
        within=within,
        what=f"{workflow_id} told of version {version}",
        interval=0.05,
        holds=lambda seen: f" of version {version}" in seen,
    )
    return seen
