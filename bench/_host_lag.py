"""`bench.host` part 2: the relay's lag, a fresh host handing to a real `TimerClient` on a fresh
dev server, and `TimerClient.apply_many` alone."""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench._host_load import (
    TENANT,
    HttpSender,
    Run,
    closed_loop,
    commands,
    host_argv,
    paced,
    progress,
    served,
)
from bench.harness import Verdicts, commit, cpu_seconds, percentile, summary
from workers.eshop.order import ORDER, PAYMENT_GRACE_PERIOD, ConfirmOrderStock, CreateOrder
from wow_temporal.dev.ports import free_port
from wow_temporal.dev.server import EmbeddedTemporal
from wow_temporal.host.relay import Relay
from wow_temporal.ids import timer_workflow_id
from wow_temporal.model import Commit
from wow_temporal.timers.client import TimerClient

QUICK_INGEST = 200  # `TimerClient.apply_many` alone, --quick: one batch of these


@dataclass(frozen=True)
class Lag:
    """One steady load of confirmations (`sent`, at `rate` for `seconds`) and what the relay
    made of it: commit createTime -> `apply_many` returned (`Relay.on_handed`: n handed, p50,
    p99, max), its p50 over the first and the last third of the commits, its batches and
    commits a second from the first handed to the last, the seconds it took to drain after the
    load; createTime -> the timer workflow's start time for a sample (n read, p50, p99); the
    dev server's CPU over the load, a share of one core."""

    label: str
    rate: float
    seconds: float
    sent: Run
    lag_ms: dict[str, float]
    thirds_p50_ms: tuple[float, float]
    batches: int
    relay_rate: float
    drain_s: float
    timer_start_ms: dict[str, float]
    server_cpu_share: float

    @property
    def behind(self) -> bool:
        """The relay did not keep up: it handed over slower than sent, or its lag grew."""
        first, last = self.thirds_p50_ms
        return self.relay_rate < 0.95 * self.sent.rate or last > 2 * first + 50

    def print(self) -> None:
        ms, starts, handed = self.lag_ms, self.timer_start_ms, int(self.lag_ms["n"])
        first, last = self.thirds_p50_ms
        print(f"  at {self.rate:.0f}/s ({self.label}) for {self.seconds:g}s:")
        print(
            f"    commit -> apply_many returned (Relay.on_handed) p50 {ms['p50']:.1f} ms  "
            f"p99 {ms['p99']:.1f} ms  max {ms['max']:.1f} ms  handed {handed}/{self.sent.n}; "
            f"p50 over the first third {first:.1f} ms, the last {last:.1f} ms"
            + ("  BEHIND" if self.behind else "")
        )
        print(
            f"    relay handed over at {self.relay_rate:.0f}/s in {self.batches} batches, "
            f"drained {self.drain_s:.2f}s after the last; commit -> timer workflow start time "
            f"({starts['n']:.0f} read by id) p50 {starts['p50']:.1f} ms  p99 {starts['p99']:.1f} ms"
        )
        server = f"dev server CPU {100 * self.server_cpu_share:.0f}% of a core"
        print(f"    confirms sent {self.sent.row()}  {self.sent.usage('host')}; {server}")


@dataclass(frozen=True)
class RelayLag:
    """Part 2: the dev server's start-up, each load's lag, `TimerClient.apply_many`'s own rate
    (commits a second) and its batch."""

    startup_s: float
    lags: list[Lag]
    ingest: float
    ingest_batch: int

    def print(self) -> None:
        print(
            f"2. relay lag, a real dev server (up in {self.startup_s:.1f}s), no timer worker, "
            "each commit a wow.ScheduleSet:"
        )
        for lag in self.lags:
            lag.print()
        print(
            f"  TimerClient.apply_many alone (this process, batches of {self.ingest_batch}, "
            f"same server): {self.ingest:.0f} commits/s"
        )

    def verdicts(self) -> Verdicts:
        """Every commit handed over; every rate, the relay's lag and the timers read above 0;
        the lag's tail and the timers' start as figures."""
        lags, starts = [lag.lag_ms for lag in self.lags], [lag.timer_start_ms for lag in self.lags]
        positive = {
            "relay_sent_rate": min(lag.sent.rate for lag in self.lags),
            "relay_handed": min(lag["n"] for lag in lags),
            "relay_lag_p50_ms": min(lag["p50"] for lag in lags),
            "timer_starts_read": min(start["n"] for start in starts),
            "timers_ingest": self.ingest,
        }
        figures = {f"relay_lag_{q}_ms": lags[0][q] for q in ("p99", "max")}
        figures |= {f"timer_start_{q}_ms": starts[0][q] for q in ("p50", "p99")}
        unhanded = sum(lag.sent.n - int(lag.lag_ms["n"]) for lag in self.lags)
        return Verdicts({"relay_unhanded": unhanded}, positive, figures=figures)


class LagRig:
    """A fresh host handing to a real `TimerClient` on a fresh dev server."""

    def __init__(self, tmp: Path, concurrency: int, sample: int) -> None:
        self.concurrency = concurrency
        self.sample = sample
        self.server = EmbeddedTemporal(tmp / "temporal", headless=True, port=free_port())
        temporal = ("--temporal", self.server.address, "--namespace", self.server.namespace)
        self.host, url = served("the host", host_argv(tmp / "lag.db", *temporal), tmp / "lag.log")
        self.http = httpx.AsyncClient(base_url=url, timeout=30)
        self.sender = HttpSender(url, 4 * concurrency)
        self.startup_s = 0.0

    async def _start_server(self) -> None:
        started = time.perf_counter()
        await self.server.start()
        self.startup_s = time.perf_counter() - started

    async def __aenter__(self) -> LagRig:
        try:  # the host connects to Temporal at its first schedule: both start at once
            await asyncio.gather(self._start_server(), self.host.start())
            self.client = await self.server.connect()
            self.timers = TimerClient(self.client)
            # Warm up: the relay connects at its first schedule; Temporal's first starts.
            warm = 2 * self.concurrency
            for command, run in ((CreateOrder, "c"), (ConfirmOrderStock, "k")):
                make = commands(command, "w", run)
                await closed_loop(self.sender, make, self.concurrency, count=warm)
            await self.until_handed(warm, 60)
        except BaseException:
            await self.__aexit__()
            raise
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
        await closed_loop(self.sender, commands(CreateOrder, tag, "c"), self.concurrency, count=n)
        before = (await self.handed())["n"]
        assert self.server.pid is not None
        server_cpu = cpu_seconds(self.server.pid)
        confirm = commands(ConfirmOrderStock, tag, "k")
        sent = await paced(self.sender, confirm, rate, seconds, n, self.host.pid)
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
) -> RelayLag:
    """The lag at `rate`; if the relay fell behind, again at half the rate it handed over at.
    Then `TimerClient.apply_many` alone over two of the relay's batches (`--quick`: one small
    one)."""
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
        return RelayLag(rig.startup_s, lags, ingest, batch)
