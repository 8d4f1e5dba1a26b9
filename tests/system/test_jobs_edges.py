"""Bad input at the job edges: `@on_schedule` and `App`, commands, the CLI, the settings and
signals of no such name.

Each is refused with a message naming what is wrong, and changes nothing.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from typer.testing import CliRunner

from wow_temporal import (
    App,
    Command,
    JobScope,
    NamedAggregate,
    SagaContext,
    ScheduleTick,
    on_schedule,
)
from wow_temporal.cli import app as cli
from wow_temporal.delivery import DeliveryOutcome, DeliveryRequest
from wow_temporal.dev.server import EmbeddedTemporal
from wow_temporal.domain.commands import command_type
from wow_temporal.ids import job_workflow_id
from wow_temporal.jobs import core as job_core
from wow_temporal.jobs.core import JobRule, JobState
from wow_temporal.jobs.workflow import DISABLE, ENABLE, JOB_WORKFLOW, RESCHEDULE, JobInput
from wow_temporal.worker import job_worker

runner = CliRunner()
REF = NamedAggregate("ctx", "thing").ref("t1", "1")


class Body(BaseModel):
    n: int = 0


class JavaNamed(BaseModel):
    __wow_type__ = "me.ahoo.eshop.Receive"
    n: int = 0


def test_a_commands_type_is_its_full_python_name_or_its_wow_type() -> None:
    assert command_type(Body()) == f"{__name__}.Body"
    assert command_type(JavaNamed) == "me.ahoo.eshop.Receive"
    context = SagaContext("ctx")
    command = context.command(REF, JavaNamed(n=2))
    assert (command.ref, command.body) == (REF, JavaNamed(n=2))
    assert command.type == "me.ahoo.eshop.Receive"
    assert command.scheduled().body == {"n": 2}
    with pytest.raises(TypeError, match="AggregateRef"):
        context.command("ctx.thing 1", Body())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="pydantic model"):
        context.command(REF, {"n": 1})  # type: ignore[type-var]


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        ({"name": "bad name!", "cron": "* * * * * *"}, "invalid job name 'bad name!'"),
        ({"name": "", "cron": "* * * * * *"}, "invalid job name"),
        ({"name": "x", "cron": "0 0 25 * * *"}, "job x: cron '0 0 25 * * *'"),
        ({"name": "x", "cron": "* * * * *"}, "job x: cron"),
        ({"name": "x", "cron": "* * * * * *", "zone": "Mars/Olympus"}, "job x:"),
        ({"name": "x", "cron": "* * * * * *", "zone": "localtime"}, "job x:"),
        ({"name": "x", "cron": "* * * * * *", "zone": "Factory"}, "job x:"),
        ({"name": "x", "cron": "* * * * * *", "misfire": "SOMETIMES"}, "job x:"),
        (
            {"name": "x", "cron": "* * * * * *", "scope": JobScope.TENANT, "sharded": True},
            "only a SYSTEM job can be sharded",
        ),
    ],
)
def test_a_bad_job_is_refused_at_the_decorator_naming_it(
    arguments: dict[str, Any], words: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(words)):
        on_schedule(**arguments)


def test_a_handler_that_does_not_take_tick_and_context_is_refused() -> None:
    with pytest.raises(ValueError, match="job lonely: the handler"):

        class Lonely:
            @on_schedule(name="lonely", cron="* * * * * *")
            def handle(self, tick: ScheduleTick) -> list[Command[Any]]:
                return []

    with pytest.raises(ValueError, match="job greedy"):

        class Greedy:
            @on_schedule(name="greedy", cron="* * * * * *")
            def handle(self, tick: ScheduleTick, context: SagaContext, more: int) -> list[Any]:
                return []


class One:
    @on_schedule(name="nightly", cron="0 0 1 * * *")
    def nightly(self, tick: ScheduleTick, context: SagaContext) -> list[Command[Any]]:
        return []


class Two:
    @on_schedule(name="nightly", cron="0 0 2 * * *")
    async def also_nightly(self, tick: ScheduleTick, context: SagaContext) -> list[Command[Any]]:
        return []


def test_the_app_refuses_duplicate_jobs_classes_and_bad_contexts() -> None:
    app = App("ctx", sagas=[One()])
    assert list(app.jobs) == ["nightly"] and app.job("nightly").processor == "One.nightly"
    with pytest.raises(ValueError, match="job nightly: declared twice in context ctx"):
        App("ctx", sagas=[One(), Two()])
    with pytest.raises(ValueError, match="sagas are instances: pass One"):
        App("ctx", sagas=[One])
    with pytest.raises(ValueError, match="invalid context name"):
        App("bad context", sagas=[One()])
    with pytest.raises(KeyError, match="no job daily in context ctx"):
        app.job("daily")
    assert App("ctx", sagas=[Two()]).job("nightly").is_async


def test_worker_app_references_are_checked_before_anything_starts() -> None:
    env = {"WOW_HOST_URL": "http://127.0.0.1:9", "WOW_CONFIG": ""}
    for reference, words in [
        ("nonsense", "give module:attr"),
        ("no_such_module_x:app", "cannot import no_such_module_x"),
        ("workers.eshop.inventory:nope", "has no nope"),
        ("workers.eshop.inventory:STOCK", "not an App"),
    ]:
        result = runner.invoke(cli, ["worker", "--app", reference], env=env)
        assert result.exit_code == 2, (reference, result.output)
        assert words in result.output, (reference, result.output)


def test_settings_for_a_job_the_app_does_not_have_are_refused(tmp_path: Path) -> None:
    config = tmp_path / "wow.yaml"
    config.write_text("wow:\n  schedules:\n    recieve-deliveries:\n      zone: UTC\n")
    env = {"WOW_HOST_URL": "http://127.0.0.1:9", "WOW_CONFIG": str(config)}
    result = runner.invoke(cli, ["worker", "--app", "workers.eshop.inventory:app"], env=env)
    assert result.exit_code == 2
    assert "wow.schedules.recieve-deliveries: no job recieve-deliveries" in result.output
    assert "receive-deliveries" in result.output  # the known one
    config.write_text("wow:\n  schedules:\n    receive-deliveries:\n      partitions: 3\n")
    result = runner.invoke(cli, ["worker", "--app", "workers.eshop.inventory:app"], env=env)
    assert result.exit_code == 2
    assert "not sharded" in result.output
    config.write_text("wow:\n  schedules:\n    receive-deliveries:\n      expresion: x\n")
    result = runner.invoke(cli, ["worker", "--app", "workers.eshop.inventory:app"], env=env)
    assert result.exit_code == 2
    assert "expresion" in result.output


def test_schedule_commands_refuse_bad_input_before_connecting() -> None:
    env = {"TEMPORAL_ADDRESS": "127.0.0.1:1", "WOW_CONFIG": ""}
    for arguments, words in [
        (["schedule", "enable", "ctx", "bad.name!"], "invalid job name"),
        (["schedule", "reschedule", "ctx", "job", "--expression", "0 0 25 * * *"], "hour"),
        (["schedule", "reschedule", "ctx", "job", "--zone", "Mars/Olympus"], "Mars/Olympus"),
        (["schedule", "reschedule", "ctx", "job", "--misfire", "SOMETIMES"], "misfire"),
        (["schedule", "reschedule", "ctx", "job"], "at least one"),
        (["schedule", "list", "--status", "Sleeping"], "use one of Enabled"),
    ]:
        result = runner.invoke(cli, arguments, env=env)
        assert result.exit_code == 2, (arguments, result.output)
        assert words in result.output, (arguments, result.output)


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


class _NoHost:
    """A sink for an instance that must not tick: any send fails the test."""

    async def send(self, request: DeliveryRequest) -> DeliveryOutcome:
        raise AssertionError(f"nothing should be sent, got {request.request_id}")


class _Hourly:
    """A SYSTEM job due every hour; the test instance never reaches its first due time."""

    def __init__(self, context: str) -> None:
        self.context = context

    @on_schedule(name="hourly", cron="0 0 * * * *")
    def hourly(self, tick: ScheduleTick, context: SagaContext) -> list[Command[Any]]:
        return []


@pytest.mark.asyncio(loop_scope="session")
async def test_an_unknown_signal_is_logged_and_shown_and_wakes_nothing(
    time_skipping_env: WorkflowEnvironment, caplog: pytest.LogCaptureFixture
) -> None:
    """`wow.schedule.bogus` sent to an instance: refused under its notices and in the log, the
    rule and slots unchanged, and no command after it (a history recorded before the handler
    existed, with the signal left unhandled, replays the same)."""
    client = time_skipping_env.client
    context = f"unknown-{uuid.uuid4().hex[:6]}"
    app = App(context, sagas=[_Hourly(context)])
    queue = f"{context}-jobs"
    workflow_id = job_workflow_id(context, "hourly")
    state = job_core.initial(context, "hourly", JobRule(expression="0 0 * * * *"))
    async with job_worker(client, app, _NoHost(), task_queue=queue):
        handle = await client.start_workflow(
            JOB_WORKFLOW,
            JobInput(state=state, enabled_at=await time_skipping_env.get_current_time()),
            id=workflow_id,
            task_queue=queue,
        )
        before = await handle.query("state", result_type=JobState)  # a task ran: it sleeps
        assert before.enabled and before.notices == ()
        with caplog.at_level(logging.WARNING, logger="temporalio.workflow"):
            await handle.signal("wow.schedule.bogus", {"expression": "* * * * * *"})
            after = await _state_when(handle, lambda s: s.notices != ())
        (notice,) = after.notices
        assert notice.startswith("wow.schedule.bogus signal refused: no such signal"), notice
        assert f"{ENABLE}, {DISABLE}, {RESCHEDULE}" in notice
        assert after.model_copy(update={"notices": ()}) == before, (before, after)
        assert after.cursor is not None
        assert f"notice: {notice}" in job_core.details(after, after.cursor)
        assert any("wow.schedule.bogus" in record.getMessage() for record in caplog.records)
        events = [event async for event in handle.fetch_history_events()]
        signalled = next(
            i for i, e in enumerate(events)
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
        )
        tasks = {
            EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
            EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
            EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
        }
        assert [e.event_type for e in events[signalled + 1 :]] and all(
            e.event_type in tasks for e in events[signalled + 1 :]
        ), [EventType.Name(e.event_type) for e in events[signalled + 1 :]]
        await handle.terminate("test over")


async def _state_when(
    handle: WorkflowHandle[Any, Any], ready: Callable[[JobState], bool]
) -> JobState:
    """Query the instance's state until `ready` (a signal is applied by a later task)."""
    for _ in range(200):
        state: JobState = await handle.query("state", result_type=JobState)
        if ready(state):
            return state
        await asyncio.sleep(0.05)
    raise AssertionError(f"never ready: {state}")
