"""Worker metrics, on the Temporal SDK's own Prometheus exporter (`wow.worker.metrics-port`):
the SDK's metrics (`temporal_*`: polls, task latencies, slots) and wow-temporal's beside them,
recorded from the activities through `activity.metric_meter()`:

- `wow_deliveries{outcome}`: delivery attempts by outcome (delivered, rejected, failed,
  parked, cancelled);
- `wow_delivery_lateness`: milliseconds from a slot's due time to its delivery (histogram);
- `wow_ticks{outcome}` and `wow_ticks_skipped`: job ticks handled, and the slots a COALESCE
  tick stood for.

Every series also carries the SDK's labels (namespace, task queue, activity type).
"""

from __future__ import annotations

from temporalio import activity
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

from wow_temporal.logs import core_logging

__all__ = ["metrics_runtime", "record_delivery", "record_tick"]


def metrics_runtime(port: int, host: str = "0.0.0.0") -> Runtime:
    """A Temporal runtime serving Prometheus metrics on `host:port` (`/metrics`), the core's
    logs forwarded as `configure_temporal_runtime` does; `RuntimeError` if it cannot bind."""
    telemetry = TelemetryConfig(
        logging=core_logging(),
        metrics=PrometheusConfig(bind_address=f"{host}:{port}", counters_total_suffix=True),
    )
    return Runtime(telemetry=telemetry)


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
