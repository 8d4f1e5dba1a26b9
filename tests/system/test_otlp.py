"""Export over OTLP/HTTP (`wow.telemetry.otlp-endpoint`, the `[otlp]` extra): a real CLI worker
on the dev server pushes its spans and its metrics to a collector, here a real HTTP server that
decodes what it receives with OpenTelemetry's own protobuf messages."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from fastapi import FastAPI, Request, Response
from opentelemetry import trace
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.helpers.builders import commit
from tests.helpers.eventually import eventually
from tests.helpers.worker_process import WorkerProcess, on_the_session_loop
from wow_temporal.dev.ports import free_port
from wow_temporal.dev.server import EmbeddedTemporal
from wow_temporal.settings import SettingsError, TelemetrySettings
from wow_temporal.testing.wow_host import FakeWowHost
from wow_temporal.timers.client import TimerClient


class Collector:
    """An OTLP/HTTP receiver on 127.0.0.1: the span names and trace ids, and the metric names,
    of every export request it was sent."""

    def __init__(self) -> None:
        self.port = free_port()
        self.spans: list[tuple[str, str, dict[str, str]]] = []
        self.metrics: set[str] = set()
        self.services: set[str] = set()
        self.keys: dict[str, set[str]] = {"traces": set(), "metrics": set()}
        app = FastAPI()

        @app.post("/v1/traces")
        async def traces(request: Request) -> Response:
            self.keys["traces"].add(request.headers.get("x-collector-key", ""))
            export = ExportTraceServiceRequest.FromString(await request.body())
            for resource in export.resource_spans:
                for attribute in resource.resource.attributes:
                    if attribute.key == "service.name":
                        self.services.add(attribute.value.string_value)
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        attributes = {a.key: a.value.string_value for a in span.attributes}
                        self.spans.append((span.name, span.trace_id.hex(), attributes))
            return Response(media_type="application/x-protobuf")

        @app.post("/v1/metrics")
        async def metrics(request: Request) -> Response:
            self.keys["metrics"].add(request.headers.get("x-collector-key", ""))
            export = ExportMetricsServiceRequest.FromString(await request.body())
            for resource in export.resource_metrics:
                for scope in resource.scope_metrics:
                    self.metrics.update(metric.name for metric in scope.metrics)
            return Response(media_type="application/x-protobuf")

        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Collector:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "the collector did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *_: object) -> None:
        self.server.should_exit = True
        self.thread.join(5)


@pytest.fixture
def collector() -> Iterator[Collector]:
    with Collector() as running:
        yield running


@on_the_session_loop
async def test_a_worker_exports_its_spans_and_metrics_to_the_collector(
    dev_server: EmbeddedTemporal,
    wow_host: FakeWowHost,
    collector: Collector,
    tmp_path: Path,
) -> None:
    trace_id = uuid.uuid4().hex
    worker = WorkerProcess(
        dev_server, wow_host.url, tmp_path / "worker.log",
        env={
            "WOW_TELEMETRY_OTLP_ENDPOINT": collector.url,
            "WOW_TELEMETRY_METRICS": "otlp",
            "OTEL_BSP_SCHEDULE_DELAY": "600000",  # no batch is due: the stop sends them
            "OTEL_METRIC_EXPORT_INTERVAL": "500",
            "OTEL_EXPORTER_OTLP_HEADERS": "x-collector-key=open%20sesame",  # both signals
            "OTEL_SERVICE_NAME": "shop-timers",
        },
    )
    data = commit(after=0.2)
    data["header"] = {"traceparent": f"00-{trace_id}-{uuid.uuid4().hex[:16]}-01"}
    await worker.start()
    try:
        await TimerClient(await dev_server.connect()).apply(data)
        await wow_host.wait_for(
            lambda host: any(r.aggregate_id == data["aggregateId"] for r in host.requests),
            timeout=30,
        )
        await eventually(
            lambda: "wow_deliveries" in collector.metrics,
            within=20,
            what=f"wow_deliveries never pushed; got {sorted(collector.metrics)}",
        )
        assert not collector.spans, "a batch went before it was due"
        assert worker.proc is not None
        worker.proc.send_signal(signal.SIGTERM)  # a graceful stop sends the spans batched
        assert await asyncio.wait_for(worker.proc.wait(), 30) == 0
    finally:
        await worker.stop()
    deliver = "wow.deliver eshop.order.CancelOrder"
    assert any(name == deliver and tid == trace_id for name, tid, _ in collector.spans), (
        f"no {deliver} span of trace {trace_id} reached the collector: {collector.spans}"
    )
    ((_, _, attributes),) = [s for s in collector.spans if s[0] == deliver and s[1] == trace_id]
    assert attributes["wow.outcome"] == "delivered"
    assert collector.services == {"shop-timers"}  # OTEL_SERVICE_NAME wins
    assert collector.keys == {"traces": {"open sesame"}, "metrics": {"open sesame"}}
    # Temporal's own metrics go the same way: one sink.
    assert any(name.startswith("temporal_") for name in collector.metrics), collector.metrics
    log = (tmp_path / "worker.log").read_text()
    assert f"metrics pushed over OTLP to {collector.url}" in log
    assert "metrics on port" not in log  # no Prometheus endpoint besides


def test_spans_over_otlp_without_the_extra_say_which_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import builtins

    from wow_temporal import tracing

    real_import = builtins.__import__

    def without_exporter(name: str, *args: object, **kwargs: object) -> object:
        if name.startswith("opentelemetry.exporter.otlp"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    before = trace.get_tracer_provider()
    monkeypatch.setattr(builtins, "__import__", without_exporter)
    with pytest.raises(SettingsError, match=r"pip install 'wow-temporal\[otlp\]'"):
        tracing.configure_tracing(TelemetrySettings(otlp_endpoint="http://c:4318"), "test")
    assert trace.get_tracer_provider() is before, "a refused setting changed nothing"


def test_a_collector_outage_is_said_once_with_its_reason_and_its_end_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import logging

    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    from wow_temporal.tracing import _OTLP_LOGGER, _OutageLog

    class Answers(SpanExporter):
        """Answers as scripted, saying why it failed as the OTLP exporter does: per retry."""

        def __init__(self, *results: SpanExportResult) -> None:
            self.results = list(results)

        def export(self, spans: object) -> SpanExportResult:  # type: ignore[override]
            result = self.results.pop(0)
            if result is SpanExportResult.FAILURE:
                for retry in (1, 2, 3):
                    logging.getLogger(_OTLP_LOGGER).warning(
                        "Transient error Connection refused, retrying (%d)", retry
                    )
            return result

    failure, success = SpanExportResult.FAILURE, SpanExportResult.SUCCESS
    exporter = _OutageLog(Answers(success, failure, failure, failure, success, success), "http://c")
    with caplog.at_level("INFO"):
        results = [exporter.export([]) for _ in range(6)]
    assert results == [success, failure, failure, failure, success, success]
    said = [(r.name, r.levelname, r.getMessage()) for r in caplog.records]
    assert said == [
        ("wow_temporal.tracing", "WARNING",
         "cannot export spans to the collector at http://c, dropping them while it does not "
         "take them: Transient error Connection refused, retrying (1)"),
        ("wow_temporal.tracing", "INFO", "the collector at http://c takes spans again"),
    ]
