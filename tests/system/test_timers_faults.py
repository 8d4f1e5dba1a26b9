"""Timers under faults: a worker killed mid-delivery, the Temporal server stopped or killed.

These tests stop and kill things, so they run on their own `EmbeddedTemporal` (a persistent
SQLite database in a tmp dir), never on the session's dev server. The worker-kill test runs the
real `wow-temporal worker` console script as a subprocess, on the default task queue, which is
this server's alone.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from bench.harness.commits import commit as harness_commit
from bench.harness.commits import schedule_set
from tests.helpers.builders import fast_delivery
from tests.helpers.eventually import eventually
from tests.helpers.own_server import own_server, server
from tests.helpers.quiescent import attempts
from tests.helpers.worker_process import WorkerProcess
from tests.helpers.wow_host import wow_host
from wow_temporal.delivery import CommandSender
from wow_temporal.dev.server import EmbeddedTemporal
from wow_temporal.testing.wow_host import FakeWowHost
from wow_temporal.timers.client import TimerClient
from wow_temporal.timers.core import Status, TimerState
from wow_temporal.worker import timer_worker

pytestmark = pytest.mark.asyncio(loop_scope="session")

__all__ = ["own_server", "server", "wow_host"]  # the fixtures, used by the tests here

# How soon the attempts a killed worker had in flight are tried again: attempt_timeout.
FAST_RETRIES = fast_delivery(5, attempt_timeout=timedelta(seconds=3))


def commit(aggregate_id: str, afters: list[float], version: int = 1) -> dict[str, Any]:
    """One commit scheduling a command per delay in `afters` (seconds), keys k0, k1, …"""
    sets = (
        schedule_set({"after": f"PT{after:.3f}S"}, key=f"k{i}", body={"n": i})
        for i, after in enumerate(afters)
    )
    built = harness_commit(
        aggregate_id,
        *sets,
        version=version,
        commit_id=f"c{version}-{uuid.uuid4().hex[:8]}",
        header={"trace_id": "trace-faults"},
    )
    return {**built, "ownerId": "owner-1"}


def request_ids(data: dict[str, Any]) -> list[str]:
    return [f"{data['id']}:{event['id']}#1" for event in data["body"]]


def due_ms(data: dict[str, Any]) -> dict[str, int]:
    """Each request id's due time, epoch ms."""
    return {
        f"{data['id']}:{event['id']}#1": data["createTime"]
        + round(float(event["body"]["rule"]["after"][2:-1]) * 1000)
        for event in data["body"]
    }


async def results(client: Client, workflow_ids: list[str], within: float) -> list[TimerState]:
    async def one(workflow_id: str) -> TimerState:
        handle = client.get_workflow_handle(workflow_id, result_type=TimerState)
        state: TimerState = await handle.result()
        return state

    async with asyncio.timeout(within):
        return list(await asyncio.gather(*(one(w) for w in workflow_ids)))


def assert_decided_once(host: FakeWowHost, data: dict[str, Any]) -> None:
    """Every request id decided once, by its first request; any repeat only a duplicate."""
    ids = request_ids(data)
    dues = due_ms(data)
    requests = host.requests
    assert {r.request_id for r in requests} == set(ids)
    first_decisions = [r for r in requests if r.behaviour in ("ok", "hang")]
    assert sorted(r.request_id for r in first_decisions) == sorted(ids)
    assert all(r.behaviour == "duplicate" for r in requests if r not in first_decisions)
    for request in requests:
        assert request.received_ms >= dues[request.request_id], (
            f"{request.request_id} {dues[request.request_id] - request.received_ms} ms early"
        )


# --- worker killed ----------------------------------------------------------------------------


async def test_worker_killed_mid_delivery_then_restarted_decides_every_command_once(
    server: EmbeddedTemporal, wow_host: FakeWowHost, tmp_path: Path
) -> None:
    client = await server.connect()
    timers = TimerClient(client, delivery=FAST_RETRIES)  # the default task queue
    count = 50
    aggregate_id = uuid.uuid4().hex
    data = commit(aggregate_id, [1.0 + i / count for i in range(count)])
    # The host is slow: each first request takes half a second to answer (then Ok); a repeat
    # of a request id it has seen is answered DuplicateRequestId at once.
    for rid in request_ids(data):
        wow_host.behave("hang", request_id=rid, times=1, delay=0.5)
    worker = WorkerProcess(server, wow_host.url, tmp_path / "worker.log")
    await worker.start()
    try:
        applied = await timers.apply(data)
        assert [a.outcome for a in applied] == ["started"] * count
        await wow_host.wait_for(lambda host: len(host.requests) >= count // 4, timeout=15)
        await worker.kill()  # reaped (it asserts the SIGKILL): it sends nothing more
        at_kill = wow_host.requests
        in_flight = [
            r for r in at_kill if r.received_ms > int(time.time() * 1000) - 500
        ]  # still hanging when the worker died: their answers are lost
        await worker.start()
        ids = [a.workflow_id for a in applied]
        states = await results(client, ids, within=60)
    finally:
        await worker.stop()
    assert len(at_kill) < count, "the worker was killed after it had sent everything"
    assert in_flight, "no delivery was in flight when the worker was killed"
    assert all(s.status is Status.DELIVERED and s.delivered == 1 for s in states)
    assert_decided_once(wow_host, data)
    # What the killed worker had in flight was sent again and answered as a duplicate.
    repeated = {r.request_id for r in wow_host.requests if r.behaviour == "duplicate"}
    assert repeated, "no redelivery after the kill"
    print(
        f"\nworker kill: {len(at_kill)} requests before the kill ({len(in_flight)} in flight), "
        f"{len(wow_host.requests)} in all, {len(repeated)} repeated as duplicates"
    )


# --- server stopped or killed -----------------------------------------------------------------


@pytest.mark.parametrize("how", ["stop", "kill"])
async def test_timers_pending_while_the_server_is_down_fire_after_restart_once_never_early(
    server: EmbeddedTemporal, wow_host: FakeWowHost, how: str
) -> None:
    client = await server.connect()
    task_queue = f"faults-{uuid.uuid4().hex[:10]}"
    timers = TimerClient(client, task_queue=task_queue, delivery=FAST_RETRIES)
    count = 5
    data = commit(uuid.uuid4().hex, [4.0 + i * 0.1 for i in range(count)])
    dues = due_ms(data)
    async with timer_worker(client, CommandSender(wow_host.url), task_queue=task_queue):
        applied = await timers.apply(data)
        assert [a.outcome for a in applied] == ["started"] * count
        await (server.stop() if how == "stop" else server.kill())
        assert not server.running
        assert wow_host.requests == [], "delivered before the server went down"
        # Down past every due time: real time must pass (nothing is delivered meanwhile: every
        # request is received after the restart, below).
        await asyncio.sleep(max(0.0, (max(dues.values()) - time.time() * 1000) / 1000) + 1)
        restarted = time.time() * 1000
        await server.start()
        # The worker and its client reconnect to the restarted server by themselves.
        await wow_host.wait_for(lambda host: len(host.requests) >= count, timeout=30)
        states = await results(client, [a.workflow_id for a in applied], within=10)
        # Closed, each delivered in one attempt: no stale attempt is left to send again.
        for one in applied:
            assert await attempts(client.get_workflow_handle(one.workflow_id)) == [1]
    assert all(s.status is Status.DELIVERED and s.delivered == 1 for s in states)
    assert_decided_once(wow_host, data)
    assert len(wow_host.requests) == count
    assert all(r.received_ms >= restarted for r in wow_host.requests)


async def test_an_attempt_lost_with_a_killed_worker_is_one_of_the_attempts_the_web_ui_shows(
    server: EmbeddedTemporal, wow_host: FakeWowHost, tmp_path: Path
) -> None:
    """Two attempts allowed: one lost with its worker, one failed by the host: parked on the
    second, as Temporal's own count (the Web UI's `Attempt 2 / 2`) says, and the park tells
    how many the host failed."""
    client = await server.connect()
    budget = fast_delivery(2, heartbeat_timeout=timedelta(seconds=2))
    timers = TimerClient(client, delivery=budget)  # the default task queue
    data = commit(uuid.uuid4().hex, [0.5])
    (rid,) = request_ids(data)
    wow_host.behave("fail", request_id=rid, times=1)
    wow_host.behave("hang", request_id=rid, times=1, delay=8)  # first: the worker dies
    worker = WorkerProcess(server, wow_host.url, tmp_path / "worker.log")
    await worker.start()
    try:
        (applied,) = await timers.apply(data)
        await wow_host.wait_for(lambda host: host.requests, timeout=15)
        await worker.kill()
        await worker.start()
        shown = await eventually(
            lambda: timers.show(applied.workflow_id),
            within=30,
            what="the timer parked",
            holds=lambda info: info.status == "Parked",
        )
    finally:
        await worker.stop()
    assert [r.behaviour for r in wow_host.requests] == ["hang", "fail"]
    assert shown.state is not None and shown.state.status is Status.PARKED
    assert shown.state.parked_error.startswith(
        "attempt 2 of 2 failed: the host failed 1 of them; 1 lost with a worker"
    )
