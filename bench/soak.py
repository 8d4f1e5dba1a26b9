"""Chaos soak: thousands of aggregates' schedules under worker kills and a server restart, the
host's ledger checked against a model of what the spec promises.

One fresh headless dev server (EmbeddedTemporal) in a throw-away directory, the fake Wow host in
a process of its own (`bench.harness.HostProcess`) recording every request and answering by the
aggregate id's prefix (`ok-` Ok, `reject-` IllegalState, `fail-` 503 until healed, `flaky-` 503
twice per request id, `slow-` Ok after up to 1.5 s; a request id it has decided answers
DuplicateRequestId), and `--workers` real
`wow-temporal worker` processes on the same task queues. This process plays the domain's relay:
each aggregate commits 1-3 times (a one-shot key, sometimes a cron key; replaced, cancelled or
deleted), some commits are handed over twice and some out of order, each applied with
`TimerClient.apply` (retried while the server is down). Meanwhile the workers are SIGKILLed and
restarted at random moments, one at a time in turn and, with several, all at once; the dev
server is killed and restarted once. At the end the failing host is healed and every parked
timer retried, live cron timers are cancelled, and the ledger is compared with the model
(`bench.oracle.ledger`, its judge):

- every expected command decided exactly once, none early;
- none for a slot due after its schedule was replaced, cancelled or deleted (after that
  change's apply returned: handed over), none at all for a set that arrived after a newer
  change; a slot already due may still arrive after the change (in flight: not recalled);
- parked exactly the schedules whose host kept failing, each delivered once after the retry;
- cron slots numbered without gaps (`skipped` accounting for COALESCE), never stalled.

It prints those counts and the lateness (first arrival - due) of deliveries to the prompt
hosts inside and outside the chaos windows, and apart those to the flaky and slow ones (whose
every slot waits for the one before to be decided); and the ingest rate inside the windows of
worker kills against outside them (ingest never waits for a worker).

With `--catch-up` it runs instead a relay's catch-up after a Temporal outage: each aggregate's
key is set (and handed over) before the dev server is killed for `--outage` seconds; during the
outage the log sets, cancels, replaces and deletes. For two thirds the first set is due 20-45 s
after the outage; for a third (seeded) it falls due during the outage and the log changes it
once during it, half of them before that due time (a cancel, a replacing set or the deletion:
the victims) and half after it (owed). The fake host is told the log as it is committed, so it
guards as docs/delivery.md asks a host in another language to. Once the server is back the
relay holds its backlog until the timers due during the outage have fired (at most 60 s: the
relay slower than the workers), then hands it over in batches with the log read ahead (as the
host's relay does), and the ledger is checked (`bench.oracle.catch_up`): every set still in
force delivered once; none the log replaced, cancelled or deleted before it was handed over or
before it was due, and in particular no victim (`delivered_though_stopped_before_due`: only
the target's guard stops them); every owed slot delivered once. `--unguarded` does not tell
the fake host the log (a host that does not check): the victims are then delivered and the run
fails, which shows the scenario rests on the guard.

Run: `python -m bench.soak [--quick] [--aggregates N] [--duration S] [--json]` (or
`--catch-up [--outage S] [--unguarded]`); `--quick` (the smoke test's size): 240 aggregates
over 40 s, two workers each killed once and both together once, seed 11.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field

from bench._soak_catch_up import catch_up, catch_up_verdicts, print_catch_up
from bench._soak_plan import CHAOS_LEAD_S, CHAOS_RECOVERY_S, DELIVERY, plan, schedules_of
from bench._soak_rig import (
    IngestInChaos,
    Run,
    chaos_kinds,
    chaos_plan,
    count_task_timeouts,
    hand_over,
    ingest_in_chaos,
    settle,
    start_host,
    start_workers,
)
from bench.harness import (
    Chaos,
    Verdicts,
    bench_main,
    parser,
    scratch,
    sized,
    still_running,
    summary,
)
from bench.oracle.ledger import Deliveries, judge_deliveries, rows_of
from wow_temporal.dev.server import EmbeddedTemporal
from wow_temporal.ids import timer_workflow_id
from wow_temporal.logs import CORE_LOGGER, configure_temporal_runtime
from wow_temporal.timers.client import TimerClient


@dataclass
class Report:
    """A soak's run: its size, its ingest, the chaos done, and its ledger judged."""

    aggregates: int
    commits: int
    schedules: int
    workers: int = 1
    chaos: list[tuple[str, float, float]] = field(default_factory=list)
    chaos_expected: list[str] = field(default_factory=list)
    """What the chaos was planned to do, by name."""
    judged: Deliveries = field(default_factory=Deliveries)
    still_running: int = 0
    workflow_task_timeouts: int = 0
    ingest_per_s: float = 0.0
    apply_p50_ms: float = 0.0
    apply_p99_ms: float = 0.0
    ingest: IngestInChaos = field(default_factory=lambda: IngestInChaos(0.0, 0.0, 0.0, 0.0, 0.0))


async def soak(args: argparse.Namespace) -> Report:
    rng = random.Random(args.seed)
    run = f"{rng.randrange(16**6):06x}"
    with scratch(args, "soak") as tmp:
        server = EmbeddedTemporal(tmp / "temporal", headless=True)
        await server.start()
        host = await start_host(tmp / "host.log")
        workers = start_workers(server, host.url, tmp, args.workers, tracing=not args.no_tracing)
        try:
            await asyncio.gather(*(w.start() for w in workers))
            client = await server.connect()
            rig = Run(server, host, workers, client, TimerClient(client, delivery=DELIVERY))
            aggregates = plan(args.aggregates, args.duration, rng, run)
            commits = sum(len(a.commits) for a in aggregates)
            print(
                f"soak: {args.aggregates} aggregates, {commits} commits over "
                f"{args.duration:.0f}s, seed {args.seed}",
                file=sys.stderr,
            )
            rig.epoch = time.time()
            chaos = Chaos(lead=CHAOS_LEAD_S, recovery=CHAOS_RECOVERY_S)
            faults = chaos_plan(
                server, workers, args.duration, rng, args.kills, not args.no_server_restart
            )
            chaos_task = asyncio.ensure_future(chaos.run(faults, rig.clock))
            limit = asyncio.Semaphore(args.concurrency)
            applies: list[tuple[float, float]] = []
            await asyncio.gather(
                *(
                    hand_over(rig.timers, a, rig.epoch, rig.clock, limit, applies)
                    for a in aggregates
                )
            )
            ingest_done = rig.clock()
            await chaos_task
            schedules = [s for a in aggregates for s in schedules_of(a, rig.epoch)]
            ending = await settle(rig, args, schedules)
            rows = rows_of(await rig.host.arrivals())
            every_timer = sorted(
                {
                    timer_workflow_id(a.ref, k)
                    for a in aggregates
                    for k in ("k1", "tick")
                    if any(e.key == k for c in a.commits for e in c.events)
                }
            )
            report = Report(
                args.aggregates,
                commits,
                len(schedules),
                workers=args.workers,
                chaos=chaos.windows,
                chaos_expected=chaos_kinds(args.workers, args.kills, not args.no_server_restart),
                judged=judge_deliveries(schedules, rows, rig.epoch, ending, chaos.inside),
                still_running=len(await still_running(rig.client, every_timer)),
                workflow_task_timeouts=await count_task_timeouts(rig.client, every_timer),
            )
            report.ingest_per_s = round(
                sum(len(c.handovers) for a in aggregates for c in a.commits)
                / max(ingest_done, 1e-9),
                1,
            )
            lat = summary([took * 1000 for _, took in applies])
            report.apply_p50_ms, report.apply_p99_ms = lat.get("p50", 0.0), lat.get("p99", 0.0)
            first_planned = min(at for a in aggregates for c in a.commits for at in c.handovers)
            report.ingest = ingest_in_chaos(applies, chaos.windows, first_planned, ingest_done)
            return report
        finally:
            await asyncio.gather(*(w.kill() for w in workers))
            await host.stop()
            await server.stop()


def print_report(report: Report) -> None:
    j, ingest = report.judged, report.ingest
    print(
        f"soak: {report.aggregates} aggregates, {report.commits} commits, "
        f"{report.schedules} schedules"
    )
    print(
        f"  expected {j.expected}: decided once {j.decided_once}, lost {j.lost}, "
        f"early {j.early}, decided twice {j.decided_twice}, "
        f"wrongly delivered {j.wrongly_delivered}"
    )
    print(
        f"  parked {j.parked} (expected {j.parked_expected}, wrongly "
        f"{j.parked_wrongly}), delivered once after retry {j.delivered_after_retry}"
    )
    print(f"  in flight at a change, not recalled: {j.sent_in_flight}")
    print(
        f"  cron gaps {j.cron_gaps}, stalled {j.cron_stalled}; still running "
        f"{report.still_running}; workflow task timeouts {report.workflow_task_timeouts}"
    )
    print(
        f"  ingest {report.ingest_per_s}/s, apply p50 {report.apply_p50_ms} ms "
        f"p99 {report.apply_p99_ms} ms; {report.workers} workers"
    )
    print(
        f"  ingest inside worker chaos {ingest.inside_per_s}/s vs outside "
        f"{ingest.outside_per_s}/s (x{ingest.inside_ratio}), apply p99 inside "
        f"{ingest.apply_p99_inside_ms} ms vs outside {ingest.apply_p99_outside_ms} ms"
    )
    print(f"  lateness ms outside chaos {j.lateness_outside}")
    print(f"  lateness ms inside chaos  {j.lateness_inside}")
    print(f"  lateness ms to flaky and slow hosts {j.lateness_unhealthy}")
    for late, due_at, request_id in j.latest_outside:
        print(f"  late outside chaos: {late} ms, due at {due_at}s, {request_id}")
    for late, due_at, request_id in j.latest_inside:
        print(f"  late inside chaos: {late} ms, due at {due_at}s, {request_id}")
    for what, began, ended in report.chaos:
        print(f"  chaos {what}: {began:.1f}s .. {ended:.1f}s")
    for line in j.problems:
        print(f"  ! {line}")


QUICK = {"aggregates": 240, "duration": 40.0, "kills": 2, "workers": 2, "settle": 8.0, "seed": 11}
"""`--quick`: the smoke test's size (about a minute and a half)."""
FULL = {"aggregates": 3000, "duration": 300.0, "kills": 3, "workers": 3, "settle": 15.0, "seed": 7}


def verdicts(report: Report) -> Verdicts:
    """The judge's (nothing lost, early, twice or after a change; every expected command
    decided once; the failing host's schedules parked and delivered once after the retry),
    no timer left running, the chaos as planned, and enough checked."""
    return report.judged.verdicts() | Verdicts(
        must_be_zero={
            "still_running": report.still_running,
            "chaos_kinds_missing": _differ(report.chaos_expected, [w for w, _, _ in report.chaos]),
        },
        must_be_positive={
            "expected_over_100": report.judged.expected - 100,
            "ingest_inside_per_s": report.ingest.inside_per_s,
            "ingest_outside_per_s": report.ingest.outside_per_s,
        },
        figures={"ingest_per_s": report.ingest_per_s, "apply_p99_ms": report.apply_p99_ms},
    )


def _differ(wanted: list[str], done: list[str]) -> int:
    """How many entries the two lists do not share (each counted as often as it occurs)."""
    a, b = Counter(wanted), Counter(done)
    return sum(((a - b) + (b - a)).values())


def main() -> int:
    p = parser(__doc__)
    for name in ("aggregates", "kills"):
        p.add_argument(f"--{name}", type=int, help=f"default {FULL[name]} ({QUICK[name]} quick)")
    p.add_argument("--duration", type=float, help="seconds of commits (default 300, 40 quick)")
    p.add_argument(
        "--workers",
        type=int,
        help="worker processes (default 3, 2 quick); several: also all killed once",
    )
    p.add_argument("--settle", type=float, help="default 15 (8 quick)")
    p.add_argument("--no-server-restart", action="store_true")
    p.add_argument(
        "--no-tracing", action="store_true", help="the worker without spans (its default: on)"
    )
    p.add_argument("--concurrency", type=int, default=50, help="applies in flight")
    p.add_argument(
        "--settle-within",
        type=float,
        default=300.0,
        help="at most this long to wait for the one-shots to end or park, after --settle",
    )
    p.add_argument(
        "--catch-up",
        action="store_true",
        help="instead: a relay's catch-up after a Temporal outage of --outage seconds",
    )
    p.add_argument("--outage", type=float, default=180.0, help="with --catch-up (at least 10)")
    p.add_argument(
        "--unguarded",
        action="store_true",
        help="with --catch-up: the fake host is not told the log (a host that does not check)",
    )
    args = p.parse_args()
    if args.catch_up and args.outage < 10:
        p.error("--outage: at least 10 seconds (timers fall due and change within it)")
    sized(args, QUICK, FULL)
    configure_temporal_runtime()  # the core's retry warnings while the server is down: quiet
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    logging.getLogger(CORE_LOGGER).setLevel(logging.ERROR)
    if args.catch_up:
        return bench_main(args, catch_up, print_catch_up, catch_up_verdicts)
    return bench_main(args, soak, print_report, verdicts)


if __name__ == "__main__":
    raise SystemExit(main())
