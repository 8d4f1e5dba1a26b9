"""The dev-server rig of the timers' end-to-end tests (`rig`): a task queue, aggregate and timers
client of a test's own on the session's dev server, delivering to the fake Wow host; the
commits and events those tests ingest."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest_asyncio
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Worker

from bench.harness.commits import commit as harness_commit
from tests.helpers.builders import fast_delivery
from tests.helpers.eventually import eventually
from wow_temporal.delivery import CommandSender
from wow_temporal.testing.wow_host import Arrival, FakeWowHost
from wow_temporal.timers.client import TimerClient, TimerFilter, TimerInfo
from wow_temporal.timers.core import TimerState
from wow_temporal.worker import timer_worker

CONTEXT, AGGREGATE, TENANT = "eshop-order", "order", "t1"
COMMAND = "eshop.order.CancelOrder"
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
MAX_ATTEMPTS = 3


def now_ms() -> int:
    return int(time.time() * 1000)


def schedule_set(key: str, rule: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "name": "wow.ScheduleSet",
        "key": key,
        "rule": rule,
        "command": {"type": COMMAND, "body": {"reason": "PAYMENT_TIMEOUT", "key": key}},
        "target": None,
        **extra,
    }


def cancelled(key: str) -> dict[str, Any]:
    return {"name": "wow.ScheduleCancelled", "key": key}


DELETED: dict[str, Any] = {"name": "wow.AggregateDeleted"}


@dataclass
class Rig:
    """One test's world: its task queue, aggregate, timers client and the fake Wow host."""

    client: Client
    host: FakeWowHost
    timers: TimerClient
    task_queue: str
    aggregate_id: str

    def commit(
        self,
        version: int,
        *events: dict[str, Any],
        header: dict[str, str] | None = None,
        created_ms: int | None = None,
    ) -> dict[str, Any]:
        header = {"trace_id": "trace-1"} if header is None else header
        built = harness_commit(
            self.aggregate_id,
            *events,
            version=version,
            commit_id=f"c{version}-{uuid.uuid4().hex[:8]}",
            header=header,
            created_ms=created_ms,
        )
        return {**built, "ownerId": "owner-1", "spaceId": "space-1"}

    def worker(self) -> Worker:
        return timer_worker(self.client, CommandSender(self.host.url), task_queue=self.task_queue)

    def workflow_id(self, key: str) -> str:
        return f"wow-timer:{CONTEXT}.{AGGREGATE}:{TENANT}:{self.aggregate_id}:{key}"

    def handle(self, key: str) -> WorkflowHandle[Any, TimerState]:
        return self.client.get_workflow_handle(self.workflow_id(key), result_type=TimerState)

    async def result(self, key: str, within: float = 20.0) -> TimerState:
        """The timer's final state; fails if it has not closed `within` seconds."""
        try:
            async with asyncio.timeout(within):
                state: TimerState = await self.handle(key).result()
        except TimeoutError:
            description = await self.handle(key).describe()
            status = description.status.name if description.status else "?"
            raise AssertionError(
                f"timer {key!r} still {status} after {within}s "
                f"({description.history_length} history events: never dispatched?)"
            ) from None
        return state

    async def listed(
        self, predicate: Callable[[list[TimerInfo]], bool], within: float = 10.0, **filters: Any
    ) -> list[TimerInfo]:
        """Poll the visibility listing (eventually consistent) until `predicate` holds."""
        where = TimerFilter(aggregate_id=self.aggregate_id, **filters)

        listed: list[TimerInfo] = await eventually(
            lambda: self.timers.list(where),
            within=within,
            what=f"listing {filters}",
            interval=0.1,
            holds=predicate,
        )
        return listed


@pytest_asyncio.fixture(loop_scope="session")
async def rig(dev_client: Client, wow_host: FakeWowHost) -> AsyncIterator[Rig]:
    task_queue = f"e2e-{uuid.uuid4().hex[:10]}"
    timers = TimerClient(
        dev_client,
        task_queue=task_queue,
        delivery=fast_delivery(MAX_ATTEMPTS, attempt_timeout=timedelta(seconds=5)),
    )
    yield Rig(dev_client, wow_host, timers, task_queue, uuid.uuid4().hex)


def request_id(commit: dict[str, Any], event: int = 0, slot: int = 1) -> str:
    return f"{commit['id']}:e{event}#{slot}"


def due_ms(request: Arrival) -> int:
    due = request.message_header("schedule_due")
    assert due is not None
    return int(due)
