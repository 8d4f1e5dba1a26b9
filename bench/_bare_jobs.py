"""The baselines of `bench.jobs`, as a Temporal user would write them: what a native Schedule
starts, and a bare workflow that sleeps until its due time. A tiny module of its own: the
sandbox re-imports a workflow's module for every workflow instance."""

from datetime import timedelta

from temporalio import workflow
from temporalio.common import SearchAttributeKey

SCHEDULED = SearchAttributeKey.for_datetime("TemporalScheduledStartTime")


@workflow.defn(name="bench.Scheduled")
class Scheduled:
    """What a native Schedule starts: one activity sending the slot's command."""

    @workflow.run
    async def run(self, run: str) -> None:
        info = workflow.info()
        due = info.typed_search_attributes.get(SCHEDULED) or workflow.now()
        await workflow.execute_activity(
            "bench.send",
            args=[info.workflow_id, run, int(due.timestamp() * 1000)],
            start_to_close_timeout=timedelta(seconds=30),
        )


@workflow.defn(name="bench.Woken")
class Woken:
    """Sleeps until `due_ms`, then runs one activity sending the command."""

    @workflow.run
    async def run(self, run: str, due_ms: int) -> None:
        wait = due_ms / 1000 - workflow.now().timestamp()
        if wait > 0:
            await workflow.sleep(wait)
        await workflow.execute_activity(
            "bench.send",
            args=[workflow.info().workflow_id, run, due_ms],
            start_to_close_timeout=timedelta(seconds=30),
        )
