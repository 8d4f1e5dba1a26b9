"""Benchmark: handing commits over, through `POST /commits` and `TimerClient.apply`, against bare
`start_workflow` calls side by side on one dev server.

One fresh headless dev server and the real control API (`wow-temporal api`, its own process,
as a foreign host's relay would call it). Each side hands over the same number of one-commit
schedules far in the future (nothing fires):

- `api, one per request`: one commit per `POST /commits`, `--clients` requests in flight;
- `api, batched`: `--batch` commits per `POST /commits`, one request at a time (the API applies
  a batch's aggregates at once);
- `TimerClient.apply`: `--clients` applies in flight in this process;
- `bare start_workflow`: a workflow started with a start delay, `--clients` in flight.

Printed: commits per second and request latency p50/p99, and each side's ratio to bare.

Then changes to running timers, as an operator meets them: `--timers` timers have each run on
a real `wow-temporal worker` process (so they are sticky to it), and `--changes` commits
replacing their schedules go to `POST /commits` from `--clients` clients, in each case:

- `healthy`: one worker, healthy (measured first and last; the better is the baseline);
- `after a worker SIGKILL`: the worker that ran them SIGKILLed and another started at once;
- `no worker`: the worker SIGKILLed, none running;
- `2 workers, one SIGKILLed`: two workers ran them, one is SIGKILLed, the other healthy;
- `behind a backlog`: `--backlog` other timers' changes queued as workflow tasks first.

Each prints its rate and p99 as ratios to the healthy ones (targets: rate ≥ 0.8x, p99 ≤ 2x),
and how long the timers then took to apply every change once a worker ran (not ingest).
Run: `.venv/bin/python bench/ingest.py [--n 1000] [--clients 20] [--batch 100] [--timers 150]`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
from temporalio import workflow
from temporalio.client import Client

from bench.harness.stats import percentile
from bench.soak import WorkerProcess
from wow_temporal.dev.ports import free_port
from wow_temporal.dev.server import EmbeddedTemporal
from wow_temporal.ids import timer_workflow_id
from wow_temporal.model import Commit
from wow_temporal.timers.client import TimerClient

IDLE_QUEUE = "bench-ingest-idle"  # no worker polls it: nothing ever runs
API = Path(sys.executable).parent / "wow-temporal"
CHANGE_CLIENTS = 12


@workflow.defn(name="bench.Idle")
class Idle:
    @workflow.run
    async def run(self) -> None:  # pragma: no cover - never runs
        return None


def commit(aggregate_id: str, version: int = 1) -> dict[str, Any]:
    return {
        "id": f"c{version}-{aggregate_id}",
        "contextName": "eshop-order",
        "aggregateName": "order",
        "tenantId": "t1",
        "aggregateId": aggregate_id,
        "version": version,
        "createTime": int(time.time() * 1000),
        "body": [
            {
                "id": "e0",
                "name": "wow.ScheduleSet",
                "body": {
                    "key": "grace",
                    "rule": {"after": "P30D"},
                    "command": {"type": "eshop.order.CancelOrder", "body": {}},
                },
            }
        ],
    }


async def timed(
    jobs: list[Callable[[], Awaitable[int]]], in_flight: int
) -> tuple[float, list[float]]:
    """Run the jobs (each returns how many commits it handed over) with `in_flight` at once:
    commits per second, and each job's latency in ms."""
    queue = list(reversed(jobs))
    latencies: list[float] = []
    done = 0

    async def worker() -> None:
        nonlocal done
        while queue:
            job = queue.pop()
            began = time.perf_counter()
            handed = await job()  # (not `done += await ...`: that reads `done` first)
            done += handed
            latencies.append((time.perf_counter() - began) * 1000)

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(in_flight)))
    return done / (time.perf_counter() - began), latencies


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="wow-ingest-") as tmp:
        server = EmbeddedTemporal(Path(tmp) / "temporal", headless=True)
        await server.start()
        port = free_port()
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("WOW_", "TEMPORAL_"))},
            "TEMPORAL_ADDRESS": server.address,
            "WOW_API_PORT": str(port),
        }
        api = await asyncio.create_subprocess_exec(
            str(API), "api", env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        http = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60)
        try:
            for _ in range(300):
                with contextlib.suppress(httpx.HTTPError):
                    if (await http.get("/ready")).status_code == 200:
                        break
                await asyncio.sleep(0.1)
            client: Client = await server.connect()
            timers = TimerClient(client, task_queue=IDLE_QUEUE)
            run_id = uuid.uuid4().hex[:6]

            def ids(side: str) -> list[str]:
                return [f"{side}-{run_id}-{i}" for i in range(args.n)]

            async def post_one(aggregate_id: str) -> int:
                answer = await http.post("/commits", json=commit(aggregate_id))
                answer.raise_for_status()
                return 1

            async def post_batch(batch: list[str]) -> int:
                answer = await http.post("/commits", json=[commit(a) for a in batch])
                answer.raise_for_status()
                return len(batch)

            async def apply(aggregate_id: str) -> int:
                await timers.apply(commit(aggregate_id))
                return 1

            async def bare(aggregate_id: str) -> int:
                await client.start_workflow(
                    Idle.run,
                    id=f"bare:{aggregate_id}",
                    task_queue=IDLE_QUEUE,
                    start_delay=timedelta(days=30),
                )
                return 1

            def batches(side: str) -> list[Callable[[], Awaitable[int]]]:
                names = ids(side)
                return [
                    (lambda b=names[i : i + args.batch]: post_batch(b))
                    for i in range(0, len(names), args.batch)
                ]

            sides: list[tuple[str, Callable[[str], list[Callable[[], Awaitable[int]]]], int]] = [
                (
                    "bare start_workflow",
                    lambda s: [lambda a=a: bare(a) for a in ids(s)],
                    args.clients,
                ),
                (
                    "TimerClient.apply",
                    lambda s: [lambda a=a: apply(a) for a in ids(s)],
                    args.clients,
                ),
                (
                    "api, one per request",
                    lambda s: [lambda a=a: post_one(a) for a in ids(s)],
                    args.clients,
                ),
                (f"api, {args.batch} per request", batches, 1),
            ]
            results: dict[str, tuple[float, list[float]]] = {}
            for round_ in range(args.rounds):
                for index, (name, jobs, in_flight) in enumerate(sides):
                    rate, latencies = await timed(jobs(f"s{index}r{round_}"), in_flight)
                    if name not in results or rate > results[name][0]:
                        results[name] = (rate, latencies)
            base = results["bare start_workflow"][0]
            print(f"=== handing over {args.n} commits, best of {args.rounds} rounds ===")
            for name, (rate, latencies) in results.items():
                print(
                    f"  {name:24} {rate:7.0f} commits/s  ratio {rate / base:4.2f}  "
                    f"request p50 {percentile(latencies, 0.5):7.1f} ms  "
                    f"p99 {percentile(latencies, 0.99):7.1f} ms"
                )
            if args.timers:
                await run_changes(server, http, client, args)
        finally:
            await http.aclose()
            api.terminate()
            await api.wait()
            await server.stop()


class Workers:
    """Real `wow-temporal worker` processes (`bench/soak.py`'s) started and SIGKILLed at will."""

    def __init__(self, server: EmbeddedTemporal, logs: Path) -> None:
        self.server = server
        self.logs = logs
        self.running: list[WorkerProcess] = []
        self.started = 0

    async def start(self) -> WorkerProcess:
        self.started += 1
        log = self.logs / f"worker-{self.started}.log"
        worker = WorkerProcess(self.server, "http://127.0.0.1:9", log)  # nothing falls due
        await worker.start()
        self.running.append(worker)
        return worker

    async def kill(self, worker: WorkerProcess) -> None:
        await worker.kill()
        self.running.remove(worker)

    async def stop(self) -> None:
        for worker in list(self.running):
            await self.kill(worker)


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
        version = self.version

        async def post(aggregate_id: str) -> int:
            (
                await self.http.post("/commits", json=commit(aggregate_id, version))
            ).raise_for_status()
            return 1

        return await timed([functools.partial(post, a) for a in self.ids], clients)

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


def timer_workflow_id_of(aggregate_id: str) -> str:
    return timer_workflow_id(Commit.parse(commit(aggregate_id)).aggregate, "grace")


async def backlog(http: httpx.AsyncClient, count: int, batch: int) -> None:
    """Queue `count` workflow tasks ahead: timers set, then each changed (ending its start
    delay), in batched requests."""
    names = [f"backlog-{uuid.uuid4().hex[:6]}-{i}" for i in range(count)]
    for version in (1, 2):
        for i in range(0, count, batch):
            body = [commit(a, version) for a in names[i : i + batch]]
            (await http.post("/commits", json=body)).raise_for_status()


async def run_changes(
    server: EmbeddedTemporal, http: httpx.AsyncClient, client: Client, args: argparse.Namespace
) -> None:
    """The changes cases side by side, one set of warm timers throughout."""
    with tempfile.TemporaryDirectory(prefix="wow-ingest-workers-") as logs:
        workers = Workers(server, Path(logs))
        timers = TimerClient(client)
        ids = [f"warm-{uuid.uuid4().hex[:6]}-{i}" for i in range(args.timers)]
        run = ChangeRun(http, timers, ids)
        results: list[tuple[str, float, list[float], float]] = []

        async def case(name: str) -> None:
            rate, latencies = await run.post_rounds(args.rounds_per_case)
            settle = await run.applied() if workers.running else -1.0
            results.append((name, rate, latencies, settle))

        try:
            first = await workers.start()
            await run.post_round()  # each timer starts (sleeping out its start delay) …
            await run.post_round()  # … and runs on the worker: sticky to it from now on
            await run.applied()
            await case("healthy")
            await workers.kill(first)
            second = await workers.start()
            await case("after a worker SIGKILL")
            await workers.kill(second)
            await case("no worker")
            third = await workers.start()
            await run.applied()
            await workers.start()
            await workers.kill(third)
            await case("2 workers, one SIGKILLed")
            await backlog(http, args.backlog, args.batch)
            await case(f"behind a backlog of {args.backlog}")
            await case("healthy")
        finally:
            await workers.stop()
        healthy = [r for r in results if r[0] == "healthy"]
        base_rate, base_latencies = max((r[1], r[2]) for r in healthy)
        base_p99 = percentile(base_latencies, 0.99)
        print(
            f"=== changes of {args.timers} running timers x {args.rounds_per_case} rounds, "
            f"POST /commits from {CHANGE_CLIENTS} clients ==="
        )
        for name, rate, latencies, settle in results:
            applied = f"applied in {settle:5.1f} s" if settle >= 0 else "applied once one runs"
            print(
                f"  {name:28} {rate:6.0f} commits/s  x{rate / base_rate:4.2f}  "
                f"p50 {percentile(latencies, 0.5):6.1f} ms  "
                f"p99 {percentile(latencies, 0.99):6.1f} ms "
                f"x{percentile(latencies, 0.99) / base_p99:4.2f}  {applied}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="commits per side and round")
    parser.add_argument("--clients", type=int, default=20, help="requests in flight")
    parser.add_argument("--batch", type=int, default=100, help="commits per batched request")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--timers", type=int, default=150, help="running timers changed; 0: none")
    parser.add_argument("--rounds-per-case", type=int, default=2, help="changes per timer")
    parser.add_argument("--backlog", type=int, default=3000, help="workflow tasks queued ahead")
    # SIGTERM (a timeout) ends the run through `finally`, so no dev server is left behind.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
