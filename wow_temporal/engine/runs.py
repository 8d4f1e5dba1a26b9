"""The engine's Temporal half for the clients: a run read by its id, one way for timers, jobs
and deletion records."""

from __future__ import annotations

from temporalio.client import Client, WorkflowExecutionDescription
from temporalio.service import RPCError, RPCStatusCode

__all__ = ["describe_or_none"]


async def describe_or_none(client: Client, workflow_id: str) -> WorkflowExecutionDescription | None:
    """The workflow's latest run as the server describes it by id (strongly consistent, and no
    billed action); None when there is none (never started, or past the namespace's
    retention). Any other failure is raised."""
    try:
        return await client.get_workflow_handle(workflow_id).describe()
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
