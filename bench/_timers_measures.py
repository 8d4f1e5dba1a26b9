"""`bench.timers`' measures 1-4: throughput and a burst's drain side by side, lateness, Temporal
Cloud actions per command, ingest; and their report."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import dataclass

from temporalio.client import Client

from bench._timers_rig import (
    BARE_QUEUE,
    CONCURRENCY,
    IDLE_QUEUE,
    LATENESS_INGEST_LIMIT,
    LATENESS_P99_TARGET_MS,
    THROUGHPUT_TARGET,
    WOW_QUEUE,
    Rig,
    cancel_at,
    cancel_commit,
    timer_id,
)
from bench.harness import (
    iso_ms,
    percentile,
    ratio,
    verdict,
)
from bench.harness.actions import by_kind, history, total
from wow_temporal.timers.client import TimerClient

# -- the measures ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
    name: str
    label: str
    via: str  # "host" or "noop": where deliveries are seen
    activity: str = ""
    delay: bool = False

    @property
    def wow(self) -> bool:
        """A wow side (`wow.deliver`); the bare ones name their activity."""
        return not self.activity


SIDES = [
    Side("wow", "wow (start delay, wow.deliver over HTTP)", "host"),
    Side("bare", "bare: workflow.sleep + no-op activity", "noop", "bench.noop"),
    Side("bare_http", "bare: workflow.sleep + same HTTP POST", "host", "bench.http"),
    Side("bare_delay", "bare: start_delay + same HTTP POST", "host", "bench.http", delay=True),
]


@dataclass
class Burst:
    rate: float
    late_ingest: bool
    p50_ms: float
    last_ms: float


async def run_side(
    rig: Rig,
    side: Side,
    dues_ms: list[int],
    tag: str,
    drain_timeout: float,
    limit: int = CONCURRENCY,
    *,
    timers: TimerClient | None = None,
    traced: bool = False,
) -> tuple[dict[str, float], float, bool]:
    """Ingest one side's timers and wait for all deliveries; (receipts, ingest end ms, ok).
    A wow side's go through `timers` (default the rig's, on `WOW_QUEUE`), `traced` or not."""
    if side.wow:
        await rig.ingest_wow(tag, dues_ms, timers or rig.timers, limit, traced=traced)
        rig.wow_ids.extend(timer_id(f"{tag}-{i}") for i in range(len(dues_ms)))
    else:
        await rig.ingest_bare(
            tag, dues_ms, side.activity, delay=side.delay, queue=BARE_QUEUE, limit=limit
        )
        rig.bare_ids.extend(f"bare:{tag}-{i}" for i in range(len(dues_ms)))
    ingested_ms = time.time() * 1000
    wait = max(dues_ms) / 1000 - time.time()
    ok = await rig.wait_delivered(tag, len(dues_ms), side.via, wait + drain_timeout)
    got = await rig.received(tag, side.via)
    rig.undelivered += len(dues_ms) - len(got)
    return got, ingested_ms, ok


async def burst(rig: Rig, side: Side, n: int, lead: float) -> Burst:
    """N commands due at one instant `lead` seconds ahead: deliveries per second after due."""
    tag = rig.tag(side.name.replace("_", ""))
    due = int((time.time() + lead) * 1000)
    got, ingested_ms, ok = await run_side(rig, side, [due] * n, tag, 30 + n / 10)
    await rig.settle(WOW_QUEUE if side.wow else BARE_QUEUE)
    if not ok:
        print(f"  ! {side.name}: only {len(got)}/{n} delivered", file=sys.stderr)
    late = [t - due for t in got.values()]
    last = max(late) if late else float("inf")
    return Burst(
        rate=len(got) / max(last / 1000, 1e-3),
        late_ingest=ingested_ms > due,
        p50_ms=percentile(late, 0.5) if late else float("nan"),
        last_ms=last,
    )


async def pipeline(
    rig: Rig, side: Side, n: int, *, timers: TimerClient | None = None, traced: bool = False
) -> float:
    """N commands due on arrival, ingested as fast as the side can: commands per second from
    the first ingest to the last answer (every stage of commit ingested -> host answered).
    A wow side ingests through `timers` (default the rig's), `traced` or not."""
    tag = rig.tag("p" + side.name.replace("_", ""))
    start_ms = time.time() * 1000
    got, _, ok = await run_side(
        rig, side, [int(start_ms)] * n, tag, 30 + n / 10, timers=timers, traced=traced
    )
    timers = timers or rig.timers
    await rig.settle(timers.task_queue if side.wow else BARE_QUEUE)
    if not ok:
        print(f"  ! {side.name}: only {len(got)}/{n} delivered", file=sys.stderr)
    last = max(got.values()) if got else float("inf")
    return len(got) / max((last - start_ms) / 1000, 1e-3)


async def measure_ingest(rig: Rig, n: int, rounds: int) -> tuple[float, float]:
    """Best commits/s of `TimerClient.apply` and of bare `start_workflow` (start delay)."""
    wow, bare = [], []
    far = int((time.time() + 30 * 86400) * 1000)
    for r in range(rounds):
        for name in ("wow", "bare") if r % 2 == 0 else ("bare", "wow"):
            tag = rig.tag(f"i{name}")
            if name == "wow":
                wow.append(n / await rig.ingest_wow(tag, [far] * n, rig.idle_timers))
            else:
                seconds = await rig.ingest_bare(tag, [far] * n, "", delay=True, queue=IDLE_QUEUE)
                bare.append(n / seconds)
    return max(wow), max(bare)


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


async def lateness(
    rig: Rig, side: Side, rate: float, seconds: float, ingest_rate: float
) -> Lateness:
    """Commands due one after another at `rate`/s for `seconds`: receive time minus due.

    The commits are handed over ahead of time a few at once, as a relay hands them over while
    they are made: a start delay counts from when the server takes the start, so a burst of
    fifty concurrent starts would add its own queueing (~150 ms here) to every due time.
    """
    n = max(5, round(rate * seconds))
    tag = rig.tag(f"l{side.name.replace('_', '')}")
    t0 = time.time() + 1.0 + 1.5 * n / (ingest_rate * LATENESS_INGEST_LIMIT / CONCURRENCY)
    dues = [int((t0 + i / rate) * 1000) for i in range(n)]
    got, ingested_ms, _ = await run_side(rig, side, dues, tag, 30, LATENESS_INGEST_LIMIT)
    await rig.settle(WOW_QUEUE if side.wow else BARE_QUEUE)
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


# -- actions, by Temporal Cloud's billing rules ----------------------------------------------


async def history_actions(client: Client, workflow_id: str) -> dict[str, int]:
    """Actions of every run of `workflow_id` by kind, following continue-as-new back."""
    return by_kind(await history(client, workflow_id))


def describe(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if k != "slots")


async def mean_actions(client: Client, ids: list[str]) -> tuple[float, str]:
    found = await asyncio.gather(*(history_actions(client, i) for i in ids))
    totals = [total(c) for c in found]
    return sum(totals) / len(totals), describe(found[0])


@dataclass
class ActionsReport:
    one_shot: tuple[float, str]
    bare: tuple[float, str] | None
    cron_per_slot: float
    cron_slots: int
    cron_detail: str
    replaced: tuple[int, str]
    cancelled: tuple[int, str]


async def measure_actions(rig: Rig, sample: int, cron_slots: int) -> ActionsReport:
    client, timers = rig.client, rig.timers
    one_shot = await mean_actions(client, rig.wow_ids[-sample:])
    bare = await mean_actions(client, rig.bare_ids[-sample:]) if rig.bare_ids else None

    tag = rig.tag("act")
    soon = int((time.time() + 3) * 1000)
    cron_agg, replaced_agg, cancelled_agg = f"{tag}-cron", f"{tag}-repl", f"{tag}-canc"
    await timers.apply(cancel_commit(f"{tag}-0", cron_agg, 1, cancel_at({"cron": "* * * * * *"})))
    await timers.apply(cancel_commit(f"{tag}-1", replaced_agg, 1, cancel_at({"at": iso_ms(soon)})))
    await timers.apply(
        cancel_commit(f"{tag}-2", replaced_agg, 2, cancel_at({"at": iso_ms(soon + 1000)}))
    )
    await timers.apply(cancel_commit(f"{tag}-3", cancelled_agg, 1, cancel_at({"at": iso_ms(soon)})))
    await timers.apply(
        cancel_commit(
            f"{tag}-4", cancelled_agg, 2, {"name": "wow.ScheduleCancelled", "key": "grace"}
        )
    )
    # The cron timer delivers `{tag}-0:e0#k`; the replaced one `{tag}-2:e0#1`: wait for both.
    deadline = time.monotonic() + cron_slots + 30
    while time.monotonic() < deadline:
        records = await rig.records(tag)
        if sum(1 for k in records if k.startswith(f"{tag}-0:")) >= cron_slots and any(
            k.startswith(f"{tag}-2:") for k in records
        ):
            break
        await asyncio.sleep(0.1)
    await timers.cancel(timer_id(cron_agg))
    for agg in (cron_agg, replaced_agg, cancelled_agg):
        await client.get_workflow_handle(timer_id(agg)).result()
    cron = await history_actions(client, timer_id(cron_agg))
    cron["query"] = 1  # TimerClient.cancel's show() queries the running timer: billed, no event
    replaced = await history_actions(client, timer_id(replaced_agg))
    cancelled = await history_actions(client, timer_id(cancelled_agg))
    slots = cron.get("slots", 0)
    return ActionsReport(
        one_shot=one_shot,
        bare=bare,
        cron_per_slot=total(cron) / max(slots, 1),
        cron_slots=slots,
        cron_detail=describe(cron),
        replaced=(total(replaced), describe(replaced)),
        cancelled=(total(cancelled), describe(cancelled)),
    )


@dataclass
class TimersReport:
    """Sections 1 to 4."""

    sides: list[Side]
    ingest_wow: float
    ingest_bare: float
    best: dict[str, Burst]
    flow: dict[str, float]
    wow_late: Lateness
    bare_late: Lateness | None
    actions: ActionsReport


async def measure_timers(
    rig: Rig, args: argparse.Namespace, sides: list[Side], n: int, rounds: int
) -> TimersReport:
    """Sections 1 to 4, wow against bare Temporal."""
    spread = 2.0 if args.quick else 8.0
    cron_slots = 3 if args.quick else 10

    # 4. ingest first: its rate sizes the lead time of the bursts.
    ingest_n = max(n, 100)
    ingest_wow, ingest_bare = await measure_ingest(rig, ingest_n, rounds)
    print(
        f"ingest: wow {ingest_wow:.0f}/s, bare start_workflow {ingest_bare:.0f}/s", file=sys.stderr
    )

    # Warm up every side once (imports, connections, caches), unmeasured.
    await asyncio.gather(*(burst(rig, side, 10, 1.5) for side in sides))

    # 1. throughput, interleaved rounds, rotating order.
    lead = 1.0 + 1.5 * n / min(ingest_wow, ingest_bare)
    results: dict[str, list[Burst]] = {s.name: [] for s in sides}
    for r in range(rounds):
        order = sides[r % len(sides) :] + sides[: r % len(sides)]
        for side in order:
            b = await burst(rig, side, n, lead)
            results[side.name].append(b)
            print(
                f"  round {r + 1} {side.name:10} {b.rate:6.0f}/s "
                f"(p50 {b.p50_ms:5.0f} ms, last {b.last_ms:5.0f} ms after due"
                f"{', INGEST OVERRAN DUE' if b.late_ingest else ''})",
                file=sys.stderr,
            )
    best = {name: max(bs, key=lambda b: b.rate) for name, bs in results.items()}

    # 1b. the whole pipeline, commands due on arrival, interleaved rounds.
    flows: dict[str, list[float]] = {s.name: [] for s in sides}
    for r in range(rounds):
        order = sides[r % len(sides) :] + sides[: r % len(sides)]
        for side in order:
            flows[side.name].append(await pipeline(rig, side, n))
            rate = flows[side.name][-1]
            print(f"  round {r + 1} {side.name:10} {rate:6.0f}/s e2e", file=sys.stderr)
    flow = {name: max(rates) for name, rates in flows.items()}

    # 2. lateness at half the ceiling (the end-to-end rate).
    half = flow["wow"] / 2
    wow_late = await lateness(rig, SIDES[0], half, spread, ingest_wow)
    bare_late = None if args.quick else await lateness(rig, SIDES[2], half, spread, ingest_bare)

    # 3. actions.
    report = await measure_actions(rig, min(20, n), cron_slots)
    return TimersReport(sides, ingest_wow, ingest_bare, best, flow, wow_late, bare_late, report)


def print_timers(t: TimersReport) -> None:
    flow, best, sides = t.flow, t.best, t.sides
    wow_late, bare_late, report = t.wow_late, t.bare_late, t.actions
    throughput = ratio(flow["wow"], flow["bare"])
    burst_ratio = ratio(best["wow"].rate, best["bare"].rate)
    print(
        f"throughput  end to end (commit ingested -> host answered, due on arrival): "
        f"wow {flow['wow']:.0f}/s  baseline {flow['bare']:.0f}/s  "
        f"ratio {throughput:.2f} (target >= {THROUGHPUT_TARGET})  "
        f"{verdict(throughput >= THROUGHPUT_TARGET)}"
    )
    for side in sides[1:]:
        rate = flow[side.name]
        print(f"  {side.label:40} {rate:6.0f}/s  wow/this {ratio(flow['wow'], rate):.2f}")
    print(
        f"  drain of a burst all due at one instant (after due): wow {best['wow'].rate:.0f}/s  "
        f"baseline {best['bare'].rate:.0f}/s  ratio {burst_ratio:.2f}"
    )
    for side in sides[1:]:
        b = best[side.name]
        print(
            f"    {side.label:38} {b.rate:6.0f}/s  wow/this {ratio(best['wow'].rate, b.rate):.2f}"
        )
    print(
        f"lateness    at {wow_late.rate:.0f}/s (half the wow end-to-end ceiling), "
        f"{wow_late.n} commands: "
        f"p50 {wow_late.p50:.0f} ms  p99 {wow_late.p99:.0f} ms  max {wow_late.max:.0f} ms  "
        f"early {wow_late.early}  missing {wow_late.missing} "
        f"(target p99 < {LATENESS_P99_TARGET_MS:.0f} ms, early 0)  "
        f"{verdict(wow_late.p99 < LATENESS_P99_TARGET_MS and wow_late.early == 0)}"
        f"{'  INGEST OVERRAN DUE' if wow_late.late_ingest else ''}"
    )
    print(
        f"  wow p50 over the first third {wow_late.p50_first:.0f} ms, "
        f"last third {wow_late.p50_last:.0f} ms (a p50 that grows means not keeping up)"
    )
    if bare_late is not None:
        print(
            f"  bare sleep + HTTP at the same rate: p50 {bare_late.p50:.0f} ms  "
            f"p99 {bare_late.p99:.0f} ms  max {bare_late.max:.0f} ms  early {bare_late.early}  "
            f"(thirds {bare_late.p50_first:.0f}/{bare_late.p50_last:.0f} ms)"
        )
    print(f"actions     one-shot {report.one_shot[0]:.2f} per command ({report.one_shot[1]})")
    if report.bare is not None:
        print(f"  bare sleep + activity: {report.bare[0]:.2f} ({report.bare[1]})")
    print(
        f"  cron every second: {report.cron_per_slot:.2f} per slot over {report.cron_slots} "
        f"slots, start and operator cancel included ({report.cron_detail})"
    )
    print(f"  replaced one-shot: {report.replaced[0]} ({report.replaced[1]})")
    print(f"  cancelled one-shot: {report.cancelled[0]} ({report.cancelled[1]})")
    print(
        f"ingest      wow {t.ingest_wow:.0f} commits/s  "
        f"bare start_workflow {t.ingest_bare:.0f}/s  "
        f"ratio {ratio(t.ingest_wow, t.ingest_bare):.2f}  ({CONCURRENCY} in flight)"
    )
