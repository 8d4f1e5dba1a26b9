"""Bad input at the job edges: `@on_schedule` and `App`, commands, the CLI and the settings
(the schedule commands on a real server are in tests/system/test_jobs_edges_server.py, signals of
no such name in tests/workflow/test_jobs_edges_signals.py).

Each is refused with a message naming what is wrong, and changes nothing.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
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
from wow_temporal.domain.commands import command_type

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
        ({"name": "x", "cron": "0 0 0 30 2 *"}, "job x: cron '0 0 0 30 2 *' never fires"),
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
    config.write_text(
        "wow:\n  schedules:\n    receive-deliveries:\n      expression: 0 0 0 30 2 *\n"
    )
    result = runner.invoke(cli, ["worker", "--app", "workers.eshop.inventory:app"], env=env)
    assert result.exit_code == 2
    assert "wow.schedules.receive-deliveries.expression: cron '0 0 0 30 2 *' never fires" in (
        result.output
    )


def test_schedule_commands_refuse_bad_input_before_connecting() -> None:
    env = {"TEMPORAL_ADDRESS": "127.0.0.1:1", "WOW_CONFIG": ""}
    for arguments, words in [
        (["schedule", "enable", "ctx", "bad.name!"], "invalid job name"),
        (["schedule", "reschedule", "ctx", "job", "--expression", "0 0 25 * * *"], "hour"),
        (["schedule", "reschedule", "ctx", "job", "--zone", "Mars/Olympus"], "Mars/Olympus"),
        (["schedule", "reschedule", "ctx", "job", "--misfire", "SOMETIMES"], "misfire"),
        (["schedule", "reschedule", "ctx", "job"], "at least one"),
        (["schedule", "reschedule", "ctx", "job", "--expression", "0 0 0 30 2 *"], "never fires"),
        (["schedule", "reset", "ctx", "job", "--field", "expresion"], "--field 'expresion'"),
        (["schedule", "reset", "ctx", "bad.name!"], "invalid job name"),
        (["schedule", "list", "--status", "Sleeping"], "use one of Enabled"),
    ]:
        result = runner.invoke(cli, arguments, env=env)
        assert result.exit_code == 2, (arguments, result.output)
        assert words in result.output, (arguments, result.output)
