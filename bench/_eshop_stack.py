"""The e-shop soak's processes (`bench.soak_eshop`): a dev server, the host (or its replicas on
one PostgreSQL behind one address), the timer and the job workers; and the chaos done to them,
on two tracks (the workers; the host, the server and PostgreSQL), each recovery timed."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from bench.harness import CLI, Fault, Proc, answers, log_says, worker_env
from bench.harness.balancer import Balancer
from bench.harness.chaos import restart
from bench.harness.postgres import Postgres
from bench.oracle.recovery import RECOVERY_BOUND_S, Recovery
from wow_temporal.dev.ports import free_port
from wow_temporal.dev.server import EmbeddedTemporal

SAMPLE_S = 0.2
"""How often the replicas' `/wow/followers` are read while a takeover or a recovery is timed."""


@dataclass
class Stack:
    """The e-shop's processes on a dev server of its own: the host (on its store), or its
    replicas (on one PostgreSQL database, behind one address), and the two workers."""

    server: EmbeddedTemporal
    hosts: list[Proc]
    timer_worker: Proc
    job_worker: Proc
    url: str
    """Where the customers and the workers reach the host: itself, or the replicas' balancer."""
    store: str | Path
    """The host's store: its SQLite file, or the replicas' PostgreSQL database (a URI)."""
    replicas: Replicas | None = None

    async def start(self) -> None:
        if self.replicas is not None:
            await self.replicas.balancer.start(self.replicas.port)
        await asyncio.gather(
            *(host.start() for host in self.hosts),
            self.timer_worker.start(),
            self.job_worker.start(),
        )

    async def stop_hosts(self) -> None:
        """SIGTERM every host (each lets its work in flight finish and its leases go)."""
        await asyncio.gather(*(host.stop() for host in self.hosts))

    async def kill(self) -> None:
        for proc in (self.job_worker, self.timer_worker, *self.hosts):
            await proc.kill()
        if self.replicas is not None:
            await self.replicas.balancer.close()


@asynccontextmanager
async def running(tmp: Path, args: argparse.Namespace) -> AsyncIterator[Stack]:
    """A fresh headless dev server, PostgreSQL with `--replicas` of 2 or more, and the stack
    on them, started; all ended on the way out."""
    server = EmbeddedTemporal(tmp / "temporal", headless=True)
    pg = Postgres(fsync=True) if args.replicas >= 2 else None
    stack: Stack | None = None
    try:
        if pg is not None:
            await asyncio.to_thread(pg.start)
        await server.start()
        stack = await asyncio.to_thread(make_stack, tmp, server, args, pg)
        await stack.start()
        yield stack
    finally:
        try:
            if stack is not None:
                await stack.kill()
            await server.stop()
        finally:
            if pg is not None:
                await asyncio.to_thread(pg.stop)


def make_stack(
    tmp: Path, server: EmbeddedTemporal, args: argparse.Namespace, pg: Postgres | None
) -> Stack:
    """The processes (none started): one host on SQLite, or `--replicas` of them on a new
    database of `pg` behind a balancer."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    base = worker_env(
        server.address,
        server.namespace,
        url,
        # Deliveries and ticks ride out a host that is down for a while (never parked by it),
        # and are retried promptly once it is back.
        WOW_TIMERS_MAX_ATTEMPTS="60",
        WOW_TIMERS_RETRY_INITIAL_INTERVAL="200ms",
        WOW_TIMERS_RETRY_MAX_INTERVAL="1s",
    )
    base = {k: v for k, v in base.items() if not k.startswith("ESHOP_")}
    host_env = {**base, "ESHOP_PAYMENT_GRACE_PERIOD": f"PT{args.grace:g}S"}
    store: str | Path
    replicas = None
    if pg is None:
        store = tmp / "domain.db"
        hosts = [host_proc("the host", tmp / "host.log", str(store), port, host_env)]
    else:
        store = pg.database()
        replicas = make_replicas(tmp, store, host_env, args.replicas, pg, port)
        hosts = replicas.procs
    timer_worker = Proc.worker(tmp / "timer-worker.log", base, name="the timer worker")
    job_log = tmp / "job-worker.log"
    job_worker = Proc(
        "the job worker",
        [str(CLI), "worker", "--app", "workers.eshop.inventory:app"],
        job_log,
        log_says(job_log, b"job worker for eshop-inventory"),
        env={
            **base,
            "WOW_SCHEDULES_RECEIVE_DELIVERIES_EXPRESSION": f"*/{args.job_every} * * * * *",
        },
    )
    return Stack(server, hosts, timer_worker, job_worker, url, store, replicas)


def host_proc(name: str, log: Path, db: str, port: int, env: dict[str, str]) -> Proc:
    """`wow-temporal host` of the e-shop on `db` (a SQLite file or a PostgreSQL URI)."""
    argv = [str(CLI), "host", "--app", "workers.eshop:apps", "--db", db, "--port", str(port)]
    return Proc(name, argv, log, answers(f"http://127.0.0.1:{port}/health"), env=env)


def make_replicas(
    tmp: Path, uri: str, env: dict[str, str], count: int, pg: Postgres, port: int
) -> Replicas:
    """`count` hosts on database `uri`, each named (`WOW_HOST_REPLICA`) r1, r2, …, behind a
    balancer to listen on `port`."""
    ports: list[int] = []
    while len(ports) < count:
        if (found := free_port()) not in [*ports, port]:
            ports.append(found)
    procs = [
        host_proc(
            f"host replica r{n}",
            tmp / f"host-r{n}.log",
            uri,
            p,
            {**env, "WOW_HOST_REPLICA": f"r{n}"},
        )
        for n, p in enumerate(ports, 1)
    ]
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    balancer = Balancer([("127.0.0.1", p) for p in ports])
    return Replicas(procs, urls, pg, balancer, port, seen=Recovery(replicas=count))


@dataclass
class Replicas:
    """Host replicas on one PostgreSQL database behind one balancer, and the chaos done to
    them: the followers' holder SIGKILLed each time, PostgreSQL stopped once; what
    each took to recover (monotonic seconds; the customers' Ok answers in `oks`)."""

    procs: list[Proc]
    urls: list[str]
    pg: Postgres
    balancer: Balancer
    port: int
    oks: list[float] = field(default_factory=list)
    """When each customer's command was answered Ok (the shop's list)."""
    seen: Recovery = field(default_factory=Recovery)
    """What the chaos did to them and what each recovery took, for the judge."""

    async def here(self, http: httpx.AsyncClient) -> tuple[set[str], list[set[str]]]:
        """Every follower's name, and those each replica runs now, read from each replica
        directly (`/wow/followers`; one that is down or cannot read its store runs none)."""

        async def runs(proc: Proc, url: str) -> list[dict[str, Any]]:
            if not proc.running:
                return []
            with contextlib.suppress(httpx.HTTPError, ValueError):
                answer = await http.get(url + "/wow/followers")
                if answer.status_code == 200:
                    return list(answer.json())
            return []

        views = await asyncio.gather(
            *(runs(p, u) for p, u in zip(self.procs, self.urls, strict=True))
        )
        names = {f["name"] for view in views for f in view}
        return names, [{f["name"] for f in view if f["here"]} for view in views]

    async def until_held(self, http: httpx.AsyncClient, within: float) -> float | None:
        """When every follower was first seen running on a replica, `within` s at most."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            names, held = await self.here(http)
            if names and names <= set().union(*held):
                return time.monotonic()
            await asyncio.sleep(SAMPLE_S)
        return None

    async def kill_next(self, pause: float) -> None:
        """SIGKILL the replica running the most followers (so the holders change in turn),
        start it again `pause` s later; done once every follower runs again. Followers that
        ran nowhere before the kill count as not taken over."""
        async with httpx.AsyncClient(timeout=2) as http:
            if await self.until_held(http, RECOVERY_BOUND_S) is None:
                self.seen.not_taken_over += 1
            _, held = await self.here(http)
            victim = max(range(len(held)), key=lambda n: len(held[n]))
            proc = self.procs[victim]
            self.seen.kills.append((proc.name.removeprefix("host replica "), bool(held[victim])))
            killed = time.monotonic()
            await proc.kill()
            again = asyncio.create_task(_start_after(proc, pause))
            try:
                if held[victim]:
                    taken = await self.until_held(http, RECOVERY_BOUND_S)
                    if taken is None:
                        self.seen.not_taken_over += 1
                    else:
                        self.seen.takeovers.append(taken - killed)
                await again
            finally:
                again.cancel()  # a run that failed meanwhile starts nothing after its cleanup

    async def postgres_down(self, pause: float) -> None:
        """Stop PostgreSQL at once, start it again `pause` s later; done once a customer's
        command was answered Ok and every follower runs again ( `RECOVERY_BOUND_S` at most)."""
        stopped = time.monotonic()
        await asyncio.to_thread(self.pg.restart, pause)
        back = time.monotonic()
        self.seen.pg_window = (stopped, back)
        async with httpx.AsyncClient(timeout=2) as http:
            self.seen.pg_held = await self.until_held(http, RECOVERY_BOUND_S)
        while (ok := min((t for t in self.oks if t > back), default=None)) is None:
            if time.monotonic() > back + RECOVERY_BOUND_S:
                break
            await asyncio.sleep(SAMPLE_S)
        self.seen.pg_ok = ok


async def _start_after(proc: Proc, pause: float) -> None:
    await asyncio.sleep(pause)
    await proc.start()


def chaos_plan(
    stack: Stack, args: argparse.Namespace, rng: random.Random
) -> tuple[list[Fault], list[Fault]]:
    """SIGKILL the workers `--kills` times, and the host `--host-kills` times and kill the dev
    server once, at seeded random moments: two tracks, each done one fault after the other and
    the two at once (a worker may die while the host or the server is down). With replicas,
    each host kill SIGKILLs the followers' lease holder, and PostgreSQL is stopped once, on
    the host's track."""
    duration = args.duration
    victims = [stack.timer_worker], [stack.job_worker], [stack.timer_worker, stack.job_worker]
    kills = sorted(
        (rng.uniform(0.12, 0.7) * duration, rng.randrange(3), rng.uniform(0.5, 3.0))
        for _ in range(args.kills)
    )
    hosts = [
        (rng.uniform(0.12, 0.7) * duration, rng.uniform(0.3, 2.0)) for _ in range(args.host_kills)
    ]
    workers = [
        Fault(at, " and ".join(v.name.removeprefix("the ") for v in victims[which]),
              partial(restart, victims[which], pause))
        for at, which, pause in kills
    ]  # fmt: skip
    replicas = stack.replicas
    if replicas is None:
        downs = [Fault(at, "host", partial(restart, stack.hosts, pause)) for at, pause in hosts]
    else:
        downs = [
            Fault(at, "host replica", partial(replicas.kill_next, pause)) for at, pause in hosts
        ]
    if not args.no_server_restart:
        at = rng.uniform(0.35, 0.55) * duration
        downs.append(Fault(at, "server", partial(restart, [stack.server], 5.0)))
    if replicas is not None:  # away ~5.5-8 s with the stop and the start
        pause = rng.uniform(5.0, 7.0)
        at = rng.uniform(0.15, 0.6) * duration
        downs.append(Fault(at, "postgres", partial(replicas.postgres_down, pause)))
    return workers, downs
