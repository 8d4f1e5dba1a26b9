"""`bench.host` part 3: `wow-temporal host` replicas on one PostgreSQL database (1, 2, 3) beside
the SQLite host, under the same ReceiveStock load: commands a second, the CPU a command in the
hosts, PostgreSQL and the client, PostgreSQL's transactions, fsyncs and backends' states."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import os
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import psycopg

from bench._host_load import PRODUCTS, HttpSender, Run, closed_loop, commands, progress, served
from bench.harness import (
    Verdicts,
    busy_cpu_seconds,
    cpu_seconds,
    ratio,
    tree_cpu_seconds,
    verdict,
    worker_env,
)
from bench.harness.postgres import Postgres
from workers.eshop.stock import ReceiveStock
from wow_temporal.dev.ports import free_port

REPLICAS = (1, 2, 3)  # the host's replicas on one database (`--quick`: 1, 2 and no SQLite host)
QUICK_REPLICAS = (1, 2)
SCALE_TARGET = 1.3  # two replicas' commands a second over one's
CORES_OUT = 0.9  # the share of the machine's cores busy over a load from which they ran out
CORES = len(os.sched_getaffinity(0))
CPU_SIDES = ("hosts", "pg", "client")  # the hosts summed, PostgreSQL's processes, this one
PG_COUNTERS = """
SELECT xact_commit, xact_rollback,
    (SELECT coalesce(sum(fsyncs), 0) FROM pg_stat_io WHERE object = 'wal')
FROM pg_stat_database WHERE datname = current_database()
"""
COUNTERS = ("committed", "rolled_back", "wal_fsyncs")  # what `PG_COUNTERS` reads
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
lock (every commit holds it to its end), waiting for a lock, for the WAL, for their host's next
statement mid-transaction, and running one."""
SAMPLE_S = 0.05


@dataclass(frozen=True)
class Replicas:
    """One configuration under the ReceiveStock load: its commands, the CPU a command on each of
    `CPU_SIDES` and the cores the whole machine kept busy over it (any other work on it too);
    PostgreSQL's `COUNTERS` a command over the whole of it (the start and the warm-up included;
    a conflict's refused write is among those rolled back), how many of its backends were in
    each of `STATES` on average over the load; every round's rate (this is the best round)."""

    key: str
    replicas: int
    run: Run
    cpu_ms: dict[str, float]
    machine_cores: float
    counts: dict[str, float]
    backends: dict[str, float]
    rounds: list[float] = dataclasses.field(default_factory=list)

    @property
    def label(self) -> str:
        return "SQLite x1" if self.key == "sqlite" else f"PostgreSQL x{self.replicas}"

    @property
    def total_cpu_ms(self) -> float:
        return sum(ms for ms in self.cpu_ms.values() if math.isfinite(ms))

    @property
    def cores_used(self) -> float:
        """The cores `CPU_SIDES` kept busy over the load."""
        return self.total_cpu_ms * self.run.rate / 1000


def replica_env(name: str) -> dict[str, str]:
    """`wow-temporal host`'s environment, as a worker's (the repository importable for `--app
    bench._host_load:bench_apps`): Temporal at a port nothing serves (ReceiveStock sets no
    schedule: the relay never connects), `name` among the replicas."""
    temporal = f"127.0.0.1:{free_port('127.0.0.1')}"
    return worker_env(temporal, "default", "http://127.0.0.1:9", WOW_HOST_REPLICA=name)


def replica_argv(db: str) -> list[str]:
    return ["-m", "wow_temporal.cli", "host", "--app", "bench._host_load:bench_apps", "--db", db]


def databases(pg: Postgres, n: int) -> list[str]:
    """`n` fresh databases, all made before any load (CREATE DATABASE writes and syncs the
    template's files), then a checkpoint."""
    with psycopg.connect(pg.uri(), autocommit=True) as conn:
        for i in range(n):
            conn.execute(f'CREATE DATABASE "replicas_{i}"')
        conn.execute("CHECKPOINT")
    return [pg.uri(f"replicas_{i}") for i in range(n)]


async def pg_counters(uri: str | None) -> dict[str, float]:
    """`PG_COUNTERS` (NaN without PostgreSQL), once the backends of the hosts just stopped
    have reported theirs (a backend reports its statistics when it ends)."""
    if uri is None:
        return dict.fromkeys(COUNTERS, math.nan)
    await asyncio.sleep(0.5)
    async with await psycopg.AsyncConnection.connect(uri, autocommit=True) as conn:
        row = await (await conn.execute(PG_COUNTERS)).fetchone()
    assert row is not None
    return {name: float(x) for name, x in zip(COUNTERS, row, strict=True)}


@contextlib.asynccontextmanager
async def sampled(uri: str | None) -> AsyncIterator[dict[str, float]]:
    """How many of the database's backends were in each of `STATES` on average over the block,
    sampled every `SAMPLE_S` seconds (filled in on leaving; left empty without PostgreSQL)."""
    averages: dict[str, float] = {}
    samples: list[tuple[int, ...]] = []

    async def sample(uri: str) -> None:
        async with await psycopg.AsyncConnection.connect(uri, autocommit=True) as conn:
            while True:
                samples.append(tuple(await (await conn.execute(PG_STATES)).fetchone() or ()))
                await asyncio.sleep(SAMPLE_S)

    task = asyncio.create_task(sample(uri)) if uri is not None else None
    try:
        yield averages
    finally:
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for i, state in enumerate(STATES if samples else ()):
            averages[state] = sum(s[i] for s in samples) / len(samples)


def usage(pids: Sequence[int | None], pg: Postgres | None) -> dict[str, float]:
    """CPU seconds so far on each of `CPU_SIDES`, and the machine's busy cores'."""
    return {
        "hosts": sum(cpu_seconds(pid) for pid in pids if pid is not None),
        "pg": tree_cpu_seconds(pg.pid) if pg is not None else math.nan,
        "client": cpu_seconds(),
        "machine": busy_cpu_seconds(),
    }


async def configuration(
    tmp: Path, key: str, dbs: Sequence[str], pg: Postgres | None, seconds: float, concurrency: int
) -> Replicas:
    """A `wow-temporal host` on each of `dbs` (a replica each) under ReceiveStock spread over
    them after each product's first command."""
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
        async with HttpSender([url for _, url in hosts], concurrency) as sender:
            warm = commands(ReceiveStock, key, "warm-r")
            await closed_loop(sender, warm, concurrency, count=PRODUCTS)
            async with sampled(uri) as backends:
                start = usage(pids, pg)
                receive = commands(ReceiveStock, key, "m-r")
                run = await closed_loop(sender, receive, concurrency, seconds=seconds)
                end = usage(pids, pg)
    finally:
        await asyncio.gather(*(proc.stop(grace=20) for proc, _ in hosts))
    after = await pg_counters(uri)
    cpu_ms = {side: ratio(1000 * (end[side] - start[side]), run.n) for side in CPU_SIDES}
    machine = ratio(end["machine"] - start["machine"], run.seconds)
    counts = {name: (after[name] - before[name]) / (run.n + PRODUCTS) for name in COUNTERS}
    replicas = Replicas(key, len(dbs), run, cpu_ms, machine, counts, backends)
    progress(f"{replicas.label:17} {run.rate:6.0f}/s  CPU {replicas.total_cpu_ms:.2f} ms/command")
    return replicas


@dataclass(frozen=True)
class Scaling:
    """Part 3: each configuration's best round, under `concurrency` commands in flight for
    `seconds`; PG x2 over PG x1 and how it reads (PASS, MISS, or MISS where the cores ran out:
    then informational, the CPU a command says how it scales with more cores)."""

    seconds: float
    concurrency: int
    configs: list[Replicas]
    two_per_one: tuple[float, str]

    def print(self) -> None:
        print(
            f"3. replicas: ReceiveStock over {PRODUCTS} products, {self.concurrency} in flight "
            f"spread over the replicas (each connection to one in turn), {self.seconds:g}s each, "
            f"the best of {len(self.configs[0].rounds)} rounds; wow-temporal host processes; "
            f"PostgreSQL fsync on; {CORES} cores:"
        )
        print(
            f"    {'':17} {'cmd/s':>6} {'/PG x1':>6} {'/SQLite':>7} {'p50 ms':>7} {'p99 ms':>7}"
            f"  CPU ms/command: {'hosts':>5} {'PG':>5} {'client':>6} {'total':>6}"
            "  cores used: these, the machine"
        )
        by = {c.key: c.run.rate for c in self.configs}
        for c in self.configs:
            run, ms = c.run, c.cpu_ms
            rounds = ", ".join(f"{rate:.0f}" for rate in c.rounds)
            print(
                f"    {c.label:17} {run.rate:6.0f} {ratio(run.rate, by['pg1']):6.2f} "
                f"{ratio(run.rate, by.get('sqlite', math.nan)):7.2f} {run.p50_ms:7.2f} "
                f"{run.p99_ms:7.2f}  {'':15} {ms['hosts']:5.2f} {ms['pg']:5.2f} "
                f"{ms['client']:6.2f} {c.total_cpu_ms:6.2f}  {c.cores_used:4.2f}, "
                f"{c.machine_cores:4.2f} of {CORES}  rounds {rounds}/s"
            )
        print(
            "  PostgreSQL a command (transactions, WAL fsyncs; the events table's commit lock "
            "held, ms a command) and its backends on average over the load (sampled every "
            f"{1000 * SAMPLE_S:.0f} ms): holding the commit lock | waiting for a lock | for the "
            "WAL | in a transaction, waiting for their host | running"
        )
        for c in (c for c in self.configs if c.key != "sqlite"):
            b = [c.backends.get(state, math.nan) for state in STATES]
            tx = c.counts["committed"] + c.counts["rolled_back"]
            print(
                f"    {c.label:17} {tx:5.2f} tx  {c.counts['wal_fsyncs']:5.2f} fsyncs "
                f"{ratio(1000 * b[0], c.run.rate):5.2f} ms held   "
                + " | ".join(f"{x:4.2f}" for x in b)
            )
        two, said = self.two_per_one
        print(f"  PostgreSQL x2 / x1 = {two:.2f} (target >= {SCALE_TARGET}) {said}")

    def verdicts(self) -> Verdicts:
        """Each configuration's rate and CPU above 0 (PostgreSQL's too); its rate over PG x1's
        and the SQLite host's; its latencies, cores used and PostgreSQL's counts as figures."""
        by = {c.key: c for c in self.configs}
        positive: dict[str, float] = {}
        ratios: dict[str, float] = {}
        figures: dict[str, float] = {}
        for c in self.configs:
            key, run = f"replicas_{c.key}", c.run
            positive |= {f"{key}_rate": run.rate, f"{key}_host_cpu_ms": c.cpu_ms["hosts"]}
            figures |= {f"{key}_p50_ms": run.p50_ms, f"{key}_p99_ms": run.p99_ms}
            figures |= {f"{key}_cores_used": c.cores_used, f"{key}_machine_cores": c.machine_cores}
            if c.key == "sqlite":
                continue
            positive[f"{key}_pg_cpu_ms"] = c.cpu_ms["pg"]
            if "sqlite" in by:
                ratios[f"{key}_per_sqlite"] = ratio(run.rate, by["sqlite"].run.rate)
            if c.key != "pg1":
                ratios[f"{key}_per_pg1"] = ratio(run.rate, by["pg1"].run.rate)
            figures[f"{key}_tx_per_command"] = c.counts["committed"] + c.counts["rolled_back"]
            figures[f"{key}_wal_fsyncs_per_command"] = c.counts["wal_fsyncs"]
            figures[f"{key}_commit_lock_held"] = c.backends.get("lock_held", math.nan)
        return Verdicts(must_be_positive=positive, ratios=ratios, figures=figures)


async def replicas(
    tmp: Path, seconds: float, concurrency: int, quick: bool, rounds: int
) -> Scaling:
    """The SQLite host, then `REPLICAS` replicas on a PostgreSQL database each (fsync on), in
    `rounds` rounds (every other one in reverse order), a fresh store each; the best round of
    each configuration, with every round's rate."""
    counts = QUICK_REPLICAS if quick else REPLICAS
    pg = Postgres(fsync=True)
    await asyncio.to_thread(pg.start)
    try:
        uris = iter(await asyncio.to_thread(databases, pg, len(counts) * rounds))
        plan = [] if quick else [("sqlite", 1)]
        plan += [(f"pg{n}", n) for n in counts]
        best: dict[str, Replicas] = {}
        rates: dict[str, list[float]] = {key: [] for key, _ in plan}
        for round_ in range(rounds):
            for key, n in plan if round_ % 2 == 0 else plan[::-1]:
                sqlite = key == "sqlite"
                dbs = [str(tmp / f"replicas-{round_}.db")] if sqlite else [next(uris)] * n
                c = await configuration(tmp, key, dbs, None if sqlite else pg, seconds, concurrency)
                rates[key].append(c.run.rate)
                if key not in best or c.run.rate > best[key].run.rate:
                    best[key] = c
    finally:
        await asyncio.to_thread(pg.stop)
    configs = [dataclasses.replace(best[key], rounds=rates[key]) for key, _ in plan]
    return Scaling(seconds, concurrency, configs, two_per_one(configs))


def two_per_one(configs: Sequence[Replicas]) -> tuple[float, str]:
    """PG x2 over PG x1, and how it reads."""
    by = {c.replicas: c for c in configs if c.key.startswith("pg")}
    two = ratio(by[2].run.rate, by[1].run.rate)
    if two >= SCALE_TARGET:
        return two, verdict(True)
    if max(by[2].cores_used, by[2].machine_cores) >= CORES_OUT * CORES:
        return two, f"{verdict(False)} (informational: the {CORES} cores ran out)"
    return two, verdict(False)
