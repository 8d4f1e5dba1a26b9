"""`bench.timers`' measure 5: the wow pipeline with tracing and metrics on, as production switches
them on, against the same with them off."""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import httpx
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from temporalio.client import Client
from temporalio.runtime import Runtime, TelemetryConfig

from bench._timers_measures import (
    Side,
    pipeline,
)
from bench._timers_rig import (
    MAX_ACTIVITIES,
    TELEMETRY_OFF_QUEUE,
    TELEMETRY_ON_QUEUE,
    TELEMETRY_TARGET,
    Rig,
)
from bench.harness import (
    ratio,
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
from wow_temporal.worker import timer_worker

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
