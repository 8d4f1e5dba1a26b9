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
timer retried, live cron timers are cancelled, and the ledger is compared with the model:

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
host's relay does), and the ledger is checked: every set still in force delivered once; none
the log replaced, cancelled or deleted before it was handed over or before it was due, and in
particular no victim (`delivered_though_stopped_before_due`: only the target's guard stops
them); every owed slot delivered once. `--unguarded` does not tell
the fake host the log (a host that does not check): the victims are then delivered and the run
fails, which shows the scenario rests on the guard.

Run: `python -m bench.soak [--quick] [--aggregates N] [--duration S] [--json]` (or
`--catch-up [--outage S] [--unguarded]`); `--quick` (the smoke test's size): 240 aggregates
over 40 s, two workers each killed once and both together once, seed 11.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import random
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus

from bench.harness import (
    Chaos,
    Fault,
    HostProcess,
    Proc,
    Verdicts,
    bench_main,
    parser,
    scratch,
    sized,
    still_running,
    summary,
    verdict,
    worker_env,
)
from wow_temporal.dev.server import EmbeddedTemporal
from wow_temporal.host.relay import Relay
from wow_temporal.ids import timer_workflow_id
from wow_temporal.logs import CORE_LOGGER, configure_temporal_runtime
from wow_temporal.model import AggregateRef, Commit, ScheduleRule
from wow_temporal.testing.wow_host import Arrival
from wow_temporal.timers.client import TimerClient, TimerError
from wow_temporal.timers.core import Status, TimerState
from wow_temporal.timers.fold import Horizon
from wow_temporal.timers.workflow import DeliverySettings
from wow_temporal.wire import DUPLICATE_REQUEST_ID, OK

CONTEXT, AGGREGATE, TENANT = "eshop-order", "order", "t1"
BEHAVIOURS = (("ok", 0.70), ("reject", 0.07), ("fail", 0.06), ("flaky", 0.09), ("slow", 0.08))
FLAKY_FAILURES = 2
DELIVERY = DeliverySettings(
    max_attempts=6,  # a flaky host's 2 failures, and up to 3 attempts lost to chaos, then one
    initial_interval=timedelta(milliseconds=200),
    max_interval=timedelta(seconds=1),
    attempt_timeout=timedelta(seconds=15),
    heartbeat_timeout=timedelta(seconds=3),
)
PARKED_WITHIN_S = 5.0 + sum(
    min(
        DELIVERY.initial_interval.total_seconds() * DELIVERY.backoff**n,
        DELIVERY.max_interval.total_seconds(),
    )
    for n in range(DELIVERY.max_attempts - 1)
)
"""A failing host's slot due this long before the host is healed has been parked by then."""
CHAOS_RECOVERY_S = 10.0
"""Lateness of a delivery due up to this long after a chaos event ends counts as inside it."""
UNHEALTHY = frozenset({"flaky", "slow"})
"""Hosts whose answers make lateness by design; their deliveries are counted apart."""
CHAOS_LEAD_S = 2.0
"""...and one due this long before it (its attempt may have been in flight)."""


# -- the model --------------------------------------------------------------------------------


@dataclass
class Event:
    """One schedule event of a commit (a set carries its rule)."""

    kind: str  # set, cancel, delete
    key: str = ""
    rule: dict[str, Any] | None = None


@dataclass
class Planned:
    """One commit an aggregate makes, and when the relay hands it over (and again)."""

    version: int
    created_s: float
    events: list[Event]
    handovers: list[float]
    commit_id: str = ""
    applied_s: list[tuple[float, float]] = field(default_factory=list)
    """(start, return) of each handover's successful apply, run-relative seconds."""

    def wire(self, aggregate_id: str, epoch: float) -> dict[str, Any]:
        body = []
        for index, event in enumerate(self.events):
            name = {
                "set": "wow.ScheduleSet",
                "cancel": "wow.ScheduleCancelled",
                "delete": "wow.AggregateDeleted",
            }[event.kind]
            payload: dict[str, Any] = {}
            if event.kind == "set":
                payload = {
                    "key": event.key,
                    "rule": event.rule,
                    "command": {"type": "eshop.order.CancelOrder", "body": {"v": self.version}},
                    "target": None,
                }
            elif event.kind == "cancel":
                payload = {"key": event.key}
            body.append({"id": f"e{index}", "name": name, "body": payload})
        return {
            "id": self.commit_id,
            "contextName": CONTEXT,
            "aggregateName": AGGREGATE,
            "tenantId": TENANT,
            "aggregateId": aggregate_id,
            "version": self.version,
            "createTime": int((epoch + self.created_s) * 1000),
            "body": body,
        }


@dataclass
class Aggregate:
    aggregate_id: str
    behaviour: str
    commits: list[Planned]

    @property
    def ref(self) -> AggregateRef:
        return AggregateRef(
            context_name=CONTEXT,
            aggregate_name=AGGREGATE,
            tenant_id=TENANT,
            aggregate_id=self.aggregate_id,
        )


@dataclass
class Schedule:
    """One `wow.ScheduleSet` and what the spec says of its deliveries."""

    timer: str
    aggregate: Aggregate
    key: str
    order: tuple[int, int]
    rule: ScheduleRule
    created: datetime
    applied_at: float | None = None
    """When its own first apply returned (run-relative s); None if never handed over."""
    superseded_at: float | None = None
    """When the first newer change of its key (or deletion) was handed over (apply returned):
    no slot due after it may be sent."""
    superseded_from: float | None = None
    """When that change's apply began."""

    @property
    def recurring(self) -> bool:
        return self.rule.kind == "cron"

    def due_ms(self, slot: int) -> int:
        due = self.rule.first_due(self.created)
        assert due is not None
        for _ in range(slot - 1):
            following = self.rule.next_cron(due)
            assert following is not None
            due = following
        return int(due.timestamp() * 1000)


def plan(count: int, duration: float, rng: random.Random, run: str) -> list[Aggregate]:
    """Each aggregate's commits: a one-shot key, sometimes a cron key; then maybe replaced,
    cancelled or deleted; some handed over twice, some out of order."""
    names, weights = zip(*BEHAVIOURS, strict=True)
    aggregates = []
    horizon = duration * 0.72
    for n in range(count):
        behaviour = rng.choices(names, weights)[0]
        start = rng.uniform(2.0, horizon)
        first = [Event("set", "k1", {"after": f"PT{rng.uniform(2, 12):.3f}S"})]
        cron = rng.random() < 0.05
        if cron:
            misfire = rng.choice(["COALESCE", "CATCH_UP"])
            every = rng.choice([5, 10, 15])
            expression = f"{rng.randrange(every)}/{every} * * * * *"  # of varied seconds
            first.append(Event("set", "tick", {"cron": expression, "misfire": misfire}))
        commits = [Planned(1, start, first, [start])]
        at = start
        for version in (2, 3):
            if commits[-1].events[-1].kind == "delete" or rng.random() > (
                0.45 if version == 2 else 0.3
            ):
                break
            at += rng.uniform(0.3, 8.0)
            choice = rng.random()
            if choice < 0.4:
                event = Event("set", "k1", {"after": f"PT{rng.uniform(1, 10):.3f}S"})
            elif choice < 0.7:
                event = Event("cancel", "k1" if not cron or rng.random() < 0.6 else "tick")
            else:
                event = Event("delete")
            commits.append(Planned(version, at, [event], [at]))
        if len(commits) > 1 and rng.random() < 0.12:
            i = rng.randrange(len(commits) - 1)  # hand over the newer one first
            commits[i].handovers[0], commits[i + 1].handovers[0] = (
                commits[i + 1].handovers[0],
                commits[i].handovers[0] + 0.05,
            )
        for commit in commits:
            if rng.random() < 0.1:
                commit.handovers.append(commit.handovers[0] + rng.uniform(0.5, 5.0))
        aggregate = Aggregate(f"{behaviour}-{n:05d}-{run}", behaviour, commits)
        for commit in commits:
            commit.commit_id = f"c{commit.version}-{aggregate.aggregate_id}"
        aggregates.append(aggregate)
    return aggregates


def schedules_of(aggregate: Aggregate, epoch: float) -> list[Schedule]:
    """The aggregate's sets, each with when it was superseded (in version order)."""
    found: list[Schedule] = []
    for commit in aggregate.commits:
        for index, event in enumerate(commit.events):
            if event.kind != "set":
                continue
            assert event.rule is not None
            found.append(
                Schedule(
                    timer=f"{commit.commit_id}:e{index}",
                    aggregate=aggregate,
                    key=event.key,
                    order=(commit.version, index),
                    rule=ScheduleRule.model_validate(event.rule),
                    created=datetime.fromtimestamp(
                        int((epoch + commit.created_s) * 1000) / 1000, UTC
                    ),
                    applied_at=min((r for _, r in commit.applied_s), default=None),
                )
            )
    for schedule in found:
        for commit in aggregate.commits:
            for index, event in enumerate(commit.events):
                newer = (commit.version, index) > schedule.order
                if newer and (event.kind == "delete" or event.key == schedule.key):
                    for began, returned in commit.applied_s:
                        if schedule.superseded_at is None or returned < schedule.superseded_at:
                            schedule.superseded_at, schedule.superseded_from = returned, began
    return found


# -- the rig ----------------------------------------------------------------------------------


# -- the rig ----------------------------------------------------------------------------------


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


def ledger(arrivals: list[Arrival]) -> list[dict[str, Any]]:
    """What the host received, one row a request: its code as a host that remembers every
    decision (Ok or IllegalState) would answer it, so a rejected request id that comes again
    is a duplicate, as an accepted one is."""
    decided: set[str] = set()
    rows = []
    for arrival in arrivals:
        request_id = arrival.request_id
        if arrival.behaviour in ("ok", "hang", "reject") and request_id not in decided:
            decided.add(request_id)
            code = OK if arrival.behaviour != "reject" else arrival.error_code
        elif arrival.behaviour in ("ok", "hang", "reject", "duplicate"):
            code = DUPLICATE_REQUEST_ID
        else:
            code = arrival.error_code
        rows.append(
            {
                "requestId": request_id,
                "arrivedMs": arrival.received_ms,
                "code": code,
                "dueMs": int(arrival.message_header("schedule_due") or 0),
                "slot": int(arrival.message_header("schedule_slot") or 0),
                "skipped": int(arrival.message_header("schedule_skipped") or 0),
                "aggregateId": arrival.aggregate_id,
            }
        )
    return rows


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


# -- the check --------------------------------------------------------------------------------


@dataclass
class Report:
    aggregates: int
    commits: int
    schedules: int
    expected: int = 0
    decided_once: int = 0
    lost: int = 0
    early: int = 0
    decided_twice: int = 0
    wrongly_delivered: int = 0
    parked_expected: int = 0
    parked: int = 0
    parked_wrongly: int = 0
    delivered_after_retry: int = 0
    sent_in_flight: int = 0
    """Requests of a slot due before its schedule's change was handed over that arrived after:
    a command already on its way is not recalled (its target's state guards it)."""
    cron_gaps: int = 0
    cron_stalled: int = 0
    still_running: int = 0
    workflow_task_timeouts: int = 0
    ingest_per_s: float = 0.0
    apply_p50_ms: float = 0.0
    apply_p99_ms: float = 0.0
    workers: int = 1
    ingest_outside_per_s: float = 0.0
    """Applies done per second outside the chaos windows, while commits were handed over."""
    ingest_inside_per_s: float = 0.0
    """... and inside the windows of worker kills (a server restart stops ingest by nature)."""
    ingest_inside_ratio: float = 0.0
    apply_p99_inside_ms: float = 0.0
    apply_p99_outside_ms: float = 0.0
    lateness_outside: dict[str, float] = field(default_factory=dict)
    lateness_inside: dict[str, float] = field(default_factory=dict)
    lateness_unhealthy: dict[str, float] = field(default_factory=dict)
    """Deliveries to the flaky and slow hosts, wherever due."""
    chaos: list[tuple[str, float, float]] = field(default_factory=list)
    chaos_expected: list[str] = field(default_factory=list)
    """What the chaos was planned to do, by name."""
    latest_outside: list[tuple[int, float, str]] = field(default_factory=list)
    latest_inside: list[tuple[int, float, str]] = field(default_factory=list)
    """The latest deliveries due outside the chaos windows: (ms late, due at s, request id)."""
    problems: list[str] = field(default_factory=list)

    MUST_BE_ZERO = (
        "lost",
        "early",
        "decided_twice",
        "wrongly_delivered",
        "parked_wrongly",
        "cron_gaps",
        "cron_stalled",
        "still_running",
    )

    @property
    def ok(self) -> bool:
        return (
            all(getattr(self, name) == 0 for name in self.MUST_BE_ZERO)
            and self.parked == self.parked_expected == self.delivered_after_retry
        )


def check(
    report: Report,
    schedules: list[Schedule],
    ledger: list[dict[str, Any]],
    epoch: float,
    parked_seen: set[str],
    healed_at: float,
    chaos: Chaos,
    cancelled_crons_at: dict[str, tuple[float, float]],
) -> None:
    """Compare the host's ledger with what the model says of each schedule."""
    by_timer: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for entry in ledger:
        by_timer[entry["requestId"].rsplit("#", 1)[0]].append(entry)
    outside: list[float] = []
    inside: list[float] = []
    unhealthy: list[float] = []

    def problem(text: str) -> None:
        if len(report.problems) < 40:
            report.problems.append(text)

    for schedule in schedules:
        entries = by_timer.get(schedule.timer, [])
        behaviour = schedule.aggregate.behaviour
        ended_at = schedule.superseded_at
        if schedule.recurring and ended_at is None:
            ended_at = cancelled_crons_at[schedule.timer][1]
        ended_from = schedule.superseded_from
        if schedule.recurring and schedule.superseded_at is None:
            ended_from = cancelled_crons_at[schedule.timer][0]
        never_applied_live = schedule.applied_at is None or (
            schedule.superseded_at is not None and schedule.superseded_at <= schedule.applied_at
        )
        for entry in entries:
            arrived = entry["arrivedMs"] / 1000 - epoch
            if entry["dueMs"] != schedule.due_ms(entry["slot"]):
                problem(f"{entry['requestId']}: due header {entry['dueMs']} != model")
            if entry["arrivedMs"] < entry["dueMs"]:
                report.early += 1
                problem(f"{entry['requestId']}: {entry['dueMs'] - entry['arrivedMs']:.0f} ms early")
            due_at = entry["dueMs"] / 1000 - epoch
            if never_applied_live or (ended_at is not None and due_at > ended_at):
                report.wrongly_delivered += 1
                problem(
                    f"{entry['requestId']} ({behaviour}) due at {due_at:.2f}s arrived at "
                    f"{arrived:.2f}s, after its schedule ended at {ended_at}"
                )
            elif ended_at is not None and arrived > ended_at:
                report.sent_in_flight += 1  # its slot was due before the change: not recalled
        decisions: dict[str, dict[str, Any]] = {}
        for entry in entries:
            if entry["code"] in ("Ok", "IllegalState"):
                if entry["requestId"] in decisions:
                    report.decided_twice += 1
                    problem(f"{entry['requestId']} decided twice")
                decisions[entry["requestId"]] = entry
        firsts: dict[str, float] = {}
        for entry in entries:
            firsts.setdefault(entry["requestId"], entry["arrivedMs"] - entry["dueMs"])
        for request_id, late in firsts.items():
            due_at = schedule.due_ms(int(request_id.rsplit("#", 1)[1])) / 1000 - epoch
            if behaviour == "fail":
                continue  # parked until the host is healed, by design
            if behaviour in UNHEALTHY:
                # Each slot of a flaky or slow host waits for the one before it to be decided.
                unhealthy.append(late)
            elif chaos.inside(due_at):
                inside.append(late)
                report.latest_inside.append((round(late), round(due_at, 1), request_id))
            else:
                outside.append(late)
                report.latest_outside.append((round(late), round(due_at, 1), request_id))
        if schedule.timer in parked_seen:
            report.parked += 1
            if any(
                e["arrivedMs"] / 1000 - epoch > healed_at and e["code"] == "Ok" for e in entries
            ):
                report.delivered_after_retry += 1
        if not schedule.recurring:
            due_at = schedule.due_ms(1) / 1000 - epoch
            live_at_due = not never_applied_live and (
                schedule.superseded_from is None or schedule.superseded_from > due_at + 30
            )
            if schedule.superseded_at is None and not never_applied_live:
                report.expected += 1
                if behaviour == "fail":
                    report.parked_expected += 1
                    if schedule.timer not in parked_seen:
                        report.parked_wrongly += 1
                        problem(f"{schedule.timer} (fail) was not parked")
                elif schedule.timer in parked_seen:
                    report.parked_wrongly += 1
                    problem(f"{schedule.timer} ({behaviour}) was parked")
                if len(decisions) == 1:
                    report.decided_once += 1
                else:
                    report.lost += 1
                    problem(f"{schedule.timer} ({behaviour}) decided {len(decisions)} times")
            elif live_at_due and not decisions and behaviour != "fail":
                report.lost += 1
                problem(f"{schedule.timer} ({behaviour}) due {due_at:.1f}s was never decided")
            continue
        # cron: slot numbers without gaps; live ones kept ticking until they ended
        slots = sorted((e["slot"], e["skipped"]) for e in decisions.values())
        expected_slot = 1
        for slot, skipped in slots:
            want = slot if schedule.rule.misfire.value == "COALESCE" else expected_slot
            if slot != want or slot - skipped != expected_slot:
                report.cron_gaps += 1
                problem(
                    f"{schedule.timer}: slot {slot} skipped {skipped}, expected {expected_slot}"
                )
            expected_slot = slot + 1
        if not never_applied_live and ended_from is not None and behaviour != "fail":
            last_due = schedule.due_ms(slots[-1][0]) / 1000 - epoch if slots else None
            first_due = schedule.due_ms(1) / 1000 - epoch
            if first_due < ended_from - 30 and (last_due is None or last_due < ended_from - 30):
                report.cron_stalled += 1
                problem(f"{schedule.timer}: last slot due {last_due}, ended {ended_from:.1f}s")
        if schedule.superseded_at is None and not never_applied_live:
            report.expected += 1
            if behaviour == "fail":
                due = schedule.due_ms(1) / 1000 - epoch
                report.parked_expected += int(due < healed_at - PARKED_WITHIN_S)
            if slots:
                report.decided_once += 1
    report.latest_outside = sorted(report.latest_outside, reverse=True)[:5]
    report.latest_inside = sorted(report.latest_inside, reverse=True)[:5]
    report.lateness_outside = summary(outside)
    report.lateness_inside = summary(inside)
    report.lateness_unhealthy = summary(unhealthy)


def ingest_in_chaos(
    report: Report,
    applies: list[tuple[float, float]],
    chaos: Chaos,
    began: float,
    ended: float,
) -> None:
    """Applies done per second inside the worker-kill windows (to their restart, and 2 s
    on) against outside every window, over the time commits were handed over;
    the server's window (and its recovery) counts as neither: with no server, no ingest."""
    step = 0.1
    bins = max(1, int((ended - began) / step) + 1)
    kind = ["outside"] * bins
    for what, start, end in chaos.windows:
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
    report.ingest_outside_per_s = round(outside, 1)
    report.ingest_inside_per_s = round(inside, 1)
    report.ingest_inside_ratio = round(inside / outside, 2) if outside else 0.0
    report.apply_p99_outside_ms = summary(took["outside"]).get("p99", 0.0)
    report.apply_p99_inside_ms = summary(took["worker"]).get("p99", 0.0)


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
            report = Report(args.aggregates, commits, 0, workers=args.workers, chaos=chaos.windows)
            report.chaos_expected = chaos_kinds(
                args.workers, args.kills, not args.no_server_restart
            )
            await settle_and_check(rig, args, aggregates, chaos, report)
            report.ingest_per_s = round(
                sum(len(c.handovers) for a in aggregates for c in a.commits)
                / max(ingest_done, 1e-9),
                1,
            )
            lat = summary([took * 1000 for _, took in applies])
            report.apply_p50_ms, report.apply_p99_ms = lat.get("p50", 0.0), lat.get("p99", 0.0)
            first_planned = min(at for a in aggregates for c in a.commits for at in c.handovers)
            ingest_in_chaos(report, applies, chaos, first_planned, ingest_done)
            return report
        finally:
            await asyncio.gather(*(w.kill() for w in workers))
            await host.stop()
            await server.stop()


async def settle_and_check(
    rig: Run, args: argparse.Namespace, aggregates: list[Aggregate], chaos: Chaos, report: Report
) -> None:
    """Once the last one-shot is due: read which timers parked, heal the failing host and
    retry them, cancel the live cron timers; then check the host's ledger against the model."""
    schedules = [s for a in aggregates for s in schedules_of(a, rig.epoch)]
    report.schedules = len(schedules)
    last_due = max(
        (s.due_ms(1) / 1000 - rig.epoch for s in schedules if not s.recurring), default=0.0
    )
    await asyncio.sleep(max(0.0, last_due - rig.clock()) + args.settle)

    # Parked now: exactly the failing host's live schedules (read by id, not visibility).
    parked_seen: set[str] = set()
    live: dict[str, Schedule] = {}
    for schedule in schedules:
        if schedule.superseded_at is None and schedule.applied_at is not None:
            wid = timer_workflow_id(schedule.aggregate.ref, schedule.key)
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
    rows = ledger(await rig.host.arrivals())
    check(report, schedules, rows, rig.epoch, parked_seen, healed_at, chaos, cancelled_crons_at)
    every_timer = sorted(
        {
            timer_workflow_id(a.ref, k)
            for a in aggregates
            for k in ("k1", "tick")
            if any(e.key == k for c in a.commits for e in c.events)
        }
    )
    report.still_running = len(await still_running(rig.client, every_timer))
    report.workflow_task_timeouts = await count_task_timeouts(rig.client, every_timer)


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


def print_report(report: Report) -> None:
    print(
        f"soak {verdict(report.ok)}: {report.aggregates} aggregates, {report.commits} commits, "
        f"{report.schedules} schedules"
    )
    print(
        f"  expected {report.expected}: decided once {report.decided_once}, lost {report.lost}, "
        f"early {report.early}, decided twice {report.decided_twice}, "
        f"wrongly delivered {report.wrongly_delivered}"
    )
    print(
        f"  parked {report.parked} (expected {report.parked_expected}, wrongly "
        f"{report.parked_wrongly}), delivered once after retry {report.delivered_after_retry}"
    )
    print(f"  in flight at a change, not recalled: {report.sent_in_flight}")
    print(
        f"  cron gaps {report.cron_gaps}, stalled {report.cron_stalled}; still running "
        f"{report.still_running}; workflow task timeouts {report.workflow_task_timeouts}"
    )
    print(
        f"  ingest {report.ingest_per_s}/s, apply p50 {report.apply_p50_ms} ms "
        f"p99 {report.apply_p99_ms} ms; {report.workers} workers"
    )
    print(
        f"  ingest inside worker chaos {report.ingest_inside_per_s}/s vs outside "
        f"{report.ingest_outside_per_s}/s (x{report.ingest_inside_ratio}), apply p99 inside "
        f"{report.apply_p99_inside_ms} ms vs outside {report.apply_p99_outside_ms} ms"
    )
    print(f"  lateness ms outside chaos {report.lateness_outside}")
    print(f"  lateness ms inside chaos  {report.lateness_inside}")
    print(f"  lateness ms to flaky and slow hosts {report.lateness_unhealthy}")
    for late, due_at, request_id in report.latest_outside:
        print(f"  late outside chaos: {late} ms, due at {due_at}s, {request_id}")
    for late, due_at, request_id in report.latest_inside:
        print(f"  late inside chaos: {late} ms, due at {due_at}s, {request_id}")
    for what, began, ended in report.chaos:
        print(f"  chaos {what}: {began:.1f}s .. {ended:.1f}s")
    for line in report.problems:
        print(f"  ! {line}")


# -- the catch-up after an outage (`--catch-up`) -----------------------------------------------


DUE_DURING_SHARE = 1 / 3
"""Of `--catch-up`'s aggregates, the share whose first set falls due during the outage."""
FIRED_WITHIN_S = 60.0
"""How long, once the server is back, the relay holds its backlog while the timers that fell due
during the outage fire (the relay slower than the workers: the guard's case)."""


@dataclass
class CatchUpReport:
    """What a relay's catch-up after a Temporal outage delivered, against the log."""

    aggregates: int
    commits: int
    outage_s: float
    guarded: bool = True
    """Whether the fake host was told the log (and so guards as docs/delivery.md asks)."""
    caught_up_s: float = 0.0
    waited_s: float = 0.0
    """How long the backlog waited, once the server was back, for the due timers to fire."""
    in_force: int = 0
    """Sets still in force at the end of the log (each must be delivered once)."""
    superseded: int = 0
    """Sets the log replaced, cancelled or deleted, but the owed (none may be delivered)."""
    delivered_once: int = 0
    lost: int = 0
    decided_twice: int = 0
    early: int = 0
    delivered_though_changed: int = 0
    """Sets delivered though the log had replaced, cancelled or deleted them: must be 0."""
    victims: int = 0
    """Sets handed over before the outage and due during it that the log stopped (a cancel, a
    replacing set, the deletion) before they were due: their timers fire when the server is
    back, before the backlog; none may be delivered (counted in `superseded` too)."""
    delivered_though_stopped_before_due: int = 0
    """Victims delivered: must be 0 (the target's guard refuses them)."""
    owed: int = 0
    """Sets handed over before the outage and due during it that the log changed only at or
    after their due time: the slot was owed, each must be delivered once."""
    owed_delivered_once: int = 0
    owed_lost: int = 0
    fired_before_handover: int = 0
    """Victims and owed sets that had reached the host when the backlog was handed over."""
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (
            self.lost
            or self.decided_twice
            or self.early
            or self.delivered_though_changed
            or self.delivered_though_stopped_before_due
            or self.owed_lost
        )


Change = tuple[str, float]
"""One change of `k1` in a commit: `set` (due that many seconds after the commit), `cancel`,
`delete`, or `set-cancel` (a set and its cancel in one commit)."""


def catch_up_log(
    count: int, rng: random.Random, run: str, before: float, during: tuple[float, float]
) -> list[dict[str, Any]]:
    """Each aggregate's commits in log order (by createTime), as wire commits. Most set `k1`
    before the outage (handed over then, due well after it) and change it 1-3 times during it
    (`_due_after`); a share (`DUE_DURING_SHARE`, seeded) set `k1` due during the outage and
    change it once during it, before or after that due time (`_due_during`)."""
    log: list[tuple[float, dict[str, Any]]] = []
    for n in range(count):
        if rng.random() < DUE_DURING_SHARE:
            aggregate_id, commits = f"ok-{run}-d{n}", _due_during(rng, before, during)
        else:
            aggregate_id, commits = f"ok-{run}-c{n}", _due_after(rng, before, during)
        for version, (at, changes) in enumerate(commits, start=1):
            log.append((at, _catch_up_commit(aggregate_id, version, at, changes)))
    log.sort(key=lambda pair: pair[0])
    return [commit for _, commit in log]


def _due_after(
    rng: random.Random, before: float, during: tuple[float, float]
) -> list[tuple[float, list[Change]]]:
    """A set of `k1` before the outage, due 20-45 s after it, then 1-3 commits during it (sets
    due during the outage or after, cancels, re-sets, deletions): every stop before the due."""
    start, end = during
    moments = [before, *sorted(rng.uniform(start, end) for _ in range(rng.randint(1, 3)))]
    commits: list[tuple[float, list[Change]]] = []
    for at in moments:
        if not commits:
            commits.append((at, [("set", end - at + rng.uniform(20, 45))]))
            continue
        options = [
            ("set", rng.uniform(5, (end - start) + 40)),
            ("cancel", 0.0),
            ("cancel", 0.0),
            ("delete", 0.0),
            ("set-cancel", rng.uniform(1, 10)),
        ]
        commits.append((at, [rng.choice(options)]))
    return commits


def _due_during(
    rng: random.Random, before: float, during: tuple[float, float]
) -> list[tuple[float, list[Change]]]:
    """A set of `k1` before the outage, due 20-60 % into it, then one change during the outage
    (a cancel, a replacing set due 20-45 s after the outage, or the deletion): committed
    before that due time (its slot a victim: the log stopped it) or after it (owed), alike."""
    start, end = during
    due = start + rng.uniform(0.2, 0.6) * (end - start)
    if rng.random() < 0.5:
        at = rng.uniform(start + 0.05 * (end - start), due - 0.5)
    else:
        at = rng.uniform(due + 0.5, end - 0.5)
    change = rng.choice([("cancel", 0.0), ("set", end - at + rng.uniform(20, 45)), ("delete", 0.0)])
    return [(before, [("set", due - before)]), (at, [change])]


def _catch_up_commit(
    aggregate_id: str, version: int, at: float, changes: list[Change]
) -> dict[str, Any]:
    """The wire commit of `aggregate_id` at `version`, created at `at` (epoch s)."""
    body: list[dict[str, Any]] = []
    for kind, after in changes:
        if kind in ("set", "set-cancel"):
            body.append(
                {
                    "id": f"e{len(body)}",
                    "name": "wow.ScheduleSet",
                    "body": {
                        "key": "k1",
                        "rule": {"after": f"PT{after:.3f}S"},
                        "command": {"type": "eshop.order.CancelOrder", "body": {}},
                    },
                }
            )
        if kind in ("cancel", "set-cancel"):
            name, cancel = "wow.ScheduleCancelled", {"key": "k1"}
            body.append({"id": f"e{len(body)}", "name": name, "body": cancel})
        if kind == "delete":
            body.append({"id": f"e{len(body)}", "name": "wow.AggregateDeleted", "body": {}})
    return {
        "id": f"{aggregate_id}-v{version}",
        "contextName": CONTEXT,
        "aggregateName": AGGREGATE,
        "tenantId": TENANT,
        "aggregateId": aggregate_id,
        "version": version,
        "createTime": int(at * 1000),
        "body": body,
    }


@dataclass(frozen=True)
class LoggedSet:
    """One `wow.ScheduleSet` of the log, and the first change that stopped it (if any)."""

    timer: str
    created_ms: int
    due_ms: int
    stopped_ms: int | None
    """createTime of the first later cancel or set of its key, or its aggregate's deletion."""


def logged_sets(log: list[dict[str, Any]]) -> list[LoggedSet]:
    """Every set of the log (`after` rules), with when the log first stopped it."""
    events: dict[str, list[tuple[tuple[int, int], dict[str, Any], dict[str, Any]]]]
    events = defaultdict(list)
    for commit in log:
        for index, event in enumerate(commit["body"]):
            events[commit["aggregateId"]].append(((commit["version"], index), commit, event))
    found = []
    for history in events.values():
        history.sort(key=lambda entry: entry[0])
        for at, (_, commit, event) in enumerate(history):
            if event["name"] != "wow.ScheduleSet":
                continue
            key, created = event["body"]["key"], commit["createTime"]
            after = float(event["body"]["rule"]["after"][2:-1])
            stops = (
                later["createTime"]
                for _, later, change in history[at + 1 :]
                if change["name"] == "wow.AggregateDeleted" or change["body"].get("key") == key
            )
            found.append(
                LoggedSet(
                    timer=f"{commit['id']}:{event['id']}",
                    created_ms=created,
                    due_ms=created + int(after * 1000),
                    stopped_ms=next(stops, None),
                )
            )
    return found


def judge_catch_up(
    report: CatchUpReport,
    log: list[dict[str, Any]],
    ledger: list[dict[str, Any]],
    outage_ms: tuple[int, int],
) -> None:
    """Compare what the host received with the log. A set no later change of its key (nor its
    aggregate's deletion) stopped is in force: delivered once. One handed over before the
    outage (committed before it began) and due during it is owed when the log stopped it only
    at or after its due time (delivered once), a victim when before (never delivered, though
    its timer fires before the backlog is handed over). Every other set is superseded: the log
    stopped it before it was due, or before it was handed over (the backlog folds it away):
    never delivered."""
    delivered, first = _catch_up_decisions(ledger)
    start, end = outage_ms
    for logged in logged_sets(log):
        timer = logged.timer
        if timer in first and first[timer]["arrivedMs"] < first[timer]["dueMs"]:
            report.early += 1
        if delivered[timer] > 1:
            report.decided_twice += 1
        during = logged.created_ms < start <= logged.due_ms < end
        stopped = logged.stopped_ms
        owed = during and stopped is not None and stopped >= logged.due_ms
        if stopped is None or owed:
            _must_deliver_once(report, logged, delivered[timer], owed=owed)
        else:
            _must_not_deliver(report, logged, delivered[timer] > 0, victim=during)


def _catch_up_decisions(
    ledger: list[dict[str, Any]],
) -> tuple[Counter[str], dict[str, dict[str, Any]]]:
    """Per timer: how many of its request ids were decided Ok (a refusal answered again reads
    as a duplicate in the ledger, so only Ok counts), and its first Ok or duplicate row."""
    delivered: Counter[str] = Counter()
    first: dict[str, dict[str, Any]] = {}
    for entry in ledger:
        if entry["code"] not in (OK, DUPLICATE_REQUEST_ID):
            continue
        timer = entry["requestId"].rsplit("#", 1)[0]
        delivered[timer] += entry["code"] == OK
        first.setdefault(timer, entry)
    return delivered, first


def _must_deliver_once(report: CatchUpReport, logged: LoggedSet, count: int, *, owed: bool) -> None:
    """A set in force, or owed: delivered exactly once, else lost."""
    if owed:
        report.owed += 1
        report.owed_delivered_once += count == 1
        report.owed_lost += count != 1
    else:
        report.in_force += 1
        report.delivered_once += count == 1
        report.lost += count != 1
    if count != 1:
        what = "owed" if owed else "lost"
        report.problems.append(f"{what}: {logged.timer} (due {logged.due_ms}) decided {count}x")


def _must_not_deliver(
    report: CatchUpReport, logged: LoggedSet, delivered: bool, *, victim: bool
) -> None:
    """A set the log stopped: never delivered; a victim's delivery is counted apart too."""
    report.superseded += 1
    report.victims += victim
    if not delivered:
        return
    report.delivered_though_changed += 1
    report.delivered_though_stopped_before_due += victim
    stopped = "stopped before it was due" if victim else "changed"
    report.problems.append(f"delivered though the log {stopped}: {logged.timer}")


async def commit_during(
    host: HostProcess, commits: list[dict[str, Any]], until: float, *, tell: bool
) -> None:
    """The log commits during the outage: each commit is told to the fake host (the domain's
    host, which commits while Temporal is down) once its createTime has passed; none when
    `tell` is False (a host that does not check)."""
    pending = sorted(commits, key=lambda commit: commit["createTime"])
    while pending and time.time() < until:
        now_ms = time.time() * 1000
        ready = next((i for i, c in enumerate(pending) if c["createTime"] > now_ms), len(pending))
        if tell and ready:
            await host.log(pending[:ready])
        pending = pending[ready:]
        await asyncio.sleep(min(0.5, max(0.0, until - time.time())))
    if tell and pending:
        await host.log(pending)
    await asyncio.sleep(max(0.0, until - time.time()))


async def await_fired(host: HostProcess, request_ids: set[str], within: float) -> tuple[int, float]:
    """Wait until the host has seen a request of each of `request_ids`, or `within` seconds:
    how many it has seen, and how long it took."""
    started = time.monotonic()
    while True:
        seen = request_ids & {arrival.request_id for arrival in await host.arrivals()}
        waited = time.monotonic() - started
        if seen == request_ids or waited >= within:
            return len(seen), round(waited, 1)
        await asyncio.sleep(0.25)


async def catch_up(args: argparse.Namespace) -> CatchUpReport:
    """Hundreds of aggregates' keys set before a Temporal outage, then set, cancelled,
    replaced and deleted during it, a share of them due during it; once the server is back and
    the timers due during the outage have fired, the relay catches up in pages with the log
    read ahead (as `Relay` does): nothing the log changed before it was due may be delivered,
    what it changed only once due is delivered once."""
    rng = random.Random(args.seed)
    run = f"{rng.randrange(16**6):06x}"
    tell = not args.unguarded
    with scratch(args, "soak-catch-up") as tmp:
        server = EmbeddedTemporal(tmp / "temporal", headless=True)
        await server.start()
        host = await start_host(tmp / "host.log")
        workers = start_workers(server, host.url, tmp, args.workers)
        try:
            await asyncio.gather(*(w.start() for w in workers))
            client = await server.connect()
            timers = TimerClient(client, delivery=DELIVERY)
            began = time.time()
            outage = (began + 5.0, began + 5.0 + args.outage)
            outage_ms = (int(outage[0] * 1000), int(outage[1] * 1000))
            log = catch_up_log(args.aggregates, rng, run, began, outage)
            report = CatchUpReport(args.aggregates, len(log), args.outage, guarded=tell)
            first = [c for c in log if c["version"] == 1]
            if tell:
                await host.log(first)
            for at in range(0, len(first), 100):
                await timers.apply_many([Commit.parse(c) for c in first[at : at + 100]])
            await asyncio.sleep(max(0.0, outage[0] - time.time()))
            await server.kill()
            print(f"catch-up: the server is down for {args.outage:.0f}s", file=sys.stderr)
            later = [c for c in log if c["version"] > 1]
            await commit_during(host, later, outage[1], tell=tell)
            await server.start()
            client = await server.connect()
            timers = TimerClient(client, delivery=DELIVERY)
            due_during = {
                f"{s.timer}#1"
                for s in logged_sets(first)
                if outage_ms[0] <= s.due_ms < outage_ms[1]
            }
            fired = await await_fired(host, due_during, FIRED_WITHIN_S)
            report.fired_before_handover, report.waited_s = fired
            report.caught_up_s = await hand_over_backlog(timers, [Commit.parse(c) for c in later])
            last_due = max(s.due_ms for s in logged_sets(log)) / 1000
            await asyncio.sleep(max(0.0, last_due - time.time()) + args.settle)
            judge_catch_up(report, log, ledger(await host.arrivals()), outage_ms)
            return report
        finally:
            await asyncio.gather(*(w.kill() for w in workers))
            await host.stop()
            await server.stop()


async def hand_over_backlog(timers: TimerClient, backlog: list[Commit]) -> float:
    """Hand the backlog over as the host's relay does (pages of `Relay.batch`, the log read
    ahead); how long it took, in seconds."""
    started = time.monotonic()
    page = Relay.batch
    for at in range(0, len(backlog), page):
        later = Horizon()
        later.extend(backlog[at + page :])
        await timers.apply_many(backlog[at : at + page], later=later)
    return round(time.monotonic() - started, 1)


def print_catch_up(report: CatchUpReport) -> None:
    print(
        f"catch-up after a {report.outage_s:.0f}s outage: {report.aggregates} aggregates, "
        f"{report.commits} commits, handed over in {report.caught_up_s}s, once "
        f"{report.fired_before_handover} of the {report.victims + report.owed} timers due "
        f"during the outage had fired ({report.waited_s}s after the server was back)"
    )
    print(
        f"  sets in force {report.in_force}: delivered once {report.delivered_once}, "
        f"lost {report.lost}, decided twice {report.decided_twice}, early {report.early}"
    )
    print(
        f"  sets the log replaced, cancelled or deleted {report.superseded}: "
        f"delivered {report.delivered_though_changed} (must be 0)"
    )
    print(
        f"  of them due during the outage, stopped before due {report.victims}: delivered "
        f"{report.delivered_though_stopped_before_due} (must be 0)"
    )
    print(
        f"  due during the outage, changed once due (owed) {report.owed}: delivered once "
        f"{report.owed_delivered_once}, lost {report.owed_lost}"
    )
    if not report.guarded:
        print("  --unguarded: the fake host was not told the log, nothing guards the target")
    for problem in report.problems[:20]:
        print(f"  ! {problem}")
    print(verdict(report.ok))


QUICK = {"aggregates": 240, "duration": 40.0, "kills": 2, "workers": 2, "settle": 8.0, "seed": 11}
"""`--quick`: the smoke test's size (about a minute and a half)."""
FULL = {"aggregates": 3000, "duration": 300.0, "kills": 3, "workers": 3, "settle": 15.0, "seed": 7}


def verdicts(report: Report) -> Verdicts:
    """Nothing lost, early, twice or after a change; every expected command decided once; the
    failing host's schedules parked and delivered once after the retry; the chaos planned."""
    return Verdicts(
        must_be_zero={
            **{name: getattr(report, name) for name in Report.MUST_BE_ZERO},
            "undecided": report.expected - report.decided_once,
            "parked_unlike_expected": abs(report.parked - report.parked_expected),
            "parked_undelivered": abs(report.parked - report.delivered_after_retry),
            "chaos_kinds_missing": _differ(report.chaos_expected, [w for w, _, _ in report.chaos]),
        },
        must_be_positive={
            "decided_once": report.decided_once,
            "expected_over_100": report.expected - 100,
            "parked": report.parked,
            "ingest_inside_per_s": report.ingest_inside_per_s,
            "ingest_outside_per_s": report.ingest_outside_per_s,
        },
        figures={
            "ingest_per_s": report.ingest_per_s,
            "apply_p99_ms": report.apply_p99_ms,
            **{
                f"lateness_outside_{q}_ms": report.lateness_outside[q]
                for q in ("p50", "p99")
                if q in report.lateness_outside
            },
        },
    )


def catch_up_verdicts(report: CatchUpReport) -> Verdicts:
    """Nothing lost, twice, early or delivered though the log changed it (before it was due,
    for the victims, though their timers fired first); every owed slot delivered once; each
    path taken: sets delivered, victims and owed slots, timers fired before the backlog."""
    zero = (
        "lost",
        "decided_twice",
        "early",
        "delivered_though_changed",
        "delivered_though_stopped_before_due",
        "owed_lost",
    )
    positive = ("delivered_once", "victims", "owed_delivered_once", "fired_before_handover")
    return Verdicts(
        must_be_zero={name: getattr(report, name) for name in zero},
        must_be_positive={name: getattr(report, name) for name in positive},
        figures={"caught_up_s": report.caught_up_s, "waited_s": report.waited_s},
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
