"""Benchmark: the domain host's commands per second over HTTP, against bare SQLite side by side,
and the relay's lag from a commit to its timer on a real dev server.

The host is the e-shop's (`workers.eshop`: the order and the stock aggregates; the inventory saga
left out, so only the commands sent here are decided, and the payment grace period an hour, so
no timer comes due), served as `wow-temporal host` serves it: a `HostRuntime` over a SQLite file
(WAL), its FastAPI app on uvicorn (h11, asyncio, as installed), one process of its own, logging a
line per command to a file. This process is the client (httpx, `--concurrency` commands in
flight, each with its own request id). Measured:

1. Commands per second, side by side in the same run, for a command that commits one event
   (`ReceiveStock` on a pool of products, their aggregates in memory) and for the e-shop's
   `ConfirmOrderStock` that commits two events and a `wow.ScheduleSet` (each on an order created
   before, over HTTP: `CreateOrder`'s rate, one event on a new aggregate, is printed too):
   - sqlite3 in WAL mode (the store's `synchronous`), one row of the commit's size per
     transaction: the floor of the file;
   - the eventsourcing recorder the store uses, the commit and its request id per transaction,
     as `EventStore.append` writes them: the floor of the store;
   - the host's pipeline in this process (`DomainHost.send`, no HTTP), the followers running;
   - a raw ASGI app answering Wow's `Ok` on uvicorn, to the same client: the floor of HTTP;
   - the host over HTTP: commands/s, the ratio to each floor, request p50/p99, and the host
     process's CPU per command.
   In part 1 the host's relay hands schedules to a no-op (no Temporal runs): the figures are the
   host's own.
2. The relay's lag on a fresh host handing to a real `TimerClient` on a fresh headless
   `temporal server start-dev` (no timer worker: nothing is delivered): orders confirmed at half
   the part-1 `ConfirmOrderStock` rate (a token bucket) for a fixed time, each commit carrying a
   `wow.ScheduleSet`. Lag = the commit's `createTime` -> `apply_many` returned for it
   (`Relay.on_handed`, in the host), p50/p99/max; and -> the timer workflow's start time (read
   by workflow id) for a sample.

Run: `.venv/bin/python bench/host.py [--quick] [--duration S] [--concurrency N] [--no-temporal]
[--json]`. Exits 0; nothing is asserted (the machine is small and noisy). The default run takes
about two and a half minutes on two cores.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import math
import os
import resource
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
from eventsourcing.persistence import StoredEvent
from eventsourcing.sqlite import SQLiteDatastore, SQLiteProcessRecorder

from bench.harness.stats import percentile
from workers.eshop.order import (
    ORDER,
    PAYMENT_GRACE_PERIOD,
    ConfirmOrderStock,
    CreateOrder,
    Order,
    PaymentPolicy,
)
from workers.eshop.stock import STOCK, ReceiveStock, Stock
from wow_temporal import App
from wow_temporal.dev.ports import free_port
from wow_temporal.dev.server import EmbeddedTemporal
from wow_temporal.host.relay import Relay
from wow_temporal.host.runtime import HostRuntime
from wow_temporal.host.service import CommandMessage
from wow_temporal.host.store import COMMIT_TOPIC, stream_id
from wow_temporal.ids import encode_part, timer_workflow_id
from wow_temporal.model import AggregateRef, Commit, CommitEvent
from wow_temporal.timers.client import TimerClient
from wow_temporal.timers.fold import Horizon
from wow_temporal.wire import (
    COMMAND_SEND_PATH,
    ERROR_CODE_HEADER,
    OK,
    CommandResult,
    WireCommand,
    command_headers,
)

CONCURRENCY = 32  # commands in flight (the relay's `apply_many` concurrency, as it happens)
TENANT = "bench"
PRODUCTS = 256  # ReceiveStock's aggregates, round robin: far more than in flight
GRACE = timedelta(hours=1)
LAG_SAMPLE = 200  # timers whose start time is read back
CLK_TCK = os.sysconf("SC_CLK_TCK")


def bench_apps() -> list[App]:
    """`workers.eshop.apps()` without the inventory saga, and an hour's payment grace."""
    return [
        App("eshop-order", aggregates=[Order], services=[PaymentPolicy(GRACE)]),
        App("eshop-inventory", aggregates=[Stock]),
    ]


class NullTimers:
    """Timers that take every commit at once (part 1: the host's own figures)."""

    async def apply_many(
        self, commits: Sequence[Commit], *, later: Horizon | None = None
    ) -> list[list[Any]]:
        return [[] for _ in commits]


# -- the commands -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Cmd:
    """One command as a Wow client sends it."""

    type: str
    ref: AggregateRef
    body: dict[str, Any]
    request_id: str

    def headers(self) -> dict[str, str]:
        command = WireCommand(
            type=self.type,
            context_name=self.ref.context_name,
            aggregate_name=self.ref.aggregate_name,
            aggregate_id=self.ref.aggregate_id,
            tenant_id=self.ref.tenant_id,
            request_id=self.request_id,
        )
        return {"Content-Type": "application/json", **command_headers(command)}

    def message(self) -> CommandMessage:
        return CommandMessage(
            type=self.type, ref=self.ref, body=self.body, request_id=self.request_id
        )


Make = Callable[[int], Cmd]


def receive(tag: str, run: str) -> Make:
    """ReceiveStock on `tag`'s `PRODUCTS` products, round robin; request ids of `run`."""

    def make(i: int) -> Cmd:
        ref = STOCK.ref(TENANT, f"{tag}-p{i % PRODUCTS}")
        return Cmd(ReceiveStock.__wow_type__, ref, {"quantity": 1}, f"{tag}-{run}-r{i}")

    return make


def order_ref(tag: str, i: int) -> AggregateRef:
    return ORDER.ref(TENANT, f"{tag}-o{i}")


def create(tag: str) -> Make:
    def make(i: int) -> Cmd:
        body = {"items": [{"product_id": "mug", "quantity": 1}]}
        return Cmd(CreateOrder.__wow_type__, order_ref(tag, i), body, f"{tag}-c{i}")

    return make


def confirm(tag: str) -> Make:
    def make(i: int) -> Cmd:
        body = {"product_id": "mug"}
        return Cmd(ConfirmOrderStock.__wow_type__, order_ref(tag, i), body, f"{tag}-k{i}")

    return make


Send = Callable[[Cmd], Awaitable[str]]
"""Sends a command; Wow's error code (`Ok`)."""


class HttpSender:
    """httpx, `concurrency` commands in flight at most: one `AsyncClient` (one keep-alive
    connection) per command in flight. One client with a pool of N connections spends
    O(N) per request in httpcore's pool (encode/httpx#3215: at 32 in flight it took 4-6 ms of
    CPU a request instead of 1.0-1.2 ms here, and capped the load near 100-250/s)."""

    def __init__(self, url: str, concurrency: int) -> None:
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        self.clients = [
            httpx.AsyncClient(base_url=url, timeout=60, limits=limits) for _ in range(concurrency)
        ]
        self.free: asyncio.Queue[httpx.AsyncClient] = asyncio.Queue()
        for client in self.clients:
            self.free.put_nowait(client)

    async def __call__(self, cmd: Cmd) -> str:
        client = await self.free.get()
        try:
            response = await client.post(
                COMMAND_SEND_PATH, content=json.dumps(cmd.body).encode(), headers=cmd.headers()
            )
        finally:
            self.free.put_nowait(client)
        return response.headers.get(ERROR_CODE_HEADER, f"HTTP {response.status_code}")

    async def aclose(self) -> None:
        await asyncio.gather(*(client.aclose() for client in self.clients))


# -- measuring --------------------------------------------------------------------------------


@dataclass
class Run:
    """A load: how many commands, how long, each one's latency (ms), the refusals."""

    n: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list, repr=False)
    errors: dict[str, int] = field(default_factory=dict)
    cpu_s: float | None = None
    """The host process's CPU seconds over the load (None: this process)."""
    exhausted: bool = False
    """The load ran out of commands before its time (orders to confirm)."""

    @property
    def rate(self) -> float:
        return self.n / self.seconds if self.seconds else 0.0

    @property
    def p50(self) -> float:
        return percentile(self.latencies, 0.5)

    @property
    def p99(self) -> float:
        return percentile(self.latencies, 0.99)

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    @property
    def cpu_ms(self) -> float:
        """Host CPU ms per command."""
        return 1000 * self.cpu_s / self.n if self.cpu_s is not None and self.n else math.nan

    @property
    def cpu_share(self) -> float:
        """Host CPU as a share of one core."""
        return self.cpu_s / self.seconds if self.cpu_s is not None and self.seconds else math.nan


async def closed_loop(
    send: Send,
    make: Make,
    concurrency: int,
    *,
    seconds: float | None = None,
    count: int | None = None,
) -> Run:
    """`concurrency` senders, each sending its next command once answered, for `seconds` or
    until `count` commands were sent."""
    run = Run()
    errors: Counter[str] = Counter()
    next_index = 0
    start = time.perf_counter()
    stop_at = start + seconds if seconds is not None else math.inf

    async def sender() -> None:
        nonlocal next_index
        while time.perf_counter() < stop_at:
            if count is not None and next_index >= count:
                run.exhausted = seconds is not None
                return
            cmd = make(next_index)
            next_index += 1
            sent = time.perf_counter()
            code = await send(cmd)
            run.latencies.append((time.perf_counter() - sent) * 1000)
            if code != "Ok":
                errors[code] += 1

    await asyncio.gather(*(sender() for _ in range(concurrency)))
    run.seconds = time.perf_counter() - start
    run.n = len(run.latencies)
    run.errors = dict(errors)
    return run


class TokenBucket:
    """`rate` tokens a second, at most `burst` saved up."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate = rate
        self.burst = burst
        self.tokens = 1.0
        self.last = time.perf_counter()

    async def take(self) -> None:
        while True:
            now = time.perf_counter()
            self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
            self.last = now
            if self.tokens >= 1:
                self.tokens -= 1
                return
            await asyncio.sleep((1 - self.tokens) / self.rate)


async def paced(send: Send, make: Make, rate: float, seconds: float, count: int) -> Run:
    """Commands at `rate` a second (a token bucket) for `seconds`, at most `count`."""
    run = Run()
    errors: Counter[str] = Counter()
    bucket = TokenBucket(rate, max(1.0, rate / 50))
    tasks: list[asyncio.Task[None]] = []

    async def one(cmd: Cmd) -> None:
        sent = time.perf_counter()
        code = await send(cmd)
        run.latencies.append((time.perf_counter() - sent) * 1000)
        if code != "Ok":
            errors[code] += 1

    start = time.perf_counter()
    i = 0
    while time.perf_counter() < start + seconds:
        if i >= count:
            run.exhausted = True
            break
        await bucket.take()
        tasks.append(asyncio.create_task(one(make(i))))
        i += 1
    await asyncio.gather(*tasks)
    run.seconds = time.perf_counter() - start
    run.n = len(run.latencies)
    run.errors = dict(errors)
    return run


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system, every thread) of process `pid` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# -- the floors: bare SQLite, the recorder ----------------------------------------------------


@dataclass(frozen=True)
class Shape:
    """What one command writes: its commit (as the store keeps it) and its request record."""

    commit: Commit
    state: bytes
    request_state: bytes

    @property
    def size(self) -> int:
        return len(self.state)


def synchronous_of(path: Path) -> int:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return int(conn.execute("PRAGMA synchronous").fetchone()[0])


SYNCHRONOUS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


def sqlite_rows(path: Path, size: int, seconds: float, synchronous: int) -> Run:
    """One row of `size` bytes per transaction, WAL, as fast as it goes."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={synchronous}")
        conn.execute("CREATE TABLE rows (id INTEGER PRIMARY KEY, data BLOB)")
        payload = os.urandom(size)
        run = Run()
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            sent = time.perf_counter()
            conn.execute("BEGIN")
            conn.execute("INSERT INTO rows (data) VALUES (?)", (payload,))
            conn.execute("COMMIT")
            run.latencies.append((time.perf_counter() - sent) * 1000)
        run.seconds = time.perf_counter() - start
        run.n = len(run.latencies)
        return run
    finally:
        conn.close()


def recorder_commits(path: Path, shape: Shape, seconds: float) -> Run:
    """The commit and its request id per transaction through the store's recorder, on
    `PRODUCTS` streams round robin, as `EventStore.append` writes them."""
    datastore = SQLiteDatastore(str(path), originator_id_type="text")
    try:
        recorder = SQLiteProcessRecorder(datastore)
        recorder.create_table()
        base = stream_id(shape.commit.aggregate)
        run = Run()
        start = time.perf_counter()
        i = 0
        while time.perf_counter() - start < seconds:
            stream = f"{base}-{i % PRODUCTS}"
            sent = time.perf_counter()
            recorder.insert_events(
                [
                    StoredEvent(stream, i // PRODUCTS + 1, COMMIT_TOPIC, shape.state),
                    StoredEvent(
                        f"request:{stream}:{encode_part(f'r{i}')}",
                        1,
                        "wow.RequestId",
                        shape.request_state,
                    ),
                ]
            )
            run.latencies.append((time.perf_counter() - sent) * 1000)
            i += 1
        run.seconds = time.perf_counter() - start
        run.n = len(run.latencies)
        return run
    finally:
        datastore.close()


# -- the host in this process (the pipeline without HTTP) -------------------------------------


@contextlib.asynccontextmanager
async def host_log(path: Path) -> AsyncIterator[None]:
    """The host's per-command log lines to `path`, one line each as `wow-temporal host` writes."""
    from wow_temporal.logs import LOG_FORMAT, OneLineFormatter

    logger = logging.getLogger("wow_temporal.host")
    handler = logging.FileHandler(path)
    handler.setFormatter(OneLineFormatter(LOG_FORMAT))
    level, propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate
        handler.close()


@dataclass
class Kind:
    """A measured command: its floors, in process and over HTTP."""

    name: str
    events: str
    size: int = 0
    sqlite: Run | None = None
    recorder: Run | None = None
    pipeline: Run | None = None
    http: Run | None = None
    shape: Shape | None = field(default=None, repr=False)

    def ratio(self, floor: Run | None) -> float:
        if self.http is None or floor is None or not floor.rate:
            return math.nan
        return self.http.rate / floor.rate


async def in_process(tmp: Path, seconds: float, concurrency: int) -> tuple[Kind, Kind, Run]:
    """The pipeline without HTTP: `DomainHost.send` from `concurrency` senders, the followers
    running as in the host. Also the shapes the floors write."""

    async def null() -> NullTimers:
        return NullTimers()

    receive_kind = Kind("ReceiveStock", "1 event")
    confirm_kind = Kind("ConfirmOrderStock", "2 events + wow.ScheduleSet")
    runtime = HostRuntime(bench_apps(), tmp / "pipeline.db", null)
    runtime.start()

    async def send(cmd: Cmd) -> str:
        return (await runtime.host.send(cmd.message())).error_code

    try:
        async with host_log(tmp / "pipeline.log"):
            warm = receive("w", "warm")
            await closed_loop(send, warm, concurrency, count=PRODUCTS)  # creates the products
            receive_kind.pipeline = await closed_loop(
                send, receive("w", "m"), concurrency, seconds=seconds
            )
            n = math.ceil(receive_kind.pipeline.rate * seconds * 1.15) + concurrency
            created = await closed_loop(send, create("w"), concurrency, count=n)
            confirm_kind.pipeline = await closed_loop(
                send, confirm("w"), concurrency, seconds=seconds, count=n
            )
        stock = (await runtime.host.commits(warm(1).ref))[-1]
        order = (await runtime.host.commits(order_ref("w", 1)))[-1]
    finally:
        await runtime.stop()
    for kind, commit in ((receive_kind, stock), (confirm_kind, order)):
        state = commit.model_dump_json().encode()
        request = json.dumps({"commitId": commit.id, "version": commit.version}).encode()
        kind.shape = Shape(commit, state, request)
        kind.size = len(state)
    return receive_kind, confirm_kind, created


async def floors(tmp: Path, kinds: Sequence[Kind], seconds: float) -> int:
    """sqlite3 and the recorder for each kind's shape, on fresh files; the store's
    `synchronous` (which the sqlite3 rows use too)."""
    synchronous = await asyncio.to_thread(synchronous_of, tmp / "pipeline.db")
    for index, kind in enumerate(kinds):
        shape = kind.shape
        assert shape is not None
        kind.sqlite = await asyncio.to_thread(
            sqlite_rows, tmp / f"rows-{index}.db", shape.size, seconds, synchronous
        )
        kind.recorder = await asyncio.to_thread(
            recorder_commits, tmp / f"recorder-{index}.db", shape, seconds
        )
    return synchronous


# -- the host (and the HTTP floor) in a process of their own ----------------------------------


class Served:
    """This file run as a server (`--serve-host` or `--serve-floor`), in its own process."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.port = free_port("127.0.0.1")
        self.url = f"http://127.0.0.1:{self.port}"
        self.args = args
        self.log = log
        self.proc: asyncio.subprocess.Process | None = None
        self.http = httpx.AsyncClient(base_url=self.url, timeout=30)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    async def start(self) -> None:
        out = await asyncio.to_thread(self.log.open, "ab")
        try:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                __file__,
                *self.args,
                "--port",
                str(self.port),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
            )
        finally:
            out.close()
        for _ in range(600):
            if self.proc.returncode is not None:
                break
            with contextlib.suppress(httpx.HTTPError):
                await self.http.get("/health")
                return
            await asyncio.sleep(0.05)
        tail = (await asyncio.to_thread(self.log.read_text))[-3000:]
        raise RuntimeError(f"the bench server {self.args[0]} did not start:\n{tail}")

    async def stop(self) -> None:
        await self.http.aclose()
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            try:
                async with asyncio.timeout(20):
                    await self.proc.wait()
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()

    def cpu(self) -> float:
        return process_cpu(self.pid)

    async def measure(
        self,
        send: Send,
        make: Make,
        concurrency: int,
        *,
        seconds: float | None = None,
        count: int | None = None,
    ) -> Run:
        before = self.cpu()
        run = await closed_loop(send, make, concurrency, seconds=seconds, count=count)
        run.cpu_s = self.cpu() - before
        return run


def floor_app() -> Callable[..., Awaitable[None]]:
    """A raw ASGI app answering every request with a Wow `CommandResult` of `Ok`."""
    ref = STOCK.ref(TENANT, "x")
    result = CommandResult.of(ref, command_id="x", request_id="x", code=OK)
    answer = result.model_dump_json().encode()
    error_code = (ERROR_CODE_HEADER.lower().encode(), OK.encode())
    headers = [(b"content-type", b"application/json"), error_code]

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        more = True
        while more:
            message = await receive()
            more = message.get("more_body", False)
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": answer})

    return app


def serve_floor(port: int) -> None:
    import uvicorn

    uvicorn.run(floor_app(), host="127.0.0.1", port=port, log_level="warning", lifespan="off")


class LagProbe:
    """`Relay.on_handed`: when each commit was handed over, and in which batch."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, int, float, int]] = []
        self.batches = 0

    def __call__(self, commits: list[Commit]) -> None:
        now = time.time() * 1000
        self.batches += 1
        for commit in commits:
            self.rows.append((commit.aggregate_id, commit.create_time, now, self.batches))


def serve_host(port: int, db: Path, temporal: str | None, namespace: str) -> None:
    """The host as `wow-temporal host` runs it; `GET /_bench/handed` gives the relay's probe."""
    import uvicorn

    from wow_temporal.logs import configure_logging

    configure_logging()

    async def timers() -> Any:
        if temporal is None:
            return NullTimers()
        from temporalio.client import Client
        from temporalio.contrib.pydantic import pydantic_data_converter

        client = await Client.connect(
            temporal, namespace=namespace, data_converter=pydantic_data_converter
        )
        return TimerClient(client)

    async def serve() -> None:
        runtime = HostRuntime(bench_apps(), db, timers)
        probe = LagProbe()
        runtime.relay.on_handed = probe

        async def handed(rows: bool = False) -> dict[str, Any]:
            return {
                "n": len(probe.rows),
                "batches": probe.batches,
                "rows": probe.rows if rows else [],
            }

        runtime.asgi.add_api_route("/_bench/handed", handed, methods=["GET"])
        runtime.start()
        config = uvicorn.Config(runtime.asgi, host="127.0.0.1", port=port, log_level="warning")
        try:
            await uvicorn.Server(config).serve()
        finally:
            await runtime.stop()

    asyncio.run(serve())


async def over_http(
    tmp: Path,
    receive_kind: Kind,
    confirm_kind: Kind,
    seconds: float,
    concurrency: int,
    progress: Callable[[str], None],
) -> tuple[Run, Run]:
    """The HTTP floor, then the host over HTTP: ReceiveStock, CreateOrder, ConfirmOrderStock."""
    floor = Served(["--serve-floor"], tmp / "floor.log")
    host = Served(["--serve-host", "--db", str(tmp / "host.db")], tmp / "host.log")
    try:
        await asyncio.gather(floor.start(), host.start())  # both idle until measured
    except BaseException:
        await asyncio.gather(floor.stop(), host.stop())
        raise
    sender = HttpSender(floor.url, concurrency)
    try:
        warm = receive("f", "warm")
        await closed_loop(sender, warm, concurrency, seconds=min(1.0, seconds / 2))
        floor_run = await floor.measure(sender, receive("f", "m"), concurrency, seconds=seconds)
    except BaseException:
        await host.stop()
        raise
    finally:
        await sender.aclose()
        await floor.stop()
    progress(f"HTTP floor (raw ASGI Ok)     {floor_run.rate:6.0f}/s")

    sender = HttpSender(host.url, concurrency)
    try:
        warm = receive("h", "warm")
        await closed_loop(sender, warm, concurrency, count=PRODUCTS)  # creates the products
        receive_kind.http = await host.measure(
            sender, receive("h", "m"), concurrency, seconds=seconds
        )
        progress(f"host ReceiveStock            {receive_kind.http.rate:6.0f}/s")
        n = math.ceil(receive_kind.http.rate * seconds * 1.15) + concurrency
        created = await host.measure(sender, create("h"), concurrency, count=n)
        progress(f"host CreateOrder             {created.rate:6.0f}/s ({n} orders)")
        confirm_kind.http = await host.measure(
            sender, confirm("h"), concurrency, seconds=seconds, count=n
        )
        progress(f"host ConfirmOrderStock       {confirm_kind.http.rate:6.0f}/s")
    finally:
        await sender.aclose()
        await host.stop()
    return floor_run, created


# -- part 2: the relay's lag ------------------------------------------------------------------


@dataclass
class Lag:
    """One steady load of confirmations and what the relay made of it."""

    label: str
    rate: float
    seconds: float
    sent: Run
    handed: int
    batches: int
    relay_rate: float
    """Commits handed over a second, from the first handed to the last."""
    lags: list[float] = field(repr=False)
    """commit createTime -> apply_many returned, ms, in commit order."""
    drain_s: float
    started: list[float] = field(repr=False)
    """commit createTime -> the timer workflow's start time, ms, for a sample."""
    server_cpu_s: float
    """The dev server's CPU seconds over the load."""

    @property
    def p50(self) -> float:
        return percentile(self.lags, 0.5)

    @property
    def p99(self) -> float:
        return percentile(self.lags, 0.99)

    @property
    def max(self) -> float:
        return max(self.lags) if self.lags else math.nan

    def third(self, which: int) -> float:
        k = len(self.lags) // 3
        return percentile(self.lags[which * k : (which + 1) * k] if k else self.lags, 0.5)

    @property
    def behind(self) -> bool:
        """The relay did not keep up: it handed over slower than sent, or its lag grew."""
        return self.relay_rate < 0.95 * self.sent.rate or self.third(2) > 2 * self.third(0) + 50


class LagRig:
    """A fresh host handing to a real `TimerClient` on a fresh dev server."""

    def __init__(self, tmp: Path, concurrency: int, sample: int) -> None:
        self.tmp = tmp
        self.concurrency = concurrency
        self.sample = sample
        self.server = EmbeddedTemporal(tmp / "temporal", headless=True, port=free_port())
        self.host = Served(
            [
                "--serve-host",
                "--db",
                str(tmp / "lag.db"),
                "--temporal",
                self.server.address,
                "--namespace",
                self.server.namespace,
            ],
            tmp / "lag-host.log",
        )
        self.sender: HttpSender | None = None
        self.startup_s = 0.0

    async def _start_server(self) -> None:
        started = time.perf_counter()
        await self.server.start()
        self.startup_s = time.perf_counter() - started

    async def __aenter__(self) -> LagRig:
        # The host connects to Temporal at its first schedule: both start at once.
        try:
            await asyncio.gather(self._start_server(), self.host.start())
        except BaseException:
            await self.__aexit__()
            raise
        self.client = await self.server.connect()
        self.timers = TimerClient(self.client)
        self.sender = HttpSender(self.host.url, 4 * self.concurrency)
        # Warm up: the relay connects at its first schedule; Temporal's first starts.
        warm = 2 * self.concurrency
        await closed_loop(self.sender, create("w"), self.concurrency, count=warm)
        await closed_loop(self.sender, confirm("w"), self.concurrency, count=warm)
        await self.until_handed(warm, 60)
        return self

    async def __aexit__(self, *_: object) -> None:
        try:
            if self.sender is not None:
                await self.sender.aclose()
            await self.host.stop()
        finally:
            await self.server.stop()

    async def handed(self, rows: bool = False) -> dict[str, Any]:
        answer = await self.host.http.get("/_bench/handed", params={"rows": rows})
        return dict(answer.json())

    async def until_handed(self, n: int, within: float) -> float:
        begin = time.perf_counter()
        while time.perf_counter() - begin < within:
            if (await self.handed())["n"] >= n:
                break
            await asyncio.sleep(0.02)
        return time.perf_counter() - begin

    async def load(self, tag: str, label: str, rate: float, seconds: float) -> Lag:
        """Orders created (as fast as the host takes them), then confirmed at `rate`."""
        assert self.sender is not None
        n = math.ceil(rate * seconds * 1.05) + 10
        await closed_loop(self.sender, create(tag), self.concurrency, count=n)
        before = (await self.handed())["n"]
        assert self.server.pid is not None
        cpu, server_cpu = self.host.cpu(), process_cpu(self.server.pid)
        sent = await paced(self.sender, confirm(tag), rate, seconds, n)
        sent.cpu_s = self.host.cpu() - cpu
        server_cpu = process_cpu(self.server.pid) - server_cpu
        drain = await self.until_handed(before + sent.n, 60 + sent.n / 50)
        rows = [r for r in (await self.handed(rows=True))["rows"] if r[0].startswith(f"{tag}-")]
        rows.sort(key=lambda r: int(r[0].rsplit("o", 1)[1]))
        lags = [r[2] - r[1] for r in rows]
        span_s = (max(r[2] for r in rows) - min(r[2] for r in rows)) / 1000 if rows else 0.0
        relay_rate = (len(rows) - 1) / span_s if span_s > 0 else math.nan

        step = max(1, len(rows) // self.sample)
        limit = asyncio.Semaphore(20)

        async def start_lag(row: list[Any]) -> float:
            workflow_id = timer_workflow_id(ORDER.ref(TENANT, row[0]), PAYMENT_GRACE_PERIOD)
            async with limit:
                described = await self.client.get_workflow_handle(workflow_id).describe()
            return described.start_time.timestamp() * 1000 - row[1]

        starts = await asyncio.gather(*(start_lag(r) for r in rows[::step][: self.sample]))
        batches = len({r[3] for r in rows})
        return Lag(
            label,
            rate,
            seconds,
            sent,
            len(rows),
            batches,
            relay_rate,
            lags,
            drain,
            list(starts),
            server_cpu,
        )

    async def ingest(self, shape: Commit, n: int, batch: int) -> float:
        """`TimerClient.apply_many` alone, from this process, on commits like the host's in
        batches as the relay's: commits a second (the relay's floor)."""
        commits = []
        for i in range(n):
            commit_id = f"ingest-{i}"
            body = [
                CommitEvent(id=f"{commit_id}-{k}", name=e.name, body=e.body)
                for k, e in enumerate(shape.body)
            ]
            commits.append(
                shape.model_copy(
                    update={
                        "id": commit_id,
                        "aggregate_id": f"ingest-o{i}",
                        "create_time": int(time.time() * 1000),
                        "body": body,
                    }
                )
            )
        start = time.perf_counter()
        for at in range(0, n, batch):
            await self.timers.apply_many(commits[at : at + batch])
        return n / (time.perf_counter() - start)


async def relay_lag(
    tmp: Path,
    rate: float,
    seconds: float,
    concurrency: int,
    sample: int,
    shape: Commit,
    progress: Callable[[str], None],
    batches: int = 2,
) -> tuple[list[Lag], float, float]:
    """The lag at `rate`; if the relay fell behind, again at half the rate it handed over at.
    Also the dev server's start-up time and `TimerClient.apply_many`'s own rate, over at least
    `batches` of the relay's batches."""
    async with LagRig(tmp, concurrency, sample) as rig:
        lags = [await rig.load("l1", "half the ConfirmOrderStock rate", rate, seconds)]
        first = lags[0]
        progress(
            f"relay lag at {rate:.0f}/s: p50 {first.p50:.1f} ms  p99 {first.p99:.1f} ms, "
            f"handed over at {first.relay_rate:.0f}/s"
        )
        if first.behind and first.relay_rate > 0:
            again = first.relay_rate / 2
            lags.append(
                await rig.load("l2", "half the rate the relay handed over at", again, seconds)
            )
            progress(
                f"relay lag at {again:.0f}/s: p50 {lags[1].p50:.1f} ms  p99 {lags[1].p99:.1f} ms"
            )
        n = max(batches * Relay.batch, 100 * round(first.relay_rate * min(seconds, 5) / 100))
        ingest = await rig.ingest(shape, n, Relay.batch)
        progress(f"TimerClient.apply_many alone {ingest:.0f} commits/s ({n})")
        return lags, rig.startup_s, ingest


# -- main -------------------------------------------------------------------------------------


@dataclass
class Report:
    concurrency: int
    duration: float
    floor_seconds: float
    synchronous: str
    kinds: list[Kind]
    created: Run
    created_in_process: Run
    floor: Run
    lags: list[Lag]
    temporal_startup_s: float | None
    timers_ingest: float | None
    """`TimerClient.apply_many` alone, commits a second (part 2)."""
    elapsed_s: float
    load: tuple[float, float]
    """The machine's 1-minute load average at the start and the end."""


def fmt_run(run: Run | None) -> str:
    if run is None:
        return "      -"
    return f"{run.rate:6.0f}/s  p50 {run.p50:6.2f} ms  p99 {run.p99:6.2f} ms"


ROW = 44  # the width of a row's label


def print_report(r: Report) -> None:
    print()
    print(
        f"=== domain host over HTTP vs bare SQLite: {r.concurrency} in flight, "
        f"{r.duration:g}s per HTTP measure ({r.floor_seconds:g}s per floor), one host process "
        f"(uvicorn, h11, asyncio); {r.elapsed_s:.0f}s in all, load average "
        f"{r.load[0]:.1f} -> {r.load[1]:.1f} ==="
    )
    print(f"1. commands per second (SQLite file, WAL, synchronous={r.synchronous}):")
    for kind in r.kinds:
        http = kind.http
        assert http is not None
        print(f"  {kind.name} ({kind.events}, commit {kind.size} B):")
        rows = (
            (f"sqlite3, one {kind.size} B row per transaction", kind.sqlite),
            ("eventsourcing recorder, commit + request id", kind.recorder),
            ("host pipeline in process, no HTTP", kind.pipeline),
        )
        for label, run in rows:
            print(f"    {label:{ROW}} {fmt_run(run)}")
        print(
            f"    {'host over HTTP':{ROW}} {fmt_run(http)}  errors {http.error_count}  "
            f"host CPU {http.cpu_ms:.2f} ms/command ({100 * http.cpu_share:.0f}% of a core)"
        )
        print(
            f"    ratio http/sqlite3 {kind.ratio(kind.sqlite):.3f}  "
            f"http/recorder {kind.ratio(kind.recorder):.3f}  "
            f"http/in-process {kind.ratio(kind.pipeline):.3f}"
            + ("  (ran out of orders)" if http.exhausted else "")
        )
    c, f = r.created, r.floor
    print("  CreateOrder (1 event, a new aggregate each):")
    print(f"    {'host pipeline in process, no HTTP':{ROW}} {fmt_run(r.created_in_process)}")
    print(
        f"    {'host over HTTP':{ROW}} {fmt_run(c)}  errors {c.error_count}  "
        f"host CPU {c.cpu_ms:.2f} ms/command ({100 * c.cpu_share:.0f}% of a core)"
    )
    print(
        f"  HTTP floor, a raw ASGI app answering Ok on uvicorn, same client:\n"
        f"    {'raw ASGI over HTTP':{ROW}} {fmt_run(f)}  server CPU {f.cpu_ms:.2f} ms/request "
        f"({100 * f.cpu_share:.0f}% of a core)"
    )
    if not r.lags:
        print("2. relay lag: skipped (--no-temporal)")
        return
    print(
        f"2. relay lag, a real dev server (up in {r.temporal_startup_s or 0:.1f}s), "
        "no timer worker, each commit a wow.ScheduleSet:"
    )
    for lag in r.lags:
        s = lag.sent
        print(f"  at {lag.rate:.0f}/s ({lag.label}) for {lag.seconds:g}s:")
        print(
            f"    commit -> apply_many returned (Relay.on_handed) p50 {lag.p50:.1f} ms  "
            f"p99 {lag.p99:.1f} ms  max {lag.max:.1f} ms  handed {lag.handed}/{s.n}"
        )
        print(
            f"    p50 over the first third {lag.third(0):.1f} ms, last third "
            f"{lag.third(2):.1f} ms (a p50 that grows means not keeping up)"
            + ("  BEHIND" if lag.behind else "")
        )
        print(
            f"    relay handed over at {lag.relay_rate:.0f}/s in {lag.batches} batches "
            f"({lag.handed / max(lag.batches, 1):.1f} commits each); drained "
            f"{lag.drain_s:.2f}s after the last"
        )
        print(
            f"    commit -> timer workflow start time ({len(lag.started)} read by id) "
            f"p50 {percentile(lag.started, 0.5):.1f} ms  p99 {percentile(lag.started, 0.99):.1f} ms"
        )
        print(
            f"    confirms sent at {s.rate:.0f}/s  p50 {s.p50:.2f} ms  p99 {s.p99:.2f} ms  "
            f"errors {s.error_count}  host CPU {s.cpu_ms:.2f} ms/command "
            f"({100 * s.cpu_share:.0f}% of a core, the relay's Temporal client included); "
            f"dev server CPU {100 * lag.server_cpu_s / s.seconds:.0f}% of a core"
        )
    print(
        f"  TimerClient.apply_many alone (this process, batches of {Relay.batch}, same server): "
        f"{r.timers_ingest or 0:.0f} commits/s"
    )


async def run(args: argparse.Namespace) -> Report:
    quick = args.quick
    duration = args.duration or (1.0 if quick else 10.0)
    floor_seconds = min(duration, 0.5 if quick else 4.0)
    lag_seconds = args.lag_seconds or (1.5 if quick else 1.5 * duration)
    sample = 30 if quick else LAG_SAMPLE
    concurrency = args.concurrency
    started = time.perf_counter()
    load = os.getloadavg()[0]

    def progress(text: str) -> None:
        print(f"  [{time.perf_counter() - started:5.1f}s] {text}", flush=True)

    print(
        f"{concurrency} in flight, {duration:g}s per HTTP measure, {floor_seconds:g}s per "
        f"floor, lag for {lag_seconds:g}s{' (skipped)' if args.no_temporal else ''}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="wow-bench-host-") as name:
        tmp = Path(name)
        receive_kind, confirm_kind, created_in_process = await in_process(
            tmp, floor_seconds, concurrency
        )
        kinds = (receive_kind, confirm_kind)
        for kind in kinds:
            assert kind.pipeline is not None
            progress(f"in process {kind.name:17} {kind.pipeline.rate:6.0f}/s")
        synchronous = await floors(tmp, kinds, floor_seconds)
        for kind in kinds:
            assert kind.sqlite is not None and kind.recorder is not None
            progress(
                f"floors {kind.name:21} sqlite3 {kind.sqlite.rate:6.0f}/s  "
                f"recorder {kind.recorder.rate:6.0f}/s"
            )
        floor, created = await over_http(
            tmp, receive_kind, confirm_kind, duration, concurrency, progress
        )
        lags: list[Lag] = []
        startup = ingest = None
        if not args.no_temporal:
            assert confirm_kind.http is not None and confirm_kind.shape is not None
            rate = confirm_kind.http.rate / 2
            lags, startup, ingest = await relay_lag(
                tmp, rate, lag_seconds, concurrency, sample, confirm_kind.shape.commit, progress,
                batches=1 if quick else 2,
            )
    return Report(
        concurrency=concurrency,
        duration=duration,
        floor_seconds=floor_seconds,
        synchronous=SYNCHRONOUS.get(synchronous, str(synchronous)),
        kinds=list(kinds),
        created=created,
        created_in_process=created_in_process,
        floor=floor,
        lags=lags,
        temporal_startup_s=startup,
        timers_ingest=ingest,
        elapsed_s=time.perf_counter() - started,
        load=(load, os.getloadavg()[0]),
    )


def to_json(report: Report) -> dict[str, Any]:
    def run_json(run: Run | None) -> dict[str, Any] | None:
        if run is None:
            return None
        return {
            "n": run.n,
            "seconds": run.seconds,
            "rate": run.rate,
            "p50_ms": run.p50,
            "p99_ms": run.p99,
            "errors": run.errors,
            "cpu_ms_per_command": run.cpu_ms if run.cpu_s is not None else None,
        }

    def lag_json(lag: Lag) -> dict[str, Any]:
        return {
            "label": lag.label,
            "rate": lag.rate,
            "seconds": lag.seconds,
            "handed": lag.handed,
            "batches": lag.batches,
            "relay_rate": lag.relay_rate,
            "p50_ms": lag.p50,
            "p99_ms": lag.p99,
            "max_ms": lag.max,
            "first_third_p50_ms": lag.third(0),
            "last_third_p50_ms": lag.third(2),
            "behind": lag.behind,
            "drain_s": lag.drain_s,
            "server_cpu_share": lag.server_cpu_s / lag.sent.seconds if lag.sent.seconds else None,
            "timer_start_p50_ms": percentile(lag.started, 0.5),
            "timer_start_p99_ms": percentile(lag.started, 0.99),
            "sent": run_json(lag.sent),
        }

    return {
        "concurrency": report.concurrency,
        "duration": report.duration,
        "synchronous": report.synchronous,
        "kinds": {
            k.name: {
                "commit_bytes": k.size,
                **{
                    side: run_json(getattr(k, side))
                    for side in ("sqlite", "recorder", "pipeline", "http")
                },
            }
            for k in report.kinds
        },
        "create_order": {
            "pipeline": run_json(report.created_in_process),
            "http": run_json(report.created),
        },
        "http_floor": run_json(report.floor),
        "relay_lag": [lag_json(lag) for lag in report.lags],
        "temporal_startup_s": report.temporal_startup_s,
        "timers_ingest": report.timers_ingest,
        "elapsed_s": report.elapsed_s,
        "load": report.load,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="a few seconds, for the smoke test")
    parser.add_argument("--duration", type=float, help="seconds per HTTP measure (10, quick 1)")
    parser.add_argument(
        "--lag-seconds", type=float, help="each lag load (1.5x --duration, quick 1.5)"
    )
    parser.add_argument(
        "--concurrency", type=int, default=CONCURRENCY, help="commands in flight (32)"
    )
    parser.add_argument("--no-temporal", action="store_true", help="skip the relay lag (part 2)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--serve-host", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-floor", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--temporal", help=argparse.SUPPRESS)
    parser.add_argument("--namespace", default="default", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_host:
        serve_host(args.port, args.db, args.temporal, args.namespace)
        return 0
    if args.serve_floor:
        serve_floor(args.port)
        return 0
    # SIGTERM (a timeout) ends the run through `finally`, so no server is left behind.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cpu = own_cpu()
    report = asyncio.run(run(args))
    if args.json:
        print(json.dumps(to_json(report), default=str))
    else:
        print_report(report)
        print(f"bench process (the client) CPU {own_cpu() - cpu:.1f}s over {report.elapsed_s:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
