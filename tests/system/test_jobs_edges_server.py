"""The schedule commands on the dev server: they refuse a job that has no instance (saying what
creates one), create one with the app, show the rule's layers and what the instance's own hides,
and reset it (the rest of the edges: tests/unit/test_jobs_edges.py)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from typing import Any

import pytest
from temporalio.client import Client

from wow_temporal import App, Command, SagaContext, ScheduleTick, on_schedule
from wow_temporal.delivery import CommandSender
from wow_temporal.dev.server import EmbeddedTemporal
from wow_temporal.jobs.client import JobClient
from wow_temporal.jobs.core import HostRule, RuleLayer
from wow_temporal.worker import job_worker


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wow_temporal.cli", *args],
        env={**os.environ, "WOW_CONFIG": "", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


async def _acli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`_cli` in a thread: the worker in this event loop must answer meanwhile."""
    return await asyncio.to_thread(_cli, *args, env=env)


@pytest.mark.asyncio(loop_scope="session")
async def test_schedule_commands_on_a_real_server(
    dev_server: EmbeddedTemporal, dev_client: Client
) -> None:
    env = {"TEMPORAL_ADDRESS": dev_server.address, "TEMPORAL_NAMESPACE": dev_server.namespace}
    context = f"cli-{uuid.uuid4().hex[:6]}"
    unknown = _cli("schedule", "disable", context, "nightly", env=env)
    assert unknown.returncode == 2
    assert f"no instance of job nightly in context {context}" in unknown.stderr
    # `disable` has no --app: the error names what creates an instance, not "run it with --app".
    assert "run it with --app" not in unknown.stderr
    assert f"wow-temporal schedule enable {context} nightly --app module:attr" in unknown.stderr
    bare_enable = _cli("schedule", "enable", context, "nightly", env=env)
    assert bare_enable.returncode == 2
    assert "schedule enable --app module:attr" in bare_enable.stderr, bare_enable.stderr
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


class _Morning:
    """A SYSTEM job due at 06:00 (never reached in the test)."""

    @on_schedule(name="morning", cron="0 0 6 * * *")
    def morning(self, tick: ScheduleTick, context: SagaContext) -> list[Command[Any]]:
        return []


@pytest.mark.asyncio(loop_scope="session")
async def test_schedule_show_says_what_the_operators_rule_hides_and_reset_removes_it(
    dev_server: EmbeddedTemporal, dev_client: Client
) -> None:
    """The demo's trap: an operator pins 06:00, the host then says 07:00. `schedule show`
    (text and JSON) gives the layers and a line saying the host's is overridden; `schedule
    reset` brings it back; a reset with nothing to remove exits 0; a misfire in any case."""
    env = {"TEMPORAL_ADDRESS": dev_server.address, "TEMPORAL_NAMESPACE": dev_server.namespace}
    context = f"reset-{uuid.uuid4().hex[:6]}"
    app = App(context, sagas=[_Morning()])
    rules = {"morning": HostRule(layer=RuleLayer(expression="0 0 7 * * *"))}
    async with (
        CommandSender("http://127.0.0.1:9") as sender,
        job_worker(dev_client, app, sender, host=rules),
    ):
        await JobClient(dev_client, app, host_rules=rules).bring_to_settings(app)
        try:
            pinned = await _acli(
                "schedule", "reschedule", context, "morning", "--expression", "0 0 6 * * *",
                "--misfire", "catch_up", env=env,
            )
            assert pinned.returncode == 0, pinned.stderr
            shown = await _acli("schedule", "show", context, "morning", env=env)
            assert shown.returncode == 0, shown.stderr
            lines = shown.stdout.splitlines()
            assert "  rule      0 0 6 * * * (operator), zone UTC (code), misfire CATCH_UP " \
                "(operator)" in lines, shown.stdout
            assert "  layers    code 0 0 6 * * * UTC COALESCE < host expression 0 0 7 * * * " \
                "< operator expression 0 0 6 * * *, misfire CATCH_UP" in lines, shown.stdout
            assert "  shadowed  host says 0 0 7 * * *, overridden by operator's 0 0 6 * * *; " \
                "`schedule reset` (or `--field expression`) to follow the host" in lines
            as_json = json.loads(
                (await _acli("schedule", "show", context, "morning", "--json", env=env)).stdout
            )
            assert as_json["workflowId"] == f"wow-job:{context}:morning"
            assert as_json["own"]["expression"] == "0 0 6 * * *"
            assert as_json["host"]["expression"] == "0 0 7 * * *"
            assert len(as_json["shadowed"]) == 1 and as_json["nextDue"]

            some = await _acli("schedule", "reset", context, "morning", "--field", "misfire",
                        "--json", env=env)
            assert some.returncode == 0, some.stderr
            assert json.loads(some.stdout)["sources"]["misfire"] == "code"
            reset = await _acli("schedule", "reset", context, "morning", env=env)
            assert reset.returncode == 0, reset.stderr
            assert "  rule      0 0 7 * * * (host), zone UTC (code), misfire COALESCE (code)" in (
                reset.stdout.splitlines()
            ), reset.stdout
            assert "shadowed" not in reset.stdout
            again = await _acli("schedule", "reset", context, "morning", "--field", "zone", env=env)
            assert again.returncode == 0 and "0 0 7 * * * (host)" in again.stdout, again.stderr
            retry = await _acli("schedule", "retry", context, "morning", env=env)
            assert retry.returncode != 0 and "only a parked instance" in retry.stderr
        finally:
            await dev_client.get_workflow_handle(f"wow-job:{context}:morning").terminate()
