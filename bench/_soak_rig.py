"""The chaos soak's rig (`bench.soak`): the server, the fake host and the workers, the chaos
done to them, the relay handing the planned commits over, and the end (parked timers retried,
crons cancelled) that its judge reads."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TypeVar

from temporalio.client import Client, WorkflowExecutionStatus

from bench._soak_plan import (
    CHAOS_RECOVERY_S,
    DELIVERY,
    FLAKY_FAILURES,
    PARKED_WITHIN_S,
    Aggregate,
    ref,
)
from bench.harness import Fault, HostProcess, Proc, scratch, summary, worker_env
from bench.harness.chaos import restart
from bench.oracle.ledger import Ending, Schedule
from wow_temporal.dev.server import EmbeddedTemporal
from wow_temporal.ids import timer_workflow_id
from wow_temporal.timers.client import TimerClient, TimerError
from wow_temporal.timers.core import Status, TimerState

R = TypeVar("R")


@dataclass
class Run:
    """A soak under way: its server, host, workers and client, and the run's clock."""

    server: EmbeddedTemporal
    host: HostProcess
    workers: list[Proc]
    client: Client
    timers: TimerClient
    epoch: float = field(default_factory=time.time)

    async def reconnect(self) -> None:
        """A client of the restarted server, and the soak's timer client on it."""
        self.client = await self.server.connect()
        self.timers = TimerClient(self.client, delivery=DELIVERY)

    def clock(self) -> float:
        return time.time() - self.epoch


@asynccontextmanager
async def running(tmp: Path, args: argparse.Namespace) -> AsyncIterator[Run]:
    """A fresh headless dev server, the fake host answering by the aggregate id's prefix (`ok-`
    Ok, `reject-` IllegalState, `fail-` 503 until healed, `flaky-` 503 for the first attempts
    of each request id, `slow-` Ok late) and `--workers` real workers; all ended on the way
    out."""
    server = EmbeddedTemporal(tmp / "temporal", headless=True)
    host = HostProcess(tmp / "host.log")
    workers: list[Proc] = []
    try:
        await server.start()
        await host.start()
        await host.behave("reject", aggregate_prefix="reject")
        await host.behave("fail", aggregate_prefix="fail", status=503)
        await host.behave("fail", aggregate_prefix="flaky", attempts=FLAKY_FAILURES, status=503)
        await host.behave("hang", aggregate_prefix="slow", delay=(0.2, 1.5))
        tracing = str(not args.no_tracing).lower()
        env = worker_env(server.address, server.namespace, host.url, WOW_TELEMETRY_TRACING=tracing)
        for n in range(args.workers):
            workers.append(Proc.worker(tmp / f"worker-{n}.log", env, name=f"worker {n + 1}"))
        await asyncio.gather(*(w.start() for w in workers))
        client = await server.connect()
        yield Run(server, host, workers, client, TimerClient(client, delivery=DELIVERY))
    finally:
        await asyncio.gather(*(w.kill() for w in workers))
        await host.stop()
        await server.stop()


async def on_fresh_rig(
    args: argparse.Namespace,
    name: str,
    body: Callable[[Run, argparse.Namespace, random.Random, str], Awaitable[R]],
) -> R:
    """`body` on a fresh rig in a scratch directory, with the run's seeded random and its id."""
    rng = random.Random(args.seed)
    run = f"{rng.randrange(16**6):06x}"
    with scratch(args, name) as tmp:
        async with running(tmp, args) as rig:
            return await body(rig, args, rng, run)


def chaos_plan(
    rig: Run, duration: float, rng: random.Random, kills: int, restart_server: bool
) -> list[Fault]:
    """SIGKILL one worker `kills` times (each in turn), all of them once when there are
    several, and kill the dev server once, at random moments while commits are handed over."""
    workers = rig.workers
    count = len(workers)
    moments = sorted(rng.uniform(0.1, 0.65) * duration for _ in range(kills + (count > 1)))
    faults = []
    if restart_server:
        at = rng.uniform(0.45, 0.6) * duration
        faults.append(Fault(at, "server", partial(restart, [rig.server], 5.0)))
    victims = [[workers[n % count]] for n in range(kills)] + [workers] * (count > 1)
    for at, procs in zip(moments, victims, strict=True):
        what = procs[0].name if len(procs) == 1 else "all workers"
        faults.append(Fault(at, what, partial(restart, procs, rng.uniform(1.0, 3.0))))
    return faults


async def hand_over(
    rig: Run, aggregate: Aggregate, limit: asyncio.Semaphore, applies: list[tuple[float, float]]
) -> None:
    """The relay for one aggregate: each handover at its moment, in the planned order,
    retried until Temporal takes it (it may be down); `applies` gets each one's end (run
    seconds) and how long it took."""
    handovers = [(at, commit) for commit in aggregate.commits for at in commit.handovers]
    for at, commit in sorted(handovers, key=lambda pair: pair[0]):
        await asyncio.sleep(max(0.0, at - rig.clock()))
        data = commit.wire(aggregate.aggregate_id, rig.epoch)
        began = rig.clock()
        deadline = time.monotonic() + 120
        while True:
            try:
                async with limit:
                    started = time.monotonic()
                    await rig.timers.apply(data)
                    applies.append((rig.clock(), time.monotonic() - started))
                break
            except Exception:
                if time.monotonic() > deadline:  # not Temporal being down for a while
                    raise
                await asyncio.sleep(0.5)
        commit.applied_s.append((began, rig.clock()))


@dataclass(frozen=True)
class Ingest:
    """Applies done per second while commits were handed over, and how long each took; apart,
    outside the chaos windows and inside the windows of worker kills (a server restart stops
    ingest by nature)."""

    per_s: float = 0.0
    apply_p50_ms: float = 0.0
    apply_p99_ms: float = 0.0
    outside_per_s: float = 0.0
    inside_per_s: float = 0.0
    inside_ratio: float = 0.0
    apply_p99_inside_ms: float = 0.0
    apply_p99_outside_ms: float = 0.0


def measure_ingest(
    applies: list[tuple[float, float]],
    windows: list[tuple[str, float, float]],
    began: float,
    ended: float,
) -> Ingest:
    """Applies done per second overall and inside the worker-kill windows (to their restart,
    and 2 s on) against outside every window, over the time commits were handed over (from
    `began`, the first planned, to `ended`, run s); the server's window (and its recovery)
    counts as neither: with no server, no ingest."""
    step = 0.1
    bins = max(1, int((ended - began) / step) + 1)
    kind = ["outside"] * bins
    for what, start, end in windows:
        label, tail = ("server", CHAOS_RECOVERY_S) if what == "server" else ("worker", 2.0)
        first = max(0, int((start - began) / step))
        last = min(bins, int((end + tail - began) / step) + 1)
        for n in range(first, last):
            if kind[n] != "server":
                kind[n] = label
    done: Counter[str] = Counter()
    took: dict[str, list[float]] = defaultdict(list)
    for finished, duration in applies:
        took["all"].append(duration * 1000)
        n = int((finished - began) / step)
        if 0 <= n < bins:
            done[kind[n]] += 1
            took[kind[n]].append(duration * 1000)
    seconds = Counter(kind)
    outside = done["outside"] / max(seconds["outside"] * step, 1e-9)
    inside = done["worker"] / max(seconds["worker"] * step, 1e-9)
    return Ingest(
        per_s=round(len(applies) / max(ended, 1e-9), 1),
        apply_p50_ms=summary(took["all"]).get("p50", 0.0),
        apply_p99_ms=summary(took["all"]).get("p99", 0.0),
        outside_per_s=round(outside, 1),
        inside_per_s=round(inside, 1),
        inside_ratio=round(inside / outside, 2) if outside else 0.0,
        apply_p99_outside_ms=summary(took["outside"]).get("p99", 0.0),
        apply_p99_inside_ms=summary(took["worker"]).get("p99", 0.0),
    )


async def settle(rig: Run, args: argparse.Namespace, schedules: list[Schedule]) -> Ending:
    """Once the last one-shot is due: read which timers parked, heal the failing host and
    retry them, cancel the live cron timers; what was done, for the judge."""
    last_due = max(
        (s.due_ms(1) / 1000 - rig.epoch for s in schedules if not s.recurring), default=0.0
    )
    await asyncio.sleep(max(0.0, last_due - rig.clock()) + args.settle)

    # Parked now: exactly the failing host's live schedules (read by id, not visibility).
    parked_seen: set[str] = set()
    live: dict[str, Schedule] = {}
    for schedule in schedules:
        if schedule.superseded_at is None and schedule.applied_at is not None:
            wid = timer_workflow_id(ref(schedule.aggregate_id), schedule.key)
            if wid not in live or live[wid].order < schedule.order:
                live[wid] = schedule
    states = await settled_states(rig.client, list(live), args.settle_within)
    for state in states.values():
        if state is not None and state.status is Status.PARKED and state.spec is not None:
            parked_seen.add(state.spec.timer)
    await rig.host.unbehave(aggregate_prefix="fail")  # healed
    healed_at = rig.clock()
    retried = [w for w, state in states.items() if state and state.status is Status.PARKED]
    for wid in retried:
        with contextlib.suppress(TimerError):
            await rig.timers.retry(wid)
    await asyncio.sleep(args.settle)
    await settled_states(rig.client, retried, args.settle_within)
    cancelled_crons_at: dict[str, tuple[float, float]] = {}
    for wid, schedule in live.items():
        if schedule.recurring:
            began = rig.clock()
            with contextlib.suppress(TimerError):
                await rig.timers.cancel(wid)
            cancelled_crons_at[schedule.timer] = (began, rig.clock())
    for schedule in schedules:
        if schedule.recurring and schedule.timer not in cancelled_crons_at:
            cancelled_crons_at[schedule.timer] = (rig.clock(), rig.clock())
    await asyncio.sleep(2.0)
    return Ending(frozenset(parked_seen), healed_at, cancelled_crons_at, PARKED_WITHIN_S)


async def settled_states(
    client: Client, workflow_ids: list[str], within: float
) -> dict[str, TimerState | None]:
    """The timers' states once every one-shot among them has ended or parked (a loaded machine
    lags behind the due times; waiting on a fixed sleep would count its backlog as lost), or
    as they are after `within` s."""
    deadline = time.monotonic() + within
    while True:
        states = await fetch_states(client, workflow_ids)
        waiting = [
            w
            for w, state in states.items()
            if state is None
            or (
                state.status in (Status.SCHEDULED, Status.DELIVERING)
                and not (state.spec is not None and state.spec.recurring)
            )
        ]
        if not waiting or time.monotonic() > deadline:
            return states
        await asyncio.sleep(1.0)


async def fetch_states(client: Client, workflow_ids: list[str]) -> dict[str, TimerState | None]:
    """Each timer's state by id: queried while it runs, its result once closed."""
    limit = asyncio.Semaphore(40)

    async def one(workflow_id: str) -> tuple[str, TimerState | None]:
        async with limit:
            handle = client.get_workflow_handle(workflow_id, result_type=TimerState)
            for _ in range(20):
                try:
                    description = await handle.describe()
                    if description.status == WorkflowExecutionStatus.RUNNING:
                        return workflow_id, await handle.query("state", result_type=TimerState)
                    return workflow_id, await handle.result(follow_runs=False)
                except Exception:  # a worker mid-restart: ask again
                    await asyncio.sleep(0.5)
            return workflow_id, None

    return dict(await asyncio.gather(*(one(w) for w in workflow_ids)))
