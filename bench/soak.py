"""Chaos soak: thousands of aggregates' schedules under worker kills and a server restart, the
host's ledger checked against a model of what the spec promises.

One fresh headless dev server (EmbeddedTemporal) in a throw-away directory, one domain host
process that records every request and answers by the aggregate id's prefix (`ok-` Ok, `reject-`
IllegalState, `fail-` 503 until healed, `flaky-` 503 twice per request id, `slow-` Ok after up to
1.5 s; a request id it has decided answers DuplicateRequestId), and `--workers` real
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
key is set before the dev server is killed for `--outage` seconds; during the outage the log
sets, cancels, replaces and deletes; once the server is back the backlog is handed over in
batches with the log read ahead (as the host's relay does), and the ledger is checked:
every set still in force delivered once, none the log replaced, cancelled or deleted.

Run: `.venv/bin/python bench/soak.py [--aggregates N] [--duration S] [--json]` (or
`--catch-up [--outage S]`); exit status 1 if any count that must be 0 is not.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus

from bench.harness.stats import summary
from wow_temporal.dev.ports import free_port
from wow_temporal.dev.server import EmbeddedTemporal
from wow_temporal.host.relay import Relay
from wow_temporal.ids import timer_workflow_id
from wow_temporal.logs import CORE_LOGGER, configure_temporal_runtime
from wow_temporal.model import AggregateRef, Commit, ScheduleRule
from wow_temporal.timers.client import TimerClient, TimerError
from wow_temporal.timers.core import Status, TimerState
from wow_temporal.timers.fold import Horizon
from wow_temporal.timers.workflow import DeliverySettings
from wow_temporal.wire import (
    COMMAND_SEND_PATH,
    DUPLICATE_REQUEST_ID,
    ERROR_CODE_HEADER,
    OK,
    CommandResult,
    parse_command,
)

CONTEXT, AGGREGATE, TENANT = "eshop-order", "order", "t1"
BEHAVIOURS = (("ok", 0.70), ("reject", 0.07), ("fail", 0.06), ("flaky", 0.09), ("slow", 0.08))
FLAKY_FAILURES = 2
DELIVERY = DeliverySettings(
    max_attempts=3,
    initial_interval=timedelta(milliseconds=200),
    max_interval=timedelta(seconds=1),
    attempt_timeout=timedelta(seconds=15),
    heartbeat_timeout=timedelta(seconds=3),
)
CHAOS_RECOVERY_S = 10.0
"""Lateness of a delivery due up to this long after a chaos event ends counts as inside it."""
UNHEALTHY = frozenset({"flaky", "slow"})
"""Hosts whose answers make lateness by design; their deliveries are counted apart."""
CHAOS_LEAD_S = 2.0
"""...and one due this long before it (its attempt may have been in flight)."""
WORKER = Path(sys.executable).parent / "wow-temporal"


# -- the domain host (its own process) --------------------------------------------------------


def host_app() -> Callable[..., Awaitable[None]]:
    """A raw ASGI Wow host that answers by the aggregate id's prefix and keeps a ledger."""
    ledger: list[dict[str, Any]] = []
    decided: dict[str, str] = {}
    attempts: Counter[str] = Counter()
    healed = False

    async def reply(send: Any, status: int, body: Any, code: str = "") -> None:
        headers = [(b"content-type", b"application/json")]
        if code:
            headers.append((ERROR_CODE_HEADER.lower().encode(), code.encode()))
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        nonlocal healed
        if scope["type"] != "http":
            return
        arrived = time.time() * 1000
        chunks = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        path = scope["path"]
        if path == "/_ledger":
            await reply(send, 200, ledger)
            return
        if path == "/_heal":
            healed = True
            await reply(send, 200, {"healed": True})
            return
        if path != COMMAND_SEND_PATH:
            await reply(send, 404, {})
            return
        headers = {name.decode(): value.decode() for name, value in scope["headers"]}
        command = parse_command(headers, b"".join(chunks))
        request_id, aggregate_id = command.request_id, command.aggregate_id
        behaviour = aggregate_id.split("-", 1)[0]
        attempts[request_id] += 1
        if request_id in decided:
            status, code = 200, DUPLICATE_REQUEST_ID
        elif behaviour == "reject":
            status, code = 400, "IllegalState"
        elif (behaviour == "fail" and not healed) or (
            behaviour == "flaky" and attempts[request_id] <= FLAKY_FAILURES
        ):
            status, code = 503, "InternalServerError"
        else:
            status, code = 200, OK
        if code in (OK, "IllegalState"):
            decided[request_id] = code
        ledger.append(
            {
                "requestId": request_id,
                "arrivedMs": arrived,
                "code": code,
                "dueMs": int(command.headers.get("schedule_due", "0")),
                "slot": int(command.headers.get("schedule_slot", "0")),
                "skipped": int(command.headers.get("schedule_skipped", "0")),
                "aggregateId": aggregate_id,
            }
        )
        if behaviour == "slow" and code == OK:
            await asyncio.sleep(random.uniform(0.2, 1.5))
        result = CommandResult.of(command, command_id=request_id, request_id=request_id, code=code)
        await reply(send, status, result.model_dump_json().encode(), code)

    return app


def serve_host(port: int) -> None:
    import uvicorn

    uvicorn.run(
        host_app(),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="off",
    )


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


class HostProcess:
    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: asyncio.subprocess.Process | None = None
        self.http = httpx.AsyncClient(timeout=30)

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, __file__, "--serve-host", str(self.port), stdin=subprocess.DEVNULL
        )
        for _ in range(200):
            with contextlib.suppress(httpx.HTTPError):
                await self.http.get(self.url + "/_heal-check")
                return
            await asyncio.sleep(0.05)
        raise RuntimeError("the soak host did not start")

    async def ledger(self) -> list[dict[str, Any]]:
        answer: list[dict[str, Any]] = (await self.http.get(self.url + "/_ledger")).json()
        return answer

    async def heal(self) -> None:
        await self.http.post(self.url + "/_heal")

    async def stop(self) -> None:
        await self.http.aclose()
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            await self.proc.wait()


class WorkerProcess:
    """The real `wow-temporal worker`, killed and started again."""

    def __init__(
        self, server: EmbeddedTemporal, host_url: str, log: Path, *, tracing: bool = True
    ) -> None:
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("WOW_", "TEMPORAL_"))},
            "TEMPORAL_ADDRESS": server.address,
            "WOW_HOST_URL": host_url,
            "WOW_TELEMETRY_TRACING": str(tracing).lower(),
            "WOW_WORKER_HEALTH_PORT": "0",  # several run side by side, on a shared machine
            "WOW_WORKER_METRICS_PORT": "0",
        }
        self.log = log
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        offset = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as out:
            self.proc = await asyncio.create_subprocess_exec(
                str(WORKER),
                "worker",
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 60
        while b"timer worker on task queue" not in self.log.read_bytes()[offset:]:
            if self.proc.returncode is not None or time.monotonic() > deadline:
                raise RuntimeError("the worker did not start:\n" + self.log.read_text()[-3000:])
            await asyncio.sleep(0.05)

    async def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            await self.proc.wait()


class Workers:
    """Several real workers on the same task queues, SIGKILLed one at a time or all at once."""

    def __init__(self, workers: list[WorkerProcess]) -> None:
        self.workers = workers

    async def start(self, which: list[int] | None = None) -> None:
        chosen = range(len(self.workers)) if which is None else which
        await asyncio.gather(*(self.workers[i].start() for i in chosen))

    async def kill(self, which: list[int] | None = None) -> None:
        chosen = range(len(self.workers)) if which is None else which
        await asyncio.gather(*(self.workers[i].kill() for i in chosen))


@dataclass
class Chaos:
    """What was done when (run-relative seconds), for the lateness windows."""

    windows: list[tuple[str, float, float]] = field(default_factory=list)

    def inside(self, at: float) -> bool:
        return any(
            start - CHAOS_LEAD_S <= at <= end + CHAOS_RECOVERY_S for _, start, end in self.windows
        )


async def run_chaos(
    server: EmbeddedTemporal,
    workers: Workers,
    duration: float,
    rng: random.Random,
    clock: Callable[[], float],
    chaos: Chaos,
    kills: int,
    restart_server: bool,
) -> None:
    """SIGKILL one worker `kills` times (each in turn), all of them once when there are
    several, and kill the dev server once, at random moments while commits are handed over."""
    count = len(workers.workers)
    moments = sorted(rng.uniform(0.1, 0.65) * duration for _ in range(kills + (count > 1)))
    plan_: list[tuple[float, str]] = [
        (at, f"worker {n % count + 1}") for n, at in enumerate(moments[:kills])
    ]
    if count > 1:
        plan_.append((moments[kills], "all workers"))
    if restart_server:
        plan_.append((rng.uniform(0.45, 0.6) * duration, "server"))
    for at, what in sorted(plan_):
        await asyncio.sleep(max(0.0, at - clock()))
        began = clock()
        if what.startswith("worker "):
            which = [int(what.split()[1]) - 1]
            await workers.kill(which)
            await asyncio.sleep(rng.uniform(1.0, 3.0))
            await workers.start(which)
        elif what == "all workers":
            await workers.kill()
            await asyncio.sleep(rng.uniform(1.0, 3.0))
            await workers.start()
        else:
            await server.kill()
            await asyncio.sleep(5.0)
            await server.start()
        chaos.windows.append((what, began, clock()))
        print(f"  chaos: {what} down {began:6.1f}s .. {clock():6.1f}s", file=sys.stderr)


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
                report.parked_expected += int(schedule.due_ms(1) / 1000 - epoch < healed_at - 5)
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


async def soak(args: argparse.Namespace) -> Report:
    rng = random.Random(args.seed)
    run = f"{rng.randrange(16**6):06x}"
    with contextlib.ExitStack() as stack:
        if args.keep:
            tmp = tempfile.mkdtemp(prefix="wow-soak-")
            print(f"soak: keeping {tmp}", file=sys.stderr)
        else:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="wow-soak-"))
        server = EmbeddedTemporal(Path(tmp) / "temporal", headless=True)
        host = HostProcess()
        await server.start()
        await host.start()
        workers = Workers(
            [
                WorkerProcess(
                    server, host.url, Path(tmp) / f"worker-{n}.log", tracing=not args.no_tracing
                )
                for n in range(args.workers)
            ]
        )
        try:
            await workers.start()
            client = await server.connect()
            timers = TimerClient(client, delivery=DELIVERY)
            aggregates = plan(args.aggregates, args.duration, rng, run)
            commits = sum(len(a.commits) for a in aggregates)
            print(
                f"soak: {args.aggregates} aggregates, {commits} commits over "
                f"{args.duration:.0f}s, seed {args.seed}",
                file=sys.stderr,
            )
            epoch = time.time()

            def clock() -> float:
                return time.time() - epoch

            chaos = Chaos()
            limit = asyncio.Semaphore(args.concurrency)
            applies: list[tuple[float, float]] = []
            chaos_task = asyncio.ensure_future(
                run_chaos(
                    server,
                    workers,
                    args.duration,
                    rng,
                    clock,
                    chaos,
                    args.kills,
                    not args.no_server_restart,
                )
            )
            await asyncio.gather(
                *(hand_over(timers, a, epoch, clock, limit, applies) for a in aggregates)
            )
            ingest_done = clock()
            await chaos_task
            schedules = [s for a in aggregates for s in schedules_of(a, epoch)]
            last_due = max(
                (s.due_ms(1) / 1000 - epoch for s in schedules if not s.recurring), default=0.0
            )
            await asyncio.sleep(max(0.0, last_due - clock()) + args.settle)

            # Parked now: exactly the failing host's live schedules (read by id, not visibility).
            parked_seen: set[str] = set()
            live: dict[str, Schedule] = {}
            for schedule in schedules:
                if schedule.superseded_at is None and schedule.applied_at is not None:
                    wid = timer_workflow_id(schedule.aggregate.ref, schedule.key)
                    if wid not in live or live[wid].order < schedule.order:
                        live[wid] = schedule
            states = await settled_states(client, list(live), args.settle_within)
            for state in states.values():
                if state is not None and state.status is Status.PARKED and state.spec is not None:
                    parked_seen.add(state.spec.timer)
            await host.heal()
            healed_at = clock()
            for wid, state in states.items():
                if state is not None and state.status is Status.PARKED:
                    with contextlib.suppress(TimerError):
                        await timers.retry(wid)
            await asyncio.sleep(args.settle)
            retried = [w for w, state in states.items() if state and state.status is Status.PARKED]
            await settled_states(client, retried, args.settle_within)
            cancelled_crons_at: dict[str, tuple[float, float]] = {}
            for wid, schedule in live.items():
                if schedule.recurring:
                    began = clock()
                    with contextlib.suppress(TimerError):
                        await timers.cancel(wid)
                    cancelled_crons_at[schedule.timer] = (began, clock())
            for schedule in schedules:
                if schedule.recurring and schedule.timer not in cancelled_crons_at:
                    cancelled_crons_at[schedule.timer] = (clock(), clock())
            await asyncio.sleep(2.0)
            ledger = await host.ledger()
            report = Report(args.aggregates, commits, len(schedules), chaos=chaos.windows)
            report.ingest_per_s = round(
                sum(len(c.handovers) for a in aggregates for c in a.commits)
                / max(ingest_done, 1e-9),
                1,
            )
            lat = summary([took * 1000 for _, took in applies])
            report.apply_p50_ms, report.apply_p99_ms = lat.get("p50", 0.0), lat.get("p99", 0.0)
            report.workers = args.workers
            first_planned = min(at for a in aggregates for c in a.commits for at in c.handovers)
            ingest_in_chaos(report, applies, chaos, first_planned, ingest_done)
            check(
                report, schedules, ledger, epoch, parked_seen, healed_at, chaos, cancelled_crons_at
            )
            every_timer = sorted(
                {
                    timer_workflow_id(a.ref, k)
                    for a in aggregates
                    for k in ("k1", "tick")
                    if any(e.key == k for c in a.commits for e in c.events)
                }
            )
            report.still_running = await count_running(client, every_timer)
            report.workflow_task_timeouts = await count_task_timeouts(client, every_timer)
            return report
        finally:
            await workers.kill()
            await host.stop()
            await server.stop()


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


async def count_running(client: Client, workflow_ids: list[str]) -> int:
    limit = asyncio.Semaphore(40)

    async def one(workflow_id: str) -> int:
        async with limit:
            with contextlib.suppress(Exception):
                description = await client.get_workflow_handle(workflow_id).describe()
                return int(description.status == WorkflowExecutionStatus.RUNNING)
            return 0

    return sum(await asyncio.gather(*(one(w) for w in workflow_ids)))


def print_report(report: Report) -> None:
    verdict = "PASS" if report.ok else "FAIL"
    print(
        f"soak {verdict}: {report.aggregates} aggregates, {report.commits} commits, "
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


@dataclass
class CatchUpReport:
    """What a relay's catch-up after a Temporal outage delivered, against the log."""

    aggregates: int
    commits: int
    outage_s: float
    caught_up_s: float = 0.0
    in_force: int = 0
    """Sets still in force at the end of the log (each must be delivered once)."""
    superseded: int = 0
    """Sets the log replaced, cancelled or deleted (none may be delivered)."""
    delivered_once: int = 0
    lost: int = 0
    decided_twice: int = 0
    early: int = 0
    delivered_though_changed: int = 0
    """Sets delivered though the log had replaced, cancelled or deleted them: must be 0."""
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.decided_twice or self.early or self.delivered_though_changed)


def catch_up_log(
    count: int, rng: random.Random, run: str, before: float, during: tuple[float, float]
) -> list[dict[str, Any]]:
    """Each aggregate's commits: a set of `k1` handed over before the outage (due well after
    it), then 1-3 commits during it (sets due during the outage or after, cancels, re-sets,
    deletions), in log order (by createTime), as wire commits."""
    start, end = during
    log: list[tuple[float, dict[str, Any]]] = []
    for n in range(count):
        aggregate_id = f"ok-{run}-c{n}"
        version = 1
        moments = [before, *sorted(rng.uniform(start, end) for _ in range(rng.randint(1, 3)))]
        for at in moments:
            if version == 1:
                events = [("set", end - at + rng.uniform(20, 45))]
            else:
                events = [
                    rng.choice(
                        [
                            ("set", rng.uniform(5, (end - start) + 40)),
                            ("cancel", 0.0),
                            ("cancel", 0.0),
                            ("delete", 0.0),
                            ("set-cancel", rng.uniform(1, 10)),
                        ]
                    )
                ]
            body: list[dict[str, Any]] = []
            for kind, after in events:
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
            commit = {
                "id": f"{aggregate_id}-v{version}",
                "contextName": CONTEXT,
                "aggregateName": AGGREGATE,
                "tenantId": TENANT,
                "aggregateId": aggregate_id,
                "version": version,
                "createTime": int(at * 1000),
                "body": body,
            }
            log.append((at, commit))
            version += 1
    log.sort(key=lambda pair: pair[0])
    return [commit for _, commit in log]


def judge_catch_up(
    report: CatchUpReport, log: list[dict[str, Any]], ledger: list[dict[str, Any]]
) -> None:
    """Compare what the host received with the log: each set is in force (delivered once) or
    superseded by a later change of its key or its aggregate's deletion (never delivered)."""
    sets: dict[str, tuple[str, tuple[int, int], int]] = {}
    latest: dict[str, tuple[int, int]] = {}
    for commit in log:
        aggregate_id = commit["aggregateId"]
        for index, event in enumerate(commit["body"]):
            order = (commit["version"], index)
            latest[aggregate_id] = max(latest.get(aggregate_id, (0, -1)), order)
            if event["name"] == "wow.ScheduleSet":
                after = float(event["body"]["rule"]["after"][2:-1])
                due_ms = commit["createTime"] + int(after * 1000)
                sets[f"{commit['id']}:{event['id']}"] = (aggregate_id, order, due_ms)
    decided: Counter[str] = Counter()
    first: dict[str, dict[str, Any]] = {}
    for entry in ledger:
        if entry["code"] not in ("Ok", "DuplicateRequestId"):
            continue
        timer = entry["requestId"].rsplit("#", 1)[0]
        decided[timer] += entry["code"] == "Ok"
        first.setdefault(timer, entry)
    for timer, (aggregate_id, order, due_ms) in sets.items():
        in_force = latest[aggregate_id] == order
        report.in_force += in_force
        report.superseded += not in_force
        if timer in first and first[timer]["arrivedMs"] < first[timer]["dueMs"]:
            report.early += 1
        if decided[timer] > 1:
            report.decided_twice += 1
        if in_force and decided[timer] == 1:
            report.delivered_once += 1
        elif in_force:
            report.lost += 1
            report.problems.append(f"lost: {timer} (due {due_ms})")
        elif timer in first:
            report.delivered_though_changed += 1
            report.problems.append(f"delivered though the log changed it: {timer}")


async def catch_up(args: argparse.Namespace) -> CatchUpReport:
    """Hundreds of aggregates' keys set before a Temporal outage, then set, cancelled,
    replaced and deleted during it; the relay catches up once the server is back, in pages
    with the log read ahead (as `Relay` does): nothing the log changed may be delivered."""
    rng = random.Random(args.seed)
    run = f"{rng.randrange(16**6):06x}"
    with tempfile.TemporaryDirectory(prefix="wow-catch-up-") as tmp:
        server = EmbeddedTemporal(Path(tmp) / "temporal", headless=True)
        host = HostProcess()
        await server.start()
        await host.start()
        logs = [Path(tmp) / f"worker-{n}.log" for n in range(args.workers)]
        workers = Workers([WorkerProcess(server, host.url, log) for log in logs])
        try:
            await workers.start()
            client = await server.connect()
            timers = TimerClient(client, delivery=DELIVERY)
            began = time.time()
            outage = (began + 5.0, began + 5.0 + args.outage)
            log = catch_up_log(args.aggregates, rng, run, began, outage)
            report = CatchUpReport(args.aggregates, len(log), args.outage)
            first = [c for c in log if c["version"] == 1]
            for at in range(0, len(first), 100):
                await timers.apply_many([Commit.parse(c) for c in first[at : at + 100]])
            await asyncio.sleep(max(0.0, outage[0] - time.time()))
            await server.kill()
            print(f"catch-up: the server is down for {args.outage:.0f}s", file=sys.stderr)
            await asyncio.sleep(max(0.0, outage[1] - time.time()))
            await server.start()
            client = await server.connect()
            timers = TimerClient(client, delivery=DELIVERY)
            backlog = [Commit.parse(c) for c in log if c["version"] > 1]
            started = time.monotonic()
            page = Relay.batch  # as the host's relay hands a backlog over
            for at in range(0, len(backlog), page):
                later = Horizon()
                later.extend(backlog[at + page :])
                await timers.apply_many(backlog[at : at + page], later=later)
            report.caught_up_s = round(time.monotonic() - started, 1)
            last_due = max(
                c["createTime"] / 1000 + float(e["body"]["rule"]["after"][2:-1])
                for c in log
                for e in c["body"]
                if e["name"] == "wow.ScheduleSet"
            )
            await asyncio.sleep(max(0.0, last_due - time.time()) + args.settle)
            judge_catch_up(report, log, await host.ledger())
            return report
        finally:
            await workers.kill()
            await host.stop()
            await server.stop()


def print_catch_up(report: CatchUpReport) -> None:
    print(
        f"catch-up after a {report.outage_s:.0f}s outage: {report.aggregates} aggregates, "
        f"{report.commits} commits, handed over in {report.caught_up_s}s"
    )
    print(
        f"  sets in force {report.in_force}: delivered once {report.delivered_once}, "
        f"lost {report.lost}, decided twice {report.decided_twice}, early {report.early}"
    )
    print(
        f"  sets the log replaced, cancelled or deleted {report.superseded}: "
        f"delivered {report.delivered_though_changed} (must be 0)"
    )
    for problem in report.problems[:20]:
        print(f"  ! {problem}")
    print("PASS" if report.ok else "FAIL")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aggregates", type=int, default=3000)
    parser.add_argument("--duration", type=float, default=300.0, help="seconds of commits")
    parser.add_argument("--kills", type=int, default=3, help="SIGKILLs of one worker, in turn")
    parser.add_argument(
        "--workers", type=int, default=3, help="worker processes; several: also all killed once"
    )
    parser.add_argument("--no-server-restart", action="store_true")
    parser.add_argument(
        "--no-tracing", action="store_true", help="the worker without spans (its default: on)"
    )
    parser.add_argument("--concurrency", type=int, default=50, help="applies in flight")
    parser.add_argument("--settle", type=float, default=15.0)
    parser.add_argument(
        "--settle-within",
        type=float,
        default=300.0,
        help="at most this long to wait for the one-shots to end or park, after --settle",
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--keep", action="store_true", help="keep the logs and database")
    parser.add_argument(
        "--catch-up",
        action="store_true",
        help="instead: a relay's catch-up after a Temporal outage of --outage seconds",
    )
    parser.add_argument("--outage", type=float, default=180.0, help="with --catch-up")
    parser.add_argument("--serve-host", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_host:
        serve_host(args.serve_host)
        return
    # SIGTERM (a timeout) ends the run through `finally`, so no dev server is left behind.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    configure_temporal_runtime()  # the core's retry warnings while the server is down: quiet
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    logging.getLogger(CORE_LOGGER).setLevel(logging.ERROR)
    if args.catch_up:
        caught = asyncio.run(catch_up(args))
        if args.json:
            print(json.dumps({**caught.__dict__, "ok": caught.ok}, default=str))
        else:
            print_catch_up(caught)
        sys.exit(0 if caught.ok else 1)
    report = asyncio.run(soak(args))
    if args.json:
        print(json.dumps({**report.__dict__, "ok": report.ok}, default=str))
    else:
        print_report(report)
    sys.exit(0 if report.ok else 1)


if __name__ == "__main__":
    main()
