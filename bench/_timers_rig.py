"""`bench.timers`' rig: one dev server, the fake Wow host, the wow and the bare baseline's
workers in this process; the commits and the baseline's activities, the queues and targets."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import httpx
from temporalio import activity
from temporalio.client import Client
from temporalio.worker import PollerBehaviorAutoscaling, Worker

from bench._bare_timers import BareTimer
from bench.harness import (
    CANCEL_ORDER,
    HostProcess,
    commit,
    iso_ms,
    pool,
    schedule_set,
)
from wow_temporal.timers.client import TimerClient
from wow_temporal.wire import (
    COMMAND_SEND_PATH,
    DUPLICATE_REQUEST_ID,
    ERROR_CODE_HEADER,
    OK,
    REQUEST_ID_HEADER,
    WireCommand,
    command_headers,
    read_result,
)
from wow_temporal.worker import STICKY_TIMEOUT

WOW_QUEUE = "bench-wow"
BARE_QUEUE = "bench-bare"
IDLE_QUEUE = "bench-idle"  # no worker polls it: ingest-only timers never run
TELEMETRY_ON_QUEUE = "bench-telemetry-on"
TELEMETRY_OFF_QUEUE = "bench-telemetry-off"
CONCURRENCY = 50  # in-flight applies / starts while ingesting
LATENESS_INGEST_LIMIT = 5  # in-flight applies ahead of the lateness measure (a relay's pace)
MAX_ACTIVITIES = 1000
THROUGHPUT_TARGET = 0.8
LATENESS_P99_TARGET_MS = 250.0
TELEMETRY_TARGET = 0.9

CANCEL = WireCommand(
    type=CANCEL_ORDER,
    context_name="eshop-order",
    aggregate_name="order",
    tenant_id="t1",
    body={"reason": "PAYMENT_TIMEOUT"},
)
"""The command every timer of the bench sends, but for its aggregate and request ids."""


# -- the bare baseline's activities ----------------------------------------------------------

NOOP_DONE: dict[str, float] = {}
"""Bare no-op activity runs: request id -> epoch ms when it ran."""


@activity.defn(name="bench.noop")
async def noop(request_id: str) -> None:
    NOOP_DONE.setdefault(request_id, time.time() * 1000)


class BareHttp:
    """The same POST to the same host as `wow.deliver`, without the wow machinery."""

    def __init__(self, host_url: str) -> None:
        self.url = host_url + COMMAND_SEND_PATH
        self.client = httpx.AsyncClient(
            timeout=httpx.Timeout(10.0),
            limits=httpx.Limits(max_connections=100, max_keepalive_connections=100),
        )
        self.headers = command_headers(CANCEL)

    @activity.defn(name="bench.http")
    async def post(self, request_id: str) -> None:
        response = await self.client.post(
            self.url,
            json=CANCEL.body,
            headers={**self.headers, REQUEST_ID_HEADER: request_id},
        )
        answer = read_result(response.content, response.headers.get(ERROR_CODE_HEADER))
        if answer.code not in (OK, DUPLICATE_REQUEST_ID):
            raise RuntimeError(f"host answered {response.status_code}")


# -- commits and ingest ----------------------------------------------------------------------


def cancel_commit(
    commit_id: str, aggregate_id: str, version: int, *events: dict[str, Any], traced: bool = False
) -> dict[str, Any]:
    """A commit of `aggregate_id` holding `events` (with the `traceparent` of a fresh sampled
    trace when `traced`, as a relay continuing the trace that made it)."""
    header = {"trace_id": f"trace-{commit_id}"}
    if traced:
        header["traceparent"] = f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"
    return commit(aggregate_id, *events, version=version, commit_id=commit_id, header=header)


def cancel_at(rule: dict[str, Any]) -> dict[str, Any]:
    """A `wow.ScheduleSet` of the `grace` key sending `CANCEL` as `rule` says."""
    return schedule_set(rule, body=dict(CANCEL.body))


def timer_id(aggregate_id: str, key: str = "grace") -> str:
    return f"wow-timer:eshop-order.order:t1:{aggregate_id}:{key}"


def tagged(request_id: str, tag: str) -> bool:
    """Whether a request id is one of `tag`'s (`tag` up to its first `-`)."""
    return request_id.split("-", 1)[0] == tag


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
            c = cancel_commit(
                f"{tag}-{i}", f"{tag}-{i}", 1, cancel_at({"at": iso_ms(due)}), traced=traced
            )
            return lambda: timers.apply(c)

        return await pool((job(i, due) for i, due in enumerate(dues_ms)), limit)

    async def ingest_bare(
        self,
        tag: str,
        dues_ms: list[int],
        activity_name: str,
        *,
        delay: bool,
        queue: str,
        limit: int = CONCURRENCY,
    ) -> float:
        """Start one bare workflow per due (sleeping until due, or with a start delay)."""

        def job(i: int, due: int) -> Callable[[], Awaitable[Any]]:
            async def start() -> None:
                wait = due / 1000 - time.time()
                await self.client.start_workflow(
                    "bench.BareTimer",
                    args=[f"{tag}-{i}", due, activity_name],
                    id=f"bare:{tag}-{i}",
                    task_queue=queue,
                    start_delay=timedelta(seconds=wait) if delay and wait > 0 else None,
                )

            return start

        return await pool((job(i, due) for i, due in enumerate(dues_ms)), limit)

    async def wait_delivered(self, tag: str, n: int, via: str, within: float) -> bool:
        if via != "noop":
            mine = f"{tag}-"
            found = await self.host.delivered_matching(
                lambda a: a.request_id.startswith(mine), n, within
            )
            return len(found) >= n
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if sum(tagged(k, tag) for k in NOOP_DONE) >= n:
                return True
            await asyncio.sleep(0.05)
        return False

    async def received(self, tag: str, via: str) -> dict[str, float]:
        """Request id (without the `:e0#1` of wow) -> epoch ms it reached the host / ran."""
        if via == "noop":
            return {k: v for k, v in NOOP_DONE.items() if tagged(k, tag)}
        return {k.split(":", 1)[0]: v for k, v in (await self.records(tag)).items()}

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


def bare_worker(client: Client, bare_http: BareHttp) -> Worker:
    """The bare baseline's worker, its workflow in a tiny module of its own (`bench._bare_timers`:
    the sandbox re-imports a workflow's module for every instance)."""
    return Worker(
        client,
        task_queue=BARE_QUEUE,
        workflows=[BareTimer],
        activities=[noop, bare_http.post],
        max_concurrent_activities=MAX_ACTIVITIES,
        # The same pollers as the timer worker: compare the designs, not the tuning.
        workflow_task_poller_behavior=PollerBehaviorAutoscaling(),
        activity_task_poller_behavior=PollerBehaviorAutoscaling(),
        sticky_queue_schedule_to_start_timeout=STICKY_TIMEOUT,
    )
