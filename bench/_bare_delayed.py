"""The workflow of `bench.rivals`' bare side: started with `start_delay` until due, one activity
that sends the command. A module of its own: the sandbox re-imports it for every workflow."""

from datetime import timedelta

from temporalio import workflow


@workflow.defn(name="bench.DelayedTimer")
class DelayedTimer:
    @workflow.run
    async def run(self, key: str) -> None:
        await workflow.execute_activity(
            "bench.post", key, start_to_close_timeout=timedelta(seconds=30)
        )
