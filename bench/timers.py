"""Benchmark: wow timers end to end on a real dev server, against bare Temporal side by side.

One fresh headless `temporal server start-dev` (EmbeddedTemporal, timer precision 10 ms) on a
throw-away directory, one domain host (the fake Wow host, `bench.harness.HostProcess`, in its own
process: it answers `Ok` and records when each request id arrived), and one worker process (this
one) running both the wow timer worker and the bare baseline's worker on separate task queues. The
same host serves both sides. Measured:

1. Throughput, end to end (commit ingested -> host answered): N commands due on arrival, handed
   over as fast as each side takes them; rate = N / (first ingest -> last answer). Wow
   (`TimerClient.apply`, `wow.deliver` over HTTP) against bare Temporal: a workflow that
   `workflow.sleep`s until the same due time and runs one no-op activity (the issue's baseline),
   plus labelled variants whose activity does the same HTTP POST, and one that uses a start
   delay instead of a sleep. Also the drain rate of a burst all due at one instant a few seconds
   ahead (N / (last delivery - due)), where a start delay does a timer's first workflow task at
   the due time while a sleep did it at ingest. Both workers poll alike (the timer worker's
   settings), sides run in interleaved rounds (the order rotates), the best round is kept.
2. Lateness (host receive time - due) p50/p99/max at half the wow end-to-end ceiling, each
   command with its own due, spread over a few seconds, handed over ahead of time a few at once;
   early deliveries (before due) must be 0.
3. Temporal Cloud actions per delivered command, counted from histories: one-shot, a cron every
   second (per slot), a replaced and a cancelled one-shot; bare baseline for comparison.
4. Ingest: commits applied per second (`TimerClient.apply`, 50 at a time) for schedules far in the
   future, beside bare `start_workflow` calls with a start delay.
5. The cost of telemetry: the wow end-to-end throughput of 1 (due on arrival, `TimerClient.apply`
   -> `wow.deliver` over HTTP) with tracing and metrics on, as production switches them on (an
   SDK tracer provider, as `configure_tracing` installs with an `otlp-endpoint`, exporting in
   batches to an exporter that drops the spans; Temporal's tracing interceptor on the client; a
   `traceparent` on every commit; a runtime serving Prometheus metrics, scraped once at the
   end), against the same with them off (no interceptor, no `traceparent`, a runtime without
   metrics). Each side has its own client, runtime, task queue and timer worker; interleaved
   rounds (3 by default), the best kept. Runs last: the tracer provider it installs is the
   process's.

Run: `python -m bench.timers [--quick] [--json] [--n N] [--rounds R] [--only telemetry]`
(`--only telemetry`: section 5 alone). Exits 0; targets are printed as PASS/MISS, never asserted
(the machine is small and noisy).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import secrets
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import httpx
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client
from temporalio.runtime import Runtime, TelemetryConfig
from temporalio.worker import PollerBehaviorAutoscaling, Worker

from bench._bare_timers import BareTimer
from bench.harness import (
    CANCEL_ORDER,
    HostProcess,
    Verdicts,
    bench_main,
    commit,
    iso_ms,
    parser,
    percentile,
    pool,
    ratio,
    schedule_set,
    scratch,
    sized,
    verdict,
)
from wow_temporal.delivery import CommandSender
from wow_temporal.dev.ports import free_port
from wow_temporal.dev.server import EmbeddedTemporal
from wow_temporal.logs import core_logging
from wow_temporal.metrics import metrics_runtime
from wow_temporal.settings import TelemetrySettings
from wow_temporal.timers.client import TimerClient
from wow_temporal.timers.workflow import DeliverySettings
from wow_temporal.tracing import client_interceptors
from wow_temporal.wire import (
    COMMAND_SEND_PATH,
    DUPLICATE_REQUEST_ID,
    ERROR_CODE_HEADER,
    OK,
    REQUEST_ID_HEADER,
    WireCommand,
    command_headers,
    read_result,
)
from wow_temporal.worker import STICKY_TIMEOUT, timer_worker

WOW_QUEUE = "bench-wow"
BARE_QUEUE = "bench-bare"
IDLE_QUEUE = "bench-idle"  # no worker polls it: ingest-only timers never run
TELEMETRY_ON_QUEUE = "bench-telemetry-on"
TELEMETRY_OFF_QUEUE = "bench-telemetry-off"
CONCURRENCY = 50  # in-flight applies / starts while ingesting
LATENESS_INGEST_LIMIT = 5  # in-flight applies ahead of the lateness measure (a relay's pace)
MAX_ACTIVITIES = 1000
THROUGHPUT_TARGET = 0.8
LATENESS_P99_TARGET_MS = 250.0
TELEMETRY_TARGET = 0.9
QUICK = {"n": 40, "rounds": 1, "telemetry_rounds": 1}
FULL = {"n": 300, "rounds": 2, "telemetry_rounds": 3}

CANCEL = WireCommand(
    type=CANCEL_ORDER,
    context_name="eshop-order",
    aggregate_name="order",
    tenant_id="t1",
    body={"reason": "PAYMENT_TIMEOUT"},
)
"""The command every timer of the bench sends, but for its aggregate and request ids."""


# -- the bare baseline's activities ----------------------------------------------------------

NOOP_DONE: dict[str, float] = {}
"""Bare no-op activity runs: request id -> epoch ms when it ran."""


@activity.defn(name="bench.noop")
async def noop(request_id: str) -> None:
    NOOP_DONE.setdefault(request_id, time.time() * 1000)


class BareHttp:
    """The same POST to the same host as `wow.deliver`, without the wow machinery."""

    def __init__(self, host_url: str) -> None:
        self.url = host_url + COMMAND_SEND_PATH
        self.client = httpx.AsyncClient(
            timeout=httpx.Timeout(10.0),
            limits=httpx.Limits(max_connections=100, max_keepalive_connections=100),
        )
        self.headers = command_headers(CANCEL)

    @activity.defn(name="bench.http")
    async def post(self, request_id: str) -> None:
        response = await self.client.post(
            self.url,
            json=CANCEL.body,
            headers={**self.headers, REQUEST_ID_HEADER: request_id},
        )
        answer = read_result(response.content, response.headers.get(ERROR_CODE_HEADER))
        if answer.code not in (OK, DUPLICATE_REQUEST_ID):
            raise RuntimeError(f"host answered {response.status_code}")


# -- commits and ingest ----------------------------------------------------------------------


def cancel_commit(
    commit_id: str, aggregate_id: str, version: int, *events: dict[str, Any], traced: bool = False
) -> dict[str, Any]:
    """A commit of `aggregate_id` holding `events` (with the `traceparent` of a fresh sampled
    trace when `traced`, as a relay continuing the trace that made it)."""
    header = {"trace_id": f"trace-{commit_id}"}
    if traced:
        header["traceparent"] = f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"
    return commit(aggregate_id, *events, version=version, commit_id=commit_id, header=header)


def cancel_at(rule: dict[str, Any]) -> dict[str, Any]:
    """A `wow.ScheduleSet` of the `grace` key sending `CANCEL` as `rule` says."""
    return schedule_set(rule, body=dict(CANCEL.body))


def timer_id(aggregate_id: str, key: str = "grace") -> str:
    return f"wow-timer:eshop-order.order:t1:{aggregate_id}:{key}"


def tagged(request_id: str, tag: str) -> bool:
    """Whether a request id is one of `tag`'s (`tag` up to its first `-`)."""
    return request_id.split("-", 1)[0] == tag


@dataclass
class Rig:
    client: Client
    host: HostProcess
    timers: TimerClient
    idle_timers: TimerClient
    seq: int = 0
    undelivered: int = 0
    """Commands of every measure not delivered before its wait ended."""
    wow_ids: list[str] = field(default_factory=list)
    bare_ids: list[str] = field(default_factory=list)

    def tag(self, prefix: str) -> str:
        self.seq += 1
        return f"{prefix}{self.seq}"

    async def ingest_wow(
        self,
        tag: str,
        dues_ms: list[int],
        timers: TimerClient,
        limit: int = CONCURRENCY,
        *,
        traced: bool = False,
    ) -> float:
        """Apply one commit per due (rule `at`; `traced`: each in a trace of its own); seconds
        taken."""

        def job(i: int, due: int) -> Callable[[], Awaitable[Any]]:
            c = cancel_commit(
                f"{tag}-{i}", f"{tag}-{i}", 1, cancel_at({"at": iso_ms(due)}), traced=traced
            )
            return lambda: timers.apply(c)

        return await pool((job(i, due) for i, due in enumerate(dues_ms)), limit)

    async def ingest_bare(
        self,
        tag: str,
        dues_ms: list[int],
        activity_name: str,
        *,
        delay: bool,
        queue: str,
        limit: int = CONCURRENCY,
    ) -> float:
        """Start one bare workflow per due (sleeping until due, or with a start delay)."""

        def job(i: int, due: int) -> Callable[[], Awaitable[Any]]:
            async def start() -> None:
                wait = due / 1000 - time.time()
                await self.client.start_workflow(
                    "bench.BareTimer",
                    args=[f"{tag}-{i}", due, activity_name],
                    id=f"bare:{tag}-{i}",
                    task_queue=queue,
                    start_delay=timedelta(seconds=wait) if delay and wait > 0 else None,
                )

            return start

        return await pool((job(i, due) for i, due in enumerate(dues_ms)), limit)

    async def wait_delivered(self, tag: str, n: int, via: str, within: float) -> bool:
        if via != "noop":
            mine = f"{tag}-"
            found = await self.host.delivered_matching(
                lambda a: a.request_id.startswith(mine), n, within
            )
            return len(found) >= n
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if sum(tagged(k, tag) for k in NOOP_DONE) >= n:
                return True
            await asyncio.sleep(0.05)
        return False

    async def received(self, tag: str, via: str) -> dict[str, float]:
        """Request id (without the `:e0#1` of wow) -> epoch ms it reached the host / ran."""
        if via == "noop":
            return {k: v for k, v in NOOP_DONE.items() if tagged(k, tag)}
        return {k.split(":", 1)[0]: v for k, v in (await self.records(tag)).items()}

    async def records(self, tag: str) -> dict[str, float]:
        """Request id -> epoch ms the host first answered it `Ok`, of `tag`'s commands."""
        delivered = await self.host.delivered()
        return {a.request_id: a.received_ms for a in delivered if tagged(a.request_id, tag)}

    async def settle(self, queue: str, within: float = 20.0) -> None:
        """Wait until no workflow of `queue` runs, so the next side starts on a quiet server."""
        deadline = time.monotonic() + within
        query = f'TaskQueue = "{queue}" AND ExecutionStatus = "Running"'
        while time.monotonic() < deadline:
            if (await self.client.count_workflows(query)).count == 0:
                return
            await asyncio.sleep(0.1)


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

# One action each (docs.temporal.io/cloud/actions); queries are billed too but leave no event.
_ONE_ACTION = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED: "start",  # continue-as-new runs too
    EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED: "activity",
    EventType.EVENT_TYPE_TIMER_STARTED: "timer",
    EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES: "upsert",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_OPTIONS_UPDATED: "options",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED: "signal",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED: "update",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_REJECTED: "update",
    EventType.EVENT_TYPE_MARKER_RECORDED: "marker",  # really one per workflow task; none here
    EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED: "child",  # really two
}


def actions(events: Iterable[HistoryEvent]) -> dict[str, int]:
    """Billable actions of one run's history by kind (`slots`: activities that completed)."""
    counts: dict[str, int] = {}
    for event in events:
        kind = _ONE_ACTION.get(event.event_type)
        if kind is not None:
            counts[kind] = counts.get(kind, 0) + 1
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            retries = event.activity_task_started_event_attributes.attempt - 1
            if retries > 0:
                counts["retry"] = counts.get("retry", 0) + retries
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            counts["slots"] = counts.get("slots", 0) + 1
    return counts


def total(counts: dict[str, int]) -> int:
    return sum(v for k, v in counts.items() if k != "slots")


async def history_actions(client: Client, workflow_id: str) -> dict[str, int]:
    """Actions of every run of `workflow_id`, following continue-as-new back to the first."""
    counts: dict[str, int] = {}
    run_id: str | None = None
    while True:
        handle = client.get_workflow_handle(workflow_id, run_id=run_id)
        events = [e async for e in handle.fetch_history_events()]
        for kind, n in actions(events).items():
            counts[kind] = counts.get(kind, 0) + n
        started = events[0].workflow_execution_started_event_attributes
        run_id = started.continued_execution_run_id
        if not run_id:
            return counts


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


# -- telemetry: the same pipeline with tracing and metrics on, and off ---------------------


class DiscardSpans(SpanExporter):
    """Takes every span of `provider` and drops it (counting them): export's cost without a
    collector."""

    def __init__(self, provider: TracerProvider) -> None:
        self.provider = provider
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS


@dataclass(frozen=True)
class Telemetered:
    """One side of the telemetry measure: a wow side with its own client, queue and worker."""

    side: Side
    client: Client
    timers: TimerClient
    traced: bool


@contextlib.asynccontextmanager
async def wow_worker(client: Client, host_url: str, queue: str) -> AsyncIterator[None]:
    """A timer worker on `queue`, delivering to `host_url`, as every wow side of the bench has."""
    async with (
        CommandSender(host_url) as sender,
        timer_worker(client, sender, task_queue=queue, max_concurrent_activities=MAX_ACTIVITIES),
    ):
        yield


async def telemetered(
    server: EmbeddedTemporal, delivery: DeliverySettings, metrics_port: int
) -> tuple[Telemetered, Telemetered, DiscardSpans]:
    """The side with tracing and metrics on, the side with them off, and where the spans go."""
    telemetry = TelemetrySettings()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):  # process-global: spans recorded, as exported
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    exporter = DiscardSpans(provider)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    on_client = await server.connect(
        client_interceptors(telemetry), metrics_runtime(metrics_port, "127.0.0.1")
    )
    off_client = await server.connect(
        runtime=Runtime(telemetry=TelemetryConfig(logging=core_logging()))
    )
    on = Telemetered(
        Side("telon", "tracing and metrics on", "host"),
        on_client,
        TimerClient(on_client, task_queue=TELEMETRY_ON_QUEUE, delivery=delivery),
        traced=True,
    )
    off = Telemetered(
        Side("teloff", "tracing and metrics off", "host"),
        off_client,
        TimerClient(off_client, task_queue=TELEMETRY_OFF_QUEUE, delivery=delivery),
        traced=False,
    )
    return on, off, exporter


@dataclass
class TelemetryReport:
    n: int
    rounds: int
    on: float
    off: float
    deliveries: float  # wow_deliveries_total scraped from the ON side's runtime
    ingested: float  # wow_commits_ingested_total, likewise
    spans: dict[str, int]  # spans exported per side (to the discarding exporter)
    delivered: int  # commands each side delivered (warm-up included)


def prometheus_total(text: str, name: str) -> float:
    """The sum of every series of `name` in a Prometheus text exposition."""
    found = re.findall(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)", text, re.MULTILINE)
    return sum(float(value) for value in found)


async def measure_telemetry(
    rig: Rig, server: EmbeddedTemporal, delivery: DeliverySettings, n: int, rounds: int
) -> TelemetryReport:
    """The wow end-to-end pipeline (`pipeline`) with tracing and metrics on, as production
    switches them on, against the same with them off; interleaved rounds, best kept.

    On: the process's SDK tracer provider (as with an `otlp-endpoint`) exporting in batches to an
    exporter that drops the spans, Temporal's tracing interceptor on the client (so on its
    worker), a `traceparent` on every commit, and a runtime serving Prometheus metrics. Off:
    a client without interceptors on a runtime without metrics, commits without a
    `traceparent`, so no span is made though the provider is installed. Each side has its own
    client, runtime, task queue, sender and timer worker, polling as the bench's wow side does.
    """
    metrics_port = free_port("127.0.0.1")
    on, off, exporter = await telemetered(server, delivery, metrics_port)
    sides = [on, off]
    async with (
        wow_worker(on.client, rig.host.url, on.timers.task_queue),
        wow_worker(off.client, rig.host.url, off.timers.task_queue),
    ):
        spans = {s.side.name: 0 for s in sides}

        async def measure(s: Telemetered, count: int) -> float:
            """One side's pipeline of `count`; the spans it made are counted once it settled."""
            before = exporter.spans
            rate = await pipeline(rig, s.side, count, timers=s.timers, traced=s.traced)
            await asyncio.to_thread(exporter.provider.force_flush)
            spans[s.side.name] += exporter.spans - before
            return rate

        warm_up = 10
        for s in sides:  # unmeasured: imports, connections, caches
            await measure(s, warm_up)
        rates: dict[str, list[float]] = {s.side.name: [] for s in sides}
        for r in range(rounds):
            for s in sides[r % 2 :] + sides[: r % 2]:
                rate = await measure(s, n)
                rates[s.side.name].append(rate)
                print(f"  round {r + 1} {s.side.name:10} {rate:6.0f}/s e2e", file=sys.stderr)
        async with httpx.AsyncClient(timeout=10) as http:
            scraped = (await http.get(f"http://127.0.0.1:{metrics_port}/metrics")).text
    return TelemetryReport(
        n=n,
        rounds=rounds,
        on=max(rates[on.side.name]),
        off=max(rates[off.side.name]),
        deliveries=prometheus_total(scraped, "wow_deliveries_total"),
        ingested=prometheus_total(scraped, "wow_commits_ingested_total"),
        spans=spans,
        delivered=warm_up + rounds * n,
    )


def print_telemetry(report: TelemetryReport) -> None:
    on_off = ratio(report.on, report.off)
    print(
        f"telemetry   end to end, N={report.n}, {report.rounds} round(s), best kept: "
        f"tracing+metrics on {report.on:.0f}/s  off {report.off:.0f}/s"
    )
    print(
        f"  telemetry on/off throughput ratio: {on_off:.2f} "
        f"(target >= {TELEMETRY_TARGET}) {verdict(on_off >= TELEMETRY_TARGET)}"
    )
    print(
        f"  metrics on: wow_deliveries_total {report.deliveries:.0f}, "
        f"wow_commits_ingested_total {report.ingested:.0f} (of {report.delivered} commands); "
        f"spans exported: on {report.spans['telon']}, off {report.spans['teloff']}"
    )


# -- main --------------------------------------------------------------------------------------


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


def bare_worker(client: Client, bare_http: BareHttp) -> Worker:
    """The bare baseline's worker, its workflow in a tiny module of its own (`bench._bare_timers`:
    the sandbox re-imports a workflow's module for every instance)."""
    return Worker(
        client,
        task_queue=BARE_QUEUE,
        workflows=[BareTimer],
        activities=[noop, bare_http.post],
        max_concurrent_activities=MAX_ACTIVITIES,
        # The same pollers as the timer worker: compare the designs, not the tuning.
        workflow_task_poller_behavior=PollerBehaviorAutoscaling(),
        activity_task_poller_behavior=PollerBehaviorAutoscaling(),
        sticky_queue_schedule_to_start_timeout=STICKY_TIMEOUT,
    )


@dataclass
class Report:
    """Every section, and what the host saw."""

    n: int
    rounds: int
    telemetry_rounds: int
    seconds: float
    timers: TimersReport | None
    telemetry: TelemetryReport
    undelivered: int
    duplicates: int


async def run(args: argparse.Namespace) -> Report:
    n, rounds, telemetry_rounds = args.n, args.rounds, args.telemetry_rounds
    sides = SIDES[:2] if args.quick else SIDES
    started = time.perf_counter()
    timers_report: TimersReport | None = None

    with scratch(args, "timers") as tmp:
        server = EmbeddedTemporal(tmp / "temporal", headless=True)
        host = HostProcess(tmp / "host.log")
        try:
            await asyncio.gather(server.start(), host.start())
            client = await server.connect()
            delivery = DeliverySettings(initial_interval=timedelta(milliseconds=200))
            rig = Rig(
                client,
                host,
                TimerClient(client, task_queue=WOW_QUEUE, delivery=delivery),
                TimerClient(client, task_queue=IDLE_QUEUE, delivery=delivery),
            )
            bare_http = BareHttp(host.url)
            async with (
                wow_worker(client, host.url, WOW_QUEUE),
                bare_worker(client, bare_http),
            ):
                names = "telemetry on, off" if args.only else ", ".join(s.name for s in sides)
                print(
                    f"dev server up in {time.perf_counter() - started:.1f}s; N={n}, "
                    f"{rounds} round(s) ({telemetry_rounds} for telemetry), sides: {names}; "
                    f"dynamic config {server.dynamic_config}",
                    file=sys.stderr,
                )
                if args.only is None:
                    timers_report = await measure_timers(rig, args, sides, n, rounds)
                # 5. telemetry on against off, last: it installs the process's tracer provider.
                telemetry_report = await measure_telemetry(
                    rig, server, delivery, n, telemetry_rounds
                )
                duplicates = await host.duplicates()
            await bare_http.client.aclose()
        finally:
            await asyncio.gather(server.stop(), host.stop())
    seconds = time.perf_counter() - started
    return Report(
        n,
        rounds,
        telemetry_rounds,
        seconds,
        timers_report,
        telemetry_report,
        rig.undelivered,
        duplicates,
    )


def text(report: Report) -> None:
    what = "telemetry on against off" if report.timers is None else "vs bare Temporal"
    rounds = report.rounds if report.timers else report.telemetry_rounds
    print(
        f"=== wow timers {what}: N={report.n}, {rounds} round(s), "
        f"best kept; {report.seconds:.0f}s in all ==="
    )
    if report.timers is not None:
        print_timers(report.timers)
    print_telemetry(report.telemetry)
    print(f"host duplicates (redeliveries): {report.duplicates}")


def verdicts(report: Report) -> Verdicts:
    """Nothing early, missing or undelivered; metrics really on (every delivery counted) and
    spans exported only when on; a one-shot command costs 2 actions; the ratios to bare."""
    tel = report.telemetry
    zero = {
        "undelivered": report.undelivered,
        "deliveries_uncounted": max(0, tel.delivered - round(tel.deliveries)),
        "spans_exported_off": tel.spans["teloff"],
    }
    ratios = {"telemetry_on_off": ratio(tel.on, tel.off)}
    figures: dict[str, float] = {}
    t = report.timers
    if t is not None:
        late = t.wow_late
        # hundredths of an action a one-shot command costs over or under 2 (printed as 2.00)
        zero["one_shot_actions_not_2"] = round(abs(t.actions.one_shot[0] - 2) * 100)
        zero |= {"early": late.early, "missing": late.missing}
        ratios |= {
            "throughput": ratio(t.flow["wow"], t.flow["bare"]),
            "burst_drain": ratio(t.best["wow"].rate, t.best["bare"].rate),
            "ingest": ratio(t.ingest_wow, t.ingest_bare),
        }
        figures = {
            "lateness_p50_ms": late.p50,
            "lateness_p99_ms": late.p99,
            "ingest_wow_per_s": t.ingest_wow,
            "ingest_bare_per_s": t.ingest_bare,
            "cron_actions_per_slot": t.actions.cron_per_slot,
        }
    return Verdicts(
        must_be_zero=zero,
        must_be_positive={"spans_exported_on": tel.spans["telon"]},
        ratios=ratios,
        figures=figures | {"host_duplicates": report.duplicates},
    )


def main() -> int:
    p = parser(__doc__)
    p.add_argument("--n", type=int, help="commands per burst (default 300, quick 40)")
    p.add_argument(
        "--rounds", type=int, help="interleaved rounds (default 2, telemetry 3; quick 1)"
    )
    p.add_argument(
        "--only", choices=["telemetry"], help="run one section alone (5: telemetry on against off)"
    )
    args = p.parse_args()
    args.telemetry_rounds = args.rounds  # --rounds sets both
    return bench_main(sized(args, QUICK, FULL), run, text, verdicts)


if __name__ == "__main__":
    raise SystemExit(main())
