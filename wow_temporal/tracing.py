"""Tracing: one trace from the command that scheduled a timer to the command it delivered.

Temporal's `TracingInterceptor` (on the client, hence on its workers) carries the trace
context through workflow starts, updates, signals and activities; wow-temporal adds a span per
commit applied, per delivery and per tick. A delivery continues the trace of the commit that
set its timer (its `traceparent`), which a later replacement or a continue-as-new does not
lose, with a link to the Temporal activity that ran it. The host gets the delivery span as the
command's `traceparent`.

Spans are recorded only where they go somewhere: with `wow.telemetry.otlp-endpoint` set, or a
tracer provider the application installed. Without one (`wow.telemetry.tracing: false`, or no
exporter), the OpenTelemetry API passes the incoming context through unchanged: a commit's
`traceparent` still reaches the delivered command, at no cost per timer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from wow_temporal.settings import SettingsError, TelemetrySettings

__all__ = [
    "TRACER_NAME",
    "client_interceptors",
    "configure_tracing",
    "continued_span",
    "current_traceparent",
    "flush_spans",
    "spans_recorded",
    "trace_id_of",
    "traceparent_context",
    "within_request_trace",
]

TRACER_NAME = "wow_temporal"
"""The instrumentation scope of wow-temporal's own spans."""

_W3C = TraceContextTextMapPropagator()
log = logging.getLogger(__name__)


_configured = False


def configure_tracing(telemetry: TelemetrySettings, service_name: str) -> bool:
    """Record spans in this process where they go somewhere: install an OpenTelemetry SDK
    tracer provider exporting over OTLP/HTTP when `otlp-endpoint` is set, or keep (and export
    from) one the application installed itself. With neither, none is installed: a span nobody
    takes is not made, and the OpenTelemetry API passes a commit's `traceparent` through
    unchanged. `OTEL_SERVICE_NAME` wins over `service_name`. True when spans are recorded.
    `SettingsError` if the endpoint needs the `[otlp]` extra (and then nothing changed)."""
    global _configured
    if not telemetry.tracing:
        return False
    if _configured:
        return spans_recorded()
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    exporter = None  # first: a missing extra changes nothing
    if telemetry.otlp_endpoint is not None:
        exporter = _otlp_exporter(telemetry.otlp_endpoint)
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        if exporter is None:
            return False  # nowhere to go: no span is recorded
        name = os.environ.get("OTEL_SERVICE_NAME") or service_name
        provider = TracerProvider(resource=Resource.create({SERVICE_NAME: name}))
        trace.set_tracer_provider(provider)
    if exporter is not None:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    _configured = True
    return True


def spans_recorded() -> bool:
    """Whether this process records spans: an OpenTelemetry SDK tracer provider is installed
    (by `configure_tracing`, or by the application)."""
    from opentelemetry.sdk.trace import TracerProvider

    return isinstance(trace.get_tracer_provider(), TracerProvider)


def _otlp_exporter(endpoint: str) -> SpanExporter:
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        raise SettingsError(
            "wow.telemetry.otlp-endpoint: exporting spans over OTLP needs the OTLP exporter: "
            "pip install 'wow-temporal[otlp]'"
        ) from None
    log.info("spans exported over OTLP to %s", endpoint)
    return _OutageLog(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces"), endpoint)


_OTLP_LOGGER = "opentelemetry.exporter.otlp.proto.http.trace_exporter"


class _Folded(logging.Filter):
    """Keeps the OTLP exporter's own warnings (one per retry, several a batch) out of the log,
    remembering the first of an export for `_OutageLog` to say once."""

    def __init__(self) -> None:
        super().__init__()
        self.first = ""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.CRITICAL:
            return True
        self.first = self.first or record.getMessage()
        return False


class _OutageLog(SpanExporter):
    """An exporter that says once, with the reason, when the collector stops taking spans and
    once when it takes them again."""

    def __init__(self, exporter: SpanExporter, endpoint: str) -> None:
        self._exporter = exporter
        self._endpoint = endpoint
        self._failing = False
        self._lock = threading.Lock()  # the batch thread, and a flush at exit
        self._said = _Folded()
        logging.getLogger(_OTLP_LOGGER).addFilter(self._said)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock:
            self._said.first = ""
            result = self._exporter.export(spans)
            if result is SpanExportResult.SUCCESS and self._failing:
                self._failing = False
                log.info("the collector at %s takes spans again", self._endpoint)
            elif result is not SpanExportResult.SUCCESS and not self._failing:
                self._failing = True
                reason = " ".join(self._said.first.split())[:300] or "no reason given"
                log.warning(
                    "cannot export spans to the collector at %s, dropping them while it does "
                    "not take them: %s",
                    self._endpoint,
                    reason,
                )
        return result

    def shutdown(self) -> None:
        self._exporter.shutdown()
        logging.getLogger(_OTLP_LOGGER).removeFilter(self._said)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._exporter.force_flush(timeout_millis)


def flush_spans(timeout_s: float = 3.0) -> None:
    """Export the spans still batched, for at most `timeout_s` (a collector may be away: the
    SDK's own flush does not bound the exports it makes)."""
    flush = getattr(trace.get_tracer_provider(), "force_flush", None)
    if flush is None:
        return
    flushing = threading.Thread(target=flush, name="wow-flush-spans", daemon=True)
    flushing.start()
    flushing.join(timeout_s)


def client_interceptors(telemetry: TelemetrySettings) -> list[Any]:
    """Temporal's `TracingInterceptor` when tracing is on and spans are recorded (a client's
    interceptors are its workers' too): without a tracer provider its spans would go nowhere,
    and a commit's trace reaches the host through the timer's own state. Configure tracing (or
    install the application's provider) before connecting."""
    if not telemetry.tracing or not spans_recorded():
        return []
    from temporalio.contrib.opentelemetry import TracingInterceptor

    return [TracingInterceptor()]


def traceparent_context(traceparent: str | None) -> otel_context.Context | None:
    """The context a W3C `traceparent` names; None when absent or malformed."""
    if not traceparent:
        return None
    found = _W3C.extract({"traceparent": traceparent})
    if not trace.get_current_span(found).get_span_context().is_valid:
        return None
    return found


def trace_id_of(traceparent: str | None) -> str | None:
    """The 32 hex digits of the trace a W3C `traceparent` names; None when absent or
    malformed."""
    found = traceparent_context(traceparent)
    if found is None:
        return None
    return f"{trace.get_current_span(found).get_span_context().trace_id:032x}"


def current_traceparent() -> str | None:
    """The active span's W3C `traceparent`; None outside a valid span."""
    carrier: dict[str, str] = {}
    _W3C.inject(carrier)
    return carrier.get("traceparent")


@contextlib.contextmanager
def continued_span(
    name: str,
    traceparent: str | None,
    attributes: Mapping[str, str | int | bool],
    *,
    kind: SpanKind = SpanKind.INTERNAL,
) -> Iterator[Span | None]:
    """A span continuing `traceparent`'s trace (linked to the active span, e.g. Temporal's
    activity span), else a child of the active span; no span (None) when there is neither,
    so a worker without tracing invents no trace. Exceptions mark it failed (a cancellation
    does not)."""
    span = detached_span(name, traceparent, attributes, kind=kind)
    try:
        with within_span(span):
            yield span
    except BaseException as error:
        mark_failed(span, error)
        raise
    finally:
        if span is not None:
            span.end()


def detached_span(
    name: str,
    traceparent: str | None,
    attributes: Mapping[str, str | int | bool],
    *,
    kind: SpanKind = SpanKind.INTERNAL,
) -> Span | None:
    """`continued_span`'s span, not made current: its owner makes it current (`within_span`)
    around each piece of work it covers, and ends it."""
    parent = traceparent_context(traceparent)
    active = trace.get_current_span().get_span_context()
    if parent is None and not active.is_valid:
        return None
    links = [Link(active)] if parent is not None and active.is_valid else None
    tracer = trace.get_tracer(TRACER_NAME)  # the provider's now (a proxy would keep its first)
    return tracer.start_span(
        name,
        context=parent,
        kind=kind,
        attributes=dict(attributes),
        links=links,
        record_exception=False,
        set_status_on_exception=False,
    )


@contextlib.contextmanager
def within_span(span: Span | None) -> Iterator[None]:
    """Make `span` current (nothing when None); it is not ended here."""
    if span is None:
        yield
        return
    with trace.use_span(span, record_exception=False, set_status_on_exception=False):
        yield


def mark_failed(span: Span | None, error: BaseException) -> None:
    """Mark `span` failed by `error` (a cancellation is no failure: the work is not wanted)."""
    if span is None:
        return
    if isinstance(error, asyncio.CancelledError):
        span.set_attribute("wow.cancelled", True)
    else:
        span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"[:500]))


@contextlib.contextmanager
def within_request_trace(traceparent: str | None) -> Iterator[None]:
    """Run in the trace of a request's `traceparent` when no server span is active already
    (FastAPI makes one, from that header, when a tracer provider is installed)."""
    parent = None
    if not trace.get_current_span().get_span_context().is_valid:
        parent = traceparent_context(traceparent)
    if parent is None:
        yield
        return
    token = otel_context.attach(parent)
    try:
        yield
    finally:
        otel_context.detach(token)
