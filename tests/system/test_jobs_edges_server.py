"""Bad input at the job edges, on the dev server: the schedule commands refuse a job that has no
instance, and create one with the app (the rest of the edges: tests/unit/test_jobs_edges.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest
from temporalio.client import Client

from wow_temporal.dev.server import EmbeddedTemporal


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wow_temporal.cli", *args],
        env={**os.environ, "WOW_CONFIG": "", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.asyncio(loop_scope="session")
async def test_schedule_commands_on_a_real_server(
    dev_server: EmbeddedTemporal, dev_client: Client
) -> None:
    env = {"TEMPORAL_ADDRESS": dev_server.address, "TEMPORAL_NAMESPACE": dev_server.namespace}
    context = f"cli-{uuid.uuid4().hex[:6]}"
    unknown = _cli("schedule", "disable", context, "nightly", env=env)
    assert unknown.returncode == 2
    assert f"no instance of job nightly in context {context}" in unknown.stderr
    shown = _cli("schedule", "show", context, "nightly", env=env)
    assert shown.returncode == 2 and "Traceback" not in shown.stderr
    # With the app, enable creates the instance (a worker is not needed to start it, but
    # to answer: with none, the change goes as a signal and says so).
    created = _cli(
        "schedule", "enable", "eshop-inventory", "receive-deliveries",
        "--app", "workers.eshop.inventory:app", env={**env, "WOW_CONFIG": ""},
    )
    assert created.returncode == 0, created.stderr
    assert "wow-job:eshop-inventory:receive-deliveries" in created.stdout
    await dev_client.get_workflow_handle("wow-job:eshop-inventory:receive-deliveries").terminate()
