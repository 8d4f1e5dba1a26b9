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

Job = Callable[[], Awaitable[int]]  # hands commits over; how many


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


async def timed(jobs: list[Job], in_flight: int) -> tuple[float, list[float]]:
    """Run the jobs with `in_flight` at once: commits per second, each job's latency in ms."""
    latencies: list[float] = []
    handed = 0

    async def one(job: Job) -> None:
        nonlocal handed
        began = time.perf_counter()
        got = await job()  # (not `handed += await ...`: that reads `handed` before awaiting)
        handed += got
        latencies.append((time.perf_counter() - began) * 1000)

    seconds = await pool([functools.partial(one, job) for job in jobs], in_flight)
    return handed / seconds, latencies


def _measured(
    slug: str, name: str, rate: float, latencies: list[float], applied_s: float | None = None
) -> Measured:
    p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
    return Measured(slug, name, rate, p50, p99, applied_s)


def _sides(
    http: httpx.AsyncClient, client: Client, args: argparse.Namespace
) -> list[tuple[str, str, Callable[[list[str]], list[Job]], int]]:
    """Each side: slug, name, its jobs for a list of aggregate ids, and its requests in flight."""
    timers = TimerClient(client, task_queue=IDLE_QUEUE)

    async def apply(aggregate_id: str) -> int:
        await timers.apply(_commit(aggregate_id))
        return 1

    async def bare(aggregate_id: str) -> int:
        await client.start_workflow(
            "bench.Idle",
            id=_bare_id(aggregate_id),
            task_queue=IDLE_QUEUE,
            start_delay=timedelta(days=30),
        )
        return 1

    def each(do: Callable[[str], Awaitable[int]]) -> Callable[[list[str]], list[Job]]:
        return lambda ids: [functools.partial(do, a) for a in ids]

    def batches(ids: list[str]) -> list[Job]:
        chunks = (ids[i : i + args.batch] for i in range(0, len(ids), args.batch))
        return [functools.partial(_post, http, [_commit(a) for a in c]) for c in chunks]

    return [
        ("bare", "bare start_workflow", each(bare), args.clients),
        ("apply", "TimerClient.apply", each(apply), args.clients),
        (
            "api_single",
            "api, one per request",
            each(lambda a: _post(http, _commit(a))),
            args.clients,
        ),
        ("api_batched", f"api, {args.batch} per request", batches, 1),
    ]


async def handovers(
    http: httpx.AsyncClient, client: Client, args: argparse.Namespace
) -> tuple[list[Measured], int, int]:
    """Every side, `--rounds` rounds, best kept; and the commits handed over against this
    run's workflows then running on the server (each described by id)."""
    run_id = uuid.uuid4().hex[:6]
    best: dict[str, Measured] = {}
    sides = _sides(http, client, args)
    workflow_ids: list[str] = []
    for round_ in range(args.rounds):
        for index, (slug, name, jobs, in_flight) in enumerate(sides):
            ids = [f"s{index}r{round_}-{run_id}-{i}" for i in range(args.n)]
            rate, latencies = await timed(jobs(ids), in_flight)
            if slug not in best or rate > best[slug].rate:
                best[slug] = _measured(slug, name, rate, latencies)
            of = _bare_id if slug == "bare" else timer_workflow_id_of
            workflow_ids += [of(a) for a in ids]
    found = len(await still_running(client, workflow_ids))
    return list(best.values()), len(workflow_ids), found


async def _post(http: httpx.AsyncClient, body: dict[str, Any] | list[dict[str, Any]]) -> int:
    """`POST /commits` one commit or a batch; how many it handed over."""
    (await http.post("/commits", json=body)).raise_for_status()
    return len(body) if isinstance(body, list) else 1


class ChangeRun:
    """`--timers` timers that have run on a worker, and their schedules replaced again and
    again through `POST /commits`: each round gives every timer its next version."""

    def __init__(self, http: httpx.AsyncClient, timers: TimerClient, ids: list[str]) -> None:
        self.http = http
        self.timers = timers
        self.ids = ids
        self.version = 0

    async def post_round(self, clients: int = CHANGE_CLIENTS) -> tuple[float, list[float]]:
        """One new version for every timer, `clients` requests in flight."""
        self.version += 1
        bodies = [_commit(a, self.version) for a in self.ids]
        return await timed([functools.partial(_post, self.http, b) for b in bodies], clients)

    async def post_rounds(self, rounds: int) -> tuple[float, list[float]]:
        """`rounds` rounds one after the other (a timer's versions in order): the rate over
        all of them and every request's latency."""
        latencies: list[float] = []
        elapsed = 0.0
        for _ in range(rounds):
            rate, round_latencies = await self.post_round()
            elapsed += len(self.ids) / rate
            latencies.extend(round_latencies)
        return len(latencies) / elapsed, latencies

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


def _bare_id(aggregate_id: str) -> str:
    return f"bare:{aggregate_id}"


def timer_workflow_id_of(aggregate_id: str) -> str:
    return timer_workflow_id(Commit.parse(_commit(aggregate_id)).aggregate, "grace")


async def backlog(http: httpx.AsyncClient, count: int, batch: int) -> None:
    """Queue `count` workflow tasks ahead: timers set, then each changed (ending its start
    delay), in batched requests."""
    names = [f"backlog-{uuid.uuid4().hex[:6]}-{i}" for i in range(count)]
    for version in (1, 2):
        for i in range(0, count, batch):
            await _post(http, [_commit(a, version) for a in names[i : i + batch]])


async def run_changes(
    server: EmbeddedTemporal,
    http: httpx.AsyncClient,
    client: Client,
    args: argparse.Namespace,
    logs: Path,
) -> list[Measured]:
    """The changes cases side by side, one set of warm timers throughout."""
    env = worker_env(server.address, server.namespace, NO_HOST)
    workers: list[Proc] = []
    ids = [f"warm-{uuid.uuid4().hex[:6]}-{i}" for i in range(args.timers)]
    run = ChangeRun(http, TimerClient(client), ids)
    results: list[Measured] = []

    async def start() -> Proc:
        worker = Proc.worker(logs / f"worker-{len(workers) + 1}.log", env)
        workers.append(worker)
        await worker.start()
        return worker

    async def case(slug: str, name: str) -> None:
        rate, latencies = await run.post_rounds(args.rounds_per_case)
        settle = await run.applied() if any(w.running for w in workers) else None
        results.append(_measured(slug, name, rate, latencies, settle))

    try:
        first = await start()
        await run.post_round()  # each timer starts (sleeping out its start delay) …
        await run.post_round()  # … and runs on the worker: sticky to it from now on
        await run.applied()
        await case("healthy", "healthy")
        await first.kill()
        second = await start()
        await case("after_sigkill", "after a worker SIGKILL")
        await second.kill()
        await case("no_worker", "no worker")
        third = await start()
        await run.applied()
        await start()
        await third.kill()
        await case("one_of_two_sigkilled", "2 workers, one SIGKILLed")
        await backlog(http, args.backlog, args.batch)
        await case("behind_backlog", f"behind a backlog of {args.backlog}")
        await case("healthy", "healthy")
    finally:
        for worker in workers:
            await worker.kill()
    return results


async def run(args: argparse.Namespace) -> IngestReport:
    """The dev server and the control API up; the handovers, then the changes."""
    sized(args, {**QUICK, "rounds_per_case": 1}, {**FULL, "rounds_per_case": 2})
    with scratch(args, "ingest") as tmp:
        server = EmbeddedTemporal(tmp / "temporal", headless=True)
        await server.start()
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        env = worker_env(server.address, server.namespace, NO_HOST, WOW_API_PORT=str(port))
        api = Proc(
            "the control API", [str(CLI), "api"], tmp / "api.log", answers(url + "/ready"), env=env
        )
        http = httpx.AsyncClient(base_url=url, timeout=60)
        try:
            await api.start()
            client = await server.connect()
            sides, handed, found = await handovers(http, client, args)
            changes = await run_changes(server, http, client, args, tmp) if args.timers else []
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
