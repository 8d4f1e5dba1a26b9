"""The e-shop served for real, for the end-to-end tests: the domain host (`HostRuntime` over a
SQLite store, the inventory saga, the relay to the timers) behind uvicorn on a free port, and
optionally an in-process timer worker delivering to it over HTTP.

In front of the host sits `Front`, an ASGI wrapper that records every `POST /wow/command/send`
(request id, the timer that sent it, how the host answered), can hold chosen requests at the
door or timers' answers after the host decided them, and keeps serving (503, a technical
failure) while the runtime behind it is swapped: a host crash and restart on the same store
file, at the same URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx
import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from tests.helpers.eventually import eventually
from workers.eshop.inventory import app as inventory_app
from workers.eshop.order import (
    ORDER,
    PAYMENT_GRACE_PERIOD,
    PaymentPolicy,
    order_app,
)
from workers.eshop.stock import STOCK
from wow_temporal import App, Commit
from wow_temporal.delivery import CommandSender
from wow_temporal.host.runtime import HostRuntime
from wow_temporal.host.server import ErrorInfo
from wow_temporal.ids import timer_workflow_id
from wow_temporal.model import AggregateRef
from wow_temporal.timers.admission import Admission
from wow_temporal.timers.client import Applied, TimerClient
from wow_temporal.timers.core import TimerState
from wow_temporal.timers.fold import Horizon
from wow_temporal.timers.workflow import DeliverySettings
from wow_temporal.wire import (
    AGGREGATE_ID_HEADER,
    COMMAND_SEND_PATH,
    COMMAND_TYPE_HEADER,
    ERROR_CODE_HEADER,
    MESSAGE_HEADER_PREFIX,
    OK,
    REQUEST_ID_HEADER,
    TENANT_ID_HEADER,
    CommandResult,
    WireCommand,
    WireError,
    command_headers,
)
from wow_temporal.worker import timer_worker

__all__ = [
    "FAST_DELIVERY",
    "Answer",
    "EshopStack",
    "Front",
    "Hold",
    "OrderView",
    "RecordingTimers",
    "Seen",
    "new_tenant",
    "timer_result",
]

RESTARTING = WireError("ServiceUnavailable", "the host is restarting")
"""What the front answers while there is no host (with HTTP 503)."""
_ERROR_CODE = ERROR_CODE_HEADER.lower().encode()

FAST_DELIVERY = DeliverySettings(
    max_attempts=10,
    initial_interval=timedelta(milliseconds=100),
    max_interval=timedelta(milliseconds=500),
    # Longer than a command the tests hold at the host's door waits there.
    attempt_timeout=timedelta(seconds=15),
    # How soon an attempt lost with a killed worker is tried again.
    heartbeat_timeout=timedelta(seconds=2),
)


def new_tenant() -> str:
    """A tenant of the test's own: tests on the shared dev server never see each other."""
    return f"t-{uuid.uuid4().hex[:12]}"


# --- the front: what reaches the host -----------------------------------------------------------


@dataclass
class Seen:
    """One command request as it reached the host's door."""

    request_id: str
    command_type: str
    tenant_id: str
    aggregate_id: str
    timer: str
    """`Command-Header-schedule_timer`: the timer that sent it ("" for other senders)."""
    received_ms: int
    status: int | None = None
    error_code: str = ""
    answered: bool = False
    """The answer went out (a timer's answer waits while `Front.answers` is clear)."""


@dataclass
class Hold:
    """Requests matching `matches` wait at the door until `release()`; `arrived` is set at the
    first one."""

    matches: Callable[[Seen], bool]
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    released: asyncio.Event = field(default_factory=asyncio.Event)
    held: list[Seen] = field(default_factory=list)

    def release(self) -> None:
        self.released.set()


class Front:
    """ASGI: records each command request, then forwards it to `app` (503 while there is
    none, as a host that is down: a technical failure the timers retry)."""

    def __init__(self) -> None:
        self.app: ASGIApp | None = None
        self.seen: list[Seen] = []
        self.answers = asyncio.Event()
        """While clear, a timer's answer waits after the host decided it (on its way)."""
        self.answers.set()
        self._holds: list[Hold] = []

    def hold(self, matches: Callable[[Seen], bool]) -> Hold:
        hold = Hold(matches)
        self._holds.append(hold)
        return hold

    def by_timer(self, timer: str) -> list[Seen]:
        """The requests a timer sent, in arrival order."""
        return [s for s in self.seen if s.timer == timer]

    def from_timers(self, tenant_id: str) -> list[Seen]:
        return [s for s in self.seen if s.timer and s.tenant_id == tenant_id]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] != COMMAND_SEND_PATH or scope["method"] != "POST":
            await self._forward(scope, receive, send, None)
            return
        headers = _headers(scope)
        seen = Seen(
            request_id=headers.get(REQUEST_ID_HEADER.lower(), ""),
            command_type=headers.get(COMMAND_TYPE_HEADER.lower(), ""),
            tenant_id=headers.get(TENANT_ID_HEADER.lower(), ""),
            aggregate_id=headers.get(AGGREGATE_ID_HEADER.lower(), ""),
            timer=headers.get(MESSAGE_HEADER_PREFIX.lower() + "schedule_timer", ""),
            received_ms=int(time.time() * 1000),
        )
        self.seen.append(seen)
        for hold in list(self._holds):
            if hold.matches(seen):
                hold.held.append(seen)
                hold.arrived.set()
                await hold.released.wait()
        await self._forward(scope, receive, send, seen)

    async def _forward(self, scope: Scope, receive: Receive, send: Send, seen: Seen | None) -> None:
        app = self.app
        if app is None:
            if seen is not None:
                seen.status, seen.error_code, seen.answered = 503, RESTARTING.code, True
            await send(
                {
                    "type": "http.response.start",
                    "status": 503,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": _restarting(scope, seen)})
            return
        if seen is None:
            await app(scope, receive, send)
            return

        async def recording(message: Message) -> None:
            if message["type"] == "http.response.start":
                seen.status = int(message["status"])
                for name, value in message.get("headers", []):
                    if name.lower() == _ERROR_CODE:
                        seen.error_code = value.decode("latin-1")
                if seen.timer:
                    await self.answers.wait()
                seen.answered = True
            await send(message)

        await app(scope, receive, recording)


def _headers(scope: Scope) -> dict[str, str]:
    """The request's headers by lower-case name (the last of each)."""
    return {
        name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]
    }


def _restarting(scope: Scope, seen: Seen | None) -> bytes:
    """The body of the front's 503 while there is no host: Wow's `CommandResult` for a command
    (`seen`), its `ErrorInfo` for anything else."""
    if seen is None:
        info = ErrorInfo(error_code=RESTARTING.code, error_msg=RESTARTING.message)
        return info.model_dump_json().encode()
    result = CommandResult.refusing(_headers(scope), RESTARTING, command_id=uuid.uuid4().hex)
    return result.model_dump_json().encode()


class _Server(uvicorn.Server):
    """uvicorn on a task of the test's loop, leaving the process's signal handlers alone."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


# --- the timers, as the relay hands them commits ------------------------------------------------


class RecordingTimers:
    """The relay's `Timers`: a `TimerClient` that records each commit handed over and what
    applying it did (`handed`, in order, across host restarts)."""

    def __init__(self, timers: TimerClient) -> None:
        self.timers = timers
        self.handed: list[tuple[Commit, list[Applied]]] = []
        self.on_handed: Callable[[Sequence[Commit]], None] | None = None
        self.cut: Exception | None = None
        """Set: the host's connection to Temporal is cut (the relay's hand-overs raise it); the
        workers keep theirs."""

    async def apply_many(
        self,
        commits: Sequence[Commit] | Admission,
        *,
        later: Horizon | None = None,
        failures: dict[AggregateRef, Exception] | None = None,
        within: float | None = None,
    ) -> list[list[Applied]]:
        if self.cut is not None:
            raise self.cut
        answers = await self.timers.apply_many(
            commits, later=later, failures=failures, within=within
        )
        listed = commits.commits if isinstance(commits, Admission) else commits
        taken = [
            (commit, answer)
            for commit, answer in zip(listed, answers, strict=True)
            if not failures or commit.aggregate not in failures
        ]
        self.handed.extend(taken)
        if self.on_handed is not None:
            self.on_handed([commit for commit, _ in taken])
        return answers

    def answers_for(self, commit_id: str) -> list[list[Applied]]:
        """What each hand-over of that commit did, in order."""
        return [answers for commit, answers in self.handed if commit.id == commit_id]


# --- reading orders -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """How the host answered a command."""

    status: int
    error_code: str
    error_msg: str
    version: int | None

    @property
    def ok(self) -> bool:
        return self.error_code == OK


@dataclass(frozen=True)
class OrderView:
    """An order as the host's aggregate read shows it."""

    ref: AggregateRef
    status: str
    deleted: bool
    version: int
    commits: list[Commit]

    def events(self, name: str) -> list[tuple[Commit, dict[str, Any]]]:
        """Each event of that name with its commit, in commit order."""
        return [(c, e.body) for c in self.commits for e in c.body if e.name == name]

    @property
    def cancellations(self) -> list[tuple[Commit, dict[str, Any]]]:
        return self.events("eshop.order.OrderCancelled")

    def schedule_set(self, index: int = 0) -> tuple[Commit, str]:
        """The `index`th commit that set a schedule, and the timer it set (`commit:event`)."""
        found = [
            (c, f"{c.id}:{e.id}")
            for c in self.commits
            for e in c.body
            if e.name == "wow.ScheduleSet"
        ]
        assert len(found) > index, f"{self.ref.aggregate_id}: {len(found)} schedule sets"
        return found[index]


# --- the stack ----------------------------------------------------------------------------------


class EshopStack:
    """The e-shop's host over HTTP on a free port, its relay handing schedules to the timers on
    `task_queue`, and (`worker=True`) a timer worker there delivering to it over HTTP."""

    def __init__(
        self,
        client: Client,
        db_path: Path,
        *,
        grace: timedelta,
        task_queue: str | None = None,
        worker: bool = True,
        delivery: DeliverySettings = FAST_DELIVERY,
        apps: Sequence[App] = (),
    ) -> None:
        self.client = client
        self.db_path = db_path
        self.grace = grace
        self.task_queue = task_queue or f"e2e-{uuid.uuid4().hex[:10]}"
        self.apps = [
            order_app(PaymentPolicy(grace)),
            inventory_app,
            *apps,
        ]
        self.timers = RecordingTimers(
            TimerClient(client, task_queue=self.task_queue, delivery=delivery)
        )
        self.front = Front()
        self.runtime: HostRuntime | None = None
        self._run_worker = worker
        self._worker: Worker | None = None
        self._worker_task: asyncio.Task[None] | None = None
        self._sender: CommandSender | None = None
        self._server: _Server | None = None
        self._serving: asyncio.Task[None] | None = None
        self.url = ""
        self.http = httpx.AsyncClient(timeout=30)

    @property
    def grace_ms(self) -> int:
        return round(self.grace.total_seconds() * 1000)

    # -- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def start(self) -> None:
        self.start_runtime()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        config = uvicorn.Config(
            self.front,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=1,
        )
        self._server = _Server(config)
        self._serving = asyncio.create_task(self._server.serve(sockets=[sock]))
        await eventually(
            lambda: self._server is not None and self._server.started,
            within=10,
            what="the host serves",
            interval=0.01,
        )
        if self._run_worker:
            self._sender = CommandSender(self.url)
            self._worker = timer_worker(self.client, self._sender, task_queue=self.task_queue)
            self._worker_task = asyncio.create_task(self._worker.run())

    @contextlib.asynccontextmanager
    async def workers_paused(self) -> AsyncIterator[None]:
        """No timer worker runs inside the block (timers fall due undelivered); one runs after."""
        assert self._worker is not None and self._worker_task is not None and self._sender
        await self._worker.shutdown()
        with contextlib.suppress(asyncio.CancelledError):
            await self._worker_task
        try:
            yield
        finally:
            self._worker = timer_worker(self.client, self._sender, task_queue=self.task_queue)
            self._worker_task = asyncio.create_task(self._worker.run())

    def start_runtime(self) -> None:
        """A host runtime on the store file, behind the front (a restart after `stop_runtime`)."""
        assert self.runtime is None, "a runtime is running"

        async def connect() -> RecordingTimers:
            return self.timers

        self.runtime = HostRuntime(self.apps, self.db_path, connect)
        self.runtime.start()
        self.front.app = self.runtime.asgi

    async def stop_runtime(self) -> None:
        """The host goes away (its followers stopped where they were); the front answers 503."""
        self.front.app = None
        if self.runtime is not None:
            runtime, self.runtime = self.runtime, None
            await runtime.stop()

    async def close(self) -> None:
        if self._worker is not None and self._worker_task is not None:
            await self._worker.shutdown()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker_task
            self._worker = self._worker_task = None
        if self._sender is not None:
            await self._sender.aclose()
        if self._server is not None and self._serving is not None:
            self._server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await self._serving
        await self.stop_runtime()
        await self.http.aclose()

    # -- commands and reads --------------------------------------------------------------------

    async def send(
        self,
        command_type: str,
        ref: AggregateRef,
        body: dict[str, Any] | None = None,
        *,
        request_id: str | None = None,
        traceparent: str | None = None,
    ) -> Answer:
        command = WireCommand.to(
            ref, command_type, request_id=request_id or uuid.uuid4().hex, traceparent=traceparent
        )
        response = await self.http.post(
            self.url + COMMAND_SEND_PATH, json=body or {}, headers=command_headers(command)
        )
        result = CommandResult.model_validate_json(response.content)
        return Answer(
            response.status_code, result.error_code, result.error_msg, result.aggregate_version
        )

    async def read(self, ref: AggregateRef) -> dict[str, Any] | None:
        """The aggregate read (`GET /wow/aggregate/...`); None when it does not exist."""
        response = await self.http.get(
            f"{self.url}/wow/aggregate/{ref.context_name}/{ref.aggregate_name}/"
            f"{ref.tenant_id}/{ref.aggregate_id}"
        )
        if response.status_code == 404:
            return None
        response.raise_for_status()
        data: dict[str, Any] = response.json()
        return data

    async def order(self, ref: AggregateRef) -> OrderView:
        data = await self.read(ref)
        assert data is not None, f"order {ref.aggregate_id} does not exist"
        return OrderView(
            ref=ref,
            status=data["state"]["status"],
            deleted=data["deleted"],
            version=data["version"],
            commits=[Commit.model_validate(c) for c in data["commits"]],
        )

    async def followers(self) -> dict[str, dict[str, Any]]:
        response = await self.http.get(self.url + "/wow/followers")
        response.raise_for_status()
        return {f["name"]: f for f in response.json()}

    async def receive_stock(self, tenant: str, product: str, quantity: int) -> None:
        answer = await self.send(
            "eshop.inventory.ReceiveStock", STOCK.ref(tenant, product), {"quantity": quantity}
        )
        assert answer.ok, answer

    async def place_order(
        self,
        tenant: str,
        order_id: str,
        items: dict[str, int] | None = None,
        *,
        traceparent: str | None = None,
    ) -> AggregateRef:
        """Create an order (one `mug` unless `items` say), answered Ok; its ref."""
        ref = ORDER.ref(tenant, order_id)
        lines = [{"product_id": p, "quantity": q} for p, q in (items or {"mug": 1}).items()]
        answer = await self.send(
            "eshop.order.CreateOrder", ref, {"items": lines}, traceparent=traceparent
        )
        assert answer.ok, answer
        return ref

    async def wait_order(
        self,
        ref: AggregateRef,
        status: str,
        timeout: float = 15,  # noqa: ASYNC109
    ) -> OrderView:
        """The order once it has reached `status`."""

        async def reached() -> OrderView | None:
            view = await self.order(ref)
            return view if view.status == status else None

        found: OrderView = await eventually(
            reached, within=timeout, what=f"order {ref.aggregate_id} {status}"
        )
        return found

    def timer_id(self, ref: AggregateRef, key: str = PAYMENT_GRACE_PERIOD) -> str:
        return timer_workflow_id(ref, key)


async def timer_result(
    client: Client,
    workflow_id: str,
    *,
    until: Callable[[TimerState], bool] = lambda state: True,
    timeout: float = 30,  # noqa: ASYNC109
) -> TimerState:
    """The final state of the timer's latest run (read by workflow id, never by a visibility
    list), once one satisfies `until`: a later set may start a new run of the same id."""
    handle = client.get_workflow_handle(workflow_id, result_type=TimerState)

    async def result() -> TimerState | None:
        try:
            async with asyncio.timeout(5):  # a long poll while the run goes on
                state: TimerState = await handle.result()
        except TimeoutError:
            return None
        except RPCError as error:
            if error.status != RPCStatusCode.NOT_FOUND:
                raise
            return None
        return state

    final: TimerState = await eventually(
        result,
        within=timeout,
        what=f"timer {workflow_id} as expected",
        interval=0.1,
        holds=lambda state: state is not None and until(state),
    )
    return final
