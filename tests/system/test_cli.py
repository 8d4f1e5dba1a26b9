"""The command line: bad input exits 2 with a message and changes nothing; an unreachable
Temporal or a port in use exits 1 with one line; the commands that talk to Temporal run against
the session's dev server; logs are plain, one line per record."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.request
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode
from typer.testing import CliRunner

from tests.helpers.builders import fast_delivery
from tests.helpers.eventually import eventually
from wow_temporal.cli import CLOSED_STDOUT_EXIT, app
from wow_temporal.cli.timers import LIST_HEADER
from wow_temporal.delivery import CommandSender
from wow_temporal.dev.ports import free_port
from wow_temporal.dev.server import EmbeddedTemporal
from wow_temporal.logs import LOG_FORMAT, JsonFormatter, OneLineFormatter
from wow_temporal.model import Commit
from wow_temporal.testing.wow_host import FakeWowHost
from wow_temporal.timers.client import TimerClient
from wow_temporal.worker import timer_worker

WOW_TEMPORAL = Path(sys.executable).parent / "wow-temporal"
"""The console script as installed, as a user runs it."""

runner = CliRunner()


def test_cron_prints_the_next_fire_times_in_the_zone() -> None:
    result = runner.invoke(
        app,
        [
            "cron",
            "0 0 6 * * *",
            "--zone",
            "Europe/Amsterdam",
            "--from",
            "2026-03-28T00:00:00Z",
            "--count",
            "3",
        ],
    )
    assert result.exit_code == 0, result.output
    assert result.output.split() == [
        "2026-03-28T06:00:00.000+01:00",
        "2026-03-29T06:00:00.000+02:00",
        "2026-03-30T06:00:00.000+02:00",
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["cron", "0 0 25 * * *"], "hour: value 25 is out of range 0-23"),
        (["cron", "0 0 6 * *"], "6"),
        (["cron", "0 0 6 * * *", "--zone", "Mars/Base"], "unknown time zone 'Mars/Base'"),
        (["cron", "0 0 6 * * *", "--from", "yesterday"], "--from: not an ISO-8601 instant"),
    ],
)
def test_cron_refuses_bad_input_with_exit_2(args: list[str], message: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert message in result.output


@pytest.mark.parametrize("expression", ["0 0 0 31 6 *", "0 0 0 30 2 *"])
def test_cron_that_never_fires_is_bad_input_exit_2_with_one_error_line(expression: str) -> None:
    """Issue #38: it exited 1 with no `error:` line; a rule of it is refused, so it is too."""
    result = runner.invoke(app, ["cron", expression])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"error: cron {expression!r} never fires: no time ever matches it (no date of the "
        "calendar has its day-of-month, month and day-of-week), so it would never be due"
    ]


@pytest.mark.parametrize(
    "args",
    [
        ["--from", "0001-01-01T00:00Z", "--zone", "America/New_York"],
        ["--from", "9999-12-31T00:00Z"],
        ["--from", "1969-12-31T23:59:59Z"],
    ],
)
def test_cron_from_outside_the_range_of_instants_is_one_error_line_exit_2(
    args: list[str],
) -> None:
    """Issue #38: `--from 0001-01-01T00:00Z --zone America/New_York` crashed with a traceback."""
    result = runner.invoke(app, ["cron", "0 0 6 * * *", *args])
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "error: --from is between 1970-01-01T00:00:00.000Z and 9999-12-30T00:00:00.000Z, "
        f"got {args[1]!r}"
    ]


def test_cron_near_the_end_of_the_calendar_prints_the_times_left_and_says_so() -> None:
    """Issue #38: `--from 9999-12-30T00:00Z` crashed with an OverflowError's traceback; the
    times that exist are printed, and stderr says the calendar ends (exit 0: nothing wrong)."""
    result = runner.invoke(app, ["cron", "0 0 6 * * *", "--from", "9999-12-30T00:00Z"])
    assert result.exit_code == 0, result.output
    assert result.stdout.split() == ["9999-12-30T06:00:00.000Z", "9999-12-31T06:00:00.000Z"]
    assert result.stderr.splitlines() == [
        "no more fire times before the end of the calendar (9999) (2 of 5 shown)"
    ]


def test_apply_refuses_an_invalid_commit_before_connecting(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {
                "id": "c",
                "contextName": "x",
                "aggregateName": "y",
                "tenantId": "t",
                "aggregateId": "1",
                "version": 1,
                "createTime": 1796000000000,
                "body": [{"id": "e", "name": "wow.ScheduleFoo", "body": {}}],
            }
        )
    )
    result = runner.invoke(app, ["apply", str(bad)], env={"TEMPORAL_ADDRESS": "127.0.0.1:1"})
    assert result.exit_code == 2
    assert "unknown system event 'wow.ScheduleFoo'" in result.output


def test_invalid_settings_fail_at_start_naming_the_key() -> None:
    result = runner.invoke(app, ["timers", "list"], env={"WOW_TIMERS_MAX_ATTEMPTS": "0"})
    assert result.exit_code == 2
    assert "WOW_TIMERS_MAX_ATTEMPTS" in result.output


def test_worker_needs_the_host_url() -> None:
    result = runner.invoke(app, ["worker"], env={"WOW_HOST_URL": ""})
    assert result.exit_code == 2
    assert "WOW_HOST_URL" in result.output


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wow_temporal.cli", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def _grace_commit(aggregate_id: str, after: str, command_type: str) -> dict[str, Any]:
    """Commit `c-{aggregate_id}` of tenant t-cli, its event `e-1` setting timer `grace`."""
    command = {"type": command_type, "body": {}}
    return {
        "id": f"c-{aggregate_id}",
        "contextName": "eshop-order",
        "aggregateName": "order",
        "tenantId": "t-cli",
        "aggregateId": aggregate_id,
        "version": 1,
        "createTime": int(datetime.now(UTC).timestamp() * 1000),
        "body": [
            {
                "id": "e-1",
                "name": "wow.ScheduleSet",
                "body": {"key": "grace", "rule": {"after": after}, "command": command},
            }
        ],
    }


@pytest.mark.asyncio(loop_scope="session")
async def test_apply_refuses_a_bad_commit_in_one_line_and_applies_none_of_the_files(
    dev_server: EmbeddedTemporal, dev_client: Client, tmp_path: Path
) -> None:
    """Schedule events sharing an id (their commands would share a request id), and an id
    Temporal could hold but no listing find: each refused before anything is applied."""
    env = {"TEMPORAL_ADDRESS": dev_server.address, "TEMPORAL_NAMESPACE": dev_server.namespace}
    good_id, twins_id = uuid.uuid4().hex[:8], uuid.uuid4().hex[:8]
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_grace_commit(good_id, "P1D", "eshop.order.CancelOrder")))
    twins = _grace_commit(twins_id, "P1D", "eshop.order.CancelOrder")
    twins["body"].append({**twins["body"][0], "body": {**twins["body"][0]["body"], "key": "b"}})
    control = {**_grace_commit(twins_id, "P1D", "eshop.order.CancelOrder"), "tenantId": "t\x7f"}
    for bad, says in (
        (twins, f"commit 'c-{twins_id}': event id 'e-1' is given to 2 schedule events"),
        (control, "tenantId 't\\x7f' has a control character"),
    ):
        path = tmp_path / "bad.json"
        path.write_text(json.dumps(bad))
        refused = await asyncio.to_thread(_cli, "apply", str(good), str(path), env=env)
        assert refused.returncode == 2, refused.stdout
        assert refused.stdout == ""
        (line,) = refused.stderr.splitlines()
        assert line.startswith(f"error: {path}: "), line
        assert says in line, line
    for workflow_id in (
        f"wow-timer:eshop-order.order:t-cli:{good_id}:grace",
        f"wow-timer:eshop-order.order:t-cli:{twins_id}:grace",
        f"wow-timer:eshop-order.order:t\x7f:{twins_id}:grace",
    ):
        with pytest.raises(RPCError) as caught:
            await dev_client.get_workflow_handle(workflow_id).describe()
        assert caught.value.status == RPCStatusCode.NOT_FOUND, workflow_id


@pytest.mark.asyncio(loop_scope="session")
async def test_setup_apply_list_show_cancel_on_a_real_server(
    dev_server: EmbeddedTemporal, dev_client: Client, wow_host: FakeWowHost, tmp_path: Path
) -> None:
    env = {"TEMPORAL_ADDRESS": dev_server.address, "TEMPORAL_NAMESPACE": dev_server.namespace}
    setup = _cli("setup", env=env)
    assert setup.returncode == 0, setup.stderr
    assert "already there" in setup.stdout  # the dev server registered them at start

    aggregate_id = uuid.uuid4().hex[:8]
    commit = _grace_commit(aggregate_id, "P1D", "eshop.order.CancelOrder")
    path = tmp_path / "commit.json"
    path.write_text(json.dumps(commit))
    applied = _cli("apply", str(path), env=env)
    assert applied.returncode == 0, applied.stderr
    workflow_id = f"wow-timer:eshop-order.order:t-cli:{aggregate_id}:grace"
    assert f"started   set    {workflow_id}" in applied.stdout

    def listed() -> list[dict[str, Any]]:  # visibility is eventually consistent
        done = _cli("timers", "list", "--aggregate-id", aggregate_id, "--json", env=env)
        assert done.returncode == 0, done.stderr
        page: dict[str, Any] = json.loads(done.stdout)  # the answer of GET /timers
        assert page["truncated"] is False
        found: list[dict[str, Any]] = page["items"]
        return found

    (info,) = await eventually(listed, within=60, what="the timer listed")
    assert info["workflowId"] == workflow_id
    assert info["aggregateId"] == aggregate_id
    assert info["status"] == "Scheduled"
    assert info["tenant"] == "t-cli"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", info["due"])

    text = _cli("timers", "list", "--aggregate-id", aggregate_id, env=env)
    assert text.stdout.splitlines() == [
        LIST_HEADER,
        f"{'Scheduled':<10} {'due ' + info['due']:<30} {workflow_id}",
    ]

    shown = _cli("timers", "show", workflow_id, "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["state"]["spec"]["key"] == "grace"
    said = _cli("timers", "show", workflow_id, env=env)
    assert said.returncode == 0, said.stderr
    assert said.stdout.splitlines()[:8] == [
        f"{workflow_id}: Scheduled",
        f"  aggregate   eshop-order.order {aggregate_id}, tenant t-cli",
        "  key         grace",
        f"  command     eshop.order.CancelOrder → eshop-order.order {aggregate_id}",
        "  rule        after PT24H",
        f"  set by      commit c-{aggregate_id}",
        f"  due         {info['due']}",
        "  delivered   0 command(s) the host decided Ok",
    ]
    assert "  applied     commit version 1, schedule event 0" in said.stdout

    retried = _cli("timers", "retry", workflow_id, env=env)
    assert retried.returncode == 2
    assert "only a parked timer can be retried" in retried.stderr
    assert "is Scheduled" in retried.stderr

    async with timer_worker(dev_client, CommandSender(wow_host.url)):  # the default queue
        cancelled = await asyncio.to_thread(_cli, "timers", "cancel", workflow_id, env=env)
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stdout.strip() == f"{workflow_id}: Cancelled"
    assert wow_host.requests == []

    def ended() -> list[str]:  # an ended timer shows when it ended, not its past due time
        done = _cli("timers", "list", "--aggregate-id", aggregate_id, env=env)
        return done.stdout.splitlines()[1:]

    (line,) = await eventually(
        ended,
        within=60,
        what="the cancelled timer listed as ended",
        holds=lambda lines: lines[:1] != [] and "Cancelled" in lines[0],
    )
    assert line.split()[:2] == ["Cancelled", "ended"]
    assert info["due"] not in line

    missing = _cli("timers", "show", "wow-timer:nope.x:t:1:k", env=env)
    assert missing.returncode == 2
    assert "no timer" in missing.stderr
    malformed = _cli("timers", "show", "wow-timer:nope:t:1:k", env=env)
    assert malformed.returncode == 2
    assert "not a timer id" in malformed.stderr


def _console(
    *args: str, env: dict[str, str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run the installed `wow-temporal` console script."""
    return subprocess.run(
        [str(WOW_TEMPORAL), *args],
        env={**os.environ, "WOW_CONFIG": "", **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _assert_one_error_line(result: subprocess.CompletedProcess[str], line: str) -> None:
    """Exit 1, nothing on stdout, exactly `line` on stderr: no traceback, no colour codes."""
    assert "Traceback" not in result.stderr
    assert "\x1b[" not in result.stderr
    assert result.stderr == line + "\n", result.stderr
    assert result.stdout == ""
    assert result.returncode == 1


@pytest.mark.parametrize("verb", ["show", "retry", "cancel"])
@pytest.mark.parametrize(
    ("workflow_id", "said"),
    [
        ("not-a-timer", "error: not a timer id: 'not-a-timer' (timer ids start with 'wow-timer:')"),
        ("wow-timer:a.b:t:1:k\x01", "error: not a timer id: 'wow-timer:a.b:t:1:k\\x01' (a "
         "control character)"),
    ],
)
def test_a_malformed_timer_id_is_bad_input_before_temporal_is_reached(
    verb: str, workflow_id: str, said: str
) -> None:
    """Issue #38: it was `cannot reach Temporal` (exit 1) with Temporal away, though the id
    alone is wrong (exit 2), as the API answers it 400 before asking Temporal."""
    result = _console("timers", verb, workflow_id, env={"TEMPORAL_ADDRESS": "127.0.0.1:1"})
    assert (result.returncode, result.stdout, result.stderr) == (2, "", said + "\n")


_COMMIT = {
    "id": "c-unreachable",
    "contextName": "eshop-order",
    "aggregateName": "order",
    "tenantId": "t1",
    "aggregateId": "1",
    "version": 1,
    "createTime": 1796000000000,
    "body": [{"id": "e", "name": "wow.ScheduleCancelled", "body": {"key": "k"}}],
}


@pytest.mark.parametrize(
    "args",
    [  # not `worker`: it stays up, unready, and retries (tests/system/test_worker_prod.py)
        ["api", "--port", "{port}"],
        ["setup"],
        ["apply", "{commit}"],
        ["timers", "list"],
        ["timers", "show", "wow-timer:a.b:t:1:k"],
        ["timers", "retry", "wow-timer:a.b:t:1:k"],
        ["timers", "cancel", "wow-timer:a.b:t:1:k"],
    ],
    ids=lambda args: " ".join(a for a in args if not a.startswith(("{", "wow-timer"))),
)
def test_an_unreachable_temporal_is_one_line_and_exit_1(args: list[str], tmp_path: Path) -> None:
    commit = tmp_path / "commit.json"
    commit.write_text(json.dumps(_COMMIT))
    argv = [a.format(port=free_port(), commit=commit) for a in args]
    env = {"TEMPORAL_ADDRESS": "127.0.0.1:1", "WOW_HOST_URL": "http://127.0.0.1:9"}
    result = _console(*argv, env=env)
    _assert_one_error_line(
        result,
        "error: cannot reach Temporal at 127.0.0.1:1 (namespace default): Connection refused",
    )


def test_dev_defaults_to_the_documented_ports_even_when_they_are_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: dict[str, Any] = {}

    def fake_dev_main(data_dir: Path, **kwargs: Any) -> None:
        seen.update(kwargs, data_dir=data_dir)

    monkeypatch.setattr("wow_temporal.dev.stack.dev_main", fake_dev_main)
    monkeypatch.setattr("wow_temporal.dev.ports.port_is_free", lambda *a, **k: False)
    # In process: leave the pytest process's default Temporal runtime as it is.
    monkeypatch.setattr("wow_temporal.logs.configure_temporal_runtime", lambda: None)
    unset = dict.fromkeys(
        ["WOW_API_PORT", "WOW_CONFIG", "WOW_WORKER_METRICS_PORT", "WOW_DEV_TEMPORAL_PORT",
         "WOW_DEV_UI_PORT", "WOW_DEV_HOST_PORT", "WOW_HOST_URL"]
    )
    result = runner.invoke(app, ["dev"], env=unset)
    assert result.exit_code == 0, result.output
    # Passed on as asked: EmbeddedTemporal and the API use them or refuse, never swap them.
    assert (seen["port"], seen["ui_port"]) == (7233, 8233)
    assert seen["services"][0].port == 8089
    assert [getattr(s, "port", None) for s in seen["services"]][-1] == 8088
    assert seen["metrics_url"] == "http://127.0.0.1:9464/metrics"
    assert seen["data_dir"] == Path(".wow-temporal")


def test_dev_takes_every_port_from_a_flag_or_its_setting_and_0_is_any_free_port(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: dict[str, Any] = {}

    def fake_dev_main(data_dir: Path, **kwargs: Any) -> None:
        seen.update(kwargs)

    monkeypatch.setattr("wow_temporal.dev.stack.dev_main", fake_dev_main)
    monkeypatch.setattr("wow_temporal.logs.configure_temporal_runtime", lambda: None)
    env = {
        "WOW_CONFIG": None, "WOW_HOST_URL": None, "WOW_DEV_TEMPORAL_PORT": "17001",
        "WOW_DEV_UI_PORT": "17002", "WOW_DEV_HOST_PORT": "0", "WOW_API_PORT": "0",
        "WOW_WORKER_METRICS_PORT": "0",
    }
    by_settings = runner.invoke(app, ["dev"], env=env)
    assert by_settings.exit_code == 0, by_settings.output
    assert (seen["port"], seen["ui_port"]) == (17001, 17002)
    host, api = seen["services"][0].port, seen["services"][-1].port
    metrics = int(seen["metrics_url"].rsplit(":", 1)[1].split("/")[0])
    assert len({host, api, metrics}) == 3 and 0 not in {host, api, metrics}  # picked, distinct
    flags = ["--temporal-port", "0", "--ui-port", "0", "--host-port", "17003",
             "--api-port", "17004", "--metrics-port", "17005"]
    by_flags = runner.invoke(app, ["dev", *flags], env=env)
    assert by_flags.exit_code == 0, by_flags.output
    assert (seen["port"], seen["ui_port"]) == (None, None)  # the server picks them on start
    assert (seen["services"][0].port, seen["services"][-1].port) == (17003, 17004)
    assert seen["metrics_url"] == "http://127.0.0.1:17005/metrics"
    old_name = runner.invoke(app, ["dev", "--port", "17006"], env=env)
    assert old_name.exit_code == 0, old_name.output
    assert seen["port"] == 17006


def test_dev_refuses_two_flags_asking_for_one_port() -> None:
    result = _console("dev", "--ui-port", "17010", "--api-port", "17010", env={})
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        "error: --ui-port (Temporal Web UI) and --api-port (control API) both ask for port "
        "17010; give one of them another (0: any free port)\n"
    )


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (
            ["--temporal-port", "{taken}", "--headless"],
            {},
            "Temporal gRPC port {taken} on 127.0.0.1 is already in use; free it or choose "
            "another with --temporal-port or WOW_DEV_TEMPORAL_PORT (0: any free port)",
        ),
        (
            ["--ui-port", "{taken}"],
            {},
            "Temporal Web UI port {taken} on 127.0.0.1 is already in use; free it or choose "
            "another with --ui-port or WOW_DEV_UI_PORT (0: any free port), or --headless",
        ),
        (
            ["--headless"],
            {"WOW_DEV_HOST_PORT": "{taken}"},
            "domain host port {taken} on 127.0.0.1 is already in use; free it or choose "
            "another with --host-port or WOW_DEV_HOST_PORT (0: any free port)",
        ),
        (
            ["--headless"],
            {"WOW_API_PORT": "{taken}"},
            "control API port {taken} on 127.0.0.1 is already in use; free it or choose "
            "another with --api-port or WOW_API_PORT (0: any free port)",
        ),
        (
            ["--headless", "--metrics-port", "{taken}"],
            {},
            "metrics port {taken} on 127.0.0.1 is already in use; free it or choose "
            "another with --metrics-port or WOW_WORKER_METRICS_PORT (0: any free port)",
        ),
    ],
    ids=["grpc", "web-ui", "domain-host", "control-api", "metrics"],
)
def test_dev_refuses_a_port_in_use_and_starts_nothing(
    tmp_path: Path, args: list[str], env: dict[str, str], message: str
) -> None:
    """Every port is checked before anything starts: the second stack on a port says which
    and how to choose another, and no Temporal server was spawned."""
    with socket.create_server(("127.0.0.1", free_port())) as listener:
        taken = str(listener.getsockname()[1])
        argv = ["dev", "--data-dir", str(tmp_path), *(a.format(taken=taken) for a in args)]
        everything_free = {  # but the one taken
            "WOW_DEV_TEMPORAL_PORT": "0", "WOW_DEV_UI_PORT": "0", "WOW_DEV_HOST_PORT": "0",
            "WOW_API_PORT": "0", "WOW_WORKER_METRICS_PORT": "0", "WOW_HOST_URL": "",
        }
        mine = {k: v.format(taken=taken) for k, v in env.items()}
        result = _console(*argv, env={**everything_free, **mine})
    _assert_one_error_line(result, "error: " + message.format(taken=taken))
    assert not (tmp_path / "temporal.log").exists()  # no server was spawned


def test_api_refuses_a_port_in_use_before_connecting() -> None:
    with socket.create_server(("127.0.0.1", free_port())) as listener:
        port = listener.getsockname()[1]
        result = _console("api", "--port", str(port), env={"TEMPORAL_ADDRESS": "127.0.0.1:1"})
    _assert_one_error_line(
        result,
        f"error: control API port {port} on 127.0.0.1 is already in use; free it or choose "
        "another with --port or WOW_API_PORT (0: any free port)",
    )


def test_api_on_port_0_serves_on_a_free_port_and_logs_which(dev_server: EmbeddedTemporal) -> None:
    """`--port 0` and `WOW_API_PORT=0` mean any free port, as for `dev` (the flag fell back to
    the setting's port, and the variable was refused)."""
    env = {
        **os.environ, "WOW_CONFIG": "", "TEMPORAL_ADDRESS": dev_server.address,
        "TEMPORAL_NAMESPACE": dev_server.namespace,
    }
    for args, extra in ((["--port", "0"], {}), ([], {"WOW_API_PORT": "0"})):
        proc = subprocess.Popen(
            [str(WOW_TEMPORAL), "api", *args], env={**env, **extra},
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        try:
            assert proc.stderr is not None
            serving = ""
            while "control API on http://127.0.0.1:" not in serving:
                serving = proc.stderr.readline()
                assert serving, "the API exited"
            port = int(serving.split("http://127.0.0.1:", 1)[1].split()[0])
            assert port not in (0, 8088)

            def answers(port: int = port) -> bool:  # logged as it starts listening
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                        return bool(r.status == 200)
                except OSError:
                    return False

            asyncio.run(eventually(answers, within=30, what="the API answers"))
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def test_demo_finds_the_dev_stack_on_its_port_settings() -> None:
    """The demo's URLs default to the ports `dev` reads (WOW_DEV_HOST_PORT, WOW_API_PORT,
    WOW_DEV_UI_PORT); a 0 there is any free port, which only `dev` knows: exit 2, saying so."""
    port = free_port()  # nothing listens there
    moved = _console("demo", env={"WOW_DEV_HOST_PORT": str(port)})
    _assert_one_error_line(
        moved, f"error: no domain host at http://127.0.0.1:{port}: start the dev stack first "
        "(./run dev)"
    )
    anywhere = _console("demo", env={"WOW_API_PORT": "0"})
    assert anywhere.returncode == 2, anywhere.stderr
    assert anywhere.stderr == (
        "error: --api-url: WOW_API_PORT is 0 (any free port); give the URL `wow-temporal dev` "
        "printed\n"
    )


def test_log_records_are_one_plain_line() -> None:
    formatter = OneLineFormatter(LOG_FORMAT)
    try:
        raise ValueError("bad\nvalue")
    except ValueError:
        record = logging.LogRecord(
            "temporalio.core",
            logging.WARNING,
            "x",
            1,
            "\x1b[33mretried\x1b[0m\nagain",
            (),
            sys.exc_info(),
        )
    line = formatter.format(record)
    assert "\n" not in line
    assert "\x1b" not in line
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} WARNING temporalio\.core: retried \| again \| "
        r"Traceback \(most recent call last\):.* \| ValueError: bad \| value",
        line,
    ), line


def test_json_log_records_are_one_object_per_line_with_their_extra_fields() -> None:
    formatter = JsonFormatter()
    try:
        raise ValueError("bad\nvalue")
    except ValueError:
        record = logging.LogRecord(
            "wow_temporal.delivery",
            logging.WARNING,
            "x",
            1,
            "sent %s\nagain",
            ("t#1",),
            sys.exc_info(),
        )
    record.timer = "wow-timer:a.b:t:1:k"
    record.slot = 3
    record.opaque = object()
    line = formatter.format(record)
    assert "\n" not in line
    entry = json.loads(line)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", entry.pop("time"))
    assert entry.pop("exception").endswith("ValueError: bad\nvalue")
    assert entry.pop("opaque").startswith("<object object at")
    assert entry == {
        "level": "WARNING",
        "logger": "wow_temporal.delivery",
        "message": "sent t#1\nagain",
        "timer": "wow-timer:a.b:t:1:k",
        "slot": 3,
    }


_RECORD = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (INFO|WARNING|ERROR) [\w.]+: .+")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux /proc")
async def test_core_retry_warnings_are_plain_log_lines(tmp_path: Path) -> None:
    # The SDK's Rust core warns about retried gRPC calls; unconfigured, it prints them in ANSI
    # colours (on stdout). A worker whose server dies retries its polls: watch its output.
    server = EmbeddedTemporal(tmp_path / "temporal", headless=True)
    await server.start()
    out_path, err_path = tmp_path / "worker.out", tmp_path / "worker.err"

    def output() -> str:
        return out_path.read_text() + err_path.read_text()

    with out_path.open("w") as stdout, err_path.open("w") as stderr:
        worker = await asyncio.create_subprocess_exec(
            str(WOW_TEMPORAL),
            "worker",
            env={
                **os.environ,
                "WOW_CONFIG": "",
                "TEMPORAL_ADDRESS": server.address,
                "WOW_HOST_URL": "http://127.0.0.1:9",
                "WOW_WORKER_HEALTH_PORT": "0",  # not the defaults: another run may hold them
                "WOW_WORKER_METRICS_PORT": "0",
            },
            stdout=stdout,
            stderr=stderr,
        )
    try:

        def said(words: str) -> bool:
            assert worker.returncode is None, output()
            return words in output()

        await eventually(lambda: said("timer worker on task queue"), within=60, what="started")
        await server.kill()
        await eventually(lambda: said("retried"), within=60, what="a retry", interval=0.2)
    finally:
        if worker.returncode is None:
            worker.send_signal(signal.SIGTERM)
        await asyncio.wait_for(worker.wait(), 30)
        await server.stop()
    assert "\x1b[" not in output()
    assert "Traceback" not in output()
    assert out_path.read_text() == ""  # logs go to stderr, one record per line
    lines = err_path.read_text().splitlines()
    assert lines and all(_RECORD.fullmatch(line) for line in lines), lines
    retried = [line for line in lines if "retried" in line]
    assert retried[0].split(": ", 1)[0].endswith(" WARNING temporalio.core"), retried[0]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["schedule", "show"],
            "error: Missing argument 'context'. (see `wow-temporal schedule show --help`)",
        ),
        (
            ["timers", "list", "--bogus"],
            "error: No such option: --bogus (see `wow-temporal timers list --help`)",
        ),
        (["frobnicate"], "error: No such command 'frobnicate'. (see `wow-temporal --help`)"),
        (  # the demo's closing hint, without its context
            ["schedule", "show", "receive-deliveries"],
            "error: Missing argument 'name'. (see `wow-temporal schedule show --help`)",
        ),
        (["host"], "error: Missing option '--app'. (see `wow-temporal host --help`)"),
        (  # the parser names no command for these: the words given do
            ["timers", "list", "--running=yes"],
            "error: Option '--running' does not take a value. "
            "(see `wow-temporal timers list --help`)",
        ),
        (  # the API's limit, the same (it was 10,000 here, 1,000 there)
            ["timers", "list", "--limit", "1001"],
            "error: Invalid value for '--limit': Input should be less than or equal to 1000 "
            "(see `wow-temporal timers list --help`)",
        ),
        (
            ["timers", "list", "--status", "bogus"],
            "error: --status: unknown timer status 'bogus'; one of Scheduled, Delivering, "
            "Parked, Delivered, Rejected, Cancelled, NeverDue, Terminated, Failed, TimedOut",
        ),
        (
            ["timers", "list", "--limit", "many"],
            "error: Invalid value for '--limit': Input should be a valid integer, unable to "
            "parse string as an integer (see `wow-temporal timers list --help`)",
        ),
    ],
)
def test_a_usage_error_is_one_error_line_and_exit_2(args: list[str], said: str) -> None:
    done = subprocess.run(
        [str(WOW_TEMPORAL), *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == said
    assert done.stdout == ""


def test_a_closed_stdout_ends_quietly() -> None:
    """`wow-temporal cron … | head -1`: no traceback, no `error:` line, exit 141 as a SIGPIPE."""
    command = [str(WOW_TEMPORAL), "cron", "* * * * * *"]
    with subprocess.Popen(
        [*command, "--count", "10000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.readline()
        proc.stdout.close()
        err = proc.stderr.read()
        code = proc.wait(timeout=60)
    assert err == b""
    assert code == CLOSED_STDOUT_EXIT


def _into_closed_pipe(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    """Run the console script with a stdout whose reader went away before it wrote."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [str(WOW_TEMPORAL), *args],
            stdout=write,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "WOW_CONFIG": "", **env},
            timeout=60,
        )
    finally:
        os.close(write)


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["timers", "--help"],
        ["--version"],
        ["cron", "0 0 6 * * *"],
        ["manifest", "--app", "workers.eshop:apps"],
        ["timers", "list", "--json"],  # `[]` at least, from the dev server
        ["schedule", "list", "--json"],
    ],
    ids=" ".join,
)
def test_every_command_ends_quietly_on_a_closed_stdout(
    args: list[str], dev_server: EmbeddedTemporal
) -> None:
    """Not `error: cannot connect: [Errno 32] Broken pipe` (exit 1 or 2), even for the commands
    that answer from Temporal: nothing on stderr, exit 141."""
    env = {"TEMPORAL_ADDRESS": dev_server.address, "TEMPORAL_NAMESPACE": dev_server.namespace}
    done = _into_closed_pipe(*args, env=env)
    assert done.stderr == b""
    assert done.returncode == CLOSED_STDOUT_EXIT


@pytest.mark.asyncio(loop_scope="session")
async def test_timers_retry_says_what_is_true_of_the_retried_timer(
    dev_server: EmbeddedTemporal, dev_client: Client, wow_host: FakeWowHost
) -> None:
    """Not `Scheduled` for a timer that `timers list` shows `Delivering` a moment later: the
    retried slot is being delivered again, with its request id."""
    env = {"TEMPORAL_ADDRESS": dev_server.address, "TEMPORAL_NAMESPACE": dev_server.namespace}
    task_queue = f"cli-retry-{uuid.uuid4().hex[:8]}"
    command_type = f"cli.retry.Probe{uuid.uuid4().hex[:8]}"
    wow_host.behave("fail", command_type=command_type, times=2)
    timers = TimerClient(
        dev_client,
        task_queue=task_queue,
        delivery=fast_delivery(2),
    )
    aggregate_id = uuid.uuid4().hex[:8]
    commit = Commit.parse(_grace_commit(aggregate_id, "PT0.1S", command_type))
    workflow_id = f"wow-timer:eshop-order.order:t-cli:{aggregate_id}:grace"
    async with CommandSender(wow_host.url) as sender, timer_worker(
        dev_client, sender, task_queue=task_queue
    ):
        await timers.apply(commit)

        async def parked() -> bool:
            return (await timers.show(workflow_id)).status == "Parked"

        await eventually(parked, within=30, what="the timer parked", interval=0.2)
        retried = await asyncio.to_thread(_cli, "timers", "retry", workflow_id, env=env)
        assert retried.returncode == 0, retried.stderr
        assert retried.stdout.strip() == (
            f"{workflow_id}: retried: slot 1 is being delivered again "
            f"(request id c-{aggregate_id}:e-1#1)"
        )
        (delivered,) = await wow_host.wait_for(
            lambda host: [r for r in host.delivered() if r.aggregate_id == aggregate_id],
            timeout=15,
        )
    assert delivered.request_id == f"c-{aggregate_id}:e-1#1"


_INTERRUPTED_WHILE_LOADING = """
import importlib.abc, os, signal, sys

class InterruptOnLoad(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "wow_temporal.cli":
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl+C while the command line loads
        return None

sys.meta_path.insert(0, InterruptOnLoad())
sys.argv = ["wow-temporal", "cron", "0 0 6 * * *"]
from wow_temporal._entry import main
main()
"""


def test_ctrl_c_while_the_command_line_loads_exits_130_quietly() -> None:
    """Issue #38: a Ctrl+C in the half second the console script spends importing printed a
    KeyboardInterrupt's traceback from deep inside an import; now it exits 130, silent."""
    done = subprocess.run(
        [sys.executable, "-c", _INTERRUPTED_WHILE_LOADING],
        capture_output=True, text=True, timeout=60,
    )
    assert (done.returncode, done.stdout, done.stderr) == (130, "", "")
