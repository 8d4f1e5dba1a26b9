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
notification log (every commit, in order) and request records are read:

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
import contextlib
import logging
import math
import random
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import httpx
from temporalio.client import Client

from bench.harness import (
    CLI,
    Chaos,
    Fault,
    Proc,
    Verdicts,
    answers,
    bench_main,
    log_says,
    parser,
    scratch,
    sized,
    still_running,
    summary,
    verdict,
    worker_env,
)
from bench.harness.balancer import Balancer
from bench.harness.postgres import Postgres
from workers.eshop.inventory import PRODUCTS, SupplierFeed
from workers.eshop.order import ORDER, PAYMENT_GRACE_PERIOD, PAYMENT_TIMEOUT
from workers.eshop.stock import STOCK
from wow_temporal.dev.ports import free_port
from wow_temporal.dev.server import EmbeddedTemporal
from wow_temporal.host.store import EventStore
from wow_temporal.ids import job_workflow_id, timer_workflow_id
from wow_temporal.logs import CORE_LOGGER, configure_temporal_runtime
from wow_temporal.model import AggregateRef, Commit, ScheduleRule
from wow_temporal.wire import (
    COMMAND_SEND_PATH,
    ERROR_CODE_HEADER,
    WireCommand,
    command_headers,
    read_result,
)

TENANT = "(0)"
"""Wow's default tenant: the SYSTEM job's, so its deliveries stock the customers' shop."""
JOB = "receive-deliveries"
JOB_ID = job_workflow_id("eshop-inventory", JOB)
NEVER_STOCKED = "gift"
"""A product the inventory has never heard of: ReserveStock is NotFound, the order cancelled."""
INITIAL_STOCK = 40
CUSTOMER_CANCEL = "CUSTOMER"
OUT_OF_STOCK = "OUT_OF_STOCK"
PLANS: tuple[tuple[str, float], ...] = (
    ("pay", 0.42),
    ("pay-late", 0.1),
    ("cancel", 0.12),
    ("cancel-early", 0.06),
    ("abandon", 0.3),
)
"""What a customer does with a placed order, and how often."""
DELETE_SHARE = 0.3
"""Orders deleted by their customer once ended (paid or cancelled)."""
TWICE_SHARE = 0.1
"""Commands a customer sends again with the same request id once answered."""
COMMAND_DEADLINE_S = 120.0
"""How long a customer keeps retrying one command (the host may be down for a while)."""
CHAOS_LEAD_S = 2.0
CHAOS_RECOVERY_S = 10.0
"""A due time this long before a chaos window or after it counts as inside it."""
JOB_STALL_MS = 30_000
"""The job's last slot must be due no longer than this before its worker was stopped."""
PLACED_BY = 0.75
"""Orders are placed during this share of the duration (the rest lets them end)."""
TAKEOVER_LIMIT_S = 10.0
"""Issue #19: once the replica running the followers dies, another runs them within this."""
RECOVERY_BOUND_S = 30.0
"""After PostgreSQL is back, a command answered Ok and every follower running within this."""
PG_GRACE_S = 2.0
"""A 5xx this long after PostgreSQL's recovery was seen still counts as the outage's."""
SAMPLE_S = 0.2
"""How often the replicas' `/wow/followers` are read while a takeover or a recovery is timed."""

# -- processes --------------------------------------------------------------------------------


@dataclass
class Stack:
    """The e-shop's processes on a dev server of its own: the host (on its store), or its
    replicas (on one PostgreSQL database, behind one address), and the two workers."""

    server: EmbeddedTemporal
    hosts: list[Proc]
    timer_worker: Proc
    job_worker: Proc
    url: str
    """Where the customers and the workers reach the host: itself, or the replicas' balancer."""
    store: str | Path
    """The host's store: its SQLite file, or the replicas' PostgreSQL database (a URI)."""
    replicas: Replicas | None = None

    async def server_down(self) -> None:
        """Kill the dev server and start it again on its database, 5 s later."""
        await self.server.kill()
        await asyncio.sleep(5.0)
        await self.server.start()

    async def start(self) -> None:
        if self.replicas is not None:
            await self.replicas.balancer.start(self.replicas.port)
        await asyncio.gather(
            *(host.start() for host in self.hosts),
            self.timer_worker.start(),
            self.job_worker.start(),
        )

    async def stop_hosts(self) -> None:
        """SIGTERM every host (each lets its work in flight finish and its leases go)."""
        await asyncio.gather(*(host.stop() for host in self.hosts))

    async def kill(self) -> None:
        for proc in (self.job_worker, self.timer_worker, *self.hosts):
            await proc.kill()
        if self.replicas is not None:
            await self.replicas.balancer.close()


def make_stack(
    tmp: Path, server: EmbeddedTemporal, args: argparse.Namespace, pg: Postgres | None
) -> Stack:
    """The processes (none started): one host on SQLite, or `--replicas` of them on a new
    database of `pg` behind a balancer."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    base = worker_env(
        server.address,
        server.namespace,
        url,
        # Deliveries and ticks ride out a host that is down for a while (never parked by it),
        # and are retried promptly once it is back.
        WOW_TIMERS_MAX_ATTEMPTS="60",
        WOW_TIMERS_RETRY_INITIAL_INTERVAL="200ms",
        WOW_TIMERS_RETRY_MAX_INTERVAL="1s",
    )
    base = {k: v for k, v in base.items() if not k.startswith("ESHOP_")}
    host_env = {**base, "ESHOP_PAYMENT_GRACE_PERIOD": f"PT{args.grace:g}S"}
    store: str | Path
    replicas = None
    if pg is None:
        store = tmp / "domain.db"
        hosts = [host_proc("the host", tmp / "host.log", str(store), port, host_env)]
    else:
        store = pg.database()
        replicas = make_replicas(tmp, store, host_env, args.replicas, pg, port)
        hosts = replicas.procs
    timer_worker = Proc.worker(tmp / "timer-worker.log", base, name="the timer worker")
    job_log = tmp / "job-worker.log"
    job_worker = Proc(
        "the job worker",
        [str(CLI), "worker", "--app", "workers.eshop.inventory:app"],
        job_log,
        log_says(job_log, b"job worker for eshop-inventory"),
        env={
            **base,
            "WOW_SCHEDULES_RECEIVE_DELIVERIES_EXPRESSION": f"*/{args.job_every} * * * * *",
        },
    )
    return Stack(server, hosts, timer_worker, job_worker, url, store, replicas)


def host_proc(name: str, log: Path, db: str, port: int, env: dict[str, str]) -> Proc:
    """`wow-temporal host` of the e-shop on `db` (a SQLite file or a PostgreSQL URI)."""
    argv = [str(CLI), "host", "--app", "workers.eshop:apps", "--db", db, "--port", str(port)]
    return Proc(name, argv, log, answers(f"http://127.0.0.1:{port}/health"), env=env)


def make_replicas(
    tmp: Path, uri: str, env: dict[str, str], count: int, pg: Postgres, port: int
) -> Replicas:
    """`count` hosts on database `uri`, each named (`WOW_HOST_REPLICA`) r1, r2, …, behind a
    balancer to listen on `port`."""
    ports: list[int] = []
    while len(ports) < count:
        if (found := free_port()) not in [*ports, port]:
            ports.append(found)
    procs = [
        host_proc(
            f"host replica r{n}",
            tmp / f"host-r{n}.log",
            uri,
            p,
            {**env, "WOW_HOST_REPLICA": f"r{n}"},
        )
        for n, p in enumerate(ports, 1)
    ]
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    return Replicas(procs, urls, pg, Balancer([("127.0.0.1", p) for p in ports]), port)


@dataclass
class Replicas:
    """Host replicas on one PostgreSQL database behind one balancer, and the chaos done to
    them: the followers' holder SIGKILLed each time, PostgreSQL stopped once; what
    each took to recover (monotonic seconds; the customers' Ok answers in `oks`)."""

    procs: list[Proc]
    urls: list[str]
    pg: Postgres
    balancer: Balancer
    port: int
    oks: list[float] = field(default_factory=list)
    """When each customer's command was answered Ok (the shop's list)."""
    kills: list[tuple[str, bool]] = field(default_factory=list)
    """Each replica SIGKILLed, and whether it ran a follower then."""
    takeovers: list[float] = field(default_factory=list)
    """Seconds from a holder's SIGKILL until every follower ran on a replica again."""
    not_taken_over: int = 0
    pg_window: tuple[float, float] | None = None
    """When PostgreSQL was stopped, and when it was started again."""
    pg_ok: float | None = None
    """The first Ok answer to a customer after PostgreSQL was back."""
    pg_held: float | None = None
    """When every follower ran on a replica again after PostgreSQL was back."""

    async def here(self, http: httpx.AsyncClient) -> tuple[set[str], list[set[str]]]:
        """Every follower's name, and those each replica runs now, read from each replica
        directly (`/wow/followers`; one that is down or cannot read its store runs none)."""

        async def runs(proc: Proc, url: str) -> list[dict[str, Any]]:
            if not proc.running:
                return []
            with contextlib.suppress(httpx.HTTPError, ValueError):
                answer = await http.get(url + "/wow/followers")
                if answer.status_code == 200:
                    return list(answer.json())
            return []

        views = await asyncio.gather(
            *(runs(p, u) for p, u in zip(self.procs, self.urls, strict=True))
        )
        names = {f["name"] for view in views for f in view}
        return names, [{f["name"] for f in view if f["here"]} for view in views]

    async def until_held(self, http: httpx.AsyncClient, within: float) -> float | None:
        """When every follower was first seen running on a replica, `within` s at most."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            names, held = await self.here(http)
            if names and names <= set().union(*held):
                return time.monotonic()
            await asyncio.sleep(SAMPLE_S)
        return None

    async def kill_next(self, pause: float) -> None:
        """SIGKILL the replica running the most followers (so the holders change in turn),
        start it again `pause` s later; done once every follower runs again. Followers that
        ran nowhere before the kill count as not taken over."""
        async with httpx.AsyncClient(timeout=2) as http:
            if await self.until_held(http, RECOVERY_BOUND_S) is None:
                self.not_taken_over += 1
            _, held = await self.here(http)
            victim = max(range(len(held)), key=lambda n: len(held[n]))
            proc = self.procs[victim]
            self.kills.append((proc.name.removeprefix("host replica "), bool(held[victim])))
            killed = time.monotonic()
            await proc.kill()
            again = asyncio.create_task(_start_after(proc, pause))
            try:
                if held[victim]:
                    taken = await self.until_held(http, RECOVERY_BOUND_S)
                    if taken is None:
                        self.not_taken_over += 1
                    else:
                        self.takeovers.append(taken - killed)
                await again
            finally:
                again.cancel()  # a run that failed meanwhile starts nothing after its cleanup

    async def postgres_down(self, pause: float) -> None:
        """Stop PostgreSQL at once, start it again `pause` s later; done once a customer's
        command was answered Ok and every follower runs again ( `RECOVERY_BOUND_S` at most)."""
        stopped = time.monotonic()
        await asyncio.to_thread(self.pg.restart, pause)
        back = time.monotonic()
        self.pg_window = (stopped, back)
        async with httpx.AsyncClient(timeout=2) as http:
            self.pg_held = await self.until_held(http, RECOVERY_BOUND_S)
        while (ok := min((t for t in self.oks if t > back), default=None)) is None:
            if time.monotonic() > back + RECOVERY_BOUND_S:
                break
            await asyncio.sleep(SAMPLE_S)
        self.pg_ok = ok


async def _start_after(proc: Proc, pause: float) -> None:
    await asyncio.sleep(pause)
    await proc.start()


# -- chaos ------------------------------------------------------------------------------------


def chaos_plan(
    stack: Stack, args: argparse.Namespace, rng: random.Random
) -> tuple[list[Fault], list[Fault]]:
    """SIGKILL the workers `--kills` times, and the host `--host-kills` times and kill the dev
    server once, at seeded random moments: two tracks, each done one fault after the other and
    the two at once (a worker may die while the host or the server is down). With replicas,
    each host kill SIGKILLs the followers' lease holder, and PostgreSQL is stopped once, on
    the host's track."""
    duration = args.duration
    victims = [stack.timer_worker], [stack.job_worker], [stack.timer_worker, stack.job_worker]
    kills = sorted(
        (rng.uniform(0.12, 0.7) * duration, rng.randrange(3), rng.uniform(0.5, 3.0))
        for _ in range(args.kills)
    )
    hosts = [
        (rng.uniform(0.12, 0.7) * duration, rng.uniform(0.3, 2.0)) for _ in range(args.host_kills)
    ]
    workers = [
        Fault(at, " and ".join(v.name.removeprefix("the ") for v in victims[which]),
              partial(restart, victims[which], pause))
        for at, which, pause in kills
    ]  # fmt: skip
    replicas = stack.replicas
    if replicas is None:
        downs = [Fault(at, "host", partial(restart, stack.hosts, pause)) for at, pause in hosts]
    else:
        downs = [
            Fault(at, "host replica", partial(replicas.kill_next, pause)) for at, pause in hosts
        ]
    if not args.no_server_restart:
        downs.append(Fault(rng.uniform(0.35, 0.55) * duration, "server", stack.server_down))
    if replicas is not None:  # away ~5.5-8 s with the stop and the start
        pause = rng.uniform(5.0, 7.0)
        at = rng.uniform(0.15, 0.6) * duration
        downs.append(Fault(at, "postgres", partial(replicas.postgres_down, pause)))
    return workers, downs


async def restart(procs: list[Proc], pause: float) -> None:
    """SIGKILL them one after the other, wait `pause` seconds, start them again together."""
    for proc in procs:
        await proc.kill()
    await asyncio.sleep(pause)
    await asyncio.gather(*(proc.start() for proc in procs))


# -- customers --------------------------------------------------------------------------------


@dataclass
class Sent:
    """One command a customer sent, and the answer it was finally given."""

    kind: str  # create, pay, cancel, delete
    order_id: str
    request_id: str
    code: str = ""
    """Wow's error code of the final answer; "" if the host never answered in time."""
    again: str = ""
    """The answer to the same request sent again, if it was."""


@dataclass
class OrderPlan:
    customer: int
    order_id: str
    at: float
    items: dict[str, int]
    plan: str
    delete: bool
    twice: str
    """The kind of command this order's customer sends twice ("" none)."""
    wait: float
    """Seconds after the order awaits payment before the customer acts (pay, cancel)."""


@dataclass
class Shop:
    """The customers' side: their HTTP client and what they were told."""

    url: str
    http: httpx.AsyncClient
    grace: float
    sent: list[Sent] = field(default_factory=list)
    host_errors: list[tuple[float, str]] = field(default_factory=list)
    """Each 5xx answer: when (monotonic), and what."""
    oks: list[float] = field(default_factory=list)
    """When each command was answered Ok (monotonic)."""
    waited_out: int = 0
    """Orders a customer stopped waiting for (the end checks every order anyway)."""

    async def send(
        self,
        kind: str,
        order_id: str,
        ref: AggregateRef,
        command_type: str,
        body: dict[str, Any],
        request_id: str,
        *,
        record: bool = True,
    ) -> Sent:
        """Send until the host answers (a transport error or a 5xx is retried, same id)."""
        sent = Sent(kind, order_id, request_id)
        command = WireCommand(
            type=command_type,
            context_name=ref.context_name,
            aggregate_name=ref.aggregate_name,
            aggregate_id=ref.aggregate_id,
            tenant_id=ref.tenant_id,
            request_id=request_id,
            wait_stage=None,
        )
        headers = command_headers(command)
        deadline = time.monotonic() + COMMAND_DEADLINE_S
        while time.monotonic() < deadline:
            try:
                response = await self.http.post(
                    self.url + COMMAND_SEND_PATH, json=body, headers=headers
                )
            except httpx.HTTPError:
                await asyncio.sleep(random.uniform(0.2, 0.5))
                continue
            answer = read_result(response.content, response.headers.get(ERROR_CODE_HEADER))
            if answer.body is None:  # not a CommandResult: as a dropped connection
                await asyncio.sleep(random.uniform(0.2, 0.5))
                continue
            code = answer.code or ""
            if response.status_code >= 500:
                what = f"{kind} {order_id} ({request_id}): {response.text}"
                self.host_errors.append((time.monotonic(), what))
                await asyncio.sleep(0.5)
                continue
            sent.code = code
            if code == "Ok":
                self.oks.append(time.monotonic())
            break
        if record:
            self.sent.append(sent)
        return sent

    async def status(self, ref: AggregateRef) -> str | None:
        """The order's status as the host reads it (None: not there, or no answer)."""
        path = f"/wow/aggregate/{ref.context_name}/{ref.aggregate_name}/{ref.tenant_id}/"
        try:
            response = await self.http.get(self.url + path + ref.aggregate_id)
            if response.status_code != 200:
                return None
            return str(response.json()["state"]["status"])
        except (httpx.HTTPError, ValueError, KeyError):
            return None

    async def version(self, ref: AggregateRef) -> int | None:
        """The aggregate's version as the host reads it (None: not there, or no answer)."""
        path = f"/wow/aggregate/{ref.context_name}/{ref.aggregate_name}/{ref.tenant_id}/"
        for _ in range(5):
            try:
                response = await self.http.get(self.url + path + ref.aggregate_id)
                return int(response.json()["version"]) if response.status_code == 200 else None
            except (httpx.HTTPError, ValueError, KeyError):
                await asyncio.sleep(0.2)
        return None

    async def wait_status(
        self,
        ref: AggregateRef,
        wanted: set[str],
        timeout: float,  # noqa: ASYNC109
    ) -> str | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = await self.status(ref)
            if found in wanted:
                return found
            await asyncio.sleep(0.3)
        return None


def plan_orders(customers: int, duration: float, rng: random.Random, run: str) -> list[OrderPlan]:
    """Each customer's orders (one to three), spread evenly over the placing window."""
    names, weights = zip(*PLANS, strict=True)
    plans = []
    for customer in range(customers):
        for n in range(rng.choice((1, 1, 2, 2, 3))):
            products = rng.sample(PRODUCTS, rng.choice((1, 1, 2, 2, 3)))
            if rng.random() < 0.04:
                products.append(NEVER_STOCKED)
            plan = rng.choices(names, weights)[0]
            twice = rng.choice(("create", "act", "delete")) if rng.random() < TWICE_SHARE else ""
            plans.append(
                OrderPlan(
                    customer=customer,
                    order_id=f"o-{customer:04d}-{n}-{run}",
                    at=0.0,
                    items={p: rng.randint(1, 6) for p in products},
                    plan=plan,
                    delete=rng.random() < DELETE_SHARE,
                    twice=twice,
                    wait=rng.random(),
                )
            )
    rng.shuffle(plans)
    window = duration * PLACED_BY
    for index, plan_ in enumerate(plans):  # a steady rate, a little jitter
        plan_.at = 1.0 + window * (index + rng.random()) / max(len(plans), 1)
    return plans


async def customer(shop: Shop, plan: OrderPlan, clock: Callable[[], float]) -> None:
    """One order's life as its customer leads it."""
    await asyncio.sleep(max(0.0, plan.at - clock()))
    ref = ORDER.ref(TENANT, plan.order_id)
    lines = [{"product_id": p, "quantity": q} for p, q in plan.items.items()]

    async def command(kind: str, command_type: str, body: dict[str, Any]) -> Sent:
        request_id = f"{plan.order_id}:{kind}"
        sent = await shop.send(kind, plan.order_id, ref, command_type, body, request_id)
        if plan.twice == kind or (plan.twice == "act" and kind in ("pay", "cancel")):
            again = await shop.send(
                kind, plan.order_id, ref, command_type, body, request_id, record=False
            )
            sent.again = again.code
        return sent

    created = await command("create", "eshop.order.CreateOrder", {"items": lines})
    if created.code not in ("Ok", "DuplicateRequestId"):
        return
    cancel = {"cause": {"code": CUSTOMER_CANCEL, "detail": "soak"}}
    if plan.plan == "cancel-early":
        await command("cancel", "eshop.order.CancelOrder", cancel)
    else:
        status = await shop.wait_status(ref, {"AWAITING_PAYMENT", "CANCELLED"}, 90)
        if status is None:
            shop.waited_out += 1
        elif status == "AWAITING_PAYMENT" and plan.plan != "abandon":
            after = {
                "pay": 0.1 + plan.wait * shop.grace * 0.5,
                "pay-late": shop.grace + (plan.wait - 0.3) * 1.5,
                "cancel": plan.wait * shop.grace * 0.7,
            }[plan.plan]
            await asyncio.sleep(max(0.0, after))
            if plan.plan == "cancel":
                await command("cancel", "eshop.order.CancelOrder", cancel)
            else:
                await command("pay", "eshop.order.PayOrder", {})
    if plan.delete:
        if await shop.wait_status(ref, {"PAID", "CANCELLED"}, shop.grace + 90) is None:
            shop.waited_out += 1
            return
        await command("delete", "wow.DeleteAggregate", {})


# -- the check --------------------------------------------------------------------------------


@dataclass
class Report:
    customers: int
    orders: int
    duration: float
    seed: int
    # what happened (for the reader)
    paid: int = 0
    cancelled_by_timer: int = 0
    cancelled_by_customer: int = 0
    cancelled_out_of_stock: int = 0
    deleted: int = 0
    timers_set: int = 0
    timer_refused: int = 0
    """Timers whose cancellation came after the order was paid or cancelled: refused."""
    repeats: int = 0
    customers_waited_out: int = 0
    received_from_customers: int = 0
    received_from_job: int = 0
    slots_last: int = 0
    slots_handled: int = 0
    slots_skipped: int = 0
    slots_silent: int = 0
    job_commands: int = 0
    products: dict[str, dict[str, int]] = field(default_factory=dict)
    # must be zero
    unresolved: int = 0
    paid_and_cancelled: int = 0
    paid_twice: int = 0
    cancelled_twice: int = 0
    cancelled_early: int = 0
    cancelled_after_payment: int = 0
    timer_wrong: int = 0
    acknowledged_lost: int = 0
    refused_but_committed: int = 0
    repeat_answered_otherwise: int = 0
    unanswered: int = 0
    host_errors: int = 0
    decided_twice: int = 0
    reserved_twice: int = 0
    released_twice: int = 0
    oversold: int = 0
    shortage_wrong: int = 0
    held_wrongly: int = 0
    received_wrongly: int = 0
    slots_lost: int = 0
    slots_twice: int = 0
    commands_lost: int = 0
    commands_wrong: int = 0
    timers_still_running: int = 0
    job_stalled: int = 0
    not_drained: int = 0
    stale_reads: int = 0
    version_conflicts: int = 0
    lateness_timers: dict[str, float] = field(default_factory=dict)
    lateness_timers_outside: dict[str, float] = field(default_factory=dict)
    lateness_ticks: dict[str, float] = field(default_factory=dict)
    lateness_ticks_outside: dict[str, float] = field(default_factory=dict)
    latest_outside: list[tuple[int, float, str]] = field(default_factory=list)
    """The latest cancellations and ticks due outside the chaos windows: (ms, due at s, what)."""
    followers_worst: dict[str, tuple[int, float]] = field(default_factory=dict)
    """The most commits each follower of the host was behind, and when (run s)."""
    followers_stalls: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Each follower's longest stall: seconds behind without moving, from when (run s)."""
    chaos: list[tuple[str, float, float]] = field(default_factory=list)
    chaos_expected: list[str] = field(default_factory=list)
    """What the chaos was to do, by name."""
    # with replicas (`--replicas` N >= 2; run-relative seconds, NaN: not measured)
    replicas: int = 1
    replica_kills: list[tuple[str, bool]] = field(default_factory=list)
    """Each replica SIGKILLed, and whether it ran followers then."""
    takeovers_ms: list[int] = field(default_factory=list)
    """From a holder's SIGKILL until every follower ran on a replica again."""
    pg_away_s: float = math.nan
    """From PostgreSQL's stop until it was started again."""
    pg_commands_ok_after_s: float = math.nan
    """From then until a customer's command was first answered Ok."""
    pg_followers_held_after_s: float = math.nan
    """From then until every follower ran on a replica again."""
    pg_answered_5xx: int = 0
    """Commands answered 5xx while PostgreSQL was away or just back (retried, same id)."""
    pg_last_5xx_after_s: float = math.nan
    """The last of those, after PostgreSQL was back (a replica's pool still reconnecting)."""
    takeover_slow: int = 0
    postgres_unrecovered: int = 0
    problems: list[str] = field(default_factory=list)

    MUST_BE_ZERO = (
        "unresolved",
        "paid_and_cancelled",
        "paid_twice",
        "cancelled_twice",
        "cancelled_early",
        "cancelled_after_payment",
        "timer_wrong",
        "acknowledged_lost",
        "refused_but_committed",
        "repeat_answered_otherwise",
        "unanswered",
        "host_errors",
        "decided_twice",
        "reserved_twice",
        "released_twice",
        "oversold",
        "shortage_wrong",
        "held_wrongly",
        "received_wrongly",
        "slots_lost",
        "slots_twice",
        "commands_lost",
        "commands_wrong",
        "timers_still_running",
        "job_stalled",
        "not_drained",
        "stale_reads",
        "version_conflicts",
    )
    REPLICAS_ZERO = ("takeover_slow", "postgres_unrecovered")
    """Must be zero too with replicas."""

    @property
    def ok(self) -> bool:
        return all(getattr(self, name) == 0 for name in self.MUST_BE_ZERO + self.REPLICAS_ZERO)

    def problem(self, count: str, text: str) -> None:
        setattr(self, count, getattr(self, count) + 1)
        if len(self.problems) < 60:
            self.problems.append(f"{count}: {text}")


def read_log(store_path: str | Path) -> tuple[list[Commit], EventStore]:
    """Every commit of the host's notification log, in order (the host has stopped), from its
    SQLite file or its PostgreSQL database."""
    store = EventStore(store_path)
    commits: list[Commit] = []
    position = 0
    while batch := store.commits_after(position, 1000):
        commits.extend(commit for _, commit in batch)
        position = batch[-1][0]
    return commits, store


@dataclass
class OrderLog:
    """One order as its stream in the log tells it."""

    order_id: str
    items: dict[str, int] = field(default_factory=dict)
    timers: list[tuple[str, int]] = field(default_factory=list)
    """(timer, due ms) of each payment grace period it set."""
    paid: list[Commit] = field(default_factory=list)
    cancelled: list[tuple[Commit, dict[str, Any]]] = field(default_factory=list)
    deleted: bool = False


def check_orders(
    report: Report,
    commits: list[Commit],
    store: EventStore,
    sent: list[Sent],
    epoch: float,
    chaos: Chaos,
) -> dict[str, OrderLog]:
    orders: dict[str, OrderLog] = {}
    late_all: list[float] = []
    late_outside: list[float] = []
    for commit in commits:
        if (commit.context_name, commit.aggregate_name) != ("eshop-order", "order"):
            continue
        order = orders.setdefault(commit.aggregate_id, OrderLog(commit.aggregate_id))
        for event in commit.body:
            if event.name == "eshop.order.OrderCreated":
                order.items = {i["product_id"]: i["quantity"] for i in event.body["items"]}
            elif event.name == "wow.ScheduleSet" and event.body["key"] == PAYMENT_GRACE_PERIOD:
                rule = ScheduleRule.model_validate(event.body["rule"])
                first = rule.first_due(datetime.fromtimestamp(commit.create_time / 1000, UTC))
                assert first is not None
                order.timers.append((f"{commit.id}:{event.id}", round(first.timestamp() * 1000)))
            elif event.name == "eshop.order.OrderPaid":
                if order.paid:
                    report.problem("paid_twice", f"{order.order_id}: {commit.id}")
                order.paid.append(commit)
            elif event.name == "eshop.order.OrderCancelled":
                if order.cancelled:
                    report.problem("cancelled_twice", f"{order.order_id}: {commit.id}")
                if order.paid:
                    report.problem(
                        "cancelled_after_payment", f"{order.order_id}: {commit.id} {event.body}"
                    )
                order.cancelled.append((commit, event.body))
                timer = event.body.get("timer")
                reason = event.body["cause"]["code"]
                if timer is not None:
                    report.cancelled_by_timer += 1
                    known = dict(order.timers)
                    due = known.get(timer)
                    header_due = int(commit.header.get("schedule_due", "0"))
                    if (
                        due is None
                        or reason != PAYMENT_TIMEOUT
                        or commit.request_id != f"{timer}#1"
                        or abs(header_due - due) > 1
                    ):
                        report.problem(
                            "timer_wrong",
                            f"{order.order_id}: {commit.id} by {timer} (set: {order.timers}), "
                            f"request {commit.request_id}, due {header_due}",
                        )
                        continue
                    late = commit.create_time - due
                    if late < 0:
                        report.problem(
                            "cancelled_early", f"{order.order_id}: {-late} ms before {due}"
                        )
                    late_all.append(late)
                    if not chaos.inside(due / 1000 - epoch):
                        late_outside.append(late)
                        report.latest_outside.append(
                            (late, round(due / 1000 - epoch, 1), f"{commit.request_id}")
                        )
                elif reason == CUSTOMER_CANCEL:
                    report.cancelled_by_customer += 1
                elif reason == OUT_OF_STOCK:
                    report.cancelled_out_of_stock += 1
            elif event.name == "wow.AggregateDeleted":
                order.deleted = True
                report.deleted += 1
    for order in orders.values():
        ends = len(order.paid) + len(order.cancelled)
        if ends == 0:
            report.problem("unresolved", f"{order.order_id}: neither paid nor cancelled")
        elif order.paid and order.cancelled:
            report.problem("paid_and_cancelled", order.order_id)
        report.paid += bool(order.paid)
        if len(order.timers) > 1:
            report.problem("timer_wrong", f"{order.order_id}: {len(order.timers)} grace periods")
        report.timers_set += len(order.timers)
        ref = ORDER.ref(TENANT, order.order_id)
        for timer, _ in order.timers:
            record = store.request(ref, f"{timer}#1")
            if record is not None and record.refused is not None:
                report.timer_refused += 1
            if store.request(ref, f"{timer}#2") is not None:
                report.problem("timer_wrong", f"{order.order_id}: {timer} sent a slot 2")
    # What the customers were told against the log.
    by_request: dict[tuple[str, str], Commit] = {}
    for commit in commits:
        if commit.aggregate_name == "order" and commit.request_id:
            by_request[(commit.aggregate_id, commit.request_id)] = commit
    for one in sent:
        if not one.code:
            report.problem("unanswered", f"{one.kind} {one.order_id} ({one.request_id})")
            continue
        committed = (one.order_id, one.request_id) in by_request
        if one.code in ("Ok", "DuplicateRequestId") and not committed:
            report.problem("acknowledged_lost", f"{one.kind} {one.order_id}: told {one.code}")
        elif one.code not in ("Ok", "DuplicateRequestId") and committed:
            report.problem("refused_but_committed", f"{one.kind} {one.order_id}: {one.code}")
        if one.again:
            report.repeats += 1
            want = "DuplicateRequestId" if one.code in ("Ok", "DuplicateRequestId") else one.code
            if one.again != want:
                report.problem(
                    "repeat_answered_otherwise",
                    f"{one.kind} {one.order_id}: {one.code}, then {one.again}",
                )
    report.lateness_timers = summary(late_all, (0.5, 0.9, 0.99))
    report.lateness_timers_outside = summary(late_outside, (0.5, 0.9, 0.99))
    return orders


def expected_commands(due_ms: int, skipped: int) -> list[tuple[str, int]]:
    """What the job's handler derives for a tick: the suppliers' deliveries of its days."""
    today = datetime.fromtimestamp(due_ms / 1000, UTC).date()
    feed = SupplierFeed()
    return [
        (d.product_id, d.quantity)
        for n in range(skipped + 1, 0, -1)
        for d in feed.delivered_on(TENANT, today - timedelta(days=n))
    ]


def check_stock_and_job(
    report: Report,
    commits: list[Commit],
    orders: dict[str, OrderLog],
    stocked: set[str],
    epoch: float,
    chaos: Chaos,
    job_every: int,
    job_stopped_ms: int,
) -> None:
    # The job's commits, by slot: (index, product, quantity, commit).
    slots: dict[int, list[tuple[int, str, int, Commit]]] = defaultdict(list)
    requests: Counter[tuple[str, str, str, str]] = Counter()
    for commit in commits:
        if commit.request_id:
            ref = commit.aggregate
            requests[(ref.context_name, ref.aggregate_name, ref.tenant_id, commit.request_id)] += 1
    for (context, aggregate, tenant, request_id), count in requests.items():
        if count > 1:
            report.problem(
                "decided_twice", f"{context}.{aggregate} (tenant {tenant}) {request_id}: {count}"
            )
    on_hand: Counter[str] = Counter()
    holds: dict[str, dict[str, int]] = defaultdict(dict)
    ever_reserved: Counter[tuple[str, str]] = Counter()
    ever_released: Counter[tuple[str, str]] = Counter()
    for commit in commits:
        if (commit.context_name, commit.aggregate_name) != ("eshop-inventory", "stock"):
            continue
        product = commit.aggregate_id
        held = holds[product]
        for event in commit.body:
            body = event.body
            if event.name == "eshop.inventory.StockReceived":
                on_hand[product] += body["quantity"]
                if commit.request_id.startswith(f"{JOB_ID}#"):
                    report.received_from_job += body["quantity"]
                    slot_text, index_text = commit.request_id.split("#", 1)[1].split(":")
                    slots[int(slot_text)].append(
                        (int(index_text), product, body["quantity"], commit)
                    )
                elif commit.request_id in stocked:
                    report.received_from_customers += body["quantity"]
                else:
                    report.problem(
                        "received_wrongly", f"{product}: {commit.id} ({commit.request_id})"
                    )
            elif event.name == "eshop.inventory.StockReserved":
                order_id = body["order_id"]
                ever_reserved[(product, order_id)] += 1
                if order_id in held or ever_reserved[(product, order_id)] > 1:
                    report.problem("reserved_twice", f"{product} for {order_id}: {commit.id}")
                held[order_id] = body["quantity"]
                if on_hand[product] - sum(held.values()) < 0:
                    report.problem("oversold", f"{product}: {commit.id} for {order_id}")
            elif event.name == "eshop.inventory.StockShortage":
                available = on_hand[product] - sum(held.values())
                if body["available"] != available or available >= body["quantity"]:
                    report.problem(
                        "shortage_wrong", f"{product}: {commit.id} {body}, available {available}"
                    )
            elif event.name == "eshop.inventory.StockReleased":
                order_id = body["order_id"]
                ever_released[(product, order_id)] += 1
                if held.get(order_id) != body["quantity"] or ever_released[(product, order_id)] > 1:
                    report.problem("released_twice", f"{product} for {order_id}: {commit.id}")
                held.pop(order_id, None)
    # What stays reserved is exactly what the paid orders hold.
    should_hold: dict[str, dict[str, int]] = defaultdict(dict)
    for order in orders.values():
        if order.paid and not order.cancelled:
            for product, quantity in order.items.items():
                should_hold[product][order.order_id] = quantity
    for product in sorted(set(holds) | set(should_hold)):
        have, want = holds.get(product, {}), should_hold.get(product, {})
        for order_id in sorted(set(have) | set(want)):
            if have.get(order_id) != want.get(order_id):
                report.problem(
                    "held_wrongly",
                    f"{product} for {order_id}: holds {have.get(order_id)}, "
                    f"its order says {want.get(order_id)}",
                )
        report.products[product] = {
            "received": on_hand[product],
            "held_by_paid_orders": sum(want.values()),
            "available": on_hand[product] - sum(have.values()),
        }
    # The job's slots: each from 1 to the last handled once, or skipped by a later tick.
    accounted: Counter[int] = Counter()
    ticks_all: list[float] = []
    ticks_outside: list[float] = []
    dues: dict[int, int] = {}
    for slot, found in sorted(slots.items()):
        headers = {
            (
                c.header.get("schedule_slot"),
                c.header.get("schedule_due"),
                c.header.get("schedule_skipped"),
            )
            for _, _, _, c in found
        }
        if len(headers) != 1:
            report.problem("commands_wrong", f"slot {slot}: its commits disagree: {headers}")
            continue
        slot_header, due_text, skipped_text = headers.pop()
        if slot_header != str(slot) or due_text is None or skipped_text is None:
            report.problem("commands_wrong", f"slot {slot}: header {slot_header}, {due_text}")
            continue
        due, skipped = int(due_text), int(skipped_text)
        dues[slot] = due
        report.slots_handled += 1
        report.slots_skipped += skipped
        for covered in range(slot - skipped, slot + 1):
            accounted[covered] += 1
        derived = expected_commands(due, skipped)
        got = {index: (product, quantity) for index, product, quantity, _ in found}
        report.job_commands += len(found)
        for index, command in enumerate(derived):
            if index not in got:
                report.problem("commands_lost", f"slot {slot} command {index}: {command}")
            elif got[index] != command:
                report.problem(
                    "commands_wrong", f"slot {slot} command {index}: {got[index]}, not {command}"
                )
        for index in sorted(set(got) - set(range(len(derived)))):
            report.problem("commands_wrong", f"slot {slot}: an extra command {index}")
        first = min(c.create_time for _, _, _, c in found)
        ticks_all.append(first - due)
        if not chaos.inside(due / 1000 - epoch):
            ticks_outside.append(first - due)
            report.latest_outside.append(
                (first - due, round(due / 1000 - epoch, 1), f"{JOB_ID}#{slot}")
            )
    report.slots_last = max(slots, default=0)
    for slot in range(1, report.slots_last + 1):
        if accounted[slot] > 1:
            report.problem("slots_twice", f"slot {slot} accounted for {accounted[slot]} times")
        elif accounted[slot] == 0:
            later = min((s for s in dues if s > slot), default=None)
            due = dues[later] - (later - slot) * job_every * 1000 if later is not None else 0
            if later is not None and not expected_commands(due, 0):
                report.slots_silent += 1  # its day's feed is empty: nothing to see in the log
            else:
                report.problem("slots_lost", f"slot {slot} of {JOB_ID} was never handled")
    last_due = dues.get(report.slots_last)
    if last_due is None or last_due < job_stopped_ms - JOB_STALL_MS:
        report.problem(
            "job_stalled",
            f"the last slot ({report.slots_last}) was due at {last_due}, the "
            f"job worker stopped at {job_stopped_ms}",
        )
    report.lateness_ticks = summary(ticks_all)
    report.lateness_ticks_outside = summary(ticks_outside)
    report.latest_outside = sorted(report.latest_outside, reverse=True)[:6]


def check_reads(
    report: Report, commits: list[Commit], versions: dict[AggregateRef, int | None]
) -> None:
    """The host's own read of each aggregate (`GET /wow/aggregate/...`) at the end shows the
    version its log ends at."""
    logged: dict[AggregateRef, int] = {}
    for commit in commits:
        logged[commit.aggregate] = max(logged.get(commit.aggregate, 0), commit.version)
    for ref, read in versions.items():
        if read != logged.get(ref):
            report.problem(
                "stale_reads",
                f"{ref.aggregate_name} {ref.aggregate_id}: the host reads version {read}, its "
                f"log ends at {logged.get(ref)}",
            )


def check_host_log(report: Report, log: Path) -> None:
    """No command was answered with a version conflict: the host decides one aggregate's
    commands one at a time, so a conflict means it decided on a state it should not have had
    (timers and sagas take the answer as a refusal). Replicas decide again on a commit another
    one made first; an expected version's conflict needs one sent, and none is."""
    for line in log.read_text(errors="replace").splitlines():
        if ": EventVersionConflict" in line or ": CommandExpectVersionConflict" in line:
            report.problem("version_conflicts", line[:300])


def check_replicas(report: Report, replicas: Replicas | None, shop: Shop) -> None:
    """A 5xx answered while PostgreSQL was away, or after it was back until a command was Ok
    and every follower ran again (+ `PG_GRACE_S`: a replica's pool reconnecting), is counted;
    any other is a host error. With replicas: every takeover within `TAKEOVER_LIMIT_S`, a
    command Ok and the followers running again once PostgreSQL was back
    (`RECOVERY_BOUND_S`)."""
    window = replicas.pg_window if replicas is not None else None
    excused = (math.inf, -math.inf)  # nothing, unless PostgreSQL was stopped
    if window is not None and replicas is not None:
        seen = [t for t in (replicas.pg_ok, replicas.pg_held) if t is not None]
        excused = (window[0], max(seen, default=window[1] + RECOVERY_BOUND_S) + PG_GRACE_S)
    for at, what in shop.host_errors:
        if excused[0] <= at <= excused[1]:
            report.pg_answered_5xx += 1
            after = round(at - window[1], 1)
            if not after <= report.pg_last_5xx_after_s:  # NaN at first
                report.pg_last_5xx_after_s = after
        else:
            report.problem("host_errors", what)
    if replicas is None:
        return
    report.replicas = len(replicas.procs)
    report.replica_kills = replicas.kills
    report.takeovers_ms = [round(took * 1000) for took in replicas.takeovers]
    for took in replicas.takeovers:
        if took > TAKEOVER_LIMIT_S:
            report.problem("takeover_slow", f"every follower ran again {took:.1f}s after")
    for _ in range(replicas.not_taken_over):
        report.problem("takeover_slow", f"a follower ran nowhere {RECOVERY_BOUND_S:g}s after")
    if window is None:
        return  # never stopped: chaos_kinds_missing says so
    stopped, back = window
    report.pg_away_s = round(back - stopped, 2)
    for name, when in (("commands_ok", replicas.pg_ok), ("followers_held", replicas.pg_held)):
        if when is None:
            report.problem("postgres_unrecovered", f"{name}: not {RECOVERY_BOUND_S:g}s after")
        else:
            setattr(report, f"pg_{name}_after_s", round(when - back, 2))


# -- the run ----------------------------------------------------------------------------------


@dataclass
class Followers:
    """The host's followers (relay, sagas) sampled every second from `/wow/followers`: the most
    commits each was behind, and its longest stall (behind, its position not moving)."""

    worst: dict[str, tuple[int, float]] = field(default_factory=dict)
    """Per follower: (commits behind, at s)."""
    stalls: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Per follower: its longest stall (seconds, from s)."""

    async def sample(self, url: str, clock: Callable[[], float], stop: asyncio.Event) -> None:
        moved: dict[str, tuple[int, float]] = {}  # position, since when it has not moved
        async with httpx.AsyncClient(timeout=5) as http:
            while not stop.is_set():
                now = clock()
                with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, TypeError):
                    for follower in (await http.get(url + "/wow/followers")).json():
                        name, behind = follower["name"], int(follower["behind"])
                        position = int(follower["position"])
                        if behind > self.worst.get(name, (0, 0.0))[0]:
                            self.worst[name] = (behind, round(now, 1))
                        if name not in moved or moved[name][0] != position or behind == 0:
                            moved[name] = (position, now)
                        stalled = now - moved[name][1]
                        if stalled > self.stalls.get(name, (0.0, 0.0))[0]:
                            self.stalls[name] = (round(stalled, 1), round(moved[name][1], 1))
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(1.0):
                        await stop.wait()


async def drained(url: str, timeout: float) -> bool:  # noqa: ASYNC109
    """Wait until the relay and every saga have nothing left in the log (twice in a row)."""
    deadline = time.monotonic() + timeout
    quiet = 0
    async with httpx.AsyncClient(timeout=10) as http:
        while time.monotonic() < deadline:
            try:
                followers = (await http.get(url + "/wow/followers")).json()
                idle = all(f["behind"] == 0 and not f["lastError"] for f in followers)
            except (httpx.HTTPError, ValueError, KeyError, TypeError):
                idle = False
            quiet = quiet + 1 if idle else 0
            if quiet >= 3:
                return True
            await asyncio.sleep(0.5)
    return False


async def stock_up(shop: Shop, run: str) -> set[str]:
    """Every product stocked with `INITIAL_STOCK` before the customers come; the request ids."""
    stocked: set[str] = set()
    for product in PRODUCTS:
        request_id = f"stock-{product}-{run}"
        answer = await shop.send(
            "stock",
            product,
            STOCK.ref(TENANT, product),
            "eshop.inventory.ReceiveStock",
            {"quantity": INITIAL_STOCK},
            request_id,
            record=False,
        )
        assert answer.code == "Ok", answer
        stocked.add(request_id)
    return stocked


async def orders_end(shop: Shop, refs: list[AggregateRef], within: float) -> None:
    """Wait until every order placed has ended (its grace period at the latest), `within`
    seconds at most."""
    pending = list(refs)
    deadline = time.monotonic() + within
    while pending and time.monotonic() < deadline:
        statuses = await asyncio.gather(*(shop.status(r) for r in pending))
        pending = [
            r
            for r, s in zip(pending, statuses, strict=True)
            if s not in ("PAID", "CANCELLED") and not (s is None and _never(shop, r))
        ]
        if pending:
            await asyncio.sleep(0.5)


async def read_versions(shop: Shop, refs: list[AggregateRef]) -> dict[AggregateRef, int | None]:
    """Each order's and product's version as the host reads it at the end."""
    every = refs + [STOCK.ref(TENANT, p) for p in (*PRODUCTS, NEVER_STOCKED)]
    read = await asyncio.gather(*(shop.version(r) for r in every))
    return dict(zip(every, read, strict=True))


async def check_timers_ended(report: Report, client: Client, orders: dict[str, OrderLog]) -> None:
    """No order's timer is left running (parked, or never told of its end), 30 s at most."""
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
    for workflow_id in running:
        report.problem("timers_still_running", workflow_id)


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
            check_replicas(report, stack.replicas, shop)
            if not idle:
                report.problem("not_drained", "the relay or a saga was still behind at the end")
            for host in stack.hosts:
                check_host_log(report, host.log)
            commits, store = read_log(stack.store)
            check_reads(report, commits, versions)
            try:
                orders = check_orders(report, commits, store, shop.sent, epoch, chaos)
                check_stock_and_job(
                    report, commits, orders, stocked, epoch, chaos, args.job_every, job_stopped_ms
                )
            finally:
                store.close()
            await check_timers_ended(report, await server.connect(), orders)
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


def _never(shop: Shop, ref: AggregateRef) -> bool:
    """The order was never created: its customer had no answer to CreateOrder."""
    return any(
        s.kind == "create" and s.order_id == ref.aggregate_id and not s.code for s in shop.sent
    )


def print_report(report: Report) -> None:
    r = report
    cancelled = r.cancelled_by_timer + r.cancelled_by_customer + r.cancelled_out_of_stock
    print(
        f"soak-eshop {verdict(r.ok)}: {r.customers} customers, {r.orders} orders over "
        f"{r.duration:.0f}s, seed {r.seed}"
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
        f"conflict {r.version_conflicts}; customers who stopped waiting {r.customers_waited_out}"
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
    if r.replicas >= 2:
        print_replicas(r)
    if r.not_drained:
        print("  the relay or a saga was still behind at the end")
    print(f"  lateness ms timers {r.lateness_timers}")
    print(f"  lateness ms timers outside chaos {r.lateness_timers_outside}")
    print(f"  lateness ms ticks {r.lateness_ticks}")
    print(f"  lateness ms ticks outside chaos {r.lateness_ticks_outside}")
    for name in sorted(r.followers_worst):
        behind, at = r.followers_worst[name]
        stalled, since = r.followers_stalls.get(name, (0.0, 0.0))
        print(
            f"  follower {name}: at most {behind} commits behind (at {at}s), longest stall "
            f"{stalled}s (from {since}s)"
        )
    for late, due_at, what in r.latest_outside:
        print(f"  late outside chaos: {late} ms, due at {due_at}s, {what}")
    for what, began, ended in r.chaos:
        print(f"  chaos {what}: {began:.1f}s .. {ended:.1f}s")
    for line in r.problems:
        print(f"  ! {line}")


def print_replicas(r: Report) -> None:
    kills = ", ".join(f"{name}{' (holder)' if held else ''}" for name, held in r.replica_kills)
    print(
        f"  replicas: {r.replicas} on PostgreSQL; killed {kills or 'none'}; takeovers ms "
        f"{r.takeovers_ms} (max {max(r.takeovers_ms, default=0)}, over "
        f"{TAKEOVER_LIMIT_S:g}s {r.takeover_slow})"
    )
    print(
        f"  postgres: away {_s(r.pg_away_s)}; after it was back a command Ok at "
        f"{_s(r.pg_commands_ok_after_s)}, every follower running at "
        f"{_s(r.pg_followers_held_after_s)}; answered 5xx meanwhile {r.pg_answered_5xx} (the "
        f"last at {_s(r.pg_last_5xx_after_s)}); unrecovered {r.postgres_unrecovered}"
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
    """Every count that must be 0, and the chaos as planned; every path taken."""
    done = Counter(what for what, _, _ in report.chaos)
    wanted = Counter(report.chaos_expected)
    replicas = report.replicas >= 2
    return Verdicts(
        must_be_zero={
            **{name: getattr(report, name) for name in Report.MUST_BE_ZERO},
            "chaos_kinds_missing": sum(((wanted - done) + (done - wanted)).values()),
            **{name: getattr(report, name) for name in Report.REPLICAS_ZERO if replicas},
        },
        must_be_positive={
            name: getattr(report, name)
            for name in (
                "paid",
                "deleted",
                "cancelled_by_timer",
                "cancelled_by_customer",
                "cancelled_out_of_stock",
                "slots_handled",
                "received_from_job",
                "timers_set",
            )
        }
        | ({"takeovers": len(report.takeovers_ms)} if replicas else {}),
        figures={
            f"lateness_{what}_{q}_ms": figures[q]
            for what, figures in (
                ("timers_outside", report.lateness_timers_outside),
                ("ticks_outside", report.lateness_ticks_outside),
            )
            for q in ("p50", "p99")
            if q in figures
        }
        | (replica_figures(report) if replicas else {}),
    )


def replica_figures(report: Report) -> dict[str, float]:
    """The replicas' figures that were measured (a JSON figure is finite)."""
    figures = {
        "replicas": float(report.replicas),
        "takeover_max_ms": float(max(report.takeovers_ms, default=math.nan)),
        "pg_away_s": report.pg_away_s,
        "pg_commands_ok_after_s": report.pg_commands_ok_after_s,
        "pg_followers_held_after_s": report.pg_followers_held_after_s,
        "pg_answered_5xx": float(report.pg_answered_5xx),
    }
    return {name: value for name, value in figures.items() if math.isfinite(value)}


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
