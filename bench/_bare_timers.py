"""The bare baseline of `bench.timers`, as a bare Temporal user would write it: a workflow that
sleeps until its due time and runs one activity. A tiny module of its own: the sandbox
re-imports a workflow's module for every workflow instance."""

from datetime import timedelta

from temporalio import workflow


@workflow.defn(name="bench.BareTimer")
class BareTimer:
    @workflow.run
    async def run(self, request_id: str, due_ms: int, activity: str) -> None:
        wait = due_ms / 1000 - workflow.now().timestamp()
        if wait > 0:
            await workflow.sleep(wait)
        await workflow.execute_activity(
            activity, request_id, start_to_close_timeout=timedelta(seconds=30)
        )
