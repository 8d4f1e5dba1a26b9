"""What a bench reads of the workflows it started: by id, strongly consistent, never by a
visibility list."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

from temporalio.client import Client, WorkflowExecutionStatus

__all__ = ["still_running"]


async def still_running(client: Client, workflow_ids: Sequence[str]) -> list[str]:
    """The workflows of `workflow_ids` still running (described by id, 40 at a time)."""
    limit = asyncio.Semaphore(40)

    async def one(workflow_id: str) -> str | None:
        async with limit:
            with contextlib.suppress(Exception):
                description = await client.get_workflow_handle(workflow_id).describe()
                if description.status == WorkflowExecutionStatus.RUNNING:
                    return workflow_id
            return None

    found = await asyncio.gather(*(one(w) for w in workflow_ids))
    return [w for w in found if w is not None]
