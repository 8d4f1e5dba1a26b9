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
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

from eventsourcing.persistence import StoredEvent
from eventsourcing.sqlite import SQLiteDatastore, SQLiteProcessRecorder

from bench._host_load import (
    FLOOR_ARGV,
    PRODUCTS,
    HttpSender,
    NullTimers,
    Run,
    Send,
    Tally,
    bench_apps,
    closed_loop,
    commands,
    host_argv,
    progress,
    served,
)
from bench.harness import Verdicts, ratio
from workers.eshop.order import ConfirmOrderStock, CreateOrder
from workers.eshop.stock import ReceiveStock
from wow_temporal.host.runtime import HostRuntime
from wow_temporal.host.service import CommandMessage
from wow_temporal.host.store import COMMIT_TOPIC, stream_id
from wow_temporal.ids import encode_part
from wow_temporal.model import Commit

SYNCHRONOUS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
SIDES = {
    "sqlite": "sqlite3, one row of the commit's size a transaction",
    "recorder": "eventsourcing recorder, commit + request id",
    "in_process": "host pipeline in process, no HTTP",
    "http": "host over HTTP",
}
"""Where a command's rate is measured: its floors, then the host over HTTP."""
ROW = 50  # the width of a row's label


@dataclass
class Kind:
    """A measured command: its commit's size (0: not read) and its runs on each of `SIDES`."""

    name: str
    key: str
    events: str
    commit_bytes: int = 0
    runs: dict[str, Run] = field(default_factory=dict)

    def ratio(self, side: str) -> float:
        """Its rate over HTTP over its rate on `side`."""
        return ratio(self.runs["http"].rate, self.runs[side].rate)


@dataclass
class Throughput:
    """Part 1: each command's runs, and the HTTP floor's."""

    synchronous: str
    kinds: list[Kind]
    floor: Run

    def rate(self, name: str) -> float:
        """Command `name`'s rate over HTTP."""
        return next(kind.runs["http"].rate for kind in self.kinds if kind.name == name)

    def runs(self) -> list[Run]:
        return [self.floor, *(run for kind in self.kinds for run in kind.runs.values())]

    def print(self) -> None:
        print(f"1. commands per second (SQLite file, WAL, synchronous={self.synchronous}):")
        for kind in self.kinds:
            size = f", commit {kind.commit_bytes} B" if kind.commit_bytes else ""
            print(f"  {kind.name} ({kind.events}{size}):")
            for side in (side for side in SIDES if side in kind.runs):
                run = kind.runs[side]
                host = f"  {run.usage('host')}" if side == "http" else ""
                print(f"    {SIDES[side]:{ROW}} {run.row()}{host}")
            floors = [side for side in kind.runs if side != "http"]
            out = "  (ran out of orders)" if kind.runs["http"].exhausted else ""
            print("    ratio " + "  ".join(f"http/{s} {kind.ratio(s):.3f}" for s in floors) + out)
        print("  HTTP floor, a raw ASGI app answering Ok on uvicorn, same client:")
        print(f"    {'raw ASGI over HTTP':{ROW}} {self.floor.row()}  {self.floor.usage('server')}")

    def verdicts(self) -> Verdicts:
        """Every rate above 0, and the CPU over HTTP; the host over HTTP against each floor;
        the HTTP latencies as figures."""
        positive: dict[str, float] = {}
        ratios: dict[str, float] = {}
        figures: dict[str, float] = {}
        http = {f"{kind.key}_http": kind.runs["http"] for kind in self.kinds}
        for kind in self.kinds:
            for side in (side for side in kind.runs if side != "http"):
                positive[f"{kind.key}_{side}_rate"] = kind.runs[side].rate
                ratios[f"{kind.key}_http_per_{side}"] = kind.ratio(side)
        for key, run in (http | {"http_floor": self.floor}).items():
            positive |= {f"{key}_rate": run.rate, f"{key}_cpu_ms": run.cpu_ms}
            figures |= {f"{key}_p50_ms": run.p50_ms, f"{key}_p99_ms": run.p99_ms}
        return Verdicts(must_be_positive=positive, ratios=ratios, figures=figures)


# -- the floors: bare SQLite, the recorder ----------------------------------------------------


def timed(step: Callable[[int], object], seconds: float) -> Run:
    """`step(i)` for i = 0, 1, ... one at a time, for `seconds`."""
    tally = Tally()
    while time.perf_counter() - tally.start < seconds:
        sent = time.perf_counter()
        step(len(tally.latencies))
        tally.latencies.append((time.perf_counter() - sent) * 1000)
    return tally.run()


def stored(made: Commit) -> tuple[bytes, bytes]:
    """What the store writes for a commit: the commit, and its request id's record."""
    request = {"commitId": made.id, "version": made.version}
    return made.model_dump_json().encode(), json.dumps(request).encode()


def sqlite_rows(path: Path, size: int, seconds: float, synchronous: int) -> Run:
    """One row of `size` bytes per transaction, WAL, as fast as it goes."""
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={synchronous}")
        conn.execute("CREATE TABLE rows (id INTEGER PRIMARY KEY, data BLOB)")
        payload = os.urandom(size)

        def insert(_: int) -> None:
            conn.execute("BEGIN")
            conn.execute("INSERT INTO rows (data) VALUES (?)", (payload,))
            conn.execute("COMMIT")

        return timed(insert, seconds)


def recorder_commits(path: Path, made: Commit, seconds: float) -> Run:
    """The commit and its request id per transaction through the store's recorder, on
    `PRODUCTS` streams round robin, as `EventStore.append` writes them."""
    state, request = stored(made)
    base = stream_id(made.aggregate)
    datastore = SQLiteDatastore(str(path), originator_id_type="text")
    try:
        recorder = SQLiteProcessRecorder(datastore)
        recorder.create_table()

        def insert(i: int) -> None:
            stream = f"{base}-{i % PRODUCTS}"
            request_stream = f"request:{stream}:{encode_part(f'r{i}')}"
            commit = StoredEvent(stream, i // PRODUCTS + 1, COMMIT_TOPIC, state)
            recorder.insert_events(
                [commit, StoredEvent(request_stream, 1, "wow.RequestId", request)]
            )

        return timed(insert, seconds)
    finally:
        datastore.close()


# -- the host: in this process without HTTP, and over HTTP ------------------------------------


async def command_rates(
    send: Send, tag: str, seconds: float, concurrency: int, pid: int | None = None
) -> dict[str, Run]:
    """Each product's first ReceiveStock, then ReceiveStock for `seconds`; orders created for
    15% more than that rate, then confirmed for `seconds`: each command's run."""
    await closed_loop(send, commands(ReceiveStock, tag, "warm-r"), concurrency, count=PRODUCTS)
    receive = commands(ReceiveStock, tag, "m-r")
    received = await closed_loop(send, receive, concurrency, seconds=seconds, pid=pid)
    n = math.ceil(received.rate * seconds * 1.15) + concurrency
    create = commands(CreateOrder, tag, "c")
    created = await closed_loop(send, create, concurrency, count=n, pid=pid)
    confirm = commands(ConfirmOrderStock, tag, "k")
    confirmed = await closed_loop(send, confirm, concurrency, seconds=seconds, count=n, pid=pid)
    runs = {"ReceiveStock": received, "CreateOrder": created, "ConfirmOrderStock": confirmed}
    progress(", ".join(f"{tag} {name} {run.rate:.0f}/s" for name, run in runs.items()))
    return runs


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


async def in_process(
    tmp: Path, seconds: float, concurrency: int
) -> tuple[dict[str, Run], list[Commit]]:
    """The pipeline without HTTP: `DomainHost.send` from `concurrency` senders, the followers
    running as in the host; and a product's and an order's last commit (what the floors write)."""

    async def null() -> NullTimers:
        return NullTimers()

    runtime = HostRuntime(bench_apps(), tmp / "pipeline.db", null)
    runtime.start()

    async def send(cmd: CommandMessage) -> str:
        return (await runtime.host.send(cmd)).error_code

    try:
        async with host_log(tmp / "pipeline.log"):
            runs = await command_rates(send, "w", seconds, concurrency)
        refs = [commands(command, "w", "")(1).ref for command in (ReceiveStock, CreateOrder)]
        made = [(await runtime.host.commits(ref))[-1] for ref in refs]
    finally:
        await runtime.stop()
    return runs, made


async def over_http(tmp: Path, seconds: float, concurrency: int) -> tuple[Run, dict[str, Run]]:
    """The HTTP floor (ReceiveStock answered `Ok`), then the host, over HTTP."""
    floor, floor_url = served("the HTTP floor", FLOOR_ARGV, tmp / "floor.log")
    host, host_url = served("the host", host_argv(tmp / "host.db"), tmp / "host.log")
    try:
        await asyncio.gather(floor.start(), host.start())  # both idle until measured
        async with HttpSender(floor_url, concurrency) as sender:
            warm = min(1.0, seconds / 2)
            await closed_loop(
                sender, commands(ReceiveStock, "f", "warm-r"), concurrency, seconds=warm
            )
            receive = commands(ReceiveStock, "f", "m-r")
            floor_run = await closed_loop(
                sender, receive, concurrency, seconds=seconds, pid=floor.pid
            )
        await floor.stop(grace=20)
        progress(f"HTTP floor (raw ASGI Ok) {floor_run.rate:.0f}/s")
        async with HttpSender(host_url, concurrency) as sender:
            runs = await command_rates(sender, "h", seconds, concurrency, host.pid)
    finally:
        await asyncio.gather(floor.stop(grace=20), host.stop(grace=20))
    return floor_run, runs


async def throughput(
    tmp: Path, floor_seconds: float, seconds: float, concurrency: int
) -> tuple[Throughput, Commit]:
    """Part 1, and an order's commit (the relay's shape, for part 2)."""
    pipeline, made = await in_process(tmp, floor_seconds, concurrency)
    with contextlib.closing(sqlite3.connect(tmp / "pipeline.db")) as conn:
        synchronous = int(conn.execute("PRAGMA synchronous").fetchone()[0])
    kinds = [
        Kind("ReceiveStock", "receive_stock", "1 event"),
        Kind("ConfirmOrderStock", "confirm_order_stock", "2 events + wow.ScheduleSet"),
    ]
    for kind, commit in zip(kinds, made, strict=True):
        kind.commit_bytes = len(stored(commit)[0])
        rows, recorder = tmp / f"rows-{kind.key}.db", tmp / f"recorder-{kind.key}.db"
        args = (rows, kind.commit_bytes, floor_seconds, synchronous)
        kind.runs["sqlite"] = await asyncio.to_thread(sqlite_rows, *args)
        kind.runs["recorder"] = await asyncio.to_thread(
            recorder_commits, recorder, commit, floor_seconds
        )
        rates = ", ".join(f"{side} {kind.runs[side].rate:.0f}/s" for side in ("sqlite", "recorder"))
        progress(f"floors {kind.name}: {rates}")
    kinds.append(Kind("CreateOrder", "create_order", "1 event, a new aggregate each"))
    floor, http = await over_http(tmp, seconds, concurrency)
    for kind in kinds:
        kind.runs |= {"in_process": pipeline[kind.name], "http": http[kind.name]}
    return Throughput(SYNCHRONOUS.get(synchronous, str(synchronous)), kinds, floor), made[1]
