"""`wow-temporal timers check` on the dev server (issue #37): timers scheduled with a revision-1
body of a command whose app now reads revision 2 are listed, and the check exits 1, against the
build that forgot the upcaster; the build with it exits 0. Read-only, with no worker: a change
handed over to a running timer and not yet run is what the check judges."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from temporalio.client import Client

from tests.apps.notes import KEY, NOTE, REMIND
from tests.helpers.eventually import eventually
from wow_temporal.dev.server import EmbeddedTemporal
from wow_temporal.ids import timer_workflow_id
from wow_temporal.timers.client import TimerClient, TimerFilter

pytestmark = pytest.mark.timeout(30)


def remind_commit(tenant: str, note: str, version: int, command: dict[str, Any]) -> dict[str, Any]:
    """A note's commit that sets its reminder a day on, with `command`."""
    return {
        "id": f"c-{tenant}-{note}-{version}",
        "contextName": NOTE.context_name,
        "aggregateName": NOTE.aggregate_name,
        "tenantId": tenant,
        "aggregateId": note,
        "version": version,
        "createTime": int(datetime.now(UTC).timestamp() * 1000),
        "body": [
            {
                "id": "e-1",
                "name": "wow.ScheduleSet",
                "body": {"key": KEY, "rule": {"after": "P1D"}, "command": command},
            }
        ],
    }


def check(app: str, server: EmbeddedTemporal, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"TEMPORAL_ADDRESS": server.address, "TEMPORAL_NAMESPACE": server.namespace}
    return subprocess.run(
        [sys.executable, "-m", "wow_temporal.cli", "timers", "check", "--app", app, *args],
        env={**os.environ, "WOW_CONFIG": "", **env},
        capture_output=True,
        text=True,
        timeout=20,
    )


@pytest.mark.asyncio(loop_scope="session")
async def test_check_lists_what_a_build_without_the_upcaster_refuses(
    dev_server: EmbeddedTemporal, dev_client: Client
) -> None:
    tenant = f"t-check-{uuid.uuid4().hex[:8]}"
    timers = TimerClient(dev_client)
    old = {"type": REMIND, "body": {"text": "call back"}}  # revision 1: no revision
    for note in ("n-1", "n-2", "n-3"):
        await timers.apply(remind_commit(tenant, note, 1, old))
    # n-3's reminder is set again by the new build; the timer waits out its start delay, so
    # no worker has run it: the change handed over is what it will send.
    new = {"type": REMIND, "body": {"message": {"text": "call back"}}, "revision": "2"}
    await timers.apply(remind_commit(tenant, "n-3", 2, new))
    ids = [timer_workflow_id(NOTE.ref(tenant, note), KEY) for note in ("n-1", "n-2")]
    await eventually(
        lambda: timers.list(TimerFilter(tenant=tenant, running=True)),
        within=10,
        what="the timers listed",
        holds=lambda found: len(found) == 3,
        interval=0.1,
    )

    forgot = await asyncio.to_thread(
        check, "tests.apps.notes:notes_v2_without_upcaster", dev_server
    )
    assert forgot.returncode == 1, forgot.stderr
    mine = sorted(line for line in forgot.stdout.splitlines() if tenant in line)
    assert mine == [
        f"refused    {workflow_id}  notes.Remind revision 1: no upcaster reads it "
        "(the app reads revision 2)"
        for workflow_id in ids
    ]
    assert "refused" in forgot.stderr.splitlines()[-1]  # the summary

    as_json = await asyncio.to_thread(
        check, "tests.apps.notes:notes_v2_without_upcaster", dev_server, "--json"
    )
    assert as_json.returncode == 1, as_json.stderr
    found = [f for f in json.loads(as_json.stdout) if tenant in f["workflowId"]]
    assert sorted(f["workflowId"] for f in found) == ids
    assert {(f["outcome"], f["type"], f["revision"]) for f in found} == {
        ("refused", REMIND, None)
    }

    fixed = await asyncio.to_thread(check, "tests.apps.notes:notes_v2", dev_server)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert tenant not in fixed.stdout
    for workflow_id in ids:  # read-only: each still waits for its day
        assert (await timers.show(workflow_id)).status == "Scheduled"


def test_check_refuses_bad_input_and_an_unreachable_temporal_with_exit_2() -> None:
    env = {**os.environ, "TEMPORAL_ADDRESS": "127.0.0.1:1", "WOW_CONFIG": ""}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "wow_temporal.cli", "timers", "check", *args],
            env=env, capture_output=True, text=True, timeout=20,
        )

    bad_app = run("--app", "tests.apps.nowhere:apps")
    assert bad_app.returncode == 2
    assert bad_app.stderr.startswith("error: --app 'tests.apps.nowhere:apps': cannot import")
    unreachable = run("--app", "tests.apps.notes:notes_v2")
    assert unreachable.returncode == 2
    assert unreachable.stderr == (
        "error: cannot reach Temporal at 127.0.0.1:1 (namespace default): Connection refused\n"
    )
