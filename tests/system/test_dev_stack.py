"""`wow-temporal dev` as a user runs it: the whole stack starts, `wow-temporal demo` walks the
e-shop on it, a commit handed to the control API is delivered (the echo convention for a
context the host does not serve), and Ctrl-C / SIGTERM leaves no process behind; a second one
on the same data directory is refused; the stack stops when its server dies."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.helpers.eventually import eventually
from tests.helpers.processes import alive, descendants
from wow_temporal.dev.ports import free_port
from wow_temporal.dev.stack import READY_LINE
from wow_temporal.ids import job_workflow_id

_DEMO_GRACE = {"ESHOP_PAYMENT_GRACE_PERIOD": "PT2S"}
"""Order A's grace period in the demos: the domain host (in the dev stack) reads it."""


def _read_until(proc: subprocess.Popen[str], needle: str, lines: list[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            if proc.poll() is not None:
                break
            continue
        lines.append(line)
        if needle in line:
            return
    raise AssertionError(f"{needle!r} not seen; output:\n{''.join(lines)}")


def _reaped(children: set[int]) -> None:
    """Every process the dev stack started is gone soon after it stopped."""
    asyncio.run(eventually(lambda: not any(map(alive, children)), within=10, what="all gone"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux /proc")
def test_dev_runs_the_demo_delivers_a_commit_end_to_end_and_stops_cleanly(
    tmp_path: Path,
) -> None:
    api_port, metrics_port = free_port(), free_port()
    env = {
        **os.environ,
        "WOW_API_PORT": str(api_port),
        "WOW_WORKER_METRICS_PORT": str(metrics_port),
        "WOW_HOST_URL": "",
        "WOW_CONFIG": "",
        **_DEMO_GRACE,
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "wow_temporal.cli",
            "dev",
            "--headless",
            "--port",
            "0",  # 7233 may be another stack's
            "--host-port",
            "0",
            "--data-dir",
            str(tmp_path / "dev"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    lines: list[str] = []
    try:
        _read_until(proc, READY_LINE, lines, timeout=90)
        printed = "".join(lines)
        for service in ("domain host:", "timer worker:", "control API:", "Temporal gRPC:"):
            assert service in printed
        children = descendants(proc.pid)
        assert children, "the dev server runs as a child process"
        host_url = printed.split("domain host:", 1)[1].split()[0]

        demo = subprocess.run(
            [
                str(Path(sys.executable).parent / "wow-temporal"),
                "demo",
                "--host-url",
                host_url,
                "--api-url",
                f"http://127.0.0.1:{api_port}",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert demo.returncode == 0, demo.stdout + demo.stderr
        for seen in (
            "wow.ScheduleSet",
            "its timer is Cancelled",
            "is CANCELLED (PAYMENT_TIMEOUT)",
            "Its timer is Delivered",
            "IllegalState",
            "delivered",
        ):
            assert seen in demo.stdout, demo.stdout
        _the_closing_hint_works(demo.stdout, printed, env)

        created = int(datetime.now(UTC).timestamp() * 1000)
        commit = {
            "id": "commit-dev",
            "contextName": "hand-made",
            "aggregateName": "order",
            "tenantId": "t1",
            "aggregateId": "42",
            "version": 1,
            "createTime": created,
            "body": [
                {
                    "id": "e-1",
                    "name": "wow.ScheduleSet",
                    "body": {
                        "key": "payment-grace-period",
                        "rule": {"after": "PT1S"},
                        "command": {"type": "eshop.order.CancelOrder", "body": {"reason": "X"}},
                        "target": None,
                    },
                }
            ],
        }
        trace = "5bf92f3577b34da6a3ce929d0e0e4736"
        request = urllib.request.Request(
            f"http://127.0.0.1:{api_port}/commits",
            data=json.dumps(commit).encode(),
            headers={
                "content-type": "application/json",
                "traceparent": f"00-{trace}-00f067aa0ba902b7-01",
            },
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            assert json.load(response)[0]["outcome"] == "started"
        _read_until(proc, "request commit-dev:e-1#1", lines, timeout=30)
        # Traced by default: the delivered command is in the trace of the request.
        assert f"request commit-dev:e-1#1, trace {trace})" in lines[-1], lines[-1]

        # One process, one Prometheus endpoint: deliveries, ingest (the API's and the relay's)
        # and the relay's lag beside the SDK's own metrics.
        assert f"Metrics:         http://127.0.0.1:{metrics_port}/metrics" in printed
        assert "Traces:          none made until WOW_TELEMETRY_OTLP_ENDPOINT" in printed
        with urllib.request.urlopen(
            f"http://127.0.0.1:{metrics_port}/metrics", timeout=10
        ) as response:
            metrics = response.read().decode()
        assert any(
            line.startswith("wow_parked{") and 'kind="timer"' in line
            for line in metrics.splitlines()
        ), "no wow_parked gauge in the dev stack's metrics"
        for name, labels in (
            ("wow_deliveries_total", ['outcome="delivered"']),
            ("wow_commits_ingested_total", []),
            ("wow_timer_changes_total", ['kind="set"', 'outcome="started"']),
            ("wow_relay_lag_count", []),
            ("temporal_request_total", []),
        ):
            assert any(
                line.startswith(name)
                and all(label in line for label in labels)
                and float(line.rsplit(" ", 1)[1]) > 0
                for line in metrics.splitlines()
            ), f"no {name} {labels} above 0 in the dev stack's metrics:\n{metrics}"

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM
        _reaped(children)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _the_closing_hint_works(demo_output: str, printed: str, env: dict[str, str]) -> None:
    """The `schedule show` the demo suggests at its end runs on that stack (Missing argument
    'name' once)."""
    hint = demo_output.strip().splitlines()[-1]
    suggested = [c for c in hint.split("`")[1::2] if c.startswith("wow-temporal schedule show")]
    assert len(suggested) == 1, hint
    address = printed.split("Temporal gRPC:", 1)[1].split()[0]
    shown = subprocess.run(
        [str(Path(sys.executable).parent / "wow-temporal"), *shlex.split(suggested[0])[1:]],
        capture_output=True,
        text=True,
        env={**env, "TEMPORAL_ADDRESS": address},
        timeout=60,
    )
    assert shown.returncode == 0, shown.stdout + shown.stderr
    job = job_workflow_id("eshop-inventory", "receive-deliveries")
    assert shown.stdout.startswith(f"{job}: Enabled\n"), shown.stdout
    assert "rule      0 0 6 * * *" in shown.stdout, shown.stdout


def _dev(
    data_dir: Path,
    api_port: int,
    *extra: str,
    metrics_port: int = 0,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[str]:
    """`wow-temporal dev` on any free Temporal ports, the control API on `api_port` (and
    `env` beside)."""
    env = {
        **os.environ,
        "WOW_API_PORT": str(api_port),
        "WOW_WORKER_METRICS_PORT": str(metrics_port),
        "WOW_HOST_URL": "",
        "WOW_CONFIG": "",
        **(env or {}),
    }
    return subprocess.Popen(
        [
            str(Path(sys.executable).parent / "wow-temporal"),
            "dev",
            "--port",
            "0",
            "--ui-port",
            "0",
            "--host-port",
            "0",
            "--data-dir",
            str(data_dir),
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _running_on(data_dir: Path) -> list[str]:
    """The processes whose command line names `data_dir` (a Temporal server left on it)."""
    mine = str(data_dir).encode()
    running = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            if mine in cmdline.read_bytes():
                running.append(cmdline.parent.name)
    return running


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux /proc")
def test_a_metrics_port_in_use_is_refused_before_anything_starts(tmp_path: Path) -> None:
    """Checked with the other ports, before the Temporal server starts (it was found only
    once Temporal had started)."""
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        proc = _dev(tmp_path / "dev", free_port(), "--headless", metrics_port=port)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert err == (
        f"error: metrics port {port} on 127.0.0.1 is already in use; free it or choose another "
        "with --metrics-port or WOW_WORKER_METRICS_PORT (0: any free port)\n"
    )
    assert out == ""
    assert not (tmp_path / "dev" / "temporal.log").exists()  # no server was spawned
    assert not descendants(proc.pid)
    assert _running_on(tmp_path / "dev") == [], "a dev server is still running"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux /proc")
def test_a_second_dev_is_refused_and_the_first_stops_when_its_server_dies(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "dev"
    api_port = free_port()
    first = _dev(data_dir, api_port)
    lines: list[str] = []
    try:
        _read_until(first, READY_LINE, lines, timeout=90)
        fields = {k.strip(): v.strip() for k, _, v in (ln.partition(":") for ln in lines)}
        server_pid = int((data_dir / "temporal.pid").read_text())
        assert server_pid in descendants(first.pid)

        second = _dev(data_dir, free_port(), "--headless")
        out, err = second.communicate(timeout=60)
        assert second.returncode == 1, out + err
        assert out == ""
        assert err == (
            f"error: another wow-temporal dev (pid {first.pid}) is using {data_dir}: "
            f"Temporal {fields['Temporal gRPC']}, Web UI {fields['Temporal Web UI']}; "
            "stop it or use --data-dir\n"
        )
        # The first stack is untouched: same server, control API still answering.
        assert alive(server_pid)
        assert int((data_dir / "temporal.pid").read_text()) == server_pid
        with urllib.request.urlopen(f"http://127.0.0.1:{api_port}/health", timeout=10) as reply:
            assert reply.status == 200

        children = descendants(first.pid)
        os.kill(server_pid, signal.SIGKILL)  # the server dies under the running stack
        assert first.wait(timeout=30) == 1
        rest = first.stdout.read() if first.stdout else ""
        assert rest.splitlines()[-1] == (
            f"wow-temporal dev: the Temporal server (pid {server_pid}) was killed by SIGKILL "
            "while wow-temporal dev was running; stopping everything (server log: "
            f"{data_dir / 'temporal.log'})"
        ), rest
        stderr = first.stderr.read() if first.stderr else ""
        assert "Traceback" not in stderr, stderr
        _reaped(children)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()


_STOPS = [signal.SIGHUP, signal.SIGINT, signal.SIGTERM]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux /proc")
@pytest.mark.parametrize("sig", _STOPS, ids=[sig.name for sig in _STOPS])
def test_a_closed_terminal_ctrl_c_or_sigterm_stops_dev_and_its_server_without_a_traceback(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """SIGHUP (the terminal closed) stops `dev` as Ctrl+C and SIGTERM do: the Temporal server,
    in a session of its own, goes too, every port is free again, the clean stop prints no
    traceback, and the exit is 128 + the signal's number, as a shell reports it."""
    api_port = free_port()
    proc = _dev(tmp_path / "dev", api_port, "--headless")
    lines: list[str] = []
    children: set[int] = set()
    try:
        _read_until(proc, READY_LINE, lines, timeout=90)
        printed = "".join(lines)
        address = printed.split("Temporal gRPC:", 1)[1].split()[0]
        host_url = printed.split("domain host:", 1)[1].split()[0]
        children = descendants(proc.pid)
        assert children, "the dev server runs as a child process"
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 128 + sig, out + err
        assert out.splitlines()[-1] == "wow-temporal dev: stopped", out
        for word in ("Traceback", "CancelledError", "KeyboardInterrupt"):
            assert word not in out + err, out + err
        _reaped(children)
        assert _running_on(tmp_path / "dev") == []
        for port in (int(address.rsplit(":", 1)[1]), int(host_url.rsplit(":", 1)[1]), api_port):
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection(("127.0.0.1", port), timeout=5).close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for child in children:  # a server left behind by a failed stop
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child, signal.SIGKILL)


@dataclass(frozen=True)
class _DemoStack:
    """A `wow-temporal dev` the demo tests share, and the morning job as it was before them."""

    host_url: str
    api_port: int
    shown_env: dict[str, str]
    before: dict[str, object]


@pytest.fixture(scope="module")
def demo_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_DemoStack]:
    """One dev stack for the demos stopped by a signal (each demo is its own process and puts
    the job back: the next finds it as the first did); SIGTERM stops it at the end, leaving
    nothing running."""
    api_port = free_port()
    dev = _dev(tmp_path_factory.mktemp("demos") / "dev", api_port, "--headless", env=_DEMO_GRACE)
    lines: list[str] = []
    children: set[int] = set()
    try:
        _read_until(dev, READY_LINE, lines, timeout=90)
        _drain(dev)
        printed = "".join(lines)
        children = descendants(dev.pid)
        address = printed.split("Temporal gRPC:", 1)[1].split()[0]
        shown_env = {
            **os.environ,
            "WOW_CONFIG": "",
            "TEMPORAL_ADDRESS": address,
            "WOW_API_PORT": str(api_port),
        }
        host_url = printed.split("domain host:", 1)[1].split()[0]
        yield _DemoStack(host_url, api_port, shown_env, _job_shown(shown_env))
        dev.send_signal(signal.SIGTERM)
        assert dev.wait(timeout=30) == 128 + signal.SIGTERM
        _reaped(children)
    finally:
        if dev.poll() is None:
            dev.kill()
            dev.wait()
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child, signal.SIGKILL)


def _drain(proc: subprocess.Popen[str]) -> None:
    """Read what `proc` prints from now on, so that a full pipe never blocks it."""
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            threading.Thread(target=stream.read, daemon=True).start()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux /proc")
@pytest.mark.parametrize(
    ("sig", "code"),
    [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)],
    ids=["SIGINT", "SIGTERM", "SIGHUP"],
)
def test_a_demo_stopped_during_the_morning_job_puts_its_rule_back(
    demo_stack: _DemoStack, sig: signal.Signals, code: int
) -> None:
    """Ctrl+C (or SIGTERM, or SIGHUP) while the job ticks every 5 s: the demo removes its rule
    with a reset, says so, and exits 128 + the signal; the rule in force and the job's own
    layer are as before the demo, and no process it started remains."""
    demo = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "wow-temporal"),
            "demo",
            "--host-url",
            demo_stack.host_url,
            "--api-url",
            f"http://127.0.0.1:{demo_stack.api_port}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "WOW_CONFIG": ""},
    )
    started: set[int] = set()
    try:
        shown: list[str] = []
        _read_until(demo, "Watch its ticks", shown, timeout=120)
        started = descendants(demo.pid)
        demo.send_signal(sig)
        out, err = demo.communicate(timeout=60)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    assert demo.returncode == code, "".join(shown) + out + err
    assert (
        "receive-deliveries put back with a reset (the demo's rule removed): 0 0 6 * * * "
        "from the code, Enabled, next "
    ) in out, out
    assert "Traceback" not in err, err
    _reaped(started)
    before, after = demo_stack.before, _job_shown(demo_stack.shown_env)
    for part in ("expression", "zone", "misfire", "sources", "own", "host", "status"):
        assert after[part] == before[part], (part, before, after)
    assert after["own"] == {"expression": None, "zone": None, "misfire": None}


# `wow-temporal dev` whose start is held by a service that never finishes starting: a signal
# then meets the stack half started, at a known point, every time.
_HELD_AT_START = textwrap.dedent(
    """
    import asyncio
    import sys

    from wow_temporal.dev import services

    real = services.default_services


    class Held:
        name = "held"

        async def start(self, ctx):
            print("held: starting", flush=True)
            await asyncio.Event().wait()

        async def stop(self):
            print("held: stopped", flush=True)


    def held_after_the_host(*args, **kwargs):
        made = real(*args, **kwargs)
        return [made[0], Held(), *made[1:]]


    services.default_services = held_after_the_host
    from wow_temporal.cli import main

    sys.argv = ["wow-temporal", "dev", *sys.argv[1:]]
    main()
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux /proc")
def test_a_signal_while_dev_starts_stops_what_started_at_once(tmp_path: Path) -> None:
    """A signal while the stack starts: it stops there (the ready line is never printed, the
    service being started is stopped too), the Temporal server and the domain host are gone,
    no traceback, exit 128 + the signal (the start used to run to its end first). SIGHUP, whose
    default would end the process at once: the stack's one handler takes SIGINT, SIGTERM and
    SIGHUP alike from before the start, each proven by the closed-terminal test above."""
    sig = signal.SIGHUP
    script = tmp_path / "held.py"
    script.write_text(_HELD_AT_START)
    data_dir = tmp_path / "dev"
    api_port = free_port()
    env = {
        **os.environ,
        "WOW_API_PORT": str(api_port),
        "WOW_WORKER_METRICS_PORT": "0",
        "WOW_HOST_URL": "",
        "WOW_CONFIG": "",
        "PYTHONUNBUFFERED": "1",
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            str(script),
            "--temporal-port",
            "0",
            "--headless",
            "--host-port",
            "0",
            "--data-dir",
            str(data_dir),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=Path(__file__).resolve().parents[2],
    )
    lines: list[str] = []
    children: set[int] = set()
    try:
        _read_until(proc, "held: starting", lines, timeout=90)
        printed = "".join(lines)
        host_url = printed.split("domain host:", 1)[1].split()[0]
        children = descendants(proc.pid)
        assert children, "the Temporal server runs"
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
        output = printed + out
        assert proc.returncode == 128 + sig, output + err
        assert READY_LINE not in output
        assert out.splitlines() == [
            "wow-temporal dev: stopping",
            "held: stopped",
            "wow-temporal dev: stopped",
        ], out
        for word in ("Traceback", "CancelledError", "KeyboardInterrupt"):
            assert word not in output + err, output + err
        _reaped(children)
        assert _running_on(data_dir) == []
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", int(host_url.rsplit(":", 1)[1])), 5).close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child, signal.SIGKILL)


_CTRL_C_WHILE_LOADING = textwrap.dedent(
    """
    import os
    import signal
    import sys

    from wow_temporal.cli import dev

    real = dev._apps_and_settings


    def interrupted(app_ref):
        made = real(app_ref)
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl+C while the apps load: before any start
        return made


    dev._apps_and_settings = interrupted
    from wow_temporal.cli import main

    sys.argv = ["wow-temporal", "dev", *sys.argv[1:]]
    main()
    """
)


def test_ctrl_c_before_the_stack_starts_ends_quietly_with_130(tmp_path: Path) -> None:
    script = tmp_path / "loading.py"
    script.write_text(_CTRL_C_WHILE_LOADING)
    env = {**os.environ, "WOW_HOST_URL": "", "WOW_CONFIG": "", "WOW_API_PORT": "0"}
    ran = subprocess.run(
        [
            sys.executable,
            str(script),
            "--data-dir",
            str(tmp_path / "dev"),
            "--temporal-port",
            "0",
            "--headless",
            "--host-port",
            "0",
            "--metrics-port",
            "0",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert ran.returncode == 130, ran.stderr
    assert (ran.stdout, ran.stderr) == ("", "")
    assert not (tmp_path / "dev").exists()  # nothing was started, not even the data dir


def _job_shown(env: dict[str, str]) -> dict[str, object]:
    """`schedule show --json` of the morning job (once the worker has enabled it)."""

    async def shown() -> dict[str, object] | None:
        rule = await asyncio.to_thread(
            subprocess.run,
            [
                str(Path(sys.executable).parent / "wow-temporal"),
                "schedule",
                "show",
                "eshop-inventory",
                "receive-deliveries",
                "--json",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        if rule.returncode != 0:
            return None
        found: dict[str, object] = json.loads(rule.stdout)
        return found if found.get("expression") else None

    found: dict[str, object] = asyncio.run(
        eventually(shown, within=30, what="the morning job shown")
    )
    return found
