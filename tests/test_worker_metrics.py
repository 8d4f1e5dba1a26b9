"""The worker's Prometheus endpoint (`wow.worker.metrics-port`): the SDK's metrics and
wow-temporal's (deliveries by outcome, lateness) from a real CLI worker on the dev server."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import httpx

from tests.recording_host import RecordingHost
from tests.test_worker_prod import commit, on_the_session_loop
from tests.worker_process import WorkerProcess
from wow_temporal.embedded import EmbeddedTemporal, free_port
from wow_temporal.timers.client import TimerClient


async def scrape(port: int) -> str:
    async with httpx.AsyncClient(timeout=5) as client:
        response = await client.get(f"http://127.0.0.1:{port}/metrics")
    response.raise_for_status()
    return response.text


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
    dev_server: EmbeddedTemporal, recording_host: RecordingHost, tmp_path: Path
) -> None:
    port = free_port()
    worker = WorkerProcess(
        dev_server, recording_host.url, tmp_path / "worker.log",
        env={"WOW_WORKER_METRICS_PORT": str(port)},
    )
    client = await dev_server.connect()
    data = commit(after=0.2)
    rid = f"{data['id']}:e1#1"
    recording_host.behave("fail", request_id=rid, times=1)  # one failed attempt, then Ok
    await worker.start()
    try:
        before = await scrape(port)
        assert series(before, "wow_deliveries_total", outcome="delivered") == 0
        await TimerClient(client).apply(data)
        await recording_host.wait_for(
            lambda host: [r.request_id for r in host.requests].count(rid) == 2, timeout=30
        )
        text = ""
        for _ in range(50):  # the exporter reads the meters as it is scraped
            text = await scrape(port)
            if series(text, "wow_deliveries_total", outcome="delivered") >= 1:
                break
            await asyncio.sleep(0.2)
    finally:
        await worker.stop()
    assert series(text, "wow_deliveries_total", outcome="delivered") == 1, text[-2000:]
    assert series(text, "wow_deliveries_total", outcome="failed") == 1
    assert series(text, "wow_delivery_lateness_count") == 1
    assert 'activity_type="wow.deliver"' in text or "activity_type=" in text
    assert "temporal_" in text  # the SDK's own metrics beside ours
