"""`bench.host`'s client and servers: the e-shop's commands sent over HTTP as Wow sends them, the
loads and what they measured, the host as `wow-temporal host` serves it and a raw ASGI floor."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx

from bench.harness import Proc, TokenBucket, answers, cpu_seconds, percentile
from workers.eshop.order import ORDER, ConfirmOrderStock, CreateOrder, Order, PaymentPolicy
from workers.eshop.stock import STOCK, ReceiveStock, Stock
from wow_temporal import App
from wow_temporal.dev.ports import free_port
from wow_temporal.host.runtime import HostRuntime
from wow_temporal.host.service import CommandMessage
from wow_temporal.model import Commit
from wow_temporal.timers.client import TimerClient
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
STARTED = time.perf_counter()


def bench_apps() -> list[App]:
    """`workers.eshop.apps()` without the inventory saga, and an hour's payment grace."""
    return [
        App("eshop-order", aggregates=[Order], services=[PaymentPolicy(timedelta(hours=1))]),
        App("eshop-inventory", aggregates=[Stock]),
    ]


class NullTimers:
    """Timers that take every commit at once (part 1: the host's own figures)."""

    async def apply_many(self, commits: Sequence[Commit], **_: Any) -> list[list[Any]]:
        return [[] for _ in commits]


def progress(text: str) -> None:
    """A line of progress, on stderr (stdout is the report's)."""
    print(f"  [{time.perf_counter() - STARTED:5.1f}s] {text}", file=sys.stderr, flush=True)


# -- the commands and their sender ------------------------------------------------------------

Make = Callable[[int], CommandMessage]
"""A load's i-th command, with a request id of its own."""
Send = Callable[[CommandMessage], Awaitable[str]]
"""Sends a command; Wow's error code (`Ok`)."""


BODIES: dict[type, dict[str, Any]] = {
    ReceiveStock: {"quantity": 1},
    CreateOrder: {"items": [{"product_id": "mug", "quantity": 1}]},
    ConfirmOrderStock: {"product_id": "mug"},
}


def commands(command: type, tag: str, run: str) -> Make:
    """`tag`'s `command`s (one of `BODIES`), the i-th's request id `<tag>-<run><i>`:
    ReceiveStock on `tag`'s `PRODUCTS` products round robin, the others on `tag`'s order i."""
    body, stock = BODIES[command], command is ReceiveStock

    def make(i: int) -> CommandMessage:
        aggregate, name = (STOCK, f"p{i % PRODUCTS}") if stock else (ORDER, f"o{i}")
        ref = aggregate.ref(TENANT, f"{tag}-{name}")
        return CommandMessage(command.__wow_type__, ref, body, f"{tag}-{run}{i}")

    return make


class HttpSender:
    """httpx with one `AsyncClient` (one keep-alive connection) per command in flight: one
    client pooling N connections spends O(N) a request in httpcore's pool (encode/httpx#3215).
    Given several URLs (replicas), the connections go to them in turn, as a TCP balancer's."""

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

    async def __call__(self, cmd: CommandMessage) -> str:
        wire = WireCommand.to(cmd.ref, cmd.type, request_id=cmd.request_id)
        headers = command_headers(wire)
        client = await self.free.get()
        try:
            response = await client.post(
                COMMAND_SEND_PATH,
                content=json.dumps(cmd.body).encode(),
                headers={"Content-Type": "application/json", **headers},
            )
        finally:
            self.free.put_nowait(client)
        return str(response.headers.get(ERROR_CODE_HEADER, f"HTTP {response.status_code}"))

    async def __aenter__(self) -> HttpSender:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

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

    def row(self) -> str:
        """Its rate and latencies, as a report's row shows them."""
        return f"{self.rate:6.0f}/s  p50 {self.p50_ms:6.2f} ms  p99 {self.p99_ms:6.2f} ms"

    def usage(self, whose: str) -> str:
        """Its refusals and `whose` CPU, as a report's row shows them."""
        share = f"{100 * self.cpu_share:.0f}% of a core"
        return f"errors {self.error_count}  {whose} CPU {self.cpu_ms:.2f} ms/command ({share})"


class Tally:
    """A load as it goes: each command's latency and refusal, the server's CPU from its start."""

    def __init__(self, pid: int | None = None) -> None:
        self.latencies: list[float] = []
        self.errors: Counter[str] = Counter()
        self.pid = pid
        self.cpu = cpu_seconds(pid) if pid is not None else math.nan
        self.start = time.perf_counter()

    async def send(self, send: Send, cmd: CommandMessage) -> None:
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


# -- the servers, each in a process of its own ------------------------------------------------


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


FLOOR_ARGV = ["-m", "uvicorn", "bench._host_load:floor_app", "--factory", "--host", "127.0.0.1"]
FLOOR_ARGV += ["--log-level", "warning", "--lifespan", "off"]


def floor_app() -> Callable[..., Awaitable[None]]:
    """A raw ASGI app answering every request with a Wow `CommandResult` of `Ok`: the least a
    server can do (the fake Wow host would record and decide each)."""
    result = CommandResult.of(STOCK.ref(TENANT, "x"), command_id="x", request_id="x", code=OK)
    answer = result.model_dump_json().encode()
    headers = [(b"content-type", b"application/json"), (ERROR_CODE_HEADER.lower().encode(), b"Ok")]

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


def serve_host(port: int, db: Path, temporal: str | None, namespace: str) -> None:
    """The host as `wow-temporal host` runs it, handing to a `TimerClient` on `temporal` (or to
    `NullTimers`); `GET /_bench/handed` counts the commits its relay handed over (`?rows=true`:
    each one's aggregate id, createTime, when it was handed over and in which batch)."""
    import uvicorn

    from wow_temporal.logs import configure_logging

    configure_logging()
    handed: list[tuple[str, int, float, int]] = []
    batches = itertools.count(1)

    def on_handed(commits: list[Commit]) -> None:
        now, batch = time.time() * 1000, next(batches)
        handed.extend((c.aggregate_id, c.create_time, now, batch) for c in commits)

    async def timers() -> Any:
        if temporal is None:
            return NullTimers()
        from temporalio.client import Client
        from temporalio.contrib.pydantic import pydantic_data_converter

        converter = pydantic_data_converter
        client = await Client.connect(temporal, namespace=namespace, data_converter=converter)
        return TimerClient(client)

    async def handed_route(rows: bool = False) -> dict[str, Any]:
        return {"n": len(handed), "rows": handed if rows else []}

    async def serve() -> None:
        runtime = HostRuntime(bench_apps(), db, timers)
        runtime.relay.on_handed = on_handed
        runtime.asgi.add_api_route("/_bench/handed", handed_route, methods=["GET"])
        runtime.start()
        config = uvicorn.Config(runtime.asgi, host="127.0.0.1", port=port, log_level="warning")
        try:
            await uvicorn.Server(config).serve()
        finally:
            await runtime.stop()

    asyncio.run(serve())
