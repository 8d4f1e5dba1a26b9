"""Chaos soak of the e-shop end to end: the whole main job under worker, host and server kills,
checked from the domain host's own log (its store) at the end.

A fresh headless dev server (EmbeddedTemporal) in a throw-away directory; the real
`wow-temporal host --app workers.eshop:apps` (the order, the stock, the inventory saga, the
relay) on its SQLite store; the real `wow-temporal worker` for the timers and a second one with
`--app workers.eshop.inventory:app` for the `receive-deliveries` job, rescheduled (the host's
override) to every few seconds. Hundreds of customers, over real HTTP at a steady rate, place
orders (a product never stocked among some), pay them in time or late, cancel them, or leave
them to their payment grace period (a few seconds), and delete some once ended; each command is
retried with its request id until the host answers, and some are sent twice. Meanwhile, at
seeded random moments, the workers are SIGKILLed and started again, and (at the same time, on
a second track) the host is SIGKILLed and restarted on the same store and port and the dev
server is killed and restarted once on the same database.

At the end the job worker is stopped, the followers drain, the host stops, and its store's
notification log (every commit, in order) and request records are judged (`bench.oracle.eshop`,
`bench.oracle.eshop_stock`; with replicas, `bench.oracle.recovery`):

- every order ends paid xor cancelled, exactly once; never cancelled by its timer before its
  grace period ended or after it was paid; what a customer was told was done is in the log;
- each product's stock: received equals what the customers and the job's ticks delivered; no
  order reserved twice or released twice, never more reserved than on hand, and what stays
  reserved is exactly what the paid orders hold;
- every slot of the job from 1 to the last handled once (or counted as skipped by the one that
  coalesced it), its commands exactly the suppliers' deliveries for its days, each decided once;
- no request id decided twice; no timer of an order still running; the host's own reads at the
  end show each aggregate at the version its log ends at, and its log answers no command with a
  version conflict (one host decides an aggregate's commands one at a time).

It prints those counts and the lateness (commit - due) of the timers' cancellations and of the
job's ticks, overall and outside the chaos windows.

`--replicas N` (N >= 2; default 1: the one host on SQLite above) runs N `wow-temporal host`
replicas (`WOW_HOST_REPLICA` r1..rN) on one PostgreSQL database (fsync on) behind one address
(the harness's `Balancer`: round-robin per TCP connection, a replica that refuses skipped), the
customers and the workers all sent there. Each of the host track's kills SIGKILLs the replica
running the followers (the relay, the saga: read from each replica's own `/wow/followers`), so
the holders change in turn, each started again after its pause, so one is always up; the
takeover is timed until every follower runs on a replica again (issue #19: within 10 s,
`takeover_slow`, which also counts followers that ran nowhere before a kill). PostgreSQL itself
is stopped once on that track for ~5.5-8 s and started again: timed until a customer's command
is answered Ok and every follower runs again (30 s at most, `postgres_unrecovered`); a 5xx
answered from the stop until both were seen (+ 2 s) is counted apart, any other is a host
error. The end reads the same checks from the PostgreSQL log, every replica's log checked for a
version conflict answered (none sends an expected version).

Run: `python -m bench.soak_eshop [--quick] [--customers N] [--duration S] [--seed N]
[--replicas N] [--kills N] [--host-kills N] [--no-server-restart] [--json]`; `--quick` (the
smoke test's size): 50 customers over 30 s, grace 3 s, one kill of the workers and one of the
host (with replicas: of the lease holder, and PostgreSQL stopped once), seed 13.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from temporalio.client import Client

from bench._eshop_shop import (
    Followers,
    Shop,
    customer,
    drained,
    orders_end,
    plan_orders,
    read_versions,
    stock_up,
)
from bench._eshop_stack import Stack, chaos_plan, make_stack
from bench.harness import Chaos, Verdicts, bench_main, parser, scratch, sized, still_running
from bench.harness.postgres import Postgres
from bench.oracle.eshop import (
    TENANT,
    Eshop,
    OrderLog,
    judge_customers,
    judge_host_log,
    judge_orders,
    judge_reads,
    judge_requests,
)
from bench.oracle.eshop_stock import Job, judge_job, judge_stock
from bench.oracle.recovery import TAKEOVER_LIMIT_S, Recovered, judge_recovery
from workers.eshop.order import ORDER, PAYMENT_GRACE_PERIOD
from wow_temporal.dev.server import EmbeddedTemporal
from wow_temporal.host.store import EventStore
from wow_temporal.ids import timer_workflow_id
from wow_temporal.logs import CORE_LOGGER, configure_temporal_runtime
from wow_temporal.model import Commit

CHAOS_LEAD_S = 2.0
CHAOS_RECOVERY_S = 10.0
"""A due time this long before a chaos window or after it counts as inside it."""


@dataclass
class Report:
    """A run of the e-shop soak: its size, the chaos done, the followers' worst, and the log
    judged (with replicas, their recovery too)."""

    customers: int
    orders: int
    duration: float
    seed: int
    customers_waited_out: int = 0
    judged: Eshop = field(default_factory=Eshop)
    recovered: Recovered = field(default_factory=Recovered)
    followers_worst: dict[str, tuple[int, float]] = field(default_factory=dict)
    """The most commits each follower of the host was behind, and when (run s)."""
    followers_stalls: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Each follower's longest stall: seconds behind without moving, from when (run s)."""
    chaos: list[tuple[str, float, float]] = field(default_factory=list)
    chaos_expected: list[str] = field(default_factory=list)
    """What the chaos was to do, by name."""


def read_log(store_path: str | Path) -> tuple[list[Commit], EventStore]:
    """Every commit of the host's notification log, in order (the host has stopped), from its
    SQLite file or its PostgreSQL database; the store, open, for its request records."""
    store = EventStore(store_path)
    commits: list[Commit] = []
    position = 0
    while batch := store.commits_after(position, 1000):
        commits.extend(commit for _, commit in batch)
        position = batch[-1][0]
    return commits, store


async def timers_running(client: Client, orders: dict[str, OrderLog]) -> list[str]:
    """The orders' timers still running (parked, or never told of their end), 30 s at most."""
    timers = [
        timer_workflow_id(ORDER.ref(TENANT, o), PAYMENT_GRACE_PERIOD)
        for o, order in orders.items()
        if order.timers
    ]
    running = await still_running(client, timers)
    wait_until = time.monotonic() + 30
    while running and time.monotonic() < wait_until:
        await asyncio.sleep(1.0)
        running = await still_running(client, running)
    return running


async def soak(args: argparse.Namespace) -> Report:
    rng = random.Random(args.seed)
    run = f"{rng.randrange(16**6):06x}"
    with scratch(args, "soak_eshop") as tmp:
        server = EmbeddedTemporal(tmp / "temporal", headless=True)
        pg = Postgres(fsync=True) if args.replicas >= 2 else None
        stack: Stack | None = None
        background: list[asyncio.Future[Any]] = []
        http = httpx.AsyncClient(
            timeout=15, limits=httpx.Limits(max_connections=100, max_keepalive_connections=50)
        )
        try:
            if pg is not None:
                await asyncio.to_thread(pg.start)
            await server.start()
            stack = await asyncio.to_thread(make_stack, tmp, server, args, pg)
            await stack.start()
            shop = Shop(stack.url, http, args.grace)
            if stack.replicas is not None:
                stack.replicas.oks = shop.oks
            stocked = await stock_up(shop, run)
            plans = plan_orders(args.customers, args.duration, rng, run)
            on = f"{args.replicas} host replicas on PostgreSQL, " if pg is not None else ""
            print(
                f"soak-eshop: {on}{args.customers} customers, {len(plans)} orders over "
                f"{args.duration:.0f}s, grace {args.grace:g}s, job every {args.job_every}s, "
                f"seed {args.seed}",
                file=sys.stderr,
            )
            epoch = time.time()

            def clock() -> float:
                return time.time() - epoch

            chaos = Chaos(lead=CHAOS_LEAD_S, recovery=CHAOS_RECOVERY_S)
            tracks = chaos_plan(stack, args, rng)
            chaos_task = asyncio.gather(*(chaos.run(track, clock) for track in tracks))
            followers, sampled = Followers(), asyncio.Event()
            sampler = asyncio.ensure_future(followers.sample(stack.url, clock, sampled))
            background += [chaos_task, sampler]
            await asyncio.gather(*(customer(shop, p, clock) for p in plans))
            await chaos_task
            print(f"soak-eshop: customers done at {clock():.1f}s", file=sys.stderr)
            refs = [ORDER.ref(TENANT, p.order_id) for p in plans]
            await orders_end(shop, refs, args.grace + args.settle)
            job_stopped_ms = int(time.time() * 1000)
            await stack.job_worker.stop()  # its tick in flight finishes; no slot after it
            idle = await drained(stack.url, args.settle)
            sampled.set()
            await sampler
            versions = await read_versions(shop, refs)
            await stack.stop_hosts()
            print(f"soak-eshop: host stopped at {clock():.1f}s; reading its log", file=sys.stderr)

            report = Report(args.customers, len(plans), args.duration, args.seed)
            report.chaos = chaos.windows
            quick_seed = args.quick and args.seed == QUICK["seed"]
            planned = sorted(f.what for track in tracks for f in track)
            quick_chaos = QUICK_CHAOS if pg is None else QUICK_CHAOS_REPLICAS
            report.chaos_expected = list(quick_chaos) if quick_seed else planned
            report.customers_waited_out = shop.waited_out
            report.followers_worst, report.followers_stalls = followers.worst, followers.stalls
            judged = report.judged
            seen = stack.replicas.seen if stack.replicas is not None else None
            report.recovered = judge_recovery(judged, shop.host_errors, seen)
            if not idle:
                judged.problem("not_drained", "the relay or a saga was still behind at the end")
            for host in stack.hosts:
                judge_host_log(judged, host.log.read_text(errors="replace").splitlines())
            commits, store = read_log(stack.store)
            judge_reads(judged, commits, versions)
            try:
                orders = judge_orders(judged, commits, store.request, epoch, chaos.inside)
            finally:
                store.close()
            judge_customers(judged, commits, shop.sent)
            judge_requests(judged, commits)
            slots = judge_stock(judged, commits, orders, stocked)
            job = Job(args.job_every, job_stopped_ms)
            judge_job(judged, slots, job, epoch, chaos.inside)
            for workflow_id in await timers_running(await server.connect(), orders):
                judged.problem("timers_still_running", workflow_id)
            return report
        finally:
            for task in background:  # a run that failed: no fault starts a process after this
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            await http.aclose()
            try:
                if stack is not None:
                    await stack.kill()
                await server.stop()
            finally:
                if pg is not None:
                    await asyncio.to_thread(pg.stop)


def print_report(report: Report) -> None:
    r = report.judged
    cancelled = r.cancelled_by_timer + r.cancelled_by_customer + r.cancelled_out_of_stock
    print(
        f"soak-eshop: {report.customers} customers, {report.orders} orders over "
        f"{report.duration:.0f}s, seed {report.seed}"
    )
    print(
        f"  orders: paid {r.paid}, cancelled {cancelled} (by its timer {r.cancelled_by_timer}, "
        f"by the customer {r.cancelled_by_customer}, out of stock {r.cancelled_out_of_stock}); "
        f"deleted {r.deleted}"
    )
    print(
        f"  ends: unresolved {r.unresolved}, paid and cancelled {r.paid_and_cancelled}, paid "
        f"twice {r.paid_twice}, cancelled twice {r.cancelled_twice}; by its timer early "
        f"{r.cancelled_early}, after payment {r.cancelled_after_payment}, wrongly {r.timer_wrong}"
    )
    print(
        f"  timers: set {r.timers_set}, cancelled their order {r.cancelled_by_timer}, refused "
        f"(paid or cancelled first) {r.timer_refused}; still running {r.timers_still_running}"
    )
    print(
        f"  customers: acknowledged but not in the log {r.acknowledged_lost}, refused but "
        f"committed {r.refused_but_committed}, sent twice {r.repeats} (answered otherwise "
        f"{r.repeat_answered_otherwise}), unanswered {r.unanswered}, host errors "
        f"{r.host_errors}; request ids decided twice {r.decided_twice}"
    )
    print(
        f"  host: reads stale at the end {r.stale_reads}, commands answered with a version "
        f"conflict {r.version_conflicts}; customers who stopped waiting "
        f"{report.customers_waited_out}"
    )
    print(
        f"  stock: received {r.received_from_customers + r.received_from_job} (customers "
        f"{r.received_from_customers}, job {r.received_from_job}); reserved twice "
        f"{r.reserved_twice}, released twice {r.released_twice}, oversold {r.oversold}, "
        f"shortage wrong {r.shortage_wrong}, held wrongly {r.held_wrongly}, received wrongly "
        f"{r.received_wrongly}"
    )
    for product, figures in sorted(r.products.items()):
        print(
            f"    {product}: received {figures['received']} - held by paid orders "
            f"{figures['held_by_paid_orders']} = available {figures['available']}"
        )
    print(
        f"  job: slots 1..{r.slots_last}: handled {r.slots_handled}, skipped (coalesced) "
        f"{r.slots_skipped}, silent {r.slots_silent}, lost {r.slots_lost}, twice "
        f"{r.slots_twice}; commands {r.job_commands}, lost {r.commands_lost}, wrong "
        f"{r.commands_wrong}; stalled {r.job_stalled}"
    )
    if report.recovered.replicas >= 2:
        print_replicas(report.recovered, r)
    if r.not_drained:
        print("  the relay or a saga was still behind at the end")
    print(f"  lateness ms timers {r.lateness_timers}")
    print(f"  lateness ms timers outside chaos {r.lateness_timers_outside}")
    print(f"  lateness ms ticks {r.lateness_ticks}")
    print(f"  lateness ms ticks outside chaos {r.lateness_ticks_outside}")
    for name in sorted(report.followers_worst):
        behind, at = report.followers_worst[name]
        stalled, since = report.followers_stalls.get(name, (0.0, 0.0))
        print(
            f"  follower {name}: at most {behind} commits behind (at {at}s), longest stall "
            f"{stalled}s (from {since}s)"
        )
    for late, due_at, what in r.latest_outside:
        print(f"  late outside chaos: {late} ms, due at {due_at}s, {what}")
    for what, began, ended in report.chaos:
        print(f"  chaos {what}: {began:.1f}s .. {ended:.1f}s")
    for line in r.problems:
        print(f"  ! {line}")


def print_replicas(r: Recovered, judged: Eshop) -> None:
    kills = ", ".join(f"{name}{' (holder)' if held else ''}" for name, held in r.replica_kills)
    print(
        f"  replicas: {r.replicas} on PostgreSQL; killed {kills or 'none'}; takeovers ms "
        f"{r.takeovers_ms} (max {max(r.takeovers_ms, default=0)}, over "
        f"{TAKEOVER_LIMIT_S:g}s {judged.takeover_slow})"
    )
    print(
        f"  postgres: away {_s(r.pg_away_s)}; after it was back a command Ok at "
        f"{_s(r.pg_commands_ok_after_s)}, every follower running at "
        f"{_s(r.pg_followers_held_after_s)}; answered 5xx meanwhile {r.pg_answered_5xx} (the "
        f"last at {_s(r.pg_last_5xx_after_s)}); unrecovered {judged.postgres_unrecovered}"
    )


def _s(seconds: float) -> str:
    return f"{seconds:g}s" if math.isfinite(seconds) else "-"


QUICK = {
    "customers": 50,
    "duration": 30.0,
    "grace": 3.0,
    "kills": 1,
    "host_kills": 1,
    "settle": 40.0,
    "seed": 13,
}
"""`--quick`: the smoke test's size (under a minute)."""
QUICK_CHAOS = ("host", "server", "timer worker and job worker")
"""What `--quick`'s seed does: both workers killed while the server is down, then the host."""
QUICK_CHAOS_REPLICAS = ("host replica", "postgres", "server", "timer worker and job worker")
"""What it does with replicas: the followers' lease holder killed once, PostgreSQL stopped."""
FULL = {
    "customers": 300,
    "duration": 180.0,
    "grace": 4.0,
    "kills": 3,
    "host_kills": 2,
    "settle": 60.0,
    "seed": 7,
}


def verdicts(report: Report) -> Verdicts:
    """The judge's (every count that must be 0, with replicas their recovery's too; every path
    taken), the chaos as planned, and with replicas a takeover seen."""
    done = Counter(what for what, _, _ in report.chaos)
    wanted = Counter(report.chaos_expected)
    replicas = report.recovered.replicas >= 2
    return report.judged.verdicts(replicas=replicas) | Verdicts(
        must_be_zero={"chaos_kinds_missing": sum(((wanted - done) + (done - wanted)).values())},
        must_be_positive={"takeovers": len(report.recovered.takeovers_ms)} if replicas else {},
        figures=report.recovered.figures() if replicas else {},
    )


def main() -> int:
    p = parser(__doc__)
    p.add_argument("--customers", type=int, help="default 300 (50 quick)")
    p.add_argument("--duration", type=float, help="seconds of customers (default 180, 30 quick)")
    p.add_argument("--grace", type=float, help="payment grace period, s (default 4, 3 quick)")
    p.add_argument("--job-every", type=int, default=3, help="seconds between job ticks")
    p.add_argument("--kills", type=int, help="worker SIGKILLs (default 3, 1 quick)")
    p.add_argument("--host-kills", type=int, help="host SIGKILLs (default 2, 1 quick)")
    p.add_argument("--no-server-restart", action="store_true")
    p.add_argument(
        "--replicas",
        type=int,
        default=1,
        help="host replicas on one PostgreSQL behind one address (default 1: one on SQLite)",
    )
    p.add_argument("--settle", type=float, help="bound on the end's waits (default 60, 40 quick)")
    args = p.parse_args()
    if not 1 <= args.job_every <= 59 or 60 % args.job_every:
        p.error("--job-every: a divisor of 60")
    if args.replicas < 1:
        p.error("--replicas: 1 or more")
    sized(args, QUICK, FULL)
    configure_temporal_runtime()
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    logging.getLogger(CORE_LOGGER).setLevel(logging.ERROR)
    return bench_main(args, soak, print_report, verdicts)


if __name__ == "__main__":
    raise SystemExit(main())
