"""Benchmark: handing commits over, through `POST /commits` and `TimerClient.apply`, against bare
`start_workflow` calls side by side on one dev server; then changes of running timers through
`POST /commits` with their worker healthy, SIGKILLed, gone or behind a backlog (docs/benchmarks.md,
"Handing commits over").

Run: `python -m bench.ingest [--quick] [--n 1000] [--clients 20] [--batch 100] [--timers 150]`
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from temporalio.client import Client

from bench.harness import (
    CLI,
    Proc,
    Verdicts,
    answers,
    bench_main,
    commit,
    parser,
    percentile,
    pool,
    ratio,
    schedule_set,
    scratch,
    sized,
    still_running,
    worker_env,
)
from wow_temporal.dev.ports import free_port
from wow_temporal.dev.server import EmbeddedTemporal
from wow_temporal.ids import timer_workflow_id
from wow_temporal.model import Commit
from wow_temporal.timers.client import TimerClient

IDLE_QUEUE = "bench-ingest-idle"  # no worker polls it: nothing ever runs
NO_HOST = "http://127.0.0.1:9"  # nothing falls due, so nothing is ever sent
CHANGE_CLIENTS = 12
FULL = {"n": 1000, "clients": 20, "batch": 100, "rounds": 2, "timers": 150, "backlog": 3000}
QUICK = {"n": 100, "clients": 10, "batch": 50, "rounds": 1, "timers": 20, "backlog": 200}

Hand = Callable[[list[str]], Awaitable[None]]  # hands these aggregates' commits over


def _commit(aggregate_id: str, version: int = 1) -> dict[str, Any]:
    """A schedule of `aggregate_id` due in 30 days, at `version`."""
    return commit(aggregate_id, schedule_set({"after": "P30D"}), version=version)


@dataclass(frozen=True)
class Measured:
    """One side's or one case's best rate (commits per second) and request latency (ms); a
    change case's seconds until every timer applied the last change (None: no worker ran)."""

    slug: str
    name: str
    rate: float
    p50: float
    p99: float
    applied_s: float | None = None


@dataclass(frozen=True)
class IngestReport:
    n: int
    rounds: int
    sides: list[Measured]
    handed: int  # commits handed over, one new timer or workflow each
    found: int  # of this run's workflows, those running on the server afterwards (by id)
    timers: int
    rounds_per_case: int
    changes: list[Measured]

    def side(self, slug: str) -> Measured:
        return next(s for s in self.sides if s.slug == slug)

    @property
    def healthy(self) -> Measured:
        """The better healthy case: the changes' baseline."""
        return max((c for c in self.changes if c.slug == "healthy"), key=lambda c: c.rate)


async def timed(hand: Hand, chunks: list[list[str]], in_flight: int) -> tuple[float, list[float]]:
    """Hand each chunk over, `in_flight` at once: the seconds taken, each request's latency in
    ms."""
    latencies: list[float] = []

    async def one(chunk: list[str]) -> None:
        began = time.perf_counter()
        await hand(chunk)
        latencies.append((time.perf_counter() - began) * 1000)

    seconds = await pool([functools.partial(one, chunk) for chunk in chunks], in_flight)
    return seconds, latencies


def _measured(
    slug: str, name: str, rate: float, latencies: list[float], applied_s: float | None = None
) -> Measured:
    p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
    return Measured(slug, name, rate, p50, p99, applied_s)


def _sides(
    http: httpx.AsyncClient, client: Client, args: argparse.Namespace
) -> list[tuple[str, str, Hand, int, int]]:
    """Each side: slug, name, how it hands a request's commits over, commits a request and
    requests in flight."""
    timers = TimerClient(client, task_queue=IDLE_QUEUE)

    async def bare(ids: list[str]) -> None:
        await client.start_workflow(
            "bench.Idle", id=_bare_id(ids[0]), task_queue=IDLE_QUEUE, start_delay=timedelta(days=30)
        )

    async def apply(ids: list[str]) -> None:
        await timers.apply(_commit(ids[0]))

    async def post(ids: list[str]) -> None:
        await _post(http, [_commit(a) for a in ids] if len(ids) > 1 else _commit(ids[0]))

    return [
        ("bare", "bare start_workflow", bare, 1, args.clients),
        ("apply", "TimerClient.apply", apply, 1, args.clients),
        ("api_single", "api, one per request", post, 1, args.clients),
        ("api_batched", f"api, {args.batch} per request", post, args.batch, 1),
    ]


async def handovers(
    http: httpx.AsyncClient, client: Client, args: argparse.Namespace
) -> tuple[list[Measured], int, int]:
    """Every side, `--rounds` rounds, best kept; and the commits handed over against this
    run's workflows then running on the server (each described by id)."""
    run_id = uuid.uuid4().hex[:6]
    best: dict[str, Measured] = {}
    workflow_ids: list[str] = []
    sides = _sides(http, client, args)
    for round_ in range(args.rounds):
        for index, (slug, name, hand, per_request, in_flight) in enumerate(sides):
            ids = [f"s{index}r{round_}-{run_id}-{i}" for i in range(args.n)]
            chunks = [ids[i : i + per_request] for i in range(0, len(ids), per_request)]
            seconds, latencies = await timed(hand, chunks, in_flight)
            if slug not in best or args.n / seconds > best[slug].rate:
                best[slug] = _measured(slug, name, args.n / seconds, latencies)
            of = _bare_id if slug == "bare" else timer_workflow_id_of
            workflow_ids += [of(a) for a in ids]
    found = len(await still_running(client, workflow_ids))
    return list(best.values()), len(workflow_ids), found


async def _post(http: httpx.AsyncClient, body: dict[str, Any] | list[dict[str, Any]]) -> None:
    """`POST /commits` one commit or a batch."""
    (await http.post("/commits", json=body)).raise_for_status()


def _bare_id(aggregate_id: str) -> str:
    return f"bare:{aggregate_id}"


def timer_workflow_id_of(aggregate_id: str) -> str:
    return timer_workflow_id(Commit.parse(_commit(aggregate_id)).aggregate, "grace")


class Changes:
    """`--timers` timers that have run on a worker, their schedules replaced again and again
    through `POST /commits` (each round gives every timer its next version) as workers are
    SIGKILLed, started, or left behind a backlog: each case's rate, latency and settling."""

    def __init__(
        self, server: EmbeddedTemporal, http: httpx.AsyncClient, client: Client, logs: Path
    ) -> None:
        self.http = http
        self.timers = TimerClient(client)
        self.env = worker_env(server.address, server.namespace, NO_HOST)
        self.logs = logs
        self.version = 0
        self.workers: list[Proc] = []
        self.results: list[Measured] = []

    async def run(self, args: argparse.Namespace) -> list[Measured]:
        """The cases side by side, one set of warm timers throughout; every worker killed."""
        self.ids = [f"warm-{uuid.uuid4().hex[:6]}-{i}" for i in range(args.timers)]
        self.rounds = args.rounds_per_case
        try:
            first = await self.start_worker()
            await self.post_round()  # each timer starts (sleeping out its start delay) …
            await self.post_round()  # … and runs on the worker: sticky to it from now on
            await self.applied()
            await self.case("healthy", "healthy")
            await first.kill()
            second = await self.start_worker()
            await self.case("after_sigkill", "after a worker SIGKILL")
            await second.kill()
            await self.case("no_worker", "no worker")
            third = await self.start_worker()
            await self.applied()
            await self.start_worker()
            await third.kill()
            await self.case("one_of_two_sigkilled", "2 workers, one SIGKILLed")
            await backlog(self.http, args.backlog, args.batch)
            await self.case("behind_backlog", f"behind a backlog of {args.backlog}")
            await self.case("healthy", "healthy")
        finally:
            for worker in self.workers:
                await worker.kill()
        return self.results

    async def start_worker(self) -> Proc:
        worker = Proc.worker(self.logs / f"worker-{len(self.workers) + 1}.log", self.env)
        self.workers.append(worker)
        await worker.start()
        return worker

    async def case(self, slug: str, name: str) -> None:
        """`--rounds-per-case` rounds one after the other (a timer's versions in order): their
        rate and every request's latency, and the seconds until applied where a worker runs."""
        latencies: list[float] = []
        elapsed = 0.0
        for _ in range(self.rounds):
            seconds, round_latencies = await self.post_round()
            elapsed += seconds
            latencies.extend(round_latencies)
        settle = await self.applied() if any(w.running for w in self.workers) else None
        self.results.append(_measured(slug, name, len(latencies) / elapsed, latencies, settle))

    async def post_round(self) -> tuple[float, list[float]]:
        """One new version for every timer, `CHANGE_CLIENTS` requests in flight."""
        self.version += 1
        version = self.version

        async def change(ids: list[str]) -> None:
            await _post(self.http, _commit(ids[0], version))

        return await timed(change, [[a] for a in self.ids], CHANGE_CLIENTS)

    async def applied(self, within: float = 300) -> float:
        """Seconds until every timer has applied the latest version (a worker runs them)."""
        began = time.perf_counter()
        left = set(self.ids)
        while left:
            for aggregate_id in list(left):
                shown = await self.timers.show(timer_workflow_id_of(aggregate_id))
                if shown.state is not None and shown.state.applied[0] >= self.version:
                    left.discard(aggregate_id)
            if time.perf_counter() - began > within:
                raise RuntimeError(f"{len(left)} timers did not apply version {self.version}")
            if left:
                await asyncio.sleep(0.2)
        return time.perf_counter() - began


async def backlog(http: httpx.AsyncClient, count: int, batch: int) -> None:
    """Queue `count` workflow tasks ahead: timers set, then each changed (ending its start
    delay), in batched requests."""
    names = [f"backlog-{uuid.uuid4().hex[:6]}-{i}" for i in range(count)]
    for version in (1, 2):
        for i in range(0, count, batch):
            await _post(http, [_commit(a, version) for a in names[i : i + batch]])


async def run(args: argparse.Namespace) -> IngestReport:
    """The dev server and the control API up; the handovers, then the changes."""
    sized(args, {**QUICK, "rounds_per_case": 1}, {**FULL, "rounds_per_case": 2})
    with scratch(args, "ingest") as tmp:
        server = EmbeddedTemporal(tmp / "temporal", headless=True)
        await server.start()
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        env = worker_env(server.address, server.namespace, NO_HOST, WOW_API_PORT=str(port))
        ready = answers(url + "/ready")
        api = Proc("the control API", [str(CLI), "api"], tmp / "api.log", ready, env=env)
        http = httpx.AsyncClient(base_url=url, timeout=60)
        try:
            await api.start()
            client = await server.connect()
            sides, handed, found = await handovers(http, client, args)
            changes = await Changes(server, http, client, tmp).run(args) if args.timers else []
        finally:
            await http.aclose()
            await api.stop(grace=10)
            await server.stop()
    return IngestReport(
        args.n, args.rounds, sides, handed, found, args.timers, args.rounds_per_case, changes
    )


def text(report: IngestReport) -> None:
    base = report.side("bare").rate
    print(f"=== handing over {report.n} commits, best of {report.rounds} rounds ===")
    for s in report.sides:
        print(
            f"  {s.name:24} {s.rate:7.0f} commits/s  ratio {ratio(s.rate, base):4.2f}  "
            f"request p50 {s.p50:7.1f} ms  p99 {s.p99:7.1f} ms"
        )
    print(f"  workflows running on the server: {report.found} of {report.handed} handed over")
    if not report.changes:
        return
    healthy = report.healthy
    print(
        f"=== changes of {report.timers} running timers x {report.rounds_per_case} rounds, "
        f"POST /commits from {CHANGE_CLIENTS} clients ==="
    )
    for c in report.changes:
        applied = (
            "applied once one runs" if c.applied_s is None else f"applied in {c.applied_s:5.1f} s"
        )
        print(
            f"  {c.name:28} {c.rate:6.0f} commits/s  x{ratio(c.rate, healthy.rate):4.2f}  "
            f"p50 {c.p50:6.1f} ms  p99 {c.p99:6.1f} ms x{ratio(c.p99, healthy.p99):4.2f}  {applied}"
        )


def verdicts(report: IngestReport) -> Verdicts:
    """None lost; each side's rate as a ratio to bare (and batched to one per request); each
    change case's rate and p99 as ratios to healthy."""
    base = report.side("bare").rate
    ratios = {s.slug: ratio(s.rate, base) for s in report.sides if s.slug != "bare"}
    batched, single = report.side("api_batched"), report.side("api_single")
    ratios["batched_per_commit"] = ratio(batched.rate, single.rate)
    figures: dict[str, float] = {}
    if report.changes:
        healthy = report.healthy
        for c in report.changes:
            if c.slug != "healthy":
                ratios[f"{c.slug}_rate"] = ratio(c.rate, healthy.rate)
                ratios[f"{c.slug}_p99"] = ratio(c.p99, healthy.p99)
                if c.applied_s is not None:
                    figures[f"{c.slug}_applied_s"] = c.applied_s
    return Verdicts(
        must_be_zero={"lost": max(0, report.handed - report.found)},
        must_be_positive={"change_cases": len(report.changes)},
        ratios=ratios,
        figures=figures,
    )


def main() -> int:
    p = parser(__doc__)
    p.add_argument("--n", type=int, help="commits per side and round (default 1000)")
    p.add_argument("--clients", type=int, help="requests in flight (default 20)")
    p.add_argument("--batch", type=int, help="commits per batched request (default 100)")
    p.add_argument("--rounds", type=int, help="rounds of every side (default 2)")
    p.add_argument("--timers", type=int, help="running timers changed; 0: none (default 150)")
    p.add_argument("--rounds-per-case", type=int, help="changes per timer (default 2)")
    p.add_argument("--backlog", type=int, help="workflow tasks queued ahead (default 3000)")
    return bench_main(p.parse_args(), run, text, verdicts)


if __name__ == "__main__":
    raise SystemExit(main())
