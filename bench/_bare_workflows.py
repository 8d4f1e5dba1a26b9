"""The baselines of `bench.timers` and `bench.jobs`, as a Temporal user would write them. A
tiny module of its own: the sandbox re-imports a workflow's module for every instance."""

from datetime import timedelta

from temporalio import workflow
from temporalio.common import SearchAttributeKey

SCHEDULED = SearchAttributeKey.for_datetime("TemporalScheduledStartTime")


async def _sleep_until(due_ms: int) -> None:
    wait = due_ms / 1000 - workflow.now().timestamp()
    if wait > 0:
        await workflow.sleep(wait)


@workflow.defn(name="bench.BareTimer")
class BareTimer:
    """Sleeps until its due time, then runs one activity (`bench.timers`)."""

    @workflow.run
    async def run(self, request_id: str, due_ms: int, activity: str) -> None:
        await _sleep_until(due_ms)
        await workflow.execute_activity(
            activity, request_id, start_to_close_timeout=timedelta(seconds=30)
        )


@workflow.defn(name="bench.Scheduled")
class Scheduled:
    """What a native Schedule starts: one activity sending the slot's command (`bench.jobs`)."""

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
    """Sleeps until `due_ms`, then runs one activity sending the command (`bench.jobs`)."""

    @workflow.run
    async def run(self, run: str, due_ms: int) -> None:
        await _sleep_until(due_ms)
        await workflow.execute_activity(
            "bench.send",
            args=[workflow.info().workflow_id, run, due_ms],
            start_to_close_timeout=timedelta(seconds=30),
        )
