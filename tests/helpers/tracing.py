"""No tracer provider: what a test that installed one leaves behind it."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.util._once import Once

from wow_temporal import tracing


def reset_tracing() -> None:
    """Back to no tracer provider, as OpenTelemetry's own tests reset their globals."""
    trace._TRACER_PROVIDER = None
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    tracing._configured = False
