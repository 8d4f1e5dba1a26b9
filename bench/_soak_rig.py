"""The chaos soak's rig (`bench.soak`): the fake host and the workers, the chaos done to them,
the relay handing the planned commits over, and the end (parked timers retried, crons
cancelled) that its judge reads."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus

from bench._soak_plan import CHAOS_RECOVERY_S, FLAKY_FAILURES, PARKED_WITHIN_S, Aggregate, ref
from bench.harness import Fault, HostProcess, Proc, summary, worker_env
from bench.oracle.ledger import Ending, Schedule
from wow_temporal.dev.server import EmbeddedTemporal
from wow_temporal.ids import timer_workflow_id
from wow_temporal.timers.client import TimerClient, TimerError
from wow_temporal.timers.core import Status, TimerState


async def start_host(log: Path) -> HostProcess:
    """The fake Wow host in its own process, answering by the aggregate id's prefix: `ok-` Ok,
    `reject-` IllegalState, `fail-` 503 until healed, `flaky-` 503 for the first attempts of
    each request id, `slow-` Ok late."""
    host = HostProcess(log)
    await host.start()
    await host.behave("reject", aggregate_prefix="reject")
    await host.behave("fail", aggregate_prefix="fail", status=503)
    await host.behave("fail", aggregate_prefix="flaky", attempts=FLAKY_FAILURES, status=503)
    await host.behave("hang", aggregate_prefix="slow", delay=(0.2, 1.5))
    return host


async def heal(host: HostProcess) -> None:
    """The failing host answers as the others again."""
    await host.unbehave(aggregate_prefix="fail")


def start_workers(
    server: EmbeddedTemporal, host_url: str, tmp: Path, count: int, *, tracing: bool = True
) -> list[Proc]:
    """`count` real `wow-temporal worker` processes on the same task queues (not yet started)."""
    env = worker_env(
        server.address, server.namespace, host_url, WOW_TELEMETRY_TRACING=str(tracing).lower()
    )
    return [Proc.worker(tmp / f"worker-{n}.log", env, name=f"worker {n + 1}") for n in range(count)]


async def restart(procs: list[Proc], pause: float) -> None:
    """SIGKILL them together, wait `pause` seconds, start them again together."""
    await asyncio.gather(*(p.kill() for p in procs))
    await asyncio.sleep(pause)
    await asyncio.gather(*(p.start() for p in procs))


def chaos_plan(
    server: EmbeddedTemporal,
    workers: list[Proc],
    duration: float,
    rng: random.Random,
    kills: int,
    restart_server: bool,
) -> list[Fault]:
    """SIGKILL one worker `kills` times (each in turn), all of them once when there are
    several, and kill the dev server once, at random moments while commits are handed over."""
    count = len(workers)
    moments = sorted(rng.uniform(0.1, 0.65) * duration for _ in range(kills + (count > 1)))

    def down(procs: list[Proc]) -> Callable[[], Awaitable[None]]:
        return lambda: restart(procs, rng.uniform(1.0, 3.0))

    faults = [
        Fault(at, f"worker {n % count + 1}", down([workers[n % count]]))
        for n, at in enumerate(moments[:kills])
    ]
    if count > 1:
        faults.append(Fault(moments[kills], "all workers", down(workers)))

    async def server_down() -> None:
        await server.kill()
        await asyncio.sleep(5.0)
        await server.start()

    if restart_server:
        faults.append(Fault(rng.uniform(0.45, 0.6) * duration, "server", server_down))
    return faults


def chaos_kinds(workers: int, kills: int, restart_server: bool) -> list[str]:
    """What `chaos_plan` does, by name."""
    kinds = [f"worker {n % workers + 1}" for n in range(kills)]
    return sorted(kinds + ["all workers"] * (workers > 1) + ["server"] * restart_server)


async def hand_over(
    timers: TimerClient,
    aggregate: Aggregate,
    epoch: float,
    clock: Callable[[], float],
    limit: asyncio.Semaphore,
    applies: list[tuple[float, float]],
) -> None:
    """The relay for one aggregate: each handover at its moment, in the planned order,
    retried until Temporal takes it (it may be down); `applies` gets each one's end (run
    seconds) and how long it took."""
    handovers = [(at, commit) for commit in aggregate.commits for at in commit.handovers]
    for at, commit in sorted(handovers, key=lambda pair: pair[0]):
        await asyncio.sleep(max(0.0, at - clock()))
        data = commit.wire(aggregate.aggregate_id, epoch)
        began = clock()
        deadline = time.monotonic() + 120
        while True:
            try:
                async with limit:
                    started = time.monotonic()
                    await timers.apply(data)
                    applies.append((clock(), time.monotonic() - started))
                break
            except Exception:
                if time.monotonic() > deadline:  # not Temporal being down for a while
                    raise
                await asyncio.sleep(0.5)
        commit.applied_s.append((began, clock()))


@dataclass(frozen=True)
class IngestInChaos:
    """Applies done per second outside the chaos windows, while commits were handed over, and
    inside the windows of worker kills (a server restart stops ingest by nature)."""

    outside_per_s: float
    inside_per_s: float
    inside_ratio: float
    apply_p99_inside_ms: float
    apply_p99_outside_ms: float


def ingest_in_chaos(
    applies: list[tuple[float, float]],
    windows: list[tuple[str, float, float]],
    began: float,
    ended: float,
) -> IngestInChaos:
    """Applies done per second inside the worker-kill windows (to their restart, and 2 s
    on) against outside every window, over the time commits were handed over;
    the server's window (and its recovery) counts as neither: with no server, no ingest."""
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
        n = int((finished - began) / step)
        if 0 <= n < bins:
            done[kind[n]] += 1
            took[kind[n]].append(duration * 1000)
    seconds = Counter(kind)
    outside = done["outside"] / max(seconds["outside"] * step, 1e-9)
    inside = done["worker"] / max(seconds["worker"] * step, 1e-9)
    return IngestInChaos(
        outside_per_s=round(outside, 1),
        inside_per_s=round(inside, 1),
        inside_ratio=round(inside / outside, 2) if outside else 0.0,
        apply_p99_outside_ms=summary(took["outside"]).get("p99", 0.0),
        apply_p99_inside_ms=summary(took["worker"]).get("p99", 0.0),
    )


async def count_task_timeouts(client: Client, workflow_ids: list[str]) -> int:
    """Workflow tasks that timed out (on the sticky queue, or unclaimed) across the timers."""
    limit = asyncio.Semaphore(40)

    async def one(workflow_id: str) -> int:
        async with limit:
            found = 0
            with contextlib.suppress(Exception):
                handle = client.get_workflow_handle(workflow_id)
                async for event in handle.fetch_history_events():
                    found += event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT
            return found

    return sum(await asyncio.gather(*(one(w) for w in workflow_ids)))


@dataclass
class Run:
    """A soak under way: its server, host, workers and client, and the run's clock."""

    server: EmbeddedTemporal
    host: HostProcess
    workers: list[Proc]
    client: Client
    timers: TimerClient
    epoch: float = field(default_factory=time.time)

    def clock(self) -> float:
        return time.time() - self.epoch


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
    await heal(rig.host)
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
