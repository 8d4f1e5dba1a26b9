"""The worker's Prometheus endpoint (`wow.worker.metrics-port`): the SDK's metrics and
wow-temporal's (deliveries by outcome, lateness) from a real CLI worker on the dev server; and
`wow_deliveries_late`, the deliveries later than `wow.timers.poll-interval`, counted by the
delivery activity against a real HTTP host."""

from __future__ import annotations

import contextlib
import dataclasses
import re
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from temporalio.runtime import MetricBuffer, Runtime, TelemetryConfig
from temporalio.testing import ActivityEnvironment

from bench.harness.proc import CLI, Proc, answers, worker_env
from tests.helpers.builders import commit, fast_delivery, make_request
from tests.helpers.eventually import eventually
from tests.helpers.worker_process import WorkerProcess, on_the_session_loop
from wow_temporal.delivery import CommandSender, DeliveryActivities
from wow_temporal.dev.ports import free_port
from wow_temporal.dev.server import EmbeddedTemporal
from wow_temporal.testing.wow_host import FakeWowHost
from wow_temporal.timers.client import TimerClient
from wow_temporal.worker import PARKED_QUERIES, timer_worker


async def scrape(port: int) -> str:
    async with httpx.AsyncClient(timeout=5) as client:
        response = await client.get(f"http://127.0.0.1:{port}/metrics")
    response.raise_for_status()
    return response.text


async def scrape_until(port: int, name: str, **labels: str) -> str:
    """The metrics once `name`'s series with `labels` is at least 1: the exporter reads the
    meters as it is scraped."""
    text: str = await eventually(
        lambda: scrape(port),
        within=10,
        what=f"{name} {labels}",
        interval=0.2,
        holds=lambda text: series(text, name, **labels) >= 1,
    )
    return text


def series(text: str, name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels` (0 when none)."""
    total = 0.0
    for line in text.splitlines():
        match = re.match(rf"^{re.escape(name)}(\{{[^}}]*\}})?\s+(\S+)$", line)
        if match is None:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1) or ""))
        if all(found.get(key) == value for key, value in labels.items()):
            total += float(match.group(2))
    return total


@on_the_session_loop
async def test_the_worker_serves_its_deliveries_and_the_sdks_metrics(
    dev_server: EmbeddedTemporal, wow_host: FakeWowHost, tmp_path: Path
) -> None:
    port = free_port()
    worker = WorkerProcess(
        dev_server,
        wow_host.url,
        tmp_path / "worker.log",
        # A bound no real delivery meets: the first attempt is counted late.
        env={"WOW_WORKER_METRICS_PORT": str(port), "WOW_TIMERS_POLL_INTERVAL": "1ms"},
    )
    client = await dev_server.connect()
    data = commit(after=0.2)
    rid = f"{data['id']}:{data['body'][0]['id']}#1"
    wow_host.behave("fail", request_id=rid, times=1)  # one failed attempt, then Ok
    await worker.start()
    try:
        before = await scrape(port)
        assert series(before, "wow_deliveries_total", outcome="delivered") == 0
        await TimerClient(client).apply(data)
        await wow_host.wait_for(
            lambda host: [r.request_id for r in host.requests].count(rid) == 2, timeout=30
        )
        text = await scrape_until(port, "wow_deliveries_total", outcome="delivered")
    finally:
        await worker.stop()
    assert series(text, "wow_deliveries_total", outcome="delivered") == 1, text[-2000:]
    assert series(text, "wow_deliveries_total", outcome="failed") == 1
    assert series(text, "wow_delivery_lateness_count") == 1
    assert series(text, "wow_deliveries_late_total") == 1  # the first attempt, not the retry
    assert 'activity_type="wow.deliver"' in text or "activity_type=" in text
    assert "temporal_" in text  # the SDK's own metrics beside ours


@on_the_session_loop
async def test_the_worker_gauges_the_parked_timers(
    dev_server: EmbeddedTemporal, wow_host: FakeWowHost, tmp_path: Path
) -> None:
    client = await dev_server.connect()
    queue = f"parked-{uuid.uuid4().hex[:8]}"
    timers = TimerClient(client, task_queue=queue, delivery=fast_delivery(1))
    data = commit(after=0.1)
    wow_host.behave("fail", request_id=f"{data['id']}:{data['body'][0]['id']}#1")
    async with (
        CommandSender(wow_host.url) as sender,
        timer_worker(client, sender, task_queue=queue),
    ):
        await timers.apply(data)
        timer = f"wow-timer:eshop-order.order:t1:{data['aggregateId']}:payment-grace-period"

        async def parked() -> bool:
            return (await timers.show(timer)).status == "Parked"

        async def counted() -> bool:  # what the gauge counts: visibility, which lags a little
            return (await client.count_workflows(PARKED_QUERIES["timer"])).count >= 1

        await eventually(parked, within=20, what="the timer parked", interval=0.1)
        await eventually(counted, within=10, what="a parked timer counted", interval=0.1)

        port = free_port()
        worker = WorkerProcess(
            dev_server,
            wow_host.url,
            tmp_path / "worker.log",
            env={"WOW_WORKER_METRICS_PORT": str(port)},
        )
        await worker.start()
        try:
            # The first count is made as the worker starts, the timers' then the jobs'.
            text = await scrape_until(port, "wow_parked", kind="timer")
            text = await eventually(
                lambda: scrape(port),
                within=10,
                what="wow_parked of the jobs",
                interval=0.2,
                holds=lambda text: 'kind="job"' in text,
            )
        finally:
            await worker.stop()
        await client.get_workflow_handle(timer).terminate("test over")
    # Namespace-wide: other tests' parked timers count too, this one at least.
    assert series(text, "wow_parked", kind="timer") >= 1, text[-2000:]
    assert "wow_parked{" in text and 'kind="job"' in text


@on_the_session_loop
async def test_the_control_api_serves_the_commits_it_ingests(
    dev_server: EmbeddedTemporal, tmp_path: Path
) -> None:
    api_port, metrics_port = free_port(), free_port()
    env = worker_env(
        dev_server.address,
        dev_server.namespace,
        "",
        WOW_API_TOKEN="operator-secret",
        WOW_TIMERS_MAX_ATTEMPTS="1",
    )
    log = tmp_path / "api.log"
    health = answers(f"http://127.0.0.1:{api_port}/health")
    argv = [str(CLI), "api", "--port", str(api_port), "--metrics-port", str(metrics_port)]
    api = Proc("the API", argv, log, health, env=env)
    await api.start()
    data = commit(after=3600)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{api_port}", timeout=10) as http:
            answer = await http.post(
                "/commits", json=data, headers={"Authorization": "Bearer operator-secret"}
            )
            assert answer.status_code == 200, answer.text
        text = await scrape(metrics_port)
    finally:
        await api.stop()
        client = await dev_server.connect()
        timer = f"wow-timer:eshop-order.order:t1:{data['aggregateId']}:payment-grace-period"
        with contextlib.suppress(Exception):
            await client.get_workflow_handle(timer).terminate("test over")
    assert series(text, "wow_commits_ingested_total") == 1, text[-2000:]
    assert series(text, "wow_timer_changes_total", kind="set", outcome="started") == 1
    assert f"metrics on port {metrics_port}" in log.read_text()


@pytest.mark.parametrize(
    ("attempt", "started_after_due", "bound", "late", "retried"),
    [
        (1, timedelta(seconds=1.5), timedelta(seconds=1), 1, False),  # later than the bound
        (1, timedelta(seconds=0.5), timedelta(seconds=1), 0, False),  # within it
        (1, timedelta(seconds=1.5), timedelta(seconds=2), 0, False),  # the bound is the setting's
        (2, timedelta(seconds=30), timedelta(seconds=1), 0, False),  # a retry: the first counts
        (1, timedelta(seconds=30), None, 0, False),  # no bound given: nothing counted
        (1, timedelta(hours=2), timedelta(seconds=1), 0, True),  # an operator's retry of a park
    ],
)
@on_the_session_loop
async def test_a_delivery_whose_first_attempt_starts_later_than_the_bound_is_counted_late(
    wow_host: FakeWowHost,
    attempt: int,
    started_after_due: timedelta,
    bound: timedelta | None,
    late: int,
    retried: bool,
) -> None:
    buffer = MetricBuffer(1000)
    runtime = Runtime(telemetry=TelemetryConfig(metrics=buffer))
    request = make_request().model_copy(update={"retried": retried})
    due = datetime.fromtimestamp(request.schedule.due / 1000, UTC)
    env = ActivityEnvironment()
    env.metric_meter = runtime.metric_meter
    env.info = dataclasses.replace(env.info, attempt=attempt, started_time=due + started_after_due)
    async with CommandSender(wow_host.url) as sender:
        outcome = await env.run(DeliveryActivities(sender, late_after=bound).deliver, request)
    assert outcome.status == "delivered"
    updates = buffer.retrieve_updates()
    assert sum(u.value for u in updates if u.metric.name == "wow_deliveries") == 1  # read
    assert sum(u.value for u in updates if u.metric.name == "wow_deliveries_late") == late
