"""The production worker as operators run it: `wow-temporal worker` in a subprocess on the
session's dev server, with its health endpoints on a free port.

- `/livez` 200 and `/readyz` 200 once it polls; JSON logs, one object per line, a delivery's
  line among them; SIGTERM mid-delivery lets the delivery finish, and the process exits 0.
- Started while Temporal cannot be reached (a TCP proxy in front of the dev server, closed), it
  stays up, unready, and keeps trying; ready once Temporal answers; unready when it goes away
  again and ready when it is back.
- The CLI: `--address` / `--namespace` reach the client, `--version`, settings errors in one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from typer.testing import CliRunner

from tests.helpers.builders import commit
from tests.helpers.eventually import eventually
from tests.helpers.worker_process import REPO, WorkerProcess, on_the_session_loop
from tests.helpers.wow_host import wow_host
from wow_temporal import connect_timers
from wow_temporal.cli import app
from wow_temporal.delivery import CommandSender
from wow_temporal.dev.ports import free_port
from wow_temporal.dev.server import EmbeddedTemporal
from wow_temporal.health import HealthServer, Readiness
from wow_temporal.search_attributes import SA_KEY
from wow_temporal.settings import load_settings
from wow_temporal.testing.wow_host import FakeWowHost
from wow_temporal.timers.client import TimerClient
from wow_temporal.timers.core import Status, TimerState
from wow_temporal.worker import timer_worker

__all__ = ["wow_host"]  # the fixture

WOW_TEMPORAL = Path(sys.executable).parent / "wow-temporal"


async def health(port: int, path: str) -> tuple[int, dict[str, Any]]:
    async with httpx.AsyncClient(timeout=3) as http:
        answer = await http.get(f"http://127.0.0.1:{port}{path}")
        return answer.status_code, answer.json()


async def readyz_is(port: int, status: int, within: float) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        code, body = await health(port, "/readyz")
        return body if code == status else None

    found: dict[str, Any] = await eventually(check, within=within, what=f"/readyz {status}")
    return found


async def terminate(worker: WorkerProcess, within: float) -> int:
    """SIGTERM the worker; its exit code, which must come within `within` seconds."""
    assert worker.proc is not None
    worker.proc.send_signal(signal.SIGTERM)
    async with asyncio.timeout(within):
        return await worker.proc.wait()


class Proxy:
    """A TCP proxy to the dev server's gRPC port that can be closed (Temporal unreachable,
    every connection dropped) and opened again on the same port."""

    def __init__(self, target: str) -> None:
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self.port = free_port()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def open(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.CancelledError):
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            sink.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self._writers -= {writer, up_writer}


# --- the worker on the dev server ---------------------------------------------------------------


@on_the_session_loop
async def test_ready_once_polling_json_logs_and_sigterm_lets_the_delivery_in_flight_finish(
    dev_server: EmbeddedTemporal, wow_host: FakeWowHost, tmp_path: Path
) -> None:
    port = free_port()
    log = tmp_path / "worker.log"
    worker = WorkerProcess(
        dev_server,
        wow_host.url,
        log,
        "--log-format",
        "json",
        env={"WOW_WORKER_HEALTH_PORT": str(port), "WOW_WORKER_SHUTDOWN_TIMEOUT": "10s"},
    )
    client = await dev_server.connect()
    data = commit(after=0.5)
    rid = f"{data['id']}:{data['body'][0]['id']}#1"
    # The host fails the first attempt (an expected failure: retried), then is slow (3 s, Ok).
    wow_host.behave("hang", request_id=rid, times=1, delay=3)
    wow_host.behave("fail", request_id=rid, times=1)
    await worker.start()
    try:
        assert await health(port, "/livez") == (200, {"status": "ok"})
        assert await readyz_is(port, 200, within=10) == {"status": "ready"}
        [applied] = await TimerClient(client).apply(data)
        await wow_host.wait_for(
            lambda host: [r.request_id for r in host.requests].count(rid) == 2, timeout=15
        )
        assert worker.proc is not None
        worker.proc.send_signal(signal.SIGTERM)
        body = await readyz_is(port, 503, within=2)
        assert body == {"status": "unready", "reason": "shutting down"}
        async with asyncio.timeout(12):
            code = await worker.proc.wait()
    finally:
        await worker.stop()
    assert code == 0, log.read_text()[-3000:]
    mine = [r for r in wow_host.requests if r.request_id == rid]
    assert [r.behaviour for r in mine] == ["fail", "hang"]  # the second answered Ok after 3 s
    # The attempt's outcome reached Temporal before the worker left: nothing to retry.
    handle = client.get_workflow_handle(applied.workflow_id)
    events = [event.event_type async for event in handle.fetch_history_events()]
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED in events
    # Another worker finishes the workflow: delivered once, no second request.
    async with CommandSender(wow_host.url) as sender, timer_worker(client, sender):
        state = await client.get_workflow_handle(
            applied.workflow_id, result_type=TimerState
        ).result()
    assert state.status is Status.DELIVERED and state.delivered == 1
    assert [r.request_id for r in wow_host.requests].count(rid) == 2

    lines = [line for line in log.read_text().splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all({"time", "level", "logger", "message"} <= record.keys() for record in records)
    delivered = [
        r for r in records if r["logger"] == "wow_temporal.delivery" and rid in r["message"]
    ]
    assert [r["level"] for r in delivered] == ["WARNING", "INFO"], delivered
    assert delivered[0]["message"].startswith("delivery of eshop.order.CancelOrder")
    assert "failed (attempt 1 of 10 before parking)" in delivered[0]["message"]
    assert delivered[1]["message"].startswith("delivered eshop.order.CancelOrder")
    assert delivered[1]["outcome"] == "delivered" and delivered[1]["slot"] == 1
    assert isinstance(delivered[1]["lateness_ms"], int) and delivered[1]["timer"]
    assert not [r for r in records if "exception" in r], "a traceback for an expected failure"
    messages = [r["message"] for r in records]
    assert "SIGTERM: stopping" in messages and messages[-1] == "stopped"
    assert not any("Traceback" in line for line in lines)


@on_the_session_loop
async def test_unreachable_at_start_stays_up_unready_and_follows_temporal(
    dev_server: EmbeddedTemporal, wow_host: FakeWowHost, tmp_path: Path
) -> None:
    proxy = Proxy(dev_server.address)  # closed: nothing listens on its port yet
    port = free_port()
    log = tmp_path / "worker.log"
    worker = WorkerProcess(
        dev_server,
        wow_host.url,
        log,
        "--address",
        proxy.address,  # the flag beats TEMPORAL_ADDRESS (the dev server itself)
        ready=b"retrying in 3s (attempt 1)",
        env={"WOW_WORKER_HEALTH_PORT": str(port)},
    )
    await worker.start()
    try:
        assert await health(port, "/livez") == (200, {"status": "ok"})
        code, body = await health(port, "/readyz")
        assert (code, body) == (
            503,
            {
                "status": "unready",
                "reason": f"cannot reach Temporal at {proxy.address} "
                f"(namespace {dev_server.namespace}): Connection refused",
            },
        )
        await eventually(lambda: b"(attempt 2)" in log.read_bytes(), within=10, what="a retry")
        assert worker.proc is not None and worker.proc.returncode is None, "it gave up"
        await proxy.open()  # Temporal answers: ready once connected and polling
        assert await readyz_is(port, 200, within=10) == {"status": "ready"}
        await proxy.close()  # Temporal goes away: unready
        body = await readyz_is(port, 503, within=8)
        assert body["status"] == "unready" and proxy.address in body["reason"], body
        assert await health(port, "/livez") == (200, {"status": "ok"})
        await proxy.open()  # and back: ready again
        assert await readyz_is(port, 200, within=10) == {"status": "ready"}
        code = await terminate(worker, within=10)
    finally:
        await worker.stop()
        await proxy.close()
    text = log.read_text()
    assert code == 0, text[-3000:]
    attempts = [line for line in text.splitlines() if "retrying in 3s" in line]
    assert len(attempts) >= 2 and all(line.count("\n") == 0 for line in attempts)
    assert "connected to Temporal at" in text and "not ready: " in text
    assert "ready again: " in text
    assert "Traceback" not in text


@on_the_session_loop
async def test_health_server_answers_only_its_two_paths() -> None:
    readiness = Readiness("connecting to Temporal")
    async with HealthServer(readiness, 0, host="127.0.0.1") as server:
        assert await health(server.port, "/readyz") == (
            503,
            {"status": "unready", "reason": "connecting to Temporal"},
        )
        readiness.set_ready()
        assert await health(server.port, "/readyz?verbose") == (200, {"status": "ready"})
        readiness.set_unready("Temporal at x:1 does not answer:\n  gone")
        assert (await health(server.port, "/readyz"))[1]["reason"] == (
            "Temporal at x:1 does not answer: gone"
        )
        async with httpx.AsyncClient(timeout=3) as http:
            assert (await http.get(f"http://127.0.0.1:{server.port}/")).status_code == 404
            assert (await http.post(f"http://127.0.0.1:{server.port}/livez")).status_code == 405
            head = await http.head(f"http://127.0.0.1:{server.port}/livez")
            assert head.status_code == 200 and head.content == b""
        # A client that connects and says nothing does not stop the others.
        _, silent = await asyncio.open_connection("127.0.0.1", server.port)
        assert (await health(server.port, "/livez"))[0] == 200
        silent.close()


# --- the command line ---------------------------------------------------------------------------


def _console(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("WOW_", "TEMPORAL_"))}
    return subprocess.run(
        [str(WOW_TEMPORAL), *args],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=REPO,
        env={**inherited, **(env or {})},
    )


@pytest.mark.parametrize(
    "args",
    [
        ["timers", "list"],
        ["schedule", "list"],
        ["setup"],
        ["schedule", "show", "eshop-inventory", "receive-deliveries"],
    ],
    ids=" ".join,
)
def test_address_and_namespace_flags_reach_the_client(args: list[str]) -> None:
    env = {"TEMPORAL_ADDRESS": "127.0.0.1:7", "TEMPORAL_NAMESPACE": "from-env"}
    result = _console(*args, "--address", "127.0.0.1:1", "--namespace", "ns-flag", env=env)
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines() == [
        "error: cannot reach Temporal at 127.0.0.1:1 (namespace ns-flag): Connection refused"
    ]


def test_every_command_that_connects_has_the_connection_flags() -> None:
    runner = CliRunner()
    connecting = [
        ["worker"], ["api"], ["setup"], ["apply"], ["host"],
        ["timers", "list"], ["timers", "show"], ["timers", "retry"], ["timers", "cancel"],
        ["schedule", "list"], ["schedule", "show"], ["schedule", "enable"],
        ["schedule", "disable"], ["schedule", "reschedule"], ["schedule", "retry"],
    ]
    for command in connecting:
        shown = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "200"}).output
        assert "--address" in shown and "--namespace" in shown, command
    dev = runner.invoke(app, ["dev", "--help"], env={"COLUMNS": "200"}).output
    assert "--address" not in dev  # dev runs its own server


def test_version() -> None:
    from importlib.metadata import version

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output == f"wow-temporal {version('wow-temporal')}\n"


@pytest.mark.parametrize(
    ("env", "args", "message"),
    [
        (
            {"WOW_WORKER_HEALTH_PORT": "web"},
            [],
            "error: WOW_WORKER_HEALTH_PORT: Input should be a valid integer, unable to parse "
            "string as an integer, got 'web'",
        ),
        (
            {"WOW_WORKER_SHUTDOWN_TIMEOUT": "-5"},
            [],
            "error: WOW_WORKER_SHUTDOWN_TIMEOUT: must not be a negative duration, got -5s",
        ),
        (
            {"WOW_WORKER_MAX_CONCURRENT_ACTIVITIES": "0"},
            [],
            "error: WOW_WORKER_MAX_CONCURRENT_ACTIVITIES: must be at least 1, got 0",
        ),
        (
            {"WOW_LOG_FORMAT": "xml"},
            [],
            "error: WOW_LOG_FORMAT: Input should be 'text' or 'json', got 'xml'",
        ),
        ({}, ["--log-format", "yaml"], "error: --log-format: use text or json, got 'yaml'"),
        ({}, ["--address", " "], "error: --address: must not be empty"),
    ],
)
def test_worker_settings_errors_are_one_line_and_exit_2(
    env: dict[str, str], args: list[str], message: str
) -> None:
    result = _console("worker", *args, env={"WOW_HOST_URL": "http://127.0.0.1:9", **env})
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [message]


def test_worker_refuses_a_health_port_in_use() -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))  # where the health endpoints listen
        taken.listen()
        port = taken.getsockname()[1]
        env = {"WOW_HOST_URL": "http://127.0.0.1:9", "WOW_WORKER_HEALTH_PORT": str(port)}
        result = _console("worker", env=env)
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines() == [
        f"error: health port {port} on 0.0.0.0 is already in use; free it or choose another "
        "with --health-port or WOW_WORKER_HEALTH_PORT"
    ]


@on_the_session_loop
async def test_setup_on_a_namespace_given_by_flag_says_what_it_registered(
    dev_server: EmbeddedTemporal,
) -> None:
    from google.protobuf.duration_pb2 import Duration
    from temporalio.api.workflowservice.v1 import RegisterNamespaceRequest

    from wow_temporal.search_attributes import SEARCH_ATTRIBUTES

    client = await dev_server.connect()
    namespace = f"setup-{uuid.uuid4().hex[:8]}"
    await client.workflow_service.register_namespace(
        RegisterNamespaceRequest(
            namespace=namespace, workflow_execution_retention_period=Duration(seconds=86400)
        )
    )
    env = {"TEMPORAL_ADDRESS": "127.0.0.1:1", "TEMPORAL_NAMESPACE": "default"}
    flags = ["--address", dev_server.address, "--namespace", namespace]

    async def first() -> subprocess.CompletedProcess[str] | None:
        done = await asyncio.to_thread(_console, "setup", *flags, env=env)
        return done if done.returncode == 0 or "not found" not in done.stderr else None

    # visible once the server caches it
    result = await eventually(first, within=20, what="the new namespace")
    assert result.returncode == 0, result.stderr
    every = ", ".join(f"{name} ({SEARCH_ATTRIBUTES[name]})" for name in sorted(SEARCH_ATTRIBUTES))
    assert result.stdout.splitlines() == [f"namespace {namespace}: registered {every}"]
    # Usable as setup returns: a start naming them is taken.
    used = await Client.connect(dev_server.address, namespace=namespace)
    handle = await used.start_workflow(
        "wow.Probe",
        id=f"probe-{namespace}",
        task_queue=f"nobody-{namespace}",
        search_attributes=TypedSearchAttributes([SearchAttributePair(SA_KEY, "k")]),
    )
    await handle.terminate("probe")
    again = await asyncio.to_thread(_console, "setup", *flags, env=env)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == [
        f"namespace {namespace}: search attributes already there: {', '.join(SEARCH_ATTRIBUTES)}"
    ]


@on_the_session_loop
async def test_the_task_queue_and_pollers_are_settings_and_connect_timers_starts_on_that_queue(
    dev_server: EmbeddedTemporal, wow_host: FakeWowHost, tmp_path: Path
) -> None:
    queue = f"shop-timers-{uuid.uuid4().hex[:8]}"
    timer_settings = {"WOW_TIMERS_TASK_QUEUE": queue, "WOW_TIMERS_MAX_ATTEMPTS": "3"}
    worker = WorkerProcess(
        dev_server, wow_host.url, tmp_path / "worker.log",
        ready=f"timer worker on task queue {queue}".encode(),
        env={
            **timer_settings,
            "WOW_WORKER_WORKFLOW_POLLERS": "2",
            "WOW_WORKER_ACTIVITY_POLLERS": "3",
        },
    )
    await worker.start()
    try:
        data = commit(after=0.2)
        # The README's client: the same settings as the worker, so the same task queue.
        environ = {"TEMPORAL_ADDRESS": str(dev_server.address), **timer_settings}
        timers = await connect_timers(load_settings(environ=environ))
        assert (timers.task_queue, timers.delivery.max_attempts) == (queue, 3)
        await timers.apply(data)
        await wow_host.wait_for(
            lambda host: any(r.aggregate_id == data["aggregateId"] for r in host.requests),
            timeout=30,
        )
        timer = f"wow-timer:eshop-order.order:t1:{data['aggregateId']}:payment-grace-period"
        handle = timers.client.get_workflow_handle(timer)
        described = await handle.describe()
        assert described.task_queue == queue
        events = [event async for event in handle.fetch_history_events()]
        attributes = events[0].workflow_execution_started_event_attributes
        assert attributes.task_queue.name == queue
        [payload] = attributes.input.payloads
        assert json.loads(payload.data)["delivery"]["max_attempts"] == 3
    finally:
        await worker.stop()


def test_pollers_auto_scale_or_have_a_maximum() -> None:
    from temporalio.worker import PollerBehaviorAutoscaling, PollerBehaviorSimpleMaximum

    from wow_temporal.worker import pollers

    assert isinstance(pollers("auto"), PollerBehaviorAutoscaling)
    fixed = pollers(3)
    assert isinstance(fixed, PollerBehaviorSimpleMaximum) and fixed.maximum == 3
