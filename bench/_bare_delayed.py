"""The workflow of `bench.rivals`' bare side, as a Temporal user writes a keyed one-shot timer
that delivers a command: started with `start_delay` until its due time, it runs one activity
that sends the command. A tiny module of its own: the sandbox re-imports a workflow's module
for every workflow instance."""

from datetime import timedelta

from temporalio import workflow


@workflow.defn(name="bench.DelayedTimer")
class DelayedTimer:
    @workflow.run
    async def run(self, key: str) -> None:
        await workflow.execute_activity(
            "bench.post", key, start_to_close_timeout=timedelta(seconds=30)
        )
