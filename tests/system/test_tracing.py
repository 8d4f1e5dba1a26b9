"""Tracing end to end: a `traceparent` on `POST /commits` (or in the commit's header) reaches the
command its timer delivers, with the same trace id, through the real control API (uvicorn), the
dev server, a worker on a client with Temporal's tracing interceptor, and the fake Wow host;
the spans are read from an in-memory exporter on this process's tracer provider.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import pytest_asyncio
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from pydantic import BaseModel
from temporalio.client import Client

from tests.helpers.eventually import eventually
from tests.helpers.tracing import reset_tracing
from tests.helpers.wow_host import wow_host
from wow_temporal import App, Command, SagaContext, ScheduleTick, on_schedule
from wow_temporal.api import serve
from wow_temporal.delivery import CommandSender
from wow_temporal.dev.ports import free_port
from wow_temporal.dev.server import EmbeddedTemporal
from wow_temporal.jobs.client import JobClient
from wow_temporal.settings import Settings, load_settings
from wow_temporal.testing.wow_host import Arrival, FakeWowHost
from wow_temporal.timers.client import TimerClient
from wow_temporal.worker import connect, job_worker, timer_worker

pytestmark = pytest.mark.asyncio(loop_scope="session")

__all__ = ["wow_host"]

COMMAND = "eshop.order.CancelOrder"
TOKEN = "operator-secret"


def trace_id(traceparent: str) -> str:
    return traceparent.split("-")[1]


def span_id(traceparent: str) -> str:
    return traceparent.split("-")[2]


def new_traceparent() -> str:
    return f"00-{uuid.uuid4().hex}-{uuid.uuid4().hex[:16]}-01"


def hex_trace(span: ReadableSpan) -> str:
    assert span.context is not None
    return f"{span.context.trace_id:032x}"


def hex_int(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


def hex_span(span: ReadableSpan) -> str:
    assert span.context is not None
    return f"{span.context.span_id:016x}"


@pytest.fixture(scope="module")
def spans() -> Iterator[InMemorySpanExporter]:
    """Every span this process ends, from the SDK provider the worker would install; removed
    afterwards (as OpenTelemetry's own tests do), so the tests after these run untraced."""
    provider = trace.get_tracer_provider()
    installed = not isinstance(provider, TracerProvider)
    if installed:
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter
    exporter.shutdown()
    if installed:
        reset_tracing()


def settings_for(server: EmbeddedTemporal) -> Settings:
    return load_settings(
        environ={
            "TEMPORAL_ADDRESS": server.address,
            "TEMPORAL_NAMESPACE": server.namespace,
            "WOW_API_TOKEN": TOKEN,
        }
    )


@dataclass
class Rig:
    client: Client
    http: httpx.AsyncClient
    host: FakeWowHost
    spans: InMemorySpanExporter
    aggregate_id: str

    def commit(self, version: int, after: str, header: dict[str, str]) -> dict[str, Any]:
        return {
            "id": f"c{version}-{uuid.uuid4().hex[:8]}",
            "contextName": "eshop-order",
            "aggregateName": "order",
            "tenantId": "t1",
            "aggregateId": self.aggregate_id,
            "version": version,
            "createTime": int(time.time() * 1000),
            "header": header,
            "body": [
                {
                    "id": "e1",
                    "name": "wow.ScheduleSet",
                    "body": {
                        "key": "payment-grace-period",
                        "rule": {"after": after},
                        "command": {"type": COMMAND, "body": {}},
                    },
                }
            ],
        }

    async def post(self, commit: dict[str, Any], traceparent: str | None = None) -> None:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        if traceparent is not None:
            headers["traceparent"] = traceparent
        answer = await self.http.post("/commits", json=commit, headers=headers)
        assert answer.status_code == 200, answer.text

    async def delivered(self) -> Arrival:
        await self.host.wait_for(
            lambda host: any(r.aggregate_id == self.aggregate_id for r in host.requests),
            timeout=20,
        )
        (request,) = [r for r in self.host.requests if r.aggregate_id == self.aggregate_id]
        return request

    def named(self, name: str, trace: str) -> list[ReadableSpan]:
        """The spans named `name` in trace `trace` that have ended, in the order they began."""
        found = [s for s in self.spans.get_finished_spans() if s.name == name]
        return sorted((s for s in found if hex_trace(s) == trace), key=lambda s: s.start_time or 0)

    async def span(self, name: str, trace: str) -> ReadableSpan:
        """The one span named `name` in trace `trace` (spans end a little after the work)."""
        found = await eventually(lambda: self.named(name, trace), within=5, what=name)
        assert len(found) == 1, f"{len(found)} spans {name} in trace {trace}"
        span: ReadableSpan = found[0]
        return span

    def ancestors(self, span: ReadableSpan) -> list[str]:
        """The names of `span`'s parents, nearest first, as far as this process saw them."""
        by_id = {hex_int(s): s for s in self.spans.get_finished_spans()}
        names: list[str] = []
        while span.parent is not None and span.parent.span_id in by_id:
            span = by_id[span.parent.span_id]
            names.append(span.name)
        return names

    def trace_names(self, trace: str) -> set[str]:
        return {s.name for s in self.spans.get_finished_spans() if hex_trace(s) == trace}


@pytest_asyncio.fixture(loop_scope="session")
async def rig(
    dev_server: EmbeddedTemporal, wow_host: FakeWowHost, spans: InMemorySpanExporter
) -> AsyncIterator[Rig]:
    settings = settings_for(dev_server)
    client = await connect(settings)  # with Temporal's tracing interceptor, as the CLI's
    queue = f"trace-{uuid.uuid4().hex[:10]}"
    timers = TimerClient(client, task_queue=queue)
    port = free_port()
    stop = asyncio.Event()
    api = asyncio.create_task(serve(settings, timers, port=port, stop=stop))
    async with (
        CommandSender(wow_host.url) as sender,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http,
        timer_worker(client, sender, task_queue=queue),
    ):

        async def healthy() -> bool:
            with contextlib.suppress(httpx.TransportError):
                return (await http.get("/health")).status_code == 200
            return False

        await eventually(healthy, within=5, what="the API serving")
        try:
            yield Rig(client, http, wow_host, spans, uuid.uuid4().hex)
        finally:
            stop.set()
            await api


async def test_a_traceparent_on_post_commits_reaches_the_delivered_command(rig: Rig) -> None:
    sent = new_traceparent()
    await rig.post(rig.commit(1, "PT0.3S", header={}), traceparent=sent)
    request = await rig.delivered()

    got = request.header("traceparent")
    assert got is not None, "the delivered command carries no traceparent"
    assert trace_id(got) == trace_id(sent)
    deliver = await rig.span(f"wow.deliver {COMMAND}", trace_id(sent))
    assert hex_span(deliver) == span_id(got), "the host's parent is the delivery span"
    assert deliver.attributes is not None
    assert deliver.attributes["wow.outcome"] == "delivered"
    assert deliver.attributes["wow.slot"] == 1
    assert deliver.attributes["wow.key"] == "payment-grace-period"
    applied = await rig.span("wow.apply commit", trace_id(sent))
    assert (applied.attributes or {}).get("wow.changes") == 1, "the commit's answers count on it"
    # One trace: the request (FastAPI's server span), the commit applied, Temporal's spans,
    # the delivery.
    posted = await rig.span("POST /commits", trace_id(sent))
    applied = await rig.span("wow.apply commit", trace_id(sent))
    assert posted.parent is not None and f"{posted.parent.span_id:016x}" == span_id(sent)
    assert "POST /commits" in rig.ancestors(applied)
    assert deliver.parent is not None and deliver.parent.span_id == hex_int(applied)
    await rig.span("RunActivity:wow.deliver", trace_id(sent))  # Temporal's, in the same trace
    assert "StartWorkflow:wow.Timer" in rig.trace_names(trace_id(sent))


async def test_the_commits_own_traceparent_comes_before_the_requests(rig: Rig) -> None:
    own, request_trace = new_traceparent(), new_traceparent()
    await rig.post(rig.commit(1, "PT0.3S", header={"traceparent": own}), request_trace)
    request = await rig.delivered()
    got = request.header("traceparent")
    assert got is not None
    assert trace_id(got) == trace_id(own)
    applied = await rig.span("wow.apply commit", trace_id(own))
    assert applied.parent is not None and f"{applied.parent.span_id:016x}" == span_id(own)
    # The request's own span stays in its trace, linked to nothing it did not do.
    assert "POST /commits" in rig.trace_names(trace_id(request_trace))


async def test_a_replaced_timer_delivers_in_the_replacing_commits_trace(rig: Rig) -> None:
    first, second = new_traceparent(), new_traceparent()
    await rig.post(rig.commit(1, "PT60S", header={"traceparent": first}))
    await rig.post(rig.commit(2, "PT0.3S", header={"traceparent": second}))
    request = await rig.delivered()
    got = request.header("traceparent")
    assert got is not None
    # The workflow was started in the first trace; the delivery follows the timer in force.
    assert trace_id(got) == trace_id(second)
    deliver = await rig.span(f"wow.deliver {COMMAND}", trace_id(second))
    assert deliver.links, "the delivery links to Temporal's activity span"
    assert f"wow.deliver {COMMAND}" not in rig.trace_names(trace_id(first))


async def test_a_failed_attempt_is_an_error_span_and_the_retry_stays_in_the_trace(
    rig: Rig,
) -> None:
    sent = new_traceparent()
    commit = rig.commit(1, "PT0.2S", header={"traceparent": sent})
    rig.host.behave("fail", request_id=f"{commit['id']}:e1#1", times=1)
    await rig.post(commit)
    name = f"wow.deliver {COMMAND}"
    attempts = await eventually(
        lambda: rig.named(name, trace_id(sent)), within=30, what="two attempts",
        holds=lambda found: len(found) >= 2,
    )
    assert [(s.attributes or {}).get("wow.outcome") for s in attempts] == ["failed", "delivered"]
    assert [(s.attributes or {}).get("wow.attempt") for s in attempts] == [1, 2]
    assert attempts[0].status.status_code is StatusCode.ERROR
    assert "500" in (attempts[0].status.description or "")
    assert attempts[1].status.status_code is not StatusCode.ERROR


async def test_without_any_trace_context_the_delivery_starts_in_the_request(
    rig: Rig,
) -> None:
    await rig.post(rig.commit(1, "PT0.2S", header={}))
    request = await rig.delivered()
    got = request.header("traceparent")
    assert got is not None, "a traced worker traces every delivery"
    deliver = await rig.span(f"wow.deliver {COMMAND}", trace_id(got))
    assert hex_span(deliver) == span_id(got)
    await rig.span("RunActivity:wow.deliver", trace_id(got))
    # The API's server span began the trace (FastAPI's, with no traceparent to continue).
    names = rig.trace_names(trace_id(got))
    assert {"POST /commits", "wow.apply commit"} <= names, names


# --- ticks ----------------------------------------------------------------------------------


class Ping(BaseModel):
    """A command body."""

    n: int


@dataclass
class Pinger:
    context: str

    @on_schedule(name="ping", cron="* * * * * *")
    def ping(self, tick: ScheduleTick, context: SagaContext) -> list[Command[Ping]]:
        from wow_temporal import NamedAggregate

        ref = NamedAggregate(self.context, "counter").ref(tick.tenant_id, "a")
        return [context.command(ref, Ping(n=tick.slot))]


async def test_a_tick_has_a_span_and_its_commands_continue_it(
    dev_server: EmbeddedTemporal, wow_host: FakeWowHost, spans: InMemorySpanExporter
) -> None:
    client = await connect(settings_for(dev_server))
    context = f"trace-jobs-{uuid.uuid4().hex[:8]}"
    app = App(context, sagas=[Pinger(context)])
    jobs = JobClient(client, app)
    async with CommandSender(wow_host.url) as sender, job_worker(client, app, sender):
        info = await jobs.enable(context, "ping")
        try:
            await wow_host.wait_for(
                lambda host: any(r.header("command-aggregate-context") == context
                                 for r in host.requests),
                timeout=15,
            )
        finally:
            await client.get_workflow_handle(info.workflow_id).terminate("test over")
    request = next(
        r for r in wow_host.requests if r.header("command-aggregate-context") == context
    )
    got = request.header("traceparent")
    assert got is not None
    (tick,) = await eventually(
        lambda: [s for s in spans.get_finished_spans() if hex_span(s) == span_id(got)],
        within=5,
        what="the command's traceparent is a span",
    )
    assert tick.name == "wow.tick ping"
    assert hex_trace(tick) == trace_id(got)
    assert tick.attributes is not None
    assert tick.attributes["wow.job"] == "ping"
    assert tick.attributes["wow.commands"] == 1
    parents = [s for s in spans.get_finished_spans()
               if tick.parent is not None and s.context.span_id == tick.parent.span_id]
    assert [p.name for p in parents] == ["RunActivity:wow.tick"]


async def test_a_json_log_line_names_the_span_it_was_logged_in(
    spans: InMemorySpanExporter,
) -> None:
    import json
    import logging

    from wow_temporal.logs import JsonFormatter

    record = logging.makeLogRecord({"msg": "delivered", "levelno": 20, "levelname": "INFO"})
    assert "trace_id" not in json.loads(JsonFormatter().format(record))  # outside any span
    with trace.get_tracer("test").start_as_current_span("work") as span:
        line = json.loads(JsonFormatter().format(record))
    context = span.get_span_context()
    assert line["trace_id"] == f"{context.trace_id:032x}"
    assert line["span_id"] == f"{context.span_id:016x}"
