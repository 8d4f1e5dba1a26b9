"""Metrics, on the Temporal runtime's own exporter: served for Prometheus (the worker's
`wow.worker.metrics-port`, the control API's `wow.api.metrics-port`) or pushed over OTLP
(`wow.telemetry.metrics: otlp`). The SDK's metrics (`temporal_*`: polls, task latencies,
slots) and wow-temporal's beside them, recorded through the runtime's meter (the activities'
`activity.metric_meter()`, the client's for ingest):

- `wow_deliveries{outcome}`: delivery attempts by outcome (delivered, rejected, failed,
  parked, cancelled);
- `wow_delivery_lateness`: milliseconds from a slot's due time to its delivery (histogram);
- `wow_deliveries_late`: deliveries whose first attempt started later after the due time than
  `wow.timers.poll-interval`, Wow's bound on lateness (a handover, a backlog, too few workers);
- `wow_ticks{outcome}` and `wow_ticks_skipped`: job ticks handled, and the slots a COALESCE
  tick stood for;
- `wow_parked{kind}`: timers (`kind="timer"`) and job instances (`kind="job"`) parked for an
  operator, counted by the worker every `PARKED_INTERVAL` seconds (from Temporal's
  visibility, which lags a second or so: a gauge to watch, not a ledger);
- `wow_commits_ingested` and `wow_timer_changes{kind,outcome}`: commits handed to the timers
  (by `POST /commits` or a host's relay) and what each schedule event did, in the process
  that ingests them;
- `wow_timer_changes_received{kind,outcome}`: what each change handed over did once a worker
  ran its timer (replaced, cancelled, ignored as stale, or unreadable), in the worker: ingest
  can only say `handed-over`;
- `wow_relay_lag` and `wow_relay_behind`: milliseconds from a commit's creation to its
  hand-over by a domain host's relay (histogram), and the commits it has yet to read.

The activities' series also carry the SDK's labels (namespace, task queue, activity type).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from datetime import timedelta

from opentelemetry.util.re import parse_env_headers
from temporalio import activity
from temporalio.client import Client
from temporalio.common import MetricMeter
from temporalio.runtime import OpenTelemetryConfig, PrometheusConfig, Runtime, TelemetryConfig

from wow_temporal.logs import core_logging
from wow_temporal.model import Commit
from wow_temporal.settings import TelemetrySettings

log = logging.getLogger(__name__)

__all__ = [
    "PARKED_INTERVAL",
    "IngestMetrics",
    "client_meter",
    "exporting_runtime",
    "metrics_runtime",
    "otlp_metrics_runtime",
    "record_delivery",
    "record_lateness_bound",
    "record_parked",
    "record_tick",
]

PARKED_INTERVAL = 15.0
"""Seconds between the worker's counts of parked timers and job instances."""


def metrics_runtime(port: int, host: str = "0.0.0.0") -> Runtime:
    """A Temporal runtime serving Prometheus metrics on `host:port` (`/metrics`), the core's
    logs forwarded as `configure_temporal_runtime` does; `RuntimeError` if it cannot bind."""
    telemetry = TelemetryConfig(
        logging=core_logging(),
        metrics=PrometheusConfig(bind_address=f"{host}:{port}", counters_total_suffix=True),
    )
    return Runtime(telemetry=telemetry)


def otlp_metrics_runtime(endpoint: str) -> Runtime:
    """A Temporal runtime pushing its metrics to the OTLP/HTTP collector at `endpoint`, every
    `OTEL_METRIC_EXPORT_INTERVAL` milliseconds (10 s here), with the headers of
    `OTEL_EXPORTER_OTLP_METRICS_HEADERS` or `OTEL_EXPORTER_OTLP_HEADERS` (OpenTelemetry's
    variables, as the span exporter reads them)."""
    every = os.environ.get("OTEL_METRIC_EXPORT_INTERVAL", "")
    interval = timedelta(milliseconds=int(every)) if every.isdigit() else timedelta(seconds=10)
    headers = parse_env_headers(
        os.environ.get("OTEL_EXPORTER_OTLP_METRICS_HEADERS")
        or os.environ.get("OTEL_EXPORTER_OTLP_HEADERS", ""),
        liberal=True,
    )
    telemetry = TelemetryConfig(
        logging=core_logging(),
        metrics=OpenTelemetryConfig(
            url=f"{endpoint}/v1/metrics", headers=headers, http=True, metric_periodicity=interval
        ),
    )
    return Runtime(telemetry=telemetry)


def exporting_runtime(
    telemetry: TelemetrySettings, port: int, key: str, host: str = "0.0.0.0"
) -> Runtime | None:
    """A runtime exporting this process's metrics as `wow.telemetry.metrics` says: served for
    Prometheus on `host:port` (none when 0; `key` names the setting; every interface by
    default, for a scraper in a cluster), or pushed over OTLP. None: the default runtime,
    exporting nothing. `OSError` if the port cannot be bound."""
    if telemetry.metrics == "otlp" and telemetry.otlp_endpoint is not None:
        log.info("metrics pushed over OTLP to %s", telemetry.otlp_endpoint)
        return otlp_metrics_runtime(telemetry.otlp_endpoint)
    if not port:
        return None
    try:
        runtime = metrics_runtime(port, host)
    except (RuntimeError, ValueError) as failure:  # the SDK raises either
        raise OSError(f"cannot serve metrics on port {port} ({key}): {failure}") from None
    log.info("metrics on port %d: /metrics (Prometheus)", port)
    return runtime


def client_meter(client: Client) -> MetricMeter:
    """The metric meter of `client`'s runtime: its series go where that runtime's metrics go
    (the worker's Prometheus endpoint, OTLP, or nowhere)."""
    return (client.service_client.config.runtime or Runtime.default()).metric_meter


class IngestMetrics:
    """The series of the process that hands commits to the timers (`TimerClient`, a relay)."""

    def __init__(self, meter: MetricMeter) -> None:
        self._commits = meter.create_counter("wow_commits_ingested", "Commits handed to the timers")
        self._changes = meter.create_counter(
            "wow_timer_changes", "Schedule events applied to timers, by kind and outcome"
        )
        self._lag = meter.create_histogram(
            "wow_relay_lag", "From a commit's creation to its hand-over to the timers", "ms"
        )
        self._behind = meter.create_gauge("wow_relay_behind", "Commits the relay has yet to read")
        self._aside = meter.create_gauge(
            "wow_relay_set_aside", "Aggregates the relay set aside, retried on their own"
        )
        self._refused = meter.create_counter(
            "wow_relay_refused", "Commits of the log the relay passed over: admission refuses them"
        )

    def ingested(self, changes: Sequence[tuple[str, str]]) -> None:
        """Count one commit applied and its schedule events' (kind, outcome)."""
        self._commits.add(1)
        for kind, outcome in changes:
            self._changes.add(1, {"kind": kind, "outcome": outcome})

    def relayed(self, handed: Sequence[Commit], behind: int | None) -> None:
        """Record a relay batch: each commit's lag from its creation to its hand-over, and
        how many commits the log still holds after the batch (None: not counted this time)."""
        now = time.time()
        for commit in handed:
            self._lag.record(max(0, int((now - commit.created_at.timestamp()) * 1000)))
        if behind is not None:
            self._behind.set(behind)

    def set_aside(self, aggregates: int) -> None:
        """How many aggregates the relay has set aside now."""
        self._aside.set(aggregates)

    def refused(self) -> None:
        """Count a commit the relay passed over for good (admission refuses it)."""
        self._refused.add(1)


def record_change_received(meter: MetricMeter, kind: str, outcome: str) -> None:
    """Count a change a running timer received, by what it did (the workflow's meter: not
    recorded again on replay)."""
    meter.create_counter(
        "wow_timer_changes_received", "Changes handed to running timers, by what they did"
    ).add(1, {"kind": kind, "outcome": outcome})


def record_parked(meter: MetricMeter, kind: str, count: int) -> None:
    """Set the gauge of `kind` (timer, job) parked for an operator."""
    meter.create_gauge("wow_parked", "Parked for an operator, by kind").set(
        count, {"kind": kind}
    )


def record_delivery(outcome: str, lateness_ms: int | None = None) -> None:
    """Count one delivery attempt (inside the delivery activity; a no-op outside one)."""
    if not activity.in_activity():
        return
    meter = activity.metric_meter()
    meter.create_counter(
        "wow_deliveries", "Delivery attempts of scheduled commands, by outcome"
    ).add(1, {"outcome": outcome})
    if lateness_ms is not None:
        meter.create_histogram(
            "wow_delivery_lateness", "From a slot's due time to its delivery", "ms"
        ).record(max(0, lateness_ms))


def record_lateness_bound(due_ms: int, bound: timedelta | None) -> None:
    """Count the delivery in `wow_deliveries_late` when its first attempt started more than
    `bound` after its due time (inside the delivery activity; a no-op outside one, on later
    attempts, and with no bound). Temporal's start time of the attempt is used, so it holds
    under the time-skipping test server too."""
    if bound is None or not activity.in_activity():
        return
    info = activity.info()
    if info.attempt != 1:
        return
    lateness = info.started_time.timestamp() * 1000 - due_ms
    if lateness > bound.total_seconds() * 1000:
        activity.metric_meter().create_counter(
            "wow_deliveries_late", "Deliveries whose first attempt started later than the bound"
        ).add(1)


def record_tick(outcome: str, skipped: int) -> None:
    """Count one job tick handled and the slots it stood for (inside the tick activity)."""
    if not activity.in_activity():
        return
    meter = activity.metric_meter()
    meter.create_counter("wow_ticks", "Job ticks handled, by outcome").add(1, {"outcome": outcome})
    if skipped:
        meter.create_counter(
            "wow_ticks_skipped", "Missed slots a COALESCE tick stood for"
        ).add(skipped)
