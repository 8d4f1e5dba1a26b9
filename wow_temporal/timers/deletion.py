"""Deletion records: "this aggregate was deleted at version N", kept by workflow id.

Deleting an aggregate cancels its pending schedules, but its timers cannot be found reliably:
visibility (list/search) lags, and a set older than the deletion may arrive after it. So a
deletion leaves a record, a small idle workflow `wow-deleted:{context}.{aggregate}:{tenant}:{id}`
holding the deletion's order in its memo, read by workflow id (strongly consistent, and free:
a describe is no billed action). Ingest ignores a set older than the record, and the delivery
activity checks it before it sends, so a timer that started anyway ends cancelled instead of
delivering. The record stays running (it costs nothing while idle) so retention never drops it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from temporalio import workflow
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import (
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

with workflow.unsafe.imports_passed_through():
    from wow_temporal.engine.runs import describe_or_none
    from wow_temporal.ids import deletion_record_id
    from wow_temporal.model import AggregateRef
    from wow_temporal.timers.attributes import aggregate_search_attributes

__all__ = ["DeletionRecord", "DeletionRecords", "DeletionWorkflow"]

_MEMO = "deleted"


class DeletionRecord(BaseModel):
    """An aggregate's deletion: the order (version, event index) of its `wow.AggregateDeleted`."""

    model_config = ConfigDict(frozen=True)

    aggregate: AggregateRef
    version: int
    index: int = 0

    @property
    def order(self) -> tuple[int, int]:
        return (self.version, self.index)

    def describe(self) -> str:
        return f"{self.aggregate} was deleted at version {self.version}"


@workflow.defn(name="wow.AggregateDeletion")
class DeletionWorkflow:
    """Holds a deletion record; a later deletion (after the aggregate was recovered) raises it."""

    @workflow.init
    def __init__(self, record: DeletionRecord) -> None:
        self._record = record

    @workflow.run
    async def run(self, record: DeletionRecord) -> DeletionRecord:
        workflow.set_current_details(self._record.describe())
        await workflow.wait_condition(lambda: False)
        return self._record  # pragma: no cover - a record is kept for good

    @workflow.update(name="deleted")
    def deleted(self, record: DeletionRecord) -> DeletionRecord:
        """A deletion of a later version: the record holds the latest (kept for the histories
        of records raised this way; ingest now starts a new run instead)."""
        if record.order > self._record.order:
            self._record = record
            workflow.upsert_memo({_MEMO: record.model_dump(mode="json")})
            workflow.set_current_details(record.describe())
        return self._record


class DeletionRecords:
    """Reads and writes deletion records on one namespace (ingest and the delivery activity)."""

    def __init__(self, client: Client, *, task_queue: str) -> None:
        self.client = client
        self.task_queue = task_queue

    async def find(self, aggregate: AggregateRef) -> DeletionRecord | None:
        """The aggregate's deletion record, if it was ever deleted (one describe, by id)."""
        record, _ = await self._kept(aggregate)
        return record

    async def _kept(self, aggregate: AggregateRef) -> tuple[DeletionRecord | None, str | None]:
        """The record kept and the id of the run holding it, if that run is still open."""
        description = await describe_or_none(self.client, deletion_record_id(aggregate))
        if description is None:
            return None, None
        memo = await description.memo_value(_MEMO, default=None)
        running = description.status == WorkflowExecutionStatus.RUNNING
        record = None if memo is None else DeletionRecord.model_validate(memo)
        return record, description.run_id if running else None

    async def deleted_at(self, aggregate: AggregateRef) -> tuple[int, int] | None:
        """The order of the aggregate's deletion, or None (the delivery activity's check)."""
        found = await self.find(aggregate)
        return None if found is None else found.order

    async def record(self, record: DeletionRecord) -> DeletionRecord:
        """Keep `record` unless a later deletion is kept already; the record now in force.

        No worker is waited for, and the record only ever rises: a first record is a start
        with its memo; a later one (the aggregate was recovered, then deleted again) ends the
        run holding the older record *by its run id*, then starts its own, which fails if
        another ingest started one meanwhile (then the two are compared again). So a
        concurrent lower deletion can only end the run it read, never a higher one.
        """
        for _ in range(8):
            kept, run_id = await self._kept(record.aggregate)
            if kept is not None and kept.order >= record.order:
                return kept
            if run_id is not None:
                await self._end(record, run_id)
            try:
                await self._start(record)
            except WorkflowAlreadyStartedError:
                continue  # another ingest recorded one meanwhile: compare with that
            return record
        raise RuntimeError(
            f"could not record the deletion of {record.aggregate}: it keeps changing"
        )

    async def _end(self, record: DeletionRecord, run_id: str) -> None:
        """End the run `run_id` holding an older record (already ended: another ingest did)."""
        record_id = deletion_record_id(record.aggregate)
        handle = self.client.get_workflow_handle(record_id, run_id=run_id)
        try:
            await handle.terminate(reason=f"raised to version {record.version}")
        except RPCError as error:
            if error.status not in (RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION):
                raise

    async def _start(self, record: DeletionRecord) -> None:
        """Start the idle workflow holding `record` (fails while another holds one)."""
        await self.client.start_workflow(
            DeletionWorkflow.run,
            record,
            id=deletion_record_id(record.aggregate),
            task_queue=self.task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            memo={_MEMO: record.model_dump(mode="json")},
            search_attributes=TypedSearchAttributes(aggregate_search_attributes(record.aggregate)),
            static_summary=f"deletion record of {record.aggregate}: its timers are cancelled",
            static_details=(
                "Schedules of this aggregate set at a version older than its deletion "
                "are ignored when they arrive, and a timer that started anyway ends "
                "cancelled instead of delivering. Current Details and the memo hold the "
                "deletion's version; a later deletion (after the aggregate was recovered) "
                "starts a new run holding it."
            ),
        )
