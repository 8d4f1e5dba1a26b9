"""Chaos soak of the e-shop end to end: the whole main job (the real host, its relay and saga,
the timer and the job workers) under worker, host and server kills while customers shop over
HTTP, checked from the host's own log at the end (`bench.oracle.eshop`, `eshop_stock`; with
`--replicas N`, N hosts on one PostgreSQL behind one address, `bench.oracle.recovery`). What it
runs and checks: docs/benchmarks.md, "The e-shop soak".

Run: `python -m bench.soak_eshop [--quick] [--customers N] [--duration S] [--seed N]
[--replicas N] [--kills N] [--host-kills N] [--no-server-restart] [--json]`; `--quick` (the
smoke test's size): 50 customers over 30 s, grace 3 s, one kill of the workers and one of the
host (with replicas: of the lease holder, and PostgreSQL stopped once), seed 13.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from temporalio.client import Client

from bench._eshop_shop import (
    Followers,
    OrderPlan,
    Shop,
    customer,
    drained,
    orders_end,
    plan_orders,
    read_versions,
    stock_up,
)
from bench._eshop_stack import Stack, chaos_plan, running
from bench.harness import Chaos, Verdicts, bench_main, parser, scratch, sized, still_running
from bench.harness.chaos import print_tail, quiet_while_down
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
from bench.oracle.recovery import Recovery, judge_recovery
from workers.eshop.order import ORDER, PAYMENT_GRACE_PERIOD
from wow_temporal.host.store import EventStore
from wow_temporal.ids import timer_workflow_id
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
    replicas: Recovery | None = None
    """With replicas: what the chaos did to them and what each recovery took (monotonic s)."""
    recovered: dict[str, float] = field(default_factory=dict)
    """With replicas: their figures, as the judge read them."""
    followers: Followers = field(default_factory=Followers)
    chaos: Chaos = field(default_factory=Chaos)


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
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=50)
    with scratch(args, "soak_eshop") as tmp:
        async with (
            running(tmp, args) as stack,
            httpx.AsyncClient(timeout=15, limits=limits) as http,
        ):
            shop = Shop(stack.url, http, args.grace)
            if stack.replicas is not None:
                stack.replicas.oks = shop.oks
            stocked = await stock_up(shop, run)
            plans = plan_orders(args.customers, args.duration, rng, run)
            on = f"{args.replicas} host replicas on PostgreSQL, " if args.replicas >= 2 else ""
            print(
                f"soak-eshop: {on}{args.customers} customers, {len(plans)} orders over "
                f"{args.duration:.0f}s, grace {args.grace:g}s, job every {args.job_every}s, "
                f"seed {args.seed}",
                file=sys.stderr,
            )
            report = Report(args.customers, len(plans), args.duration, args.seed)
            report.chaos = Chaos(lead=CHAOS_LEAD_S, recovery=CHAOS_RECOVERY_S)
            shop.epoch = time.time()
            job = await _shop_under_chaos(stack, shop, plans, report, args, rng)
            await stack.stop_hosts()
            print(
                f"soak-eshop: host stopped at {shop.clock():.1f}s; reading its log", file=sys.stderr
            )
            orders = _judge_log(report, stack, shop, stocked, job)
            for workflow_id in await timers_running(await stack.server.connect(), orders):
                report.judged.problem("timers_still_running", workflow_id)
            return report


async def _shop_under_chaos(
    stack: Stack,
    shop: Shop,
    plans: list[OrderPlan],
    report: Report,
    args: argparse.Namespace,
    rng: random.Random,
) -> Job:
    """The customers' orders under chaos, then every order ended, the job stopped and the
    followers drained; the host's reads at the end in `shop.versions`; how the job ran."""
    clock, chaos = shop.clock, report.chaos
    tracks = chaos_plan(stack, args, rng)
    stopped = asyncio.Event()
    background = [
        asyncio.gather(*(chaos.run(track, clock) for track in tracks)),
        asyncio.ensure_future(report.followers.sample(stack.url, clock, stopped)),
    ]
    try:
        await asyncio.gather(*(customer(shop, p, clock) for p in plans))
        await background[0]
        print(f"soak-eshop: customers done at {clock():.1f}s", file=sys.stderr)
        refs = [ORDER.ref(TENANT, p.order_id) for p in plans]
        await orders_end(shop, refs, args.grace + args.settle)
        job = Job(args.job_every, int(time.time() * 1000))
        await stack.job_worker.stop()  # its tick in flight finishes; no slot after it
        if not await drained(stack.url, args.settle):
            report.judged.problem("not_drained", "the relay or a saga was still behind at the end")
        stopped.set()
        await background[1]
        shop.versions = await read_versions(shop, refs)
    finally:
        for task in background:  # a run that failed: no fault starts a process after this
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
    quick_chaos = QUICK_CHAOS if stack.replicas is None else QUICK_CHAOS_REPLICAS
    planned = sorted(f.what for track in tracks for f in track)
    chaos.planned = list(quick_chaos) if args.quick and args.seed == QUICK["seed"] else planned
    report.customers_waited_out = shop.waited_out
    report.replicas = stack.replicas.seen if stack.replicas is not None else None
    report.recovered = judge_recovery(report.judged, shop.host_errors, report.replicas)
    return job


def _judge_log(
    report: Report, stack: Stack, shop: Shop, stocked: set[str], job: Job
) -> dict[str, OrderLog]:
    """The host's logs and its store's log judged (the host has stopped); the orders."""
    judged, inside_chaos = report.judged, report.chaos.inside
    for host in stack.hosts:
        judge_host_log(judged, host.log.read_text(errors="replace").splitlines())
    commits, store = read_log(stack.store)
    judge_reads(judged, commits, shop.versions)
    try:
        orders = judge_orders(judged, commits, store.request, shop.epoch, inside_chaos)
    finally:
        store.close()
    judge_customers(judged, commits, shop.sent)
    judge_requests(judged, commits)
    slots = judge_stock(judged, commits, orders, stocked)
    judge_job(judged, slots, job, shop.epoch, inside_chaos)
    return orders


def print_report(report: Report) -> None:
    r = report.judged
    print(
        f"soak-eshop: {report.customers} customers, {report.orders} orders over "
        f"{report.duration:.0f}s, seed {report.seed}"
    )
    print(verdicts(report).text())
    print(
        f"  also: timers refused (the order paid or cancelled first) {r.timer_refused}; "
        f"customers' commands sent twice {r.repeats}; customers who stopped waiting "
        f"{report.customers_waited_out}; stock received from the customers "
        f"{r.received_from_customers}; job slots 1..{r.slots_last}, skipped (coalesced) "
        f"{r.slots_skipped}, silent {r.slots_silent}, commands {r.job_commands}"
    )
    for product, figures in sorted(r.products.items()):
        print(
            f"    {product}: received {figures['received']} - held by paid orders "
            f"{figures['held_by_paid_orders']} = available {figures['available']}"
        )
    if report.replicas is not None:
        kills = [f"{n}{' (holder)' if held else ''}" for n, held in report.replicas.kills]
        takeovers = [round(took, 2) for took in report.replicas.takeovers]
        print(f"  replicas killed: {', '.join(kills) or 'none'}; takeovers s {takeovers}")
    print(f"  lateness ms timers {r.lateness_timers}")
    print(f"  lateness ms timers outside chaos {r.lateness_timers_outside}")
    print(f"  lateness ms ticks {r.lateness_ticks}")
    print(f"  lateness ms ticks outside chaos {r.lateness_ticks_outside}")
    report.followers.print_worst()
    print_tail(report.chaos, {"outside chaos": r.latest_outside}, r.problems)


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
    seen = report.replicas
    return report.judged.verdicts(replicas=seen is not None) | Verdicts(
        must_be_zero={"chaos_kinds_missing": report.chaos.missing()},
        must_be_positive={"takeovers": len(seen.takeovers)} if seen is not None else {},
        figures=report.recovered,
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
    quiet_while_down()
    return bench_main(args, soak, print_report, verdicts)


if __name__ == "__main__":
    raise SystemExit(main())
