"""Benchmark: the domain host's commands per second over HTTP, against bare SQLite side by side,
the relay's lag from a commit to its timer on a real dev server, and the host's replicas on
PostgreSQL beside the SQLite host.

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
3. Replicas: the same client and ReceiveStock load (a `--duration` each, after each product's
   first command), its connections to the replicas in turn (as a TCP balancer deals them: each
   command to any replica, so a replica's aggregate in memory is often stale and is decided
   again), on real `wow-temporal host` processes (Temporal at a port nothing serves: ReceiveStock
   sets no schedule): the SQLite host, then 1, 2 and 3 replicas on one PostgreSQL database each
   (`bench.harness.postgres`, fsync on, as a real server commits), in `--rounds` rounds on fresh
   stores, the best round of each kept. Per configuration: commands/s, the ratio to PG x1 and to
   the SQLite host, p50/p99, CPU a command in the hosts (summed), in PostgreSQL (postmaster and
   backends) and in the client, the cores those and the whole machine kept busy; PostgreSQL's
   transactions and WAL fsyncs a command, and its backends' states sampled over the load
   (holding the events table's commit lock, waiting for a lock, for the WAL, for their host
   mid-transaction, running). Target: PG x2 >= 1.3 x PG x1, informational where the cores ran
   out (>= 90% busy): then the CPU a command says how it scales with more cores. `--quick`: PG
   x1 and x2 only, one round.

Run: `.venv/bin/python -m bench.host [--quick] [--duration S] [--concurrency N] [--no-temporal]
[--no-replicas] [--rounds N] [--json] [--keep]`. Exits 0 unless a command failed or a path was
not taken; no rate or ratio is asserted (the machine is small and noisy). The default run takes
about four and a half minutes on two cores.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import logging
import math
import os
import sqlite3
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
from eventsourcing.persistence import StoredEvent
from eventsourcing.sqlite import SQLiteDatastore, SQLiteProcessRecorder

from bench.harness import (
    REPO,
    Proc,
    TokenBucket,
    Verdicts,
    answers,
    bench_main,
    busy_cpu_seconds,
    commit,
    cpu_seconds,
    parser,
    percentile,
    ratio,
    scratch,
    sized,
    summary,
    tree_cpu_seconds,
    verdict,
)
from bench.harness.postgres import Postgres
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
from wow_temporal.model import AggregateRef, Commit
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
QUICK = {"duration": 1.0, "lag_seconds": 1.5, "floor_seconds": 0.5, "lag_sample": 30, "rounds": 1}
FULL = {"duration": 10.0, "floor_seconds": 4.0, "lag_sample": 200, "rounds": 2}
"""Seconds per HTTP measure and per floor, of each lag load (full: 1.5x the duration), the
timers whose start time is read back, and the rounds of part 3."""
QUICK_INGEST = 200  # `TimerClient.apply_many` alone, --quick: one batch of these


def bench_apps() -> list[App]:
    """`workers.eshop.apps()` without the inventory saga, and an hour's payment grace."""
    return [
        App("eshop-order", aggregates=[Order], services=[PaymentPolicy(GRACE)]),
        App("eshop-inventory", aggregates=[Stock]),
    ]


class NullTimers:
    """Timers that take every commit at once (part 1: the host's own figures)."""

    async def apply_many(
        self, commits: Sequence[Commit], *, later: Horizon | None = None, **_: object
    ) -> list[list[Any]]:
        return [[] for _ in commits]


STARTED = time.perf_counter()


def progress(text: str) -> None:
    """A line of progress, on stderr (stdout is the report's)."""
    print(f"  [{time.perf_counter() - STARTED:5.1f}s] {text}", file=sys.stderr, flush=True)


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
    CPU a request instead of 1.0-1.2 ms here, and capped the load near 100-250/s). Given
    several URLs (replicas), the connections go to them in turn, as a TCP balancer would send
    them: each command to whichever replica its free connection holds."""

    def __init__(self, url: str | Sequence[str], concurrency: int) -> None:
        urls = [url] if isinstance(url, str) else list(url)
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        self.clients = [
            httpx.AsyncClient(base_url=urls[i % len(urls)], timeout=60, limits=limits)
            for i in range(concurrency)
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
        return str(response.headers.get(ERROR_CODE_HEADER, f"HTTP {response.status_code}"))

    async def aclose(self) -> None:
        await asyncio.gather(*(client.aclose() for client in self.clients))


# -- measuring --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """A load: how many commands in how long, latency p50/p99 (ms), the refusals by error code,
    and the server process's CPU over it (ms a command, share of a core; NaN: not measured)."""

    n: int
    seconds: float
    rate: float
    p50_ms: float
    p99_ms: float
    errors: dict[str, int]
    cpu_ms: float
    cpu_share: float
    exhausted: bool
    """The load ran out of commands before its time (orders to confirm)."""

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())


class Tally:
    """A load as it goes: each command's latency and refusal, the server's CPU from its start."""

    def __init__(self, pid: int | None = None) -> None:
        self.latencies: list[float] = []
        self.errors: Counter[str] = Counter()
        self.pid = pid
        self.cpu = cpu_seconds(pid) if pid is not None else math.nan
        self.start = time.perf_counter()

    async def send(self, send: Send, cmd: Cmd) -> None:
        sent = time.perf_counter()
        code = await send(cmd)
        self.latencies.append((time.perf_counter() - sent) * 1000)
        if code != OK:
            self.errors[code] += 1

    def run(self, exhausted: bool = False) -> Run:
        seconds = time.perf_counter() - self.start
        n = len(self.latencies)
        cpu_s = cpu_seconds(self.pid) - self.cpu if self.pid is not None else math.nan
        return Run(
            n=n,
            seconds=seconds,
            rate=n / seconds if seconds else 0.0,
            p50_ms=percentile(self.latencies, 0.5),
            p99_ms=percentile(self.latencies, 0.99),
            errors=dict(self.errors),
            cpu_ms=1000 * cpu_s / n if n else math.nan,
            cpu_share=cpu_s / seconds if seconds else math.nan,
            exhausted=exhausted,
        )


async def closed_loop(
    send: Send,
    make: Make,
    concurrency: int,
    *,
    seconds: float | None = None,
    count: int | None = None,
    pid: int | None = None,
) -> Run:
    """`concurrency` senders, each sending its next command once answered, for `seconds` or
    until `count` commands were sent; the CPU of process `pid` over it."""
    tally = Tally(pid)
    exhausted = False
    next_index = 0
    stop_at = tally.start + seconds if seconds is not None else math.inf

    async def sender() -> None:
        nonlocal next_index, exhausted
        while time.perf_counter() < stop_at:
            if count is not None and next_index >= count:
                exhausted = seconds is not None
                return
            next_index += 1
            await tally.send(send, make(next_index - 1))

    await asyncio.gather(*(sender() for _ in range(concurrency)))
    return tally.run(exhausted)


async def paced(
    send: Send, make: Make, rate: float, seconds: float, count: int, pid: int | None
) -> Run:
    """Commands at `rate` a second (a token bucket) for `seconds`, at most `count`."""
    tally = Tally(pid)
    bucket = TokenBucket(rate, max(1.0, rate / 50))
    tasks: list[asyncio.Task[None]] = []
    exhausted = False
    while time.perf_counter() < tally.start + seconds:
        if len(tasks) >= count:
            exhausted = True
            break
        await bucket.take()
        tasks.append(asyncio.create_task(tally.send(send, make(len(tasks)))))
    await asyncio.gather(*tasks)
    return tally.run(exhausted)


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
        tally = Tally()
        while time.perf_counter() - tally.start < seconds:
            sent = time.perf_counter()
            conn.execute("BEGIN")
            conn.execute("INSERT INTO rows (data) VALUES (?)", (payload,))
            conn.execute("COMMIT")
            tally.latencies.append((time.perf_counter() - sent) * 1000)
        return tally.run()
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
        tally = Tally()
        i = 0
        while time.perf_counter() - tally.start < seconds:
            stream = f"{base}-{i % PRODUCTS}"
            request = f"request:{stream}:{encode_part(f'r{i}')}"
            sent = time.perf_counter()
            recorder.insert_events(
                [
                    StoredEvent(stream, i // PRODUCTS + 1, COMMIT_TOPIC, shape.state),
                    StoredEvent(request, 1, "wow.RequestId", shape.request_state),
                ]
            )
            tally.latencies.append((time.perf_counter() - sent) * 1000)
            i += 1
        return tally.run()
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
    """A measured command: its commit's size, its floors, in process and over HTTP."""

    name: str
    events: str
    commit_bytes: int = 0
    sqlite: Run | None = None
    recorder: Run | None = None
    pipeline: Run | None = None
    http: Run | None = None

    def ratio(self, floor: Run | None) -> float:
        return math.nan if self.http is None or floor is None else ratio(self.http.rate, floor.rate)


async def in_process(
    tmp: Path, seconds: float, concurrency: int
) -> tuple[Kind, Kind, Run, list[Shape]]:
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
    shapes = []
    for kind, made in ((receive_kind, stock), (confirm_kind, order)):
        state = made.model_dump_json().encode()
        request = json.dumps({"commitId": made.id, "version": made.version}).encode()
        shapes.append(Shape(made, state, request))
        kind.commit_bytes = len(state)
    return receive_kind, confirm_kind, created, shapes


async def floors(tmp: Path, kinds: Sequence[Kind], shapes: Sequence[Shape], seconds: float) -> int:
    """sqlite3 and the recorder for each kind's shape, on fresh files; the store's
    `synchronous` (which the sqlite3 rows use too)."""
    synchronous = await asyncio.to_thread(synchronous_of, tmp / "pipeline.db")
    for index, (kind, shape) in enumerate(zip(kinds, shapes, strict=True)):
        kind.sqlite = await asyncio.to_thread(
            sqlite_rows, tmp / f"rows-{index}.db", shape.size, seconds, synchronous
        )
        kind.recorder = await asyncio.to_thread(
            recorder_commits, tmp / f"recorder-{index}.db", shape, seconds
        )
    return synchronous


# -- the host (and the HTTP floor) in a process of their own ----------------------------------


def served(
    name: str, argv: Sequence[str], log: Path, env: dict[str, str] | None = None
) -> tuple[Proc, str]:
    """A server in its own process on a free port (`--port` appended), ready once it answers
    `GET /health`; and its URL."""
    port = free_port("127.0.0.1")
    url = f"http://127.0.0.1:{port}"
    argv = [sys.executable, *argv, "--port", str(port)]
    return Proc(name, argv, log, answers(f"{url}/health"), env=env, within=60), url


def host_argv(db: Path, *temporal: str) -> list[str]:
    """This bench serving the host (`serve_host`) on `db`, handing to `temporal` if given."""
    return ["-m", "bench.host", "--serve-host", "--db", str(db), *temporal]


FLOOR_ARGV = ["-m", "uvicorn", "bench.host:floor_app", "--factory", "--host", "127.0.0.1"]
FLOOR_ARGV += ["--log-level", "warning", "--lifespan", "off"]


def floor_app() -> Callable[..., Awaitable[None]]:
    """A raw ASGI app answering every request with a Wow `CommandResult` of `Ok`: the least a
    server can do (the fake Wow host would record and decide each)."""
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


class LagProbe:
    """`Relay.on_handed`: when each commit was handed over, and in which batch."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, int, float, int]] = []
        self.batches = 0

    def __call__(self, commits: list[Commit]) -> None:
        now = time.time() * 1000
        self.batches += 1
        for handed in commits:
            self.rows.append((handed.aggregate_id, handed.create_time, now, self.batches))


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
    tmp: Path, receive_kind: Kind, confirm_kind: Kind, seconds: float, concurrency: int
) -> tuple[Run, Run]:
    """The HTTP floor, then the host over HTTP: ReceiveStock, CreateOrder, ConfirmOrderStock."""
    floor, floor_url = served("the HTTP floor", FLOOR_ARGV, tmp / "floor.log")
    host, host_url = served("the host", host_argv(tmp / "host.db"), tmp / "host.log")
    try:
        await asyncio.gather(floor.start(), host.start())  # both idle until measured
        sender = HttpSender(floor_url, concurrency)
        try:
            warm = receive("f", "warm")
            await closed_loop(sender, warm, concurrency, seconds=min(1.0, seconds / 2))
            floor_run = await closed_loop(
                sender, receive("f", "m"), concurrency, seconds=seconds, pid=floor.pid
            )
        finally:
            await sender.aclose()
            await floor.stop(grace=20)
        progress(f"HTTP floor (raw ASGI Ok)     {floor_run.rate:6.0f}/s")
        sender = HttpSender(host_url, concurrency)
        try:
            await closed_loop(sender, receive("h", "warm"), concurrency, count=PRODUCTS)
            receive_kind.http = await closed_loop(
                sender, receive("h", "m"), concurrency, seconds=seconds, pid=host.pid
            )
            progress(f"host ReceiveStock            {receive_kind.http.rate:6.0f}/s")
            n = math.ceil(receive_kind.http.rate * seconds * 1.15) + concurrency
            created = await closed_loop(sender, create("h"), concurrency, count=n, pid=host.pid)
            progress(f"host CreateOrder             {created.rate:6.0f}/s ({n} orders)")
            confirm_kind.http = await closed_loop(
                sender, confirm("h"), concurrency, seconds=seconds, count=n, pid=host.pid
            )
            progress(f"host ConfirmOrderStock       {confirm_kind.http.rate:6.0f}/s")
        finally:
            await sender.aclose()
    finally:
        await asyncio.gather(floor.stop(grace=20), host.stop(grace=20))
    return floor_run, created


# -- part 2: the relay's lag ------------------------------------------------------------------


@dataclass(frozen=True)
class Lag:
    """One steady load of confirmations (`sent`, at `rate` for `seconds`) and what the relay
    made of it."""

    label: str
    rate: float
    seconds: float
    sent: Run
    lag_ms: dict[str, float]
    """commit createTime -> `apply_many` returned (`Relay.on_handed`): n (handed), p50, p99, max."""
    thirds_p50_ms: tuple[float, float]
    """The lag's p50 over the first and the last third of the commits (growing: not keeping up)."""
    batches: int
    relay_rate: float
    """Commits handed over a second, from the first handed to the last."""
    drain_s: float
    timer_start_ms: dict[str, float]
    """commit createTime -> the timer workflow's start time, for a sample: n (read), p50, p99."""
    server_cpu_share: float
    """The dev server's CPU over the load, as a share of one core."""

    @property
    def behind(self) -> bool:
        """The relay did not keep up: it handed over slower than sent, or its lag grew."""
        first, last = self.thirds_p50_ms
        return self.relay_rate < 0.95 * self.sent.rate or last > 2 * first + 50


class LagRig:
    """A fresh host handing to a real `TimerClient` on a fresh dev server."""

    def __init__(self, tmp: Path, concurrency: int, sample: int) -> None:
        self.concurrency = concurrency
        self.sample = sample
        self.server = EmbeddedTemporal(tmp / "temporal", headless=True, port=free_port())
        temporal = ("--temporal", self.server.address, "--namespace", self.server.namespace)
        argv = host_argv(tmp / "lag.db", *temporal)
        self.host, url = served("the host", argv, tmp / "lag-host.log")
        self.http = httpx.AsyncClient(base_url=url, timeout=30)
        self.sender = HttpSender(url, 4 * concurrency)
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
        # Warm up: the relay connects at its first schedule; Temporal's first starts.
        warm = 2 * self.concurrency
        await closed_loop(self.sender, create("w"), self.concurrency, count=warm)
        await closed_loop(self.sender, confirm("w"), self.concurrency, count=warm)
        await self.until_handed(warm, 60)
        return self

    async def __aexit__(self, *_: object) -> None:
        try:
            await asyncio.gather(self.sender.aclose(), self.http.aclose())
            await self.host.stop(grace=20)
        finally:
            await self.server.stop()

    async def handed(self, rows: bool = False) -> dict[str, Any]:
        answer = await self.http.get("/_bench/handed", params={"rows": rows})
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
        n = math.ceil(rate * seconds * 1.05) + 10
        await closed_loop(self.sender, create(tag), self.concurrency, count=n)
        before = (await self.handed())["n"]
        assert self.server.pid is not None
        server_cpu = cpu_seconds(self.server.pid)
        sent = await paced(self.sender, confirm(tag), rate, seconds, n, self.host.pid)
        server_cpu = cpu_seconds(self.server.pid) - server_cpu
        drain = await self.until_handed(before + sent.n, 60 + sent.n / 50)
        rows = [r for r in (await self.handed(rows=True))["rows"] if r[0].startswith(f"{tag}-")]
        rows.sort(key=lambda r: int(r[0].rsplit("o", 1)[1]))
        lags = [r[2] - r[1] for r in rows]
        span_s = (max(r[2] for r in rows) - min(r[2] for r in rows)) / 1000 if rows else 0.0
        k = len(lags) // 3
        thirds = [percentile(lags[i * k : (i + 1) * k] if k else lags, 0.5) for i in (0, 2)]
        lag = Lag(
            label,
            rate,
            seconds,
            sent,
            summary(lags),
            (thirds[0], thirds[1]),
            len({r[3] for r in rows}),
            (len(rows) - 1) / span_s if span_s > 0 else math.nan,
            drain,
            summary(await self.starts(rows)),
            server_cpu / sent.seconds if sent.seconds else math.nan,
        )
        progress(
            f"relay lag at {rate:.0f}/s: p50 {lag.lag_ms['p50']:.1f} ms  "
            f"p99 {lag.lag_ms['p99']:.1f} ms, handed over at {lag.relay_rate:.0f}/s"
        )
        return lag

    async def starts(self, rows: list[list[Any]]) -> list[float]:
        """commit createTime -> the timer workflow's start time (read by id), for a sample."""
        limit = asyncio.Semaphore(20)

        async def start_lag(row: list[Any]) -> float:
            workflow_id = timer_workflow_id(ORDER.ref(TENANT, row[0]), PAYMENT_GRACE_PERIOD)
            async with limit:
                described = await self.client.get_workflow_handle(workflow_id).describe()
            return described.start_time.timestamp() * 1000 - float(row[1])

        step = max(1, len(rows) // self.sample)
        return list(await asyncio.gather(*(start_lag(r) for r in rows[::step][: self.sample])))

    async def ingest(self, shape: Commit, n: int, batch: int) -> float:
        """`TimerClient.apply_many` alone, from this process, on commits like the host's in
        batches as the relay's: commits a second (the relay's floor)."""
        events = [{"name": e.name, **e.body} for e in shape.body]
        commits = [
            Commit.model_validate(
                commit(f"ingest-o{i}", *events, version=shape.version, tenant_id=TENANT)
            )
            for i in range(n)
        ]
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
    quick: bool,
) -> tuple[list[Lag], float, float, int]:
    """The lag at `rate`; if the relay fell behind, again at half the rate it handed over at.
    Also the dev server's start-up time, and `TimerClient.apply_many`'s own rate over two of
    the relay's batches (one small one, `--quick`) and the batch it took."""
    async with LagRig(tmp, concurrency, sample) as rig:
        lags = [await rig.load("l1", "half the ConfirmOrderStock rate", rate, seconds)]
        first = lags[0]
        if first.behind and first.relay_rate > 0:
            again = first.relay_rate / 2
            lags.append(
                await rig.load("l2", "half the rate the relay handed over at", again, seconds)
            )
        if quick:
            n = batch = QUICK_INGEST
        else:
            n = max(2 * Relay.batch, 100 * round(first.relay_rate * min(seconds, 5) / 100))
            batch = Relay.batch
        ingest = await rig.ingest(shape, n, batch)
        progress(f"TimerClient.apply_many alone {ingest:.0f} commits/s ({n})")
        return lags, rig.startup_s, ingest, batch


# -- part 3: replicas on PostgreSQL -----------------------------------------------------------

REPLICAS = (1, 2, 3)
"""The PostgreSQL configurations: this many replicas of the host on one database (`--quick`:
`QUICK_REPLICAS`, and no SQLite host beside them)."""
QUICK_REPLICAS = (1, 2)
SCALE_TARGET = 1.3
"""Two replicas' commands a second over one's."""
CORES_OUT = 0.9
"""The share of the machine's cores used over a load from which they ran out."""
CORES = len(os.sched_getaffinity(0))
PG_COUNTERS = """
SELECT xact_commit, xact_rollback,
    (SELECT coalesce(sum(fsyncs), 0) FROM pg_stat_io WHERE object = 'wal')
FROM pg_stat_database WHERE datname = current_database()
"""
"""The database's transactions committed and rolled back; the server's WAL fsyncs."""
PG_STATES = """
SELECT (SELECT count(*) FROM pg_locks l JOIN pg_database d ON l.database = d.oid
        WHERE d.datname = current_database() AND l.locktype = 'relation'
            AND l.mode = 'ExclusiveLock' AND l.granted),
    count(*) FILTER (WHERE wait_event_type = 'Lock'),
    count(*) FILTER (WHERE wait_event ILIKE 'wal%'),
    count(*) FILTER (WHERE state = 'idle in transaction'),
    count(*) FILTER (WHERE state = 'active' AND wait_event_type IS DISTINCT FROM 'Lock'
        AND wait_event NOT ILIKE 'wal%')
FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
"""
STATES = ("lock_held", "lock", "wal", "idle_in_tx", "active")
"""The database's backends, as `PG_STATES` counts them: holding the events table's EXCLUSIVE
lock (every commit takes it to its end: commits are one at a time, across replicas), waiting
for a lock (a commit waits for that one), for the WAL (its write, fsync, or their lock), in a
transaction waiting for its host's next statement, and running a statement."""
SAMPLE_S = 0.05


@dataclass(frozen=True)
class Replicas:
    """One configuration under the ReceiveStock load: its commands, and the CPU each side used
    a command over it (the hosts summed; PostgreSQL's postmaster and backends; this process,
    the client); PostgreSQL's transactions and WAL fsyncs a command over the whole of it (the
    start and the warm-up included; a conflict's refused write is among those rolled back)."""

    key: str
    label: str
    replicas: int
    run: Run
    host_ms: float
    pg_ms: float
    client_ms: float
    committed: float
    rolled_back: float
    wal_fsyncs: float
    machine_cores: float
    """The cores the whole machine kept busy over the load (any other work on it too)."""
    backends: dict[str, float]
    """How many of the database's backends were in each of `STATES`, on average over the load."""
    rounds: list[float] = dataclasses.field(default_factory=list)
    """Every round's commands a second (this is the best)."""

    @property
    def cpu_ms(self) -> float:
        return self.host_ms + (0.0 if math.isnan(self.pg_ms) else self.pg_ms) + self.client_ms

    @property
    def cores_used(self) -> float:
        """The cores the three sides kept busy over the load."""
        return self.cpu_ms * self.run.rate / 1000


def replica_env(name: str) -> dict[str, str]:
    """`wow-temporal host`'s environment: none of this one's `WOW_*`/`TEMPORAL_*`, Temporal at
    a port nothing serves (ReceiveStock sets no schedule: the relay never connects), `name`
    among the replicas, the repository importable (`--app bench.host:bench_apps`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WOW_", "TEMPORAL_"))}
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    address = f"127.0.0.1:{free_port('127.0.0.1')}"
    return {**env, "TEMPORAL_ADDRESS": address, "WOW_HOST_REPLICA": name, "PYTHONPATH": path}


def replica_argv(db: str) -> list[str]:
    return ["-m", "wow_temporal.cli", "host", "--app", "bench.host:bench_apps", "--db", db]


def databases(pg: Postgres, n: int) -> list[str]:
    """`n` fresh databases, all made before any load (CREATE DATABASE writes and syncs the
    template's files), then a checkpoint."""
    with psycopg.connect(pg.uri(), autocommit=True) as conn:
        for i in range(n):
            conn.execute(f'CREATE DATABASE "replicas_{i}"')
        conn.execute("CHECKPOINT")
    return [pg.uri(f"replicas_{i}") for i in range(n)]


async def pg_counters(uri: str | None) -> tuple[float, float, float]:
    """`PG_COUNTERS` (NaN without PostgreSQL), once the backends of the hosts just stopped
    have reported theirs (a backend reports its statistics when it ends)."""
    if uri is None:
        return math.nan, math.nan, math.nan
    await asyncio.sleep(0.5)
    async with await psycopg.AsyncConnection.connect(uri, autocommit=True) as conn:
        row = await (await conn.execute(PG_COUNTERS)).fetchone()
    assert row is not None
    return float(row[0]), float(row[1]), float(row[2])


async def pg_states(uri: str, into: list[tuple[int, ...]]) -> None:
    """Samples `PG_STATES` every `SAMPLE_S` seconds into `into`, until cancelled."""
    async with await psycopg.AsyncConnection.connect(uri, autocommit=True) as conn:
        while True:
            row = await (await conn.execute(PG_STATES)).fetchone()
            into.append(tuple(row or ()))
            await asyncio.sleep(SAMPLE_S)


def usage(pids: Sequence[int | None], postmaster: int | None) -> list[float]:
    """CPU seconds so far: the hosts' (summed), PostgreSQL's processes', this process's."""
    pg = tree_cpu_seconds(postmaster) if postmaster is not None else math.nan
    return [sum(cpu_seconds(pid) for pid in pids if pid is not None), pg, cpu_seconds()]


@contextlib.asynccontextmanager
async def sampled(uri: str | None) -> AsyncIterator[dict[str, float]]:
    """How many of the database's backends were in each of `STATES` on average over the block
    (filled in on leaving; left empty without PostgreSQL)."""
    averages: dict[str, float] = {}
    samples: list[tuple[int, ...]] = []
    task = asyncio.create_task(pg_states(uri, samples)) if uri is not None else None
    try:
        yield averages
    finally:
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if samples:
            n = len(samples)
            averages |= {state: sum(s[i] for s in samples) / n for i, state in enumerate(STATES)}


async def loaded(
    urls: Sequence[str],
    key: str,
    load: tuple[float, int],
    pids: list[int | None],
    pg: Postgres | None,
    uri: str | None,
) -> tuple[Run, list[float], dict[str, float]]:
    """ReceiveStock spread over `urls` (`load`: seconds, commands in flight) after each
    product's first command; the CPU a command `usage` counts and the machine's busy cores,
    the backends' states."""
    seconds, concurrency = load
    postmaster = pg.pid if pg is not None else None
    sender = HttpSender(urls, concurrency)
    try:
        await closed_loop(sender, receive(key, "warm"), concurrency, count=PRODUCTS)
        async with sampled(uri) as backends:
            start, busy = usage(pids, postmaster), busy_cpu_seconds()
            run = await closed_loop(sender, receive(key, "m"), concurrency, seconds=seconds)
            end, busy = usage(pids, postmaster), busy_cpu_seconds() - busy
    finally:
        await sender.aclose()
    used = [ratio((b - a) * 1000, run.n) for a, b in zip(start, end, strict=True)]
    return run, [*used, ratio(busy, run.seconds)], backends


async def configuration(
    tmp: Path,
    key: str,
    label: str,
    dbs: Sequence[str],
    pg: Postgres | None,
    load: tuple[float, int],
) -> Replicas:
    """A `wow-temporal host` on each of `dbs` (a replica each) under the load."""
    names = [f"{key}-{i + 1}" for i in range(len(dbs))]
    hosts = [
        served(name, replica_argv(db), tmp / f"{name}.log", replica_env(name))
        for name, db in zip(names, dbs, strict=True)
    ]
    uri = dbs[0] if pg is not None else None
    before = await pg_counters(uri)
    try:
        await asyncio.gather(*(proc.start() for proc, _ in hosts))
        pids = [proc.pid for proc, _ in hosts]
        run, used, backends = await loaded([url for _, url in hosts], key, load, pids, pg, uri)
    finally:
        await asyncio.gather(*(proc.stop(grace=20) for proc, _ in hosts))
    after = await pg_counters(uri)
    counts = [(b - a) / (run.n + PRODUCTS) for a, b in zip(before, after, strict=True)]
    cpu = sum(x for x in used[:3] if math.isfinite(x))
    progress(f"{label:17} {run.rate:6.0f}/s  CPU {cpu:.2f} ms/command")
    host_ms, pg_ms, client_ms, machine_cores = used
    committed, rolled_back, wal_fsyncs = counts
    return Replicas(
        key=key,
        label=label,
        replicas=len(dbs),
        run=run,
        host_ms=host_ms,
        pg_ms=pg_ms,
        client_ms=client_ms,
        committed=committed,
        rolled_back=rolled_back,
        wal_fsyncs=wal_fsyncs,
        machine_cores=machine_cores,
        backends=backends,
    )


async def replicas(
    tmp: Path, seconds: float, concurrency: int, quick: bool, rounds: int
) -> list[Replicas]:
    """The SQLite host, then `REPLICAS` replicas on a PostgreSQL database each (fsync on), in
    `rounds` rounds (every other one in reverse order), a fresh store each; the best round of
    each configuration, with every round's rate."""
    load, counts = (seconds, concurrency), QUICK_REPLICAS if quick else REPLICAS
    pg = Postgres(fsync=True)
    await asyncio.to_thread(pg.start)
    try:
        uris = iter(await asyncio.to_thread(databases, pg, len(counts) * rounds))
        plan = [] if quick else [("sqlite", "SQLite x1", 1)]
        plan += [(f"pg{n}", f"PostgreSQL x{n}", n) for n in counts]
        best: dict[str, Replicas] = {}
        rates: dict[str, list[float]] = {key: [] for key, _, _ in plan}
        for round_ in range(rounds):
            for key, label, n in plan if round_ % 2 == 0 else plan[::-1]:
                sqlite = key == "sqlite"
                dbs = [str(tmp / f"replicas-{round_}.db")] if sqlite else [next(uris)] * n
                c = await configuration(tmp, key, label, dbs, None if sqlite else pg, load)
                rates[key].append(c.run.rate)
                if key not in best or c.run.rate > best[key].run.rate:
                    best[key] = c
    finally:
        await asyncio.to_thread(pg.stop)
    return [dataclasses.replace(best[key], rounds=rates[key]) for key, _, _ in plan]


def scaling(configs: Sequence[Replicas]) -> tuple[float, str]:
    """PG x2 over PG x1, and how it reads: PASS, MISS, or MISS where the cores ran out (then
    informational: the profile says how it scales with more cores)."""
    by = {c.replicas: c for c in configs if c.key.startswith("pg")}
    two = ratio(by[2].run.rate, by[1].run.rate)
    if two >= SCALE_TARGET:
        return two, verdict(True)
    if max(by[2].cores_used, by[2].machine_cores) >= CORES_OUT * CORES:
        return two, f"{verdict(False)} (informational: the {CORES} cores ran out)"
    return two, verdict(False)


# -- the report -------------------------------------------------------------------------------


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
    timers_ingest_batch: int | None
    elapsed_s: float
    client_cpu_s: float
    """This process's (the client's) CPU seconds."""
    load: tuple[float, float]
    """The machine's 1-minute load average at the start and the end."""
    replicas: list[Replicas]
    """Part 3 (empty with --no-replicas)."""
    scaling: tuple[float, str] | None
    """PG x2 over PG x1, and its verdict."""


def fmt_run(run: Run | None) -> str:
    if run is None:
        return "      -"
    return f"{run.rate:6.0f}/s  p50 {run.p50_ms:6.2f} ms  p99 {run.p99_ms:6.2f} ms"


ROW = 44  # the width of a row's label


def host_row(run: Run) -> str:
    return (
        f"    {'host over HTTP':{ROW}} {fmt_run(run)}  errors {run.error_count}  "
        f"host CPU {run.cpu_ms:.2f} ms/command ({100 * run.cpu_share:.0f}% of a core)"
    )


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
        assert kind.http is not None
        print(f"  {kind.name} ({kind.events}, commit {kind.commit_bytes} B):")
        rows = (
            (f"sqlite3, one {kind.commit_bytes} B row per transaction", kind.sqlite),
            ("eventsourcing recorder, commit + request id", kind.recorder),
            ("host pipeline in process, no HTTP", kind.pipeline),
        )
        for label, run in rows:
            print(f"    {label:{ROW}} {fmt_run(run)}")
        print(host_row(kind.http))
        print(
            f"    ratio http/sqlite3 {kind.ratio(kind.sqlite):.3f}  "
            f"http/recorder {kind.ratio(kind.recorder):.3f}  "
            f"http/in-process {kind.ratio(kind.pipeline):.3f}"
            + ("  (ran out of orders)" if kind.http.exhausted else "")
        )
    f = r.floor
    print("  CreateOrder (1 event, a new aggregate each):")
    print(f"    {'host pipeline in process, no HTTP':{ROW}} {fmt_run(r.created_in_process)}")
    print(host_row(r.created))
    print(
        f"  HTTP floor, a raw ASGI app answering Ok on uvicorn, same client:\n"
        f"    {'raw ASGI over HTTP':{ROW}} {fmt_run(f)}  server CPU {f.cpu_ms:.2f} ms/request "
        f"({100 * f.cpu_share:.0f}% of a core)"
    )
    print_lags(r)
    print_replicas(r)
    print(f"bench process (the client) CPU {r.client_cpu_s:.1f}s over {r.elapsed_s:.0f}s")


def print_lags(r: Report) -> None:
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
        ms, starts, handed = lag.lag_ms, lag.timer_start_ms, int(lag.lag_ms["n"])
        print(
            f"    commit -> apply_many returned (Relay.on_handed) p50 {ms['p50']:.1f} ms  "
            f"p99 {ms['p99']:.1f} ms  max {ms['max']:.1f} ms  handed {handed}/{s.n}"
        )
        print(
            f"    p50 over the first third {lag.thirds_p50_ms[0]:.1f} ms, last third "
            f"{lag.thirds_p50_ms[1]:.1f} ms (a p50 that grows means not keeping up)"
            + ("  BEHIND" if lag.behind else "")
        )
        print(
            f"    relay handed over at {lag.relay_rate:.0f}/s in {lag.batches} batches "
            f"({handed / max(lag.batches, 1):.1f} commits each); drained "
            f"{lag.drain_s:.2f}s after the last"
        )
        print(
            f"    commit -> timer workflow start time ({starts['n']:.0f} read by id) "
            f"p50 {starts['p50']:.1f} ms  p99 {starts['p99']:.1f} ms"
        )
        print(
            f"    confirms sent at {s.rate:.0f}/s  p50 {s.p50_ms:.2f} ms  p99 {s.p99_ms:.2f} ms  "
            f"errors {s.error_count}  host CPU {s.cpu_ms:.2f} ms/command "
            f"({100 * s.cpu_share:.0f}% of a core, the relay's Temporal client included); "
            f"dev server CPU {100 * lag.server_cpu_share:.0f}% of a core"
        )
    print(
        f"  TimerClient.apply_many alone (this process, batches of {r.timers_ingest_batch}, "
        f"same server): {r.timers_ingest or 0:.0f} commits/s"
    )


def print_replicas(r: Report) -> None:
    if not r.replicas or r.scaling is None:
        print("3. replicas: skipped (--no-replicas)")
        return
    print(
        f"3. replicas: ReceiveStock over {PRODUCTS} products, {r.concurrency} in flight spread "
        f"over the replicas (each connection to one in turn), {r.duration:g}s each, the best "
        f"of {len(r.replicas[0].rounds)} rounds; "
        f"wow-temporal host processes; PostgreSQL fsync on; {CORES} cores:"
    )
    print(
        f"    {'':17} {'cmd/s':>6} {'/PG x1':>6} {'/SQLite':>7} {'p50 ms':>7} {'p99 ms':>7}"
        f"  CPU ms/command: {'hosts':>5} {'PG':>5} {'client':>6} {'total':>6}"
        "  cores used: these, the machine"
    )
    by = {c.key: c.run.rate for c in r.replicas}
    one, sqlite = by["pg1"], by.get("sqlite", math.nan)
    for c in r.replicas:
        run = c.run
        print(
            f"    {c.label:17} {run.rate:6.0f} {ratio(run.rate, one):6.2f} "
            f"{ratio(run.rate, sqlite):7.2f} {run.p50_ms:7.2f} {run.p99_ms:7.2f}"
            f"  {'':15} {c.host_ms:5.2f} {c.pg_ms:5.2f} {c.client_ms:6.2f} {c.cpu_ms:6.2f}"
            f"  {c.cores_used:4.2f}, {c.machine_cores:4.2f} of {CORES}"
            f"  rounds {', '.join(f'{rate:.0f}' for rate in c.rounds)}/s"
        )
    print(
        f"  PostgreSQL a command (transactions, WAL fsyncs; the events table's commit lock held, "
        f"ms a command) and its backends on average over the load (sampled every "
        f"{1000 * SAMPLE_S:.0f} ms): holding the commit lock | waiting for a lock | for the WAL | "
        "in a transaction, waiting for their host | running"
    )
    for c in r.replicas:
        if c.key == "sqlite":
            continue
        b = [c.backends.get(state, math.nan) for state in STATES]
        held = ratio(1000 * b[0], c.run.rate)
        print(
            f"    {c.label:17} {c.committed + c.rolled_back:5.2f} tx  {c.wal_fsyncs:5.2f} fsyncs "
            f"{held:5.2f} ms held   {' | '.join(f'{x:4.2f}' for x in b)}"
        )
    two, said = r.scaling
    print(f"  PostgreSQL x2 / x1 = {two:.2f} (target >= {SCALE_TARGET}) {said}")


def verdicts(r: Report) -> Verdicts:
    """Nothing refused, every commit handed to the timers; every rate, the servers' CPU, the
    relay's lag and the timers read above 0; the host over HTTP against each floor; the HTTP
    latencies, the relay's and the timers' as figures."""
    http = {"create_order_http": r.created, "http_floor": r.floor}
    positive = {"create_order_in_process_rate": r.created_in_process.rate}
    ratios: dict[str, float] = {}
    figures: dict[str, float] = {}
    for kind in r.kinds:
        key = "receive_stock" if kind.name == "ReceiveStock" else "confirm_order_stock"
        assert kind.http is not None
        http[f"{key}_http"] = kind.http
        sides = {"sqlite": kind.sqlite, "recorder": kind.recorder, "in_process": kind.pipeline}
        for side, run in sides.items():
            positive[f"{key}_{side}_rate"] = run.rate if run else math.nan
            ratios[f"{key}_http_per_{side}"] = kind.ratio(run)
    for key, run in http.items():
        positive |= {f"{key}_rate": run.rate, f"{key}_cpu_ms": run.cpu_ms}
        figures |= {f"{key}_p50_ms": run.p50_ms, f"{key}_p99_ms": run.p99_ms}
    sent = [lag.sent for lag in r.lags]
    if r.lags:
        lags, starts = [lag.lag_ms for lag in r.lags], [lag.timer_start_ms for lag in r.lags]
        positive |= {
            "relay_sent_rate": min(s.rate for s in sent),
            "relay_handed": min(lag["n"] for lag in lags),
            "relay_lag_p50_ms": min(lag["p50"] for lag in lags),
            "timer_starts_read": min(start["n"] for start in starts),
            "timers_ingest": r.timers_ingest or math.nan,
        }
        figures |= {f"relay_lag_{q}_ms": lags[0][q] for q in ("p99", "max")}
        figures |= {f"timer_start_{q}_ms": starts[0][q] for q in ("p50", "p99")}
    replicas = replica_verdicts(r.replicas)
    runs = [*http.values(), *sent, *(c.run for c in r.replicas)]
    return Verdicts(
        must_be_zero={
            "errors": sum(run.error_count for run in runs),
            "relay_unhanded": sum(lag.sent.n - int(lag.lag_ms["n"]) for lag in r.lags),
        },
        must_be_positive=positive | replicas.must_be_positive,
        ratios=ratios | replicas.ratios,
        figures=figures | replicas.figures,
    )


def replica_verdicts(configs: Sequence[Replicas]) -> Verdicts:
    """Part 3: each configuration's rate and CPU above 0 (PostgreSQL's too); its rate over
    PG x1's and the SQLite host's; its latencies, cores used and PostgreSQL's counts as figures."""
    if not configs:
        return Verdicts()
    by = {c.key: c for c in configs}
    sqlite, one = by.get("sqlite"), by["pg1"]
    positive: dict[str, float] = {}
    ratios: dict[str, float] = {}
    figures: dict[str, float] = {}
    for c in configs:
        key, run = f"replicas_{c.key}", c.run
        positive |= {f"{key}_rate": run.rate, f"{key}_host_cpu_ms": c.host_ms}
        figures |= {f"{key}_p50_ms": run.p50_ms, f"{key}_p99_ms": run.p99_ms}
        figures |= {f"{key}_cores_used": c.cores_used, f"{key}_machine_cores": c.machine_cores}
        if c is sqlite:
            continue
        positive[f"{key}_pg_cpu_ms"] = c.pg_ms
        if sqlite is not None:
            ratios[f"{key}_per_sqlite"] = ratio(run.rate, sqlite.run.rate)
        if c is not one:
            ratios[f"{key}_per_pg1"] = ratio(run.rate, one.run.rate)
        figures |= {f"{key}_tx_per_command": c.committed + c.rolled_back}
        figures |= {f"{key}_wal_fsyncs_per_command": c.wal_fsyncs}
        figures[f"{key}_commit_lock_held"] = c.backends.get("lock_held", math.nan)
    return Verdicts(must_be_positive=positive, ratios=ratios, figures=figures)


# -- main -------------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> Report:
    quick, duration = args.quick, args.duration
    floor_seconds = min(duration, args.floor_seconds)
    lag_seconds = 1.5 * duration if args.lag_seconds is None else args.lag_seconds
    concurrency = args.concurrency
    cpu, load = cpu_seconds(), os.getloadavg()[0]
    print(
        f"{concurrency} in flight, {duration:g}s per HTTP measure, {floor_seconds:g}s per "
        f"floor, lag for {lag_seconds:g}s{' (skipped)' if args.no_temporal else ''}",
        file=sys.stderr,
    )
    with scratch(args, "host") as tmp:
        receive_kind, confirm_kind, created_in_process, shapes = await in_process(
            tmp, floor_seconds, concurrency
        )
        kinds = [receive_kind, confirm_kind]
        for kind in kinds:
            assert kind.pipeline is not None
            progress(f"in process {kind.name:17} {kind.pipeline.rate:6.0f}/s")
        synchronous = await floors(tmp, kinds, shapes, floor_seconds)
        for kind in kinds:
            assert kind.sqlite is not None and kind.recorder is not None
            progress(
                f"floors {kind.name:21} sqlite3 {kind.sqlite.rate:6.0f}/s  "
                f"recorder {kind.recorder.rate:6.0f}/s"
            )
        floor, created = await over_http(tmp, receive_kind, confirm_kind, duration, concurrency)
        lags: list[Lag] = []
        startup = ingest = batch = None
        if not args.no_temporal:
            assert confirm_kind.http is not None
            rate, sample = confirm_kind.http.rate / 2, args.lag_sample
            lags, startup, ingest, batch = await relay_lag(
                tmp, rate, lag_seconds, concurrency, sample, shapes[1].commit, quick
            )
        configs = []
        if not args.no_replicas:
            configs = await replicas(tmp, duration, concurrency, quick, args.rounds)
    return Report(
        concurrency=concurrency,
        duration=duration,
        floor_seconds=floor_seconds,
        synchronous=SYNCHRONOUS.get(synchronous, str(synchronous)),
        kinds=kinds,
        created=created,
        created_in_process=created_in_process,
        floor=floor,
        lags=lags,
        temporal_startup_s=startup,
        timers_ingest=ingest,
        timers_ingest_batch=batch,
        elapsed_s=time.perf_counter() - STARTED,
        client_cpu_s=cpu_seconds() - cpu,
        load=(load, os.getloadavg()[0]),
        replicas=configs,
        scaling=scaling(configs) if configs else None,
    )


def main() -> int:
    p = parser(__doc__)
    p.add_argument("--duration", type=float, help="seconds per HTTP measure (10, quick 1)")
    p.add_argument("--lag-seconds", type=float, help="each lag load (1.5x --duration, quick 1.5)")
    p.add_argument("--concurrency", type=int, default=CONCURRENCY, help="commands in flight (32)")
    p.add_argument("--no-temporal", action="store_true", help="skip the relay lag (part 2)")
    p.add_argument("--no-replicas", action="store_true", help="skip the replicas (part 3)")
    p.add_argument("--rounds", type=int, help="rounds of part 3, the best kept (2, quick 1)")
    p.add_argument("--serve-host", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    p.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--temporal", help=argparse.SUPPRESS)
    p.add_argument("--namespace", default="default", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve_host:
        serve_host(args.port, args.db, args.temporal, args.namespace)
        return 0
    return bench_main(sized(args, QUICK, FULL), run, print_report, verdicts)


if __name__ == "__main__":
    raise SystemExit(main())
