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
Run: `.venv/bin/python bench/ingest.py [--n 1000] [--clients 20] [--batch 100]`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import statistics
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

from wow_temporal.embedded import EmbeddedTemporal, free_port
from wow_temporal.timers.client import TimerClient

IDLE_QUEUE = "bench-ingest-idle"  # no worker polls it: nothing ever runs
API = Path(sys.executable).parent / "wow-temporal"


@workflow.defn(name="bench.Idle")
class Idle:
    @workflow.run
    async def run(self) -> None:  # pragma: no cover - never runs
        return None


def commit(aggregate_id: str) -> dict[str, Any]:
    return {
        "id": f"c1-{aggregate_id}",
        "contextName": "eshop-order",
        "aggregateName": "order",
        "tenantId": "t1",
        "aggregateId": aggregate_id,
        "version": 1,
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


def p(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else values[0]


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
                    f"request p50 {p(latencies, 50):7.1f} ms  p99 {p(latencies, 99):7.1f} ms"
                )
        finally:
            await http.aclose()
            api.terminate()
            await api.wait()
            await server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="commits per side and round")
    parser.add_argument("--clients", type=int, default=20, help="requests in flight")
    parser.add_argument("--batch", type=int, default=100, help="commits per batched request")
    parser.add_argument("--rounds", type=int, default=2)
    # SIGTERM (a timeout) ends the run through `finally`, so no dev server is left behind.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
