"""Spans are recorded only where they go somewhere: `configure_tracing` installs a tracer
provider for an OTLP endpoint or keeps the application's, and Temporal's tracing interceptor
is installed only then (a span nobody takes costs CPU on every timer)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from temporalio.contrib.opentelemetry import TracingInterceptor

from tests.helpers.tracing import reset_tracing
from wow_temporal.settings import TelemetrySettings
from wow_temporal.tracing import (
    client_interceptors,
    configure_tracing,
    continued_span,
    current_traceparent,
    spans_recorded,
)

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.fixture(autouse=True)
def no_provider() -> Iterator[None]:
    reset_tracing()
    yield
    reset_tracing()


def test_without_an_exporter_no_provider_is_installed_and_no_interceptor() -> None:
    assert configure_tracing(TelemetrySettings(), "test") is False
    assert not spans_recorded()
    assert client_interceptors(TelemetrySettings()) == []


def test_without_a_provider_a_commits_traceparent_still_passes_through() -> None:
    configure_tracing(TelemetrySettings(), "test")
    with continued_span("wow.deliver X", PARENT, {}):
        assert current_traceparent() == PARENT


def test_the_applications_own_provider_is_kept_and_traced() -> None:
    provider = TracerProvider()
    trace.set_tracer_provider(provider)
    assert configure_tracing(TelemetrySettings(), "test") is True
    assert trace.get_tracer_provider() is provider
    (interceptor,) = client_interceptors(TelemetrySettings())
    assert isinstance(interceptor, TracingInterceptor)


def test_an_otlp_endpoint_installs_a_provider_and_the_interceptor() -> None:
    telemetry = TelemetrySettings(otlp_endpoint="http://127.0.0.1:9")
    assert configure_tracing(telemetry, "test") is True
    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    assert len(client_interceptors(telemetry)) == 1
    provider.shutdown()  # its exporter's log filter goes with it


def test_tracing_off_installs_nothing_even_with_a_provider() -> None:
    trace.set_tracer_provider(TracerProvider())
    assert configure_tracing(TelemetrySettings(tracing=False), "test") is False
    assert client_interceptors(TelemetrySettings(tracing=False)) == []
