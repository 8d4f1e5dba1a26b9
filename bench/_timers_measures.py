"""`bench.timers`' measures 1, 2 and 4: throughput and a burst's drain side by side, lateness,
ingest; and their report."""

from __future__ import annotations

import argparse
import asyncio
import time
from dataclasses import dataclass

from bench._dev_stack import rounds, say
from bench._timers_actions import ActionsReport, measure_actions, print_actions
from bench._timers_rig import (
    BARE_QUEUE,
    CONCURRENCY,
    LATENESS_INGEST_LIMIT,
    Rig,
    timer_id,
)
from bench.harness import percentile, ratio, verdict
from wow_temporal.timers.client import TimerClient

THROUGHPUT_TARGET = 0.8
LATENESS_P99_TARGET_MS = 250.0
SIDES = {"wow": "wow (start delay, wow.deliver over HTTP)", "bare": "bare: sleep + no-op"}


@dataclass
class Burst:
    rate: float
    late_ingest: bool
    p50_ms: float
    last_ms: float


async def run_side(
    rig: Rig,
    side: str,
    dues_ms: list[int],
    tag: str,
    drain_timeout: float,
    limit: int = CONCURRENCY,
    *,
    timers: TimerClient | None = None,
    traced: bool = False,
) -> tuple[dict[str, float], float]:
    """Ingest one side's timers (`bare`, or wow through `timers`, default the rig's, `traced`
    or not), wait for every delivery, then for the side's queue to be quiet; (receipts,
    ingest end ms)."""
    n = len(dues_ms)
    timers = timers or rig.timers
    if side == "bare":
        await rig.ingest_bare(tag, dues_ms, limit)
        rig.bare_ids.extend(f"bare:{tag}-{i}" for i in range(n))
    else:
        await rig.ingest_wow(tag, dues_ms, timers, limit, traced=traced)
        rig.wow_ids.extend(timer_id(f"{tag}-{i}") for i in range(n))
    ingested_ms = time.time() * 1000
    wait = max(dues_ms) / 1000 - time.time() + drain_timeout
    got = await rig.received(tag, n, side != "bare", wait)
    await rig.settle(BARE_QUEUE if side == "bare" else timers.task_queue)
    if len(got) < n:
        say(f"  ! {side}: only {len(got)}/{n} delivered")
    rig.undelivered += n - len(got)
    return got, ingested_ms


async def burst(rig: Rig, side: str, n: int, lead: float) -> Burst:
    """N commands due at one instant `lead` seconds ahead: deliveries per second after due."""
    due = int((time.time() + lead) * 1000)
    got, ingested_ms = await run_side(rig, side, [due] * n, rig.tag(side), 30 + n / 10)
    late = [t - due for t in got.values()]
    last = max(late, default=float("inf"))
    return Burst(
        rate=len(got) / max(last / 1000, 1e-3),
        late_ingest=ingested_ms > due,
        p50_ms=percentile(late, 0.5),
        last_ms=last,
    )


async def pipeline(
    rig: Rig, side: str, n: int, *, timers: TimerClient | None = None, traced: bool = False
) -> float:
    """N commands due on arrival, ingested as fast as the side can: commands per second from
    the first ingest to the last answer (every stage of commit ingested -> host answered)."""
    start_ms = time.time() * 1000
    dues = [int(start_ms)] * n
    got, _ = await run_side(
        rig, side, dues, rig.tag("p" + side), 30 + n / 10, timers=timers, traced=traced
    )
    return len(got) / max((max(got.values(), default=float("inf")) - start_ms) / 1000, 1e-3)


async def measure_ingest(rig: Rig, n: int, count: int) -> dict[str, float]:
    """Best commits/s of `TimerClient.apply` and of bare `start_workflow` (start delay), for
    timers due in 30 days (on a queue no worker polls)."""
    far = [int((time.time() + 30 * 86400) * 1000)] * n

    async def one(side: str) -> float:
        tag = rig.tag(f"i{side}")
        if side == "wow":
            return n / await rig.ingest_wow(tag, far, rig.idle_timers)
        return n / await rig.ingest_bare(tag, far, idle=True)

    found = await rounds(count, list(SIDES), one, lambda rate: f"{rate:6.0f}/s ingest")
    return {side: max(rates) for side, rates in found.items()}


@dataclass
class Lateness:
    rate: float
    n: int
    p50: float
    p99: float
    max: float
    early: int
    missing: int
    late_ingest: bool
    p50_first: float
    p50_last: float


async def lateness(rig: Rig, rate: float, seconds: float, ingest_rate: float) -> Lateness:
    """Wow commands due one after another at `rate`/s for `seconds`: receive time minus due.

    The commits are handed over ahead of time a few at once, as a relay hands them over while
    they are made: a start delay counts from when the server takes the start, so a burst of
    fifty concurrent starts would add its own queueing (~150 ms here) to every due time.
    """
    n = max(5, round(rate * seconds))
    tag = rig.tag("lwow")
    t0 = time.time() + 1.0 + 1.5 * n / (ingest_rate * LATENESS_INGEST_LIMIT / CONCURRENCY)
    dues = [int((t0 + i / rate) * 1000) for i in range(n)]
    got, ingested_ms = await run_side(rig, "wow", dues, tag, 30, LATENESS_INGEST_LIMIT)
    late = [got[f"{tag}-{i}"] - due for i, due in enumerate(dues) if f"{tag}-{i}" in got]
    third = max(1, len(late) // 3)
    return Lateness(
        rate=rate,
        n=n,
        p50=percentile(late, 0.5),
        p99=percentile(late, 0.99),
        max=max(late),
        early=sum(1 for x in late if x < 0),
        missing=n - len(late),
        late_ingest=ingested_ms > dues[0],
        p50_first=percentile(late[:third], 0.5),
        p50_last=percentile(late[-third:], 0.5),
    )


@dataclass
class TimersReport:
    """Sections 1 to 4."""

    ingest: dict[str, float]
    best: dict[str, Burst]
    flow: dict[str, float]
    late: Lateness
    actions: ActionsReport


async def measure_timers(rig: Rig, args: argparse.Namespace, n: int, count: int) -> TimersReport:
    """Sections 1 to 4, wow against bare Temporal, after an unmeasured warm-up of each side
    (imports, connections, caches)."""
    # 4. ingest first: its rate sizes the lead time of the bursts.
    ingest = await measure_ingest(rig, max(n, 100), count)
    await asyncio.gather(*(burst(rig, side, 10, 1.5) for side in SIDES))
    # 1. a burst's drain, then the whole pipeline (due on arrival), in interleaved rounds.
    lead = 1.0 + 1.5 * n / min(ingest.values())

    def said(b: Burst) -> str:
        overran = ", INGEST OVERRAN DUE" if b.late_ingest else ""
        return (
            f"{b.rate:6.0f}/s (p50 {b.p50_ms:5.0f} ms, last {b.last_ms:5.0f} ms after due{overran})"
        )

    bursts = await rounds(count, list(SIDES), lambda side: burst(rig, side, n, lead), said)
    flows = await rounds(
        count, list(SIDES), lambda side: pipeline(rig, side, n), lambda r: f"{r:6.0f}/s e2e"
    )
    flow = {side: max(rates) for side, rates in flows.items()}
    # 2. lateness at half the ceiling (the wow end-to-end rate).
    late = await lateness(rig, flow["wow"] / 2, 2.0 if args.quick else 8.0, ingest["wow"])
    # 3. actions.
    actions = await measure_actions(rig, min(20, n), 3 if args.quick else 10)
    best = {side: max(bs, key=lambda b: b.rate) for side, bs in bursts.items()}
    return TimersReport(ingest, best, flow, late, actions)


def print_timers(t: TimersReport) -> None:
    flow, best, late = t.flow, t.best, t.late
    throughput = ratio(flow["wow"], flow["bare"])
    print(
        f"throughput  end to end (commit ingested -> host answered, due on arrival): "
        f"wow {flow['wow']:.0f}/s  baseline ({SIDES['bare']}) {flow['bare']:.0f}/s  "
        f"ratio {throughput:.2f} (target >= {THROUGHPUT_TARGET})  "
        f"{verdict(throughput >= THROUGHPUT_TARGET)}"
    )
    wow, bare = best["wow"].rate, best["bare"].rate
    print(
        f"  drain of a burst all due at one instant (after due): wow {wow:.0f}/s  "
        f"baseline {bare:.0f}/s  ratio {ratio(wow, bare):.2f}"
    )
    print(
        f"lateness    at {late.rate:.0f}/s (half the wow end-to-end ceiling), {late.n} commands: "
        f"p50 {late.p50:.0f} ms  p99 {late.p99:.0f} ms  max {late.max:.0f} ms  "
        f"early {late.early}  missing {late.missing} "
        f"(target p99 < {LATENESS_P99_TARGET_MS:.0f} ms, early 0)  "
        f"{verdict(late.p99 < LATENESS_P99_TARGET_MS and late.early == 0)}"
        f"{'  INGEST OVERRAN DUE' if late.late_ingest else ''}"
    )
    print(
        f"  p50 over the first third {late.p50_first:.0f} ms, last third {late.p50_last:.0f} ms "
        "(a p50 that grows means not keeping up)"
    )
    print_actions(t.actions)
    wow, bare = t.ingest["wow"], t.ingest["bare"]
    print(
        f"ingest      wow {wow:.0f} commits/s  bare start_workflow {bare:.0f}/s  "
        f"ratio {ratio(wow, bare):.2f}  ({CONCURRENCY} in flight)"
    )
