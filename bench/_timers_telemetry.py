"""`bench.timers`' measure 5: the wow pipeline with tracing and metrics on, as production switches
them on, against the same with them off (how: docs/benchmarks.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

import httpx
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from temporalio.runtime import Runtime, TelemetryConfig

from bench._dev_stack import rounds
from bench._timers_measures import pipeline
from bench._timers_rig import Rig, wow_worker
from bench.harness import ratio, verdict
from bench.harness.prometheus import scrape, total
from wow_temporal.dev.ports import free_port
from wow_temporal.dev.server import EmbeddedTemporal
from wow_temporal.logs import core_logging
from wow_temporal.metrics import metrics_runtime
from wow_temporal.settings import TelemetrySettings
from wow_temporal.timers.client import TimerClient
from wow_temporal.timers.workflow import DeliverySettings
from wow_temporal.tracing import client_interceptors

TELEMETRY_TARGET = 0.9
WARM_UP = 10


class DiscardSpans(SpanExporter):
    """Takes every span and drops it (counting them): export's cost without a collector."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS


def tracer_provider(exporter: DiscardSpans) -> TracerProvider:
    """The process's SDK tracer provider (installed if none is: it is process-global),
    exporting to `exporter` in batches, as `configure_tracing` does with an `otlp-endpoint`."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


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


async def measure_telemetry(
    rig: Rig, server: EmbeddedTemporal, delivery: DeliverySettings, n: int, count: int
) -> TelemetryReport:
    """The wow end-to-end pipeline (`pipeline`) with tracing and metrics on against off, each
    side with its own client, runtime, task queue, sender and timer worker; interleaved
    rounds after a warm-up, best kept."""
    port = free_port("127.0.0.1")
    exporter = DiscardSpans()
    provider = tracer_provider(exporter)
    on = await server.connect(
        client_interceptors(TelemetrySettings()), metrics_runtime(port, "127.0.0.1")
    )
    off = await server.connect(runtime=Runtime(telemetry=TelemetryConfig(logging=core_logging())))
    sides = {
        "telon": TimerClient(on, task_queue="bench-telemetry-on", delivery=delivery),
        "teloff": TimerClient(off, task_queue="bench-telemetry-off", delivery=delivery),
    }
    spans = dict.fromkeys(sides, 0)

    async def measure(side: str, count: int = n) -> float:
        """One side's pipeline of `count`; the spans it made are counted once it settled."""
        before = exporter.spans
        rate = await pipeline(rig, "wow", count, timers=sides[side], traced=side == "telon")
        await asyncio.to_thread(provider.force_flush)
        spans[side] += exporter.spans - before
        return rate

    async with (
        wow_worker(on, rig.host.url, sides["telon"].task_queue),
        wow_worker(off, rig.host.url, sides["teloff"].task_queue),
    ):
        for side in sides:  # unmeasured: imports, connections, caches
            await measure(side, WARM_UP)
        rates = await rounds(count, list(sides), measure, lambda rate: f"{rate:6.0f}/s e2e")
        async with httpx.AsyncClient(timeout=10) as http:
            scraped = await scrape(http, f"http://127.0.0.1:{port}/metrics")
    return TelemetryReport(
        n=n,
        rounds=count,
        on=max(rates["telon"]),
        off=max(rates["teloff"]),
        deliveries=total(scraped, "wow_deliveries_total"),
        ingested=total(scraped, "wow_commits_ingested_total"),
        spans=spans,
        delivered=WARM_UP + count * n,
    )


def print_telemetry(report: TelemetryReport) -> None:
    on_off = ratio(report.on, report.off)
    print(
        f"telemetry   end to end, N={report.n}, {report.rounds} round(s), best kept: "
        f"tracing+metrics on {report.on:.0f}/s  off {report.off:.0f}/s  ratio {on_off:.2f} "
        f"(target >= {TELEMETRY_TARGET}) {verdict(on_off >= TELEMETRY_TARGET)}"
    )
    print(
        f"  metrics on: wow_deliveries_total {report.deliveries:.0f}, "
        f"wow_commits_ingested_total {report.ingested:.0f} (of {report.delivered} commands); "
        f"spans exported: on {report.spans['telon']}, off {report.spans['teloff']}"
    )
