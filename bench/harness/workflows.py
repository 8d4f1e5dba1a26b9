"""What a bench reads of the workflows it started: by id, strongly consistent, never by a
visibility list."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

__all__ = ["still_running"]


async def still_running(client: Client, workflow_ids: Sequence[str]) -> list[str]:
    """The workflows of `workflow_ids` still running (described by id, 40 at a time). One
    that cannot be described after three tries counts as running: a check never passes for
    want of an answer."""
    limit = asyncio.Semaphore(40)

    async def one(workflow_id: str) -> str | None:
        async with limit:
            for attempt in range(3):
                try:
                    description = await client.get_workflow_handle(workflow_id).describe()
                except RPCError as error:
                    if error.status == RPCStatusCode.NOT_FOUND:
                        return None  # never started, or gone by retention: not running
                    await asyncio.sleep(0.5 * (attempt + 1))
                else:
                    running = description.status == WorkflowExecutionStatus.RUNNING
                    return workflow_id if running else None
            return workflow_id

    found = await asyncio.gather(*(one(w) for w in workflow_ids))
    return [w for w in found if w is not None]
