"""What `bench.timers`, `bench.jobs` and `bench.capacity` share: one dev server and the fake Wow
host on a scratch directory, progress on stderr, rounds in rotating order, and a burst's drain
read at the host."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from temporalio.client import Client
from temporalio.worker import PollerBehaviorAutoscaling, Worker

from bench.harness import HostProcess, cpu_seconds, percentile, scratch, sleep_until
from wow_temporal.dev.ports import free_port
from wow_temporal.dev.server import EmbeddedTemporal
from wow_temporal.testing.wow_host import Arrival
from wow_temporal.worker import STICKY_TIMEOUT

R = TypeVar("R")


@dataclass
class Stack:
    """A started dev server, the fake host, a client of the server, the scratch directory."""

    server: EmbeddedTemporal
    host: HostProcess
    client: Client
    tmp: Path
    metrics_url: str
    """The server's Prometheus `/metrics` ("" when it serves none)."""


@contextlib.asynccontextmanager
async def dev_stack(
    args: argparse.Namespace, name: str, *, metrics: bool = False
) -> AsyncIterator[Stack]:
    """A fresh headless dev server (its `/metrics` on a free port with `metrics`) and the fake
    host, both started at once and stopped on the way out."""
    with scratch(args, name) as tmp:
        port = free_port("127.0.0.1") if metrics else None
        extra = ["--metrics-port", str(port)] if port else []
        server = EmbeddedTemporal(tmp / "temporal", headless=True, extra_args=extra)
        host = HostProcess(tmp / "host.log")
        try:
            await asyncio.gather(server.start(), host.start())
            url = f"http://127.0.0.1:{port}/metrics" if port else ""
            yield Stack(server, host, await server.connect(), tmp, url)
        finally:
            await asyncio.gather(server.stop(), host.stop())


def baseline_worker(
    client: Client,
    queue: str,
    workflows: list[type],
    activities: list[Callable[..., Any]],
    most: int,
) -> Worker:
    """A baseline's worker (`most` activities at once), polling as wow's workers do: compare
    the designs, not the tuning."""
    return Worker(
        client,
        task_queue=queue,
        workflows=workflows,
        activities=activities,
        max_concurrent_activities=most,
        workflow_task_poller_behavior=PollerBehaviorAutoscaling(),
        activity_task_poller_behavior=PollerBehaviorAutoscaling(),
        sticky_queue_schedule_to_start_timeout=STICKY_TIMEOUT,
    )


def say(text: str) -> None:
    """Progress, on stderr (stdout is the report)."""
    print(text, file=sys.stderr, flush=True)


async def rounds(
    count: int,
    sides: Sequence[str],
    measure: Callable[[str], Awaitable[R]],
    line: Callable[[R], str],
) -> dict[str, list[R]]:
    """Each side measured once a round, the order rotating each round; `line` says each."""
    found: dict[str, list[R]] = {side: [] for side in sides}
    for r in range(count):
        k = r % len(sides)
        for side in [*sides[k:], *sides[:k]]:
            found[side].append(await measure(side))
            say(f"  round {r + 1} {side:10} {line(found[side][-1])}")
    return found


def cpu_of(**pids: int | None) -> dict[str, float]:
    """CPU seconds so far of each named process (None: this one)."""
    return {name: cpu_seconds(pid) for name, pid in pids.items()}


def late_ms(arrival: Arrival) -> float:
    """Host receive time - the slot's due time (the body's `due`), ms."""
    return float(arrival.received_ms - int(arrival.body["due"]))


async def arrivals_of(
    host: HostProcess, run: str, n: int = 0, within: float = 0.0
) -> list[Arrival]:
    """The commands of `run` (the body's) the host decided `Ok`, in arrival order; with `n`,
    once there are `n` of them or `within` seconds have passed."""
    return await host.delivered_matching(lambda a: _run(a) == run, n, within)


def _run(arrival: Arrival) -> str:
    body = arrival.body
    return str(body.get("run", "")) if isinstance(body, dict) else ""


@dataclass
class Drain:
    """A burst all due on one instant: due -> the host has the last command."""

    n: int
    handled: int
    seconds: float
    p50_ms: float
    handover_rate: float
    """Commits, enables or starts handed over per second, ahead of the due time."""
    overran: bool
    """Handing over ended after the due time (the measure is off)."""
    cpu: dict[str, float] = field(default_factory=dict)
    """CPU seconds each process spent from the due time to the last command."""

    @property
    def rate(self) -> float:
        return self.handled / max(self.seconds, 1e-3)


async def drain(
    host: HostProcess,
    run: str,
    n: int,
    due: float,
    handover_rate: float,
    cpu: Callable[[], Awaitable[dict[str, float]]],
    within: float,
) -> Drain:
    """Called once handed over: wait for `due` (epoch s), then for the `n` commands of `run`
    (the body's) at the host, reading `cpu` then and at the last."""
    overran = time.time() > due
    await sleep_until(due)
    before = await cpu()
    late = [late_ms(a) for a in await arrivals_of(host, run, n, within=within)]
    after = await cpu()
    return Drain(
        n=n,
        handled=len(late),
        seconds=max(late, default=float("inf")) / 1000,
        p50_ms=percentile(late, 0.5),
        handover_rate=handover_rate,
        overran=overran,
        cpu={k: after[k] - before[k] for k in after},
    )
