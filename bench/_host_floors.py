"""`bench.host` part 1: the host's commands a second against its floors (bare SQLite rows, the
store's recorder, the pipeline in this process without HTTP, a raw ASGI app over HTTP)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from eventsourcing.persistence import StoredEvent
from eventsourcing.sqlite import SQLiteDatastore, SQLiteProcessRecorder

from bench._host_load import (
    FLOOR_ARGV,
    PRODUCTS,
    Cmd,
    HttpSender,
    NullTimers,
    Run,
    Tally,
    bench_apps,
    closed_loop,
    confirm,
    create,
    host_argv,
    order_ref,
    progress,
    receive,
    served,
)
from bench.harness import (
    ratio,
)
from wow_temporal.host.runtime import HostRuntime
from wow_temporal.host.store import COMMIT_TOPIC, stream_id
from wow_temporal.ids import encode_part
from wow_temporal.model import Commit

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
