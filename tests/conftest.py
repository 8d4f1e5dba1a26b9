"""Shared fixtures: the two embedded Temporal servers, started lazily once per session; no
tracer provider outlives the test that installed it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import uuid
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Generic, TypeVar

import pytest
import pytest_asyncio
from opentelemetry import trace
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from bench.harness.postgres import Postgres, PostgresUnavailable
from tests.helpers import processes
from tests.helpers.tracing import reset_tracing
from wow_temporal.dev.server import EmbeddedTemporal
from wow_temporal.testing.time_skipping import skip_time, start_time_skipping
from wow_temporal.worker import probe

T = TypeVar("T")

_TESTS = Path(__file__).resolve().parent

pytest_plugins = [
    "tests.helpers.wow_host",  # `wow_host`: a real HTTP Wow host
    "tests.helpers.progress",  # a line as each test file finishes
]


TIERS = {
    "unit": "pure code and in-process fakes: no server, no subprocess (under a minute)",
    "workflow": "workflows on the time-skipping test server",
    "system": "the dev server, real HTTP hosts, subprocesses, benchmarks and the soak",
}
"""The tiers a developer can run alone: `./run test -m unit` (each test has exactly one)."""

_DIRECTORY_TIER = {"unit": "unit", "workflow": "workflow", "system": "system", "bench": "system"}
"""A test's tier is its directory's; the benchmarks' smoke runs and the soaks are system tests
(marked `bench` as well)."""

_FIXTURE_TIER = {
    "time_skipping_env": "workflow",
    "time_skipping_client": "workflow",
    "dev_server": "system",
    "dev_client": "system",
    "wow_host": "system",
    "postgres": "system",
}
"""The shared servers a fixture starts, by the tier that may start them."""

_RANK = {"unit": 0, "workflow": 1, "system": 2}
_MISPLACED = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    """Declare the tiers; mark this run in the environment every process it starts inherits
    (`tests.helpers.processes`)."""
    for name, what in TIERS.items():
        config.addinivalue_line("markers", f"{name}: {what}")
    config.addinivalue_line("markers", "bench: the benchmarks' smoke runs and the soaks (system)")
    os.environ.setdefault(processes.MARK, f"session-{uuid.uuid4().hex[:12]}")
    worker = os.environ.get("PYTEST_XDIST_WORKER")  # each xdist worker checks its own children
    if worker and not os.environ[processes.MARK].endswith(f"/{worker}"):
        os.environ[processes.MARK] += f"/{worker}"


_LONGEST_FIRST = (
    "test_bench_handing_over",
    "test_bench_soaks",
    "test_bench_timers",
    "test_eshop_e2e",
    "test_jobs_faults",
    "test_timers_faults",
)  # started first, so that the test processes finish together


def _module(item: pytest.Item) -> str:
    module = getattr(item, "module", None)
    return module.__name__.rsplit(".", 1)[-1] if module is not None else ""


def _directory(item: pytest.Item) -> str:
    """The directory under tests/ the item's module is in ("" for tests/ itself)."""
    parts = item.path.relative_to(_TESTS).parts if item.path.is_relative_to(_TESTS) else ()
    return parts[0] if len(parts) > 1 else ""


def _tier(item: pytest.Item) -> tuple[str, str | None]:
    """The item's tier, from its directory under tests/, and why it is misplaced (None if not):
    outside the tier directories, or asking for a server of a higher tier than its own."""
    tier = _DIRECTORY_TIER.get(_directory(item))
    if tier is None:
        return "unit", f"a test module belongs under tests/{{{','.join(_DIRECTORY_TIER)}}}/"
    fixtures = set(getattr(item, "fixturenames", ())) & _FIXTURE_TIER.keys()
    needs = max((_FIXTURE_TIER[name] for name in fixtures), key=_RANK.__getitem__, default="unit")
    if _RANK[needs] > _RANK[tier]:
        return tier, f"its fixtures start {needs}-tier servers: move its module to tests/{needs}/"
    return tier, None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Give each test the tier of its directory (and `bench` under tests/bench/); run the
    longest modules first."""
    rank = {name: n for n, name in enumerate(_LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(_module(item), len(rank)))
    for item in items:
        tier, misplaced = _tier(item)
        item.add_marker(tier)
        if _directory(item) == "bench":
            item.add_marker("bench")
        if misplaced is not None:
            item.stash[_MISPLACED] = misplaced


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Fail a test whose directory does not give its tier (before its fixtures start)."""
    misplaced = item.stash.get(_MISPLACED, None)
    if misplaced is not None:
        pytest.fail(f"misplaced test: {misplaced}", pytrace=False)


_leaked: list[str] = []
"""Processes left running, as reported by this process's check and its xdist workers'."""


def pytest_testnodedown(node: Any, error: Any) -> None:
    """An xdist worker ended: keep what its own check found."""
    _leaked.extend(getattr(node, "workeroutput", {}).get("leaked", []))


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if any process it started is still alive (and stop it)."""
    stopped = processes.stop_marked(os.environ[processes.MARK], grace=10)
    left = [f"{pid} {command[:200]}" for pid, command in stopped]
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: the controller reports it
        workeroutput["leaked"] = left
        return
    left += _leaked
    if left:
        listing = "\n".join(f"  {line}" for line in left)
        sys.stderr.write(f"\nthe suite left {len(left)} process(es) running (killed):\n{listing}\n")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(autouse=True)
def untraced_afterwards() -> Iterator[None]:
    """A command run in-process (`CliRunner`) installs the process's tracer provider; remove
    it after that test, so that the tests after it see no tracing they did not ask for."""
    before = trace.get_tracer_provider()
    yield
    if trace.get_tracer_provider() is not before:
        reset_tracing()


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """A real PostgreSQL of this test process, started when first asked for; `database()`
    gives each test a fresh database; where it cannot run, each test using it fails with the
    one line that says what it needs."""
    server = Postgres()
    try:
        try:
            server.start()
        except PostgresUnavailable as error:
            unavailable = str(error)
        else:
            yield server
            return
        pytest.fail(unavailable, pytrace=False)  # outside the except: the one line alone
    finally:
        server.stop()


_HEALTH_TIMEOUT_S = 30.0
"""How long a shared server may take to show it is healthy, or to stop."""


class _Shared(Generic[T]):
    """One server shared by the session's tests, checked before each test is handed it and
    started afresh when it does not answer, so that a test which hung or broke it cannot fail
    the tests after it."""

    def __init__(
        self,
        start: Callable[[], Awaitable[T]],
        healthy: Callable[[T], Awaitable[None]],
        stop: Callable[[T], Awaitable[None]],
    ) -> None:
        self._start, self._healthy, self._stop = start, healthy, stop
        self._server: T | None = None

    async def get(self) -> T:
        if self._server is not None:
            try:
                await asyncio.wait_for(self._healthy(self._server), _HEALTH_TIMEOUT_S)
            except Exception as error:  # any failure: the next test gets a fresh server
                warnings.warn(
                    f"shared server broken ({error!r}): starting a fresh one", stacklevel=1
                )
                await self.close()
        if self._server is None:
            self._server = await self._start()
        return self._server

    async def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._stop(server), _HEALTH_TIMEOUT_S)


async def _time_moves_on(env: WorkflowEnvironment) -> None:
    """The time-skipping server answers and still skips time."""
    await skip_time(env, timedelta(minutes=1), timeout_s=20)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def _time_skipping() -> AsyncIterator[_Shared[WorkflowEnvironment]]:
    shared = _Shared(start_time_skipping, _time_moves_on, lambda env: env.shutdown())
    try:
        yield shared
    finally:
        await shared.close()


@pytest_asyncio.fixture(loop_scope="session")
async def time_skipping_env(
    _time_skipping: _Shared[WorkflowEnvironment],
) -> WorkflowEnvironment:
    """The Java time-skipping test server (pydantic data converter), shared by the session."""
    return await _time_skipping.get()


@pytest_asyncio.fixture(loop_scope="session")
async def time_skipping_client(time_skipping_env: WorkflowEnvironment) -> Client:
    """A client on the time-skipping server; awaiting a result skips time."""
    return time_skipping_env.client


@dataclass(frozen=True)
class _DevServer:
    server: EmbeddedTemporal
    client: Client


async def _answers(dev: _DevServer) -> None:
    """The dev server is running and answers (the production worker's readiness probe)."""
    why_not = await probe(dev.client)
    if why_not is not None:
        raise ConnectionError(why_not)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def _dev(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[_Shared[_DevServer]]:
    async def start() -> _DevServer:
        server = EmbeddedTemporal(tmp_path_factory.mktemp("temporal-dev"), headless=True)
        await server.start()
        return _DevServer(server, await server.connect())

    shared = _Shared(start, _answers, lambda dev: dev.server.stop())
    try:
        yield shared
    finally:
        await shared.close()


@pytest_asyncio.fixture(loop_scope="session")
async def dev_server(_dev: _Shared[_DevServer]) -> EmbeddedTemporal:
    """A headless `temporal server start-dev` on a session tmp dir, with the search attributes,
    shared by the session."""
    return (await _dev.get()).server


@pytest_asyncio.fixture(loop_scope="session")
async def dev_client(_dev: _Shared[_DevServer]) -> Client:
    """A client (pydantic data converter) on the session dev server's namespace."""
    return (await _dev.get()).client
