"""`wow-temporal dev`'s engine: services start and stop in order; signals stop everything, and
so does the server's death; the control API's port is used or refused, never swapped."""

from __future__ import annotations

import asyncio
import io
import os
import signal
import socket
import sys
import textwrap
import urllib.request
from pathlib import Path

import pytest
from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
from temporalio.client import Client

from tests.helpers.eventually import eventually
from tests.helpers.ports import time_wait_port
from tests.helpers.processes import alive, descendants
from wow_temporal.dev.errors import PortInUseError, TemporalServerExitedError
from wow_temporal.dev.ports import free_port
from wow_temporal.dev.services import ApiService
from wow_temporal.dev.stack import READY_LINE, DevContext, run_dev
from wow_temporal.settings import load_settings

# A dev run with one trivial service: a TCP server that answers with the namespace.
_DEV_SCRIPT = textwrap.dedent(
    """
    import asyncio
    import sys
    from pathlib import Path

    from wow_temporal.dev.stack import DevContext, dev_main


    class EchoService:
        name = "echo"

        async def start(self, ctx: DevContext) -> str:
            async def answer(reader, writer):
                writer.write(ctx.namespace.encode())
                await writer.drain()
                writer.close()

            self.server = await asyncio.start_server(answer, "127.0.0.1", 0)
            port = self.server.sockets[0].getsockname()[1]
            return f"tcp://127.0.0.1:{port}"

        async def stop(self) -> None:
            self.server.close()
            await self.server.wait_closed()
            print("echo service stopped", flush=True)


    dev_main(Path(sys.argv[1]), headless=sys.argv[2] == "headless", services=[EchoService()])
    """
)


class RecordingService:
    """Records its calls into a shared journal; optionally fails to start."""

    def __init__(self, name: str, journal: list[str], *, fail: bool = False) -> None:
        self.name = name
        self.journal = journal
        self.fail = fail
        self.ctx: DevContext | None = None

    async def start(self, ctx: DevContext) -> str:
        if self.fail:
            self.journal.append(f"fail {self.name}")
            raise RuntimeError(f"{self.name} cannot start")
        self.ctx = ctx
        info = await ctx.client.workflow_service.get_system_info(GetSystemInfoRequest())
        assert info.capabilities is not None
        self.journal.append(f"start {self.name}")
        return f"{self.name} at {ctx.address}"

    async def stop(self) -> None:
        self.journal.append(f"stop {self.name}")


async def test_run_dev_starts_and_stops_services_in_order(tmp_path: Path) -> None:
    journal: list[str] = []
    services = [RecordingService("first", journal), RecordingService("second", journal)]
    stop = asyncio.Event()
    out = io.StringIO()
    task = asyncio.create_task(
        run_dev(tmp_path, headless=True, services=services, stop_event=stop, out=out)
    )
    await _wait_ready(out, task)
    text = out.getvalue()
    ctx = services[0].ctx
    assert ctx is not None
    assert ctx.namespace == "default"
    assert ctx.ui_url is None
    assert f"Temporal gRPC:   {ctx.address}" in text
    assert f"first:           first at {ctx.address}" in text
    assert str(tmp_path / "temporal.db") in text
    stop.set()
    await asyncio.wait_for(task, 30)
    assert journal == ["start first", "start second", "stop second", "stop first"]
    with pytest.raises(RuntimeError, match="Failed client connect"):
        await Client.connect(ctx.address)  # the server is gone


async def test_run_dev_failed_service_stops_what_started(tmp_path: Path) -> None:
    journal: list[str] = []
    services = [
        RecordingService("ok", journal),
        RecordingService("broken", journal, fail=True),
        RecordingService("never", journal),
    ]
    with pytest.raises(RuntimeError, match="broken cannot start"):
        await asyncio.wait_for(
            run_dev(tmp_path, headless=True, services=services, out=io.StringIO()),
            60,
        )
    assert journal == ["start ok", "fail broken", "stop ok"]


async def _wait_ready(out: io.StringIO, task: asyncio.Task[None]) -> None:
    await eventually(lambda: READY_LINE in out.getvalue() or task.done(), within=30, what="ready")
    assert READY_LINE in out.getvalue(), out.getvalue()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux /proc")
async def test_run_dev_stops_everything_when_the_server_dies(tmp_path: Path) -> None:
    journal: list[str] = []
    services = [RecordingService("first", journal), RecordingService("second", journal)]
    out = io.StringIO()
    task = asyncio.create_task(
        run_dev(tmp_path, headless=True, services=services, stop_event=asyncio.Event(), out=out)
    )
    await _wait_ready(out, task)
    server_pid = int((tmp_path / "temporal.pid").read_text())
    os.killpg(server_pid, signal.SIGKILL)  # the server dies under a running stack
    with pytest.raises(TemporalServerExitedError):
        await asyncio.wait_for(task, 30)
    line = (
        f"wow-temporal dev: the Temporal server (pid {server_pid}) was killed by SIGKILL while "
        f"wow-temporal dev was running; stopping everything (server log: "
        f"{tmp_path / 'temporal.log'})"
    )
    assert out.getvalue().splitlines()[-1] == line
    assert journal == ["start first", "start second", "stop second", "stop first"]
    assert not (tmp_path / "temporal.pid").exists()


def test_the_control_api_keeps_its_port_after_a_quick_restart() -> None:
    port = time_wait_port()
    api = ApiService(load_settings(environ={"WOW_API_PORT": str(port)}))
    assert api.port == port
    api.check()  # uvicorn can listen there: no refusal


async def test_the_control_api_port_in_use_is_refused_before_anything_starts(
    tmp_path: Path,
) -> None:
    journal: list[str] = []
    with socket.create_server(("127.0.0.1", free_port())) as taken:
        port = taken.getsockname()[1]
        api = ApiService(load_settings(environ={"WOW_API_PORT": str(port)}))
        assert api.port == port  # not swapped for a free one
        out = io.StringIO()
        with pytest.raises(PortInUseError) as refused:
            await run_dev(
                tmp_path, headless=True, services=[RecordingService("x", journal), api], out=out
            )
    assert str(refused.value) == (
        f"control API port {port} on 127.0.0.1 is already in use; free it or choose another "
        "with --api-port or WOW_API_PORT (0: any free port)"
    )
    assert out.getvalue() == ""
    assert journal == []
    assert not (tmp_path / "temporal.log").exists()  # the server was never spawned


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux /proc")
@pytest.mark.parametrize(("sig", "mode"), [(signal.SIGTERM, "ui"), (signal.SIGINT, "headless")])
async def test_dev_process_stops_cleanly_on_signal(
    tmp_path: Path, sig: signal.Signals, mode: str
) -> None:
    script = tmp_path / "dev_script.py"
    script.write_text(_DEV_SCRIPT)
    data_dir = tmp_path / "data"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        str(data_dir),
        mode,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "WOW_WORKER_METRICS_PORT": "0"},
    )
    assert proc.stdout is not None
    try:
        lines: list[str] = []
        while READY_LINE not in lines:
            raw = await asyncio.wait_for(proc.stdout.readline(), 60)
            assert raw, "dev exited early:\n" + "".join(lines)
            lines.append(raw.decode().rstrip("\n"))
        fields = {
            k.strip(): v.strip() for k, _, v in (ln.partition(":") for ln in lines if ": " in ln)
        }
        address = fields["Temporal gRPC"]
        assert fields["Database"] == str(data_dir.resolve() / "temporal.db")

        client = await Client.connect(address)
        assert (
            await client.workflow_service.get_system_info(
                __import__(
                    "temporalio.api.workflowservice.v1", fromlist=["x"]
                ).GetSystemInfoRequest()
            )
        ) is not None

        host, port = fields["echo"].removeprefix("tcp://").rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        assert await reader.read() == b"default"
        writer.close()

        if mode == "ui":
            ui_url = fields["Temporal Web UI"]
            assert ui_url.startswith("http://127.0.0.1:")
            status = await asyncio.to_thread(
                lambda: urllib.request.urlopen(ui_url, timeout=10).status
            )
            assert status == 200
        else:
            assert fields["Temporal Web UI"] == "(headless)"

        below = descendants(proc.pid)
        assert below, "the Temporal server should be a child of the dev process"

        proc.send_signal(sig)
        rest, _ = await asyncio.wait_for(proc.communicate(), 30)
        output = "\n".join(lines) + "\n" + rest.decode()
        assert proc.returncode == 0, output
        assert "echo service stopped" in output
        assert output.index("echo service stopped") < output.index("wow-temporal dev: stopped")
        await eventually(lambda: not any(map(alive, below)), within=5, what="children gone")
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
