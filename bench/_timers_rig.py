"""`bench.timers`' rig: the commits, the bare baseline's worker and no-op activity, the wow
timer workers, and where each side's deliveries are seen."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker

from bench._bare_workflows import BareTimer
from bench._dev_stack import baseline_worker
from bench.harness import HostProcess, commit, iso_ms, pool, schedule_set
from wow_temporal.delivery import CommandSender
from wow_temporal.timers.client import TimerClient
from wow_temporal.worker import timer_worker

WOW_QUEUE = "bench-wow"
BARE_QUEUE = "bench-bare"
IDLE_QUEUE = "bench-idle"  # no worker polls it: ingest-only timers never run
CONCURRENCY = 50  # in-flight applies / starts while ingesting
LATENESS_INGEST_LIMIT = 5  # in-flight applies ahead of the lateness measure (a relay's pace)
MAX_ACTIVITIES = 1000

NOOP_DONE: dict[str, float] = {}
"""Bare no-op activity runs: request id -> epoch ms when it ran."""


@activity.defn(name="bench.noop")
async def noop(request_id: str) -> None:
    NOOP_DONE.setdefault(request_id, time.time() * 1000)


def cancel_commit(
    commit_id: str, aggregate_id: str, version: int, event: dict[str, Any], traced: bool = False
) -> dict[str, Any]:
    """A commit of `aggregate_id` holding `event` (with the `traceparent` of a fresh sampled
    trace when `traced`, as a relay continuing the trace that made it)."""
    header = {"trace_id": f"trace-{commit_id}"}
    if traced:
        header["traceparent"] = f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"
    return commit(aggregate_id, event, version=version, commit_id=commit_id, header=header)


def cancel_at(rule: dict[str, Any]) -> dict[str, Any]:
    """A `wow.ScheduleSet` of the `grace` key sending the order's cancel as `rule` says."""
    return schedule_set(rule, body={"reason": "PAYMENT_TIMEOUT"})


def timer_id(aggregate_id: str, key: str = "grace") -> str:
    return f"wow-timer:eshop-order.order:t1:{aggregate_id}:{key}"


def tagged(request_id: str, tag: str) -> bool:
    """Whether a request id is one of `tag`'s (`tag` up to its first `-`)."""
    return request_id.split("-", 1)[0] == tag


@contextlib.asynccontextmanager
async def wow_worker(client: Client, host_url: str, queue: str) -> AsyncIterator[None]:
    """A timer worker on `queue`, delivering to `host_url`, as every wow side of the bench has."""
    async with (
        CommandSender(host_url) as sender,
        timer_worker(client, sender, task_queue=queue, max_concurrent_activities=MAX_ACTIVITIES),
    ):
        yield


def bare_worker(client: Client) -> Worker:
    return baseline_worker(client, BARE_QUEUE, [BareTimer], [noop], MAX_ACTIVITIES)


@dataclass
class Rig:
    client: Client
    host: HostProcess
    timers: TimerClient
    idle_timers: TimerClient
    seq: int = 0
    undelivered: int = 0
    """Commands of every measure not delivered before its wait ended."""
    wow_ids: list[str] = field(default_factory=list)
    bare_ids: list[str] = field(default_factory=list)

    def tag(self, prefix: str) -> str:
        self.seq += 1
        return f"{prefix}{self.seq}"

    async def ingest_wow(
        self,
        tag: str,
        dues_ms: list[int],
        timers: TimerClient,
        limit: int = CONCURRENCY,
        *,
        traced: bool = False,
    ) -> float:
        """Apply one commit per due (rule `at`; `traced`: each in a trace of its own); seconds
        taken."""

        def job(i: int, due: int) -> Callable[[], Awaitable[Any]]:
            at = cancel_at({"at": iso_ms(due)})
            return lambda: timers.apply(cancel_commit(f"{tag}-{i}", f"{tag}-{i}", 1, at, traced))

        return await pool((job(i, due) for i, due in enumerate(dues_ms)), limit)

    async def ingest_bare(
        self, tag: str, dues_ms: list[int], limit: int = CONCURRENCY, *, idle: bool = False
    ) -> float:
        """Start one bare workflow per due sleeping until due (`idle`: with a start delay on
        `IDLE_QUEUE`, where no worker polls); seconds taken."""

        def job(i: int, due: int) -> Callable[[], Awaitable[Any]]:
            return lambda: self.client.start_workflow(
                "bench.BareTimer",
                args=[f"{tag}-{i}", due, "bench.noop"],
                id=f"bare:{tag}-{i}",
                task_queue=IDLE_QUEUE if idle else BARE_QUEUE,
                start_delay=timedelta(seconds=due / 1000 - time.time()) if idle else None,
            )

        return await pool((job(i, due) for i, due in enumerate(dues_ms)), limit)

    async def received(self, tag: str, n: int, wow: bool, within: float) -> dict[str, float]:
        """Request id (without the `:e0#1` of wow) -> epoch ms it reached the host (wow) or
        the no-op ran (bare), once all `n` of `tag` did or `within` seconds have passed."""
        if wow:
            mine = f"{tag}-"
            found = await self.host.delivered_matching(
                lambda a: a.request_id.startswith(mine), n, within
            )
            return {a.request_id.split(":", 1)[0]: a.received_ms for a in found}
        deadline = time.monotonic() + within
        while True:
            ran = {k: v for k, v in NOOP_DONE.items() if tagged(k, tag)}
            if len(ran) >= n or time.monotonic() >= deadline:
                return ran
            await asyncio.sleep(0.05)

    async def records(self, tag: str) -> dict[str, float]:
        """Request id -> epoch ms the host first answered it `Ok`, of `tag`'s commands."""
        delivered = await self.host.delivered()
        return {a.request_id: a.received_ms for a in delivered if tagged(a.request_id, tag)}

    async def settle(self, queue: str, within: float = 20.0) -> None:
        """Wait until no workflow of `queue` runs, so the next side starts on a quiet server."""
        deadline = time.monotonic() + within
        query = f'TaskQueue = "{queue}" AND ExecutionStatus = "Running"'
        while time.monotonic() < deadline:
            if (await self.client.count_workflows(query)).count == 0:
                return
            await asyncio.sleep(0.1)
