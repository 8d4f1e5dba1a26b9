"""The domain host without Temporal, over real HTTP (uvicorn on 127.0.0.1) on both stores (real
SQLite files and databases on the suite's PostgreSQL):
Wow's answers to bad input with nothing committed, request-id idempotency and tenant isolation,
one commit per decision (its schedules with its events), the e-shop's inventory saga and a
saga's schedule requests, the relay's at-least-once hand-over to a fake timers object, the host
with the timers away, one host per store file, the manifest, and the OpenAPI.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
import uvicorn
from typer.testing import CliRunner

from tests.apps.host_app import (
    CONTEXT,
    REMIND,
    THING,
    SchedulerSaga,
    make_app,
)
from tests.apps.reminders import REMINDER, RING, reminders_app
from tests.helpers.docs_page import assert_docs_served_offline
from tests.helpers.eventually import eventually
from workers.eshop import apps as eshop_apps
from workers.eshop.inventory import app as inventory_app
from workers.eshop.order import CANCEL_ORDER, ORDER, PaymentPolicy
from workers.eshop.order import order_app as eshop_order_app
from workers.eshop.stock import STOCK
from wow_temporal import App
from wow_temporal.cli import app as cli
from wow_temporal.host import aside
from wow_temporal.host.relay import RELAY, Relay
from wow_temporal.host.runtime import HostRuntime, StoreInUseError
from wow_temporal.host.store import EventStore
from wow_temporal.model import AggregateRef, Commit
from wow_temporal.timers.admission import Admission
from wow_temporal.timers.client import SlowHandOverError
from wow_temporal.timers.fold import Horizon
from wow_temporal.wire import origin_headers

TENANT = "t1"
INVENTORY_SAGA = "saga:eshop-inventory.InventorySaga"
Location = str | Path
"""A store: a SQLite file's path or a PostgreSQL database's URI."""


# --- the fakes the relay hands commits to -----------------------------------------------------


class FakeTimers:
    """What the relay needs of the timers: `apply_many`, recorded; `down` makes it raise."""

    def __init__(self) -> None:
        self.calls: list[list[Commit]] = []
        """Each successful `apply_many`, its commits in order."""
        self.attempts = 0
        self.down: Exception | None = None
        self.takes: int | None = None
        """How many more calls succeed before it goes down (None: no limit)."""
        self.ahead: list[dict[tuple[AggregateRef, str], tuple[int, int]]] = []
        """What the relay had read ahead of each successful call, per key."""
        self.refuse: set[str] = set()
        """Aggregate ids whose commits fail on their own (noted in `failures`)."""

    async def apply_many(
        self,
        commits: Sequence[Commit] | Admission,
        *,
        later: Horizon | None = None,
        failures: dict[AggregateRef, Exception] | None = None,
        within: float | None = None,
    ) -> None:
        self.attempts += 1
        if self.takes == 0:
            self.down = ConnectionError("the timers went away")
        if self.down is not None:
            raise self.down
        if self.takes is not None:
            self.takes -= 1
        taken = []
        for commit in commits.commits if isinstance(commits, Admission) else commits:
            if commit.aggregate_id in self.refuse and failures is not None:
                failures[commit.aggregate] = RuntimeError(f"{commit.aggregate_id} is refused")
            else:
                taken.append(commit)
        self.calls.append(taken)
        self.ahead.append({} if later is None else dict(later.keys))

    @property
    def handed(self) -> list[Commit]:
        return [commit for call in self.calls for commit in call]

    @property
    def handed_ids(self) -> list[str]:
        return [commit.id for commit in self.handed]


class FakeConnect:
    """The relay's `connect`: gives `timers`, or raises `down`."""

    def __init__(self, timers: FakeTimers) -> None:
        self.timers = timers
        self.attempts = 0
        self.down: Exception | None = None

    async def __call__(self) -> FakeTimers:
        self.attempts += 1
        if self.down is not None:
            raise self.down
        return self.timers


# --- a host served over HTTP ------------------------------------------------------------------


@dataclass
class Served:
    """A `HostRuntime` served by uvicorn on a free port, and a client on it."""

    runtime: HostRuntime
    client: httpx.AsyncClient
    timers: FakeTimers
    connect: FakeConnect

    async def send(
        self,
        command_type: str,
        ref: AggregateRef,
        body: Any = None,
        *,
        content: bytes | None = None,
        request_id: str | None = None,
        version: int | str | None = None,
        headers: dict[str, str] | None = None,
        omit: Iterable[str] = (),
    ) -> httpx.Response:
        """POST /wow/command/send with Wow's headers; `content` replaces the JSON `body`."""
        sent = {
            "Command-Type": command_type,
            "Command-Aggregate-Context": ref.context_name,
            "Command-Aggregate-Name": ref.aggregate_name,
            "Command-Aggregate-Id": ref.aggregate_id,
            "Command-Tenant-Id": ref.tenant_id,
            "Command-Wait-Stage": "PROCESSED",
            "Content-Type": "application/json",
        }
        if request_id is not None:
            sent["Command-Request-Id"] = request_id
        if version is not None:
            sent["Command-Aggregate-Version"] = str(version)
        sent.update(headers or {})
        for name in omit:
            del sent[name]
        raw = json.dumps({} if body is None else body).encode() if content is None else content
        return await self.client.post("/wow/command/send", content=raw, headers=sent)

    async def ok(self, command_type: str, ref: AggregateRef, body: Any = None, **kw: Any) -> int:
        """Send a command that must be answered Ok; the aggregate's version after it."""
        answer = expect(await self.send(command_type, ref, body, **kw), "Ok", 200)
        version = answer["aggregateVersion"]
        assert isinstance(version, int)
        return version

    async def read(self, ref: AggregateRef) -> dict[str, Any] | None:
        """GET /wow/aggregate/...: the aggregate, or None when it does not exist (404)."""
        response = await self.client.get(
            f"/wow/aggregate/{ref.context_name}/{ref.aggregate_name}/{ref.tenant_id}/"
            f"{ref.aggregate_id}"
        )
        if response.status_code == 404:
            assert response.json()["errorCode"] == "NotFound"
            return None
        assert response.status_code == 200, response.text
        data: dict[str, Any] = response.json()
        return data

    async def state(self, ref: AggregateRef) -> dict[str, Any]:
        found = await self.read(ref)
        assert found is not None, f"{ref} does not exist"
        state: dict[str, Any] = found["state"]
        return state

    async def log(self) -> list[tuple[int, Commit]]:
        """Every commit in the store, in log order, with its notification id."""
        store = self.runtime.host.store
        return await self.runtime.host.run(lambda: store.commits_after(0, 100_000))

    async def commits(self) -> list[Commit]:
        return [commit for _, commit in await self.log()]

    async def followers(self) -> dict[str, dict[str, Any]]:
        response = await self.client.get("/wow/followers")
        assert response.status_code == 200
        return {status["name"]: status for status in response.json()}

    async def settle(self) -> None:
        """Wait until every follower has handled the whole log, twice in a row."""
        calm = 0

        async def calm_twice() -> bool:
            nonlocal calm
            shown = await self.followers()
            caught_up = all(s["behind"] == 0 and s["lastError"] is None for s in shown.values())
            calm = calm + 1 if caught_up else 0
            return calm >= 2

        await eventually(calm_twice, within=10, what="the followers caught up", interval=0.03)


class _Dispatch:
    """The ASGI app the module's one uvicorn server serves: the runtime of the running test."""

    def __init__(self) -> None:
        self.app: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        assert self.app is not None, "no host is served"
        await self.app(scope, receive, send)


@dataclass
class _Server:
    dispatch: _Dispatch
    url: str


_server: _Server | None = None


@pytest_asyncio.fixture(scope="module", loop_scope="session", autouse=True)
async def _http_server() -> AsyncIterator[None]:
    """One real uvicorn server on 127.0.0.1 and a free port for the module's tests; each test's
    `serve` puts its runtime's app behind it (starting a server per test costs ~0.3 s)."""
    global _server
    # proto IPPROTO_TCP: asyncio then sets TCP_NODELAY on each connection (with proto 0 it does
    # not, and every answer waits ~40 ms for the client's delayed ACK)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    dispatch = _Dispatch()
    config = uvicorn.Config(
        dispatch,
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        await eventually(lambda: server.started or serving.done(), within=10, what="serving")
        if serving.done():
            serving.result()
        _server = _Server(dispatch, f"http://127.0.0.1:{sock.getsockname()[1]}")
        yield
    finally:
        _server = None
        server.should_exit = True
        await asyncio.wait_for(serving, timeout=10)
        sock.close()


@contextlib.asynccontextmanager
async def serve(
    apps: Sequence[App],
    db: Location,
    *,
    timers: FakeTimers | None = None,
    start: bool = True,
) -> AsyncIterator[Served]:
    """Run a `HostRuntime` over `db` (its followers started unless `start=False`) and serve it
    over HTTP, with a client on it."""
    assert _server is not None
    assert _server.dispatch.app is None, "one host served at a time"
    timers = timers if timers is not None else FakeTimers()
    connect = FakeConnect(timers)
    runtime = HostRuntime(apps, db, connect)
    _server.dispatch.app = runtime.asgi
    try:
        if start:
            runtime.start()
        async with httpx.AsyncClient(base_url=_server.url, timeout=10) as client:
            yield Served(runtime, client, timers, connect)
    finally:
        _server.dispatch.app = None
        await runtime.stop()


def expect(response: httpx.Response, code: str, status: int) -> dict[str, Any]:
    """Wow's CommandResult: the status, `errorCode` in the body and `Wow-Error-Code` equal."""
    body: dict[str, Any] = response.json()
    seen = (response.status_code, body.get("errorCode"), response.headers.get("Wow-Error-Code"))
    assert seen == (status, code, code), body
    return body


def thing(aggregate_id: str, tenant: str = TENANT) -> AggregateRef:
    return THING.ref(tenant, aggregate_id)


def names(commit: Commit) -> list[str]:
    return [event.name for event in commit.body]


def order_app(grace: timedelta = timedelta(seconds=20)) -> App:
    return eshop_order_app(PaymentPolicy(grace))


@pytest.fixture
def sqlite_db(tmp_path: Path) -> Path:
    """A SQLite file: for what the HTTP surface and the domain code answer, the same over
    either store."""
    return tmp_path / "host" / "domain.db"


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, sqlite_db: Path) -> Location:
    """Each store in turn: the SQLite file, and a fresh database on the suite's PostgreSQL."""
    if request.param == "postgres":
        database: str = request.getfixturevalue("postgres").database()
        return database
    return sqlite_db


# --- 1. bad input: Wow's error codes, nothing committed ---------------------------------------

BIG = json.dumps({"name": "x" * (256 * 1024)}).encode()


@pytest.mark.parametrize(
    ("case", "command_type", "target", "body", "extra", "code", "status"),
    [
        ("unknown command type", "hosttest.Nope", "t", {}, {}, "BadRequest", 400),
        (
            "a field of the wrong type",
            "hosttest.Touch",
            "t",
            {"count": "many"},
            {},
            "CommandValidation",
            400,
        ),
        ("a missing field", "hosttest.Touch", "t", {}, {}, "CommandValidation", 400),
        ("a field out of range", "hosttest.Touch", "t", {"count": 0}, {}, "CommandValidation", 400),
        (
            "a JSON array body",
            "hosttest.Touch",
            "t",
            None,
            {"content": b"[1, 2]"},
            "CommandValidation",
            400,
        ),
        (
            "a JSON string body",
            "hosttest.Touch",
            "t",
            None,
            {"content": b'"count"'},
            "CommandValidation",
            400,
        ),
        (
            "malformed JSON",
            "hosttest.Touch",
            "t",
            None,
            {"content": b'{"count": '},
            "BadRequest",
            400,
        ),
        (
            "not UTF-8",
            "hosttest.Touch",
            "t",
            None,
            {"content": b'{"count": "\xff"}'},
            "BadRequest",
            400,
        ),
        (
            "a wrong expected version",
            "hosttest.Touch",
            "t",
            {"count": 1},
            {"version": 5},
            "CommandExpectVersionConflict",
            409,
        ),
        (
            "expected version 0 of an existing one",
            "hosttest.Touch",
            "t",
            {"count": 1},
            {"version": 0},
            "CommandExpectVersionConflict",
            409,
        ),
        (
            "a version that is no number",
            "hosttest.Touch",
            "t",
            {"count": 1},
            {"version": "one"},
            "BadRequest",
            400,
        ),
        ("a body over 256 KiB", "hosttest.Touch", "t", None, {"content": BIG}, "BadRequest", 413),
        (
            "a bad wait stage",
            "hosttest.Touch",
            "t",
            {"count": 1},
            {"headers": {"Command-Wait-Stage": "EVENTUALLY"}},
            "BadRequest",
            400,
        ),
        ("an unknown context", "hosttest.Touch", "ctx", {"count": 1}, {}, "NotFound", 404),
        ("an unknown aggregate", "hosttest.Touch", "agg", {"count": 1}, {}, "NotFound", 404),
        (
            "a non-create command to a missing aggregate",
            "hosttest.Touch",
            "missing",
            {"count": 1},
            {},
            "NotFound",
            404,
        ),
        (
            "a schedule request to a missing aggregate",
            "wow.schedule.Set",
            "missing",
            {"key": "k", "rule": {"after": "PT1M"}, "command": {"type": REMIND, "body": {}}},
            {},
            "NotFound",
            404,
        ),
        (
            "a schedule request with a bad rule",
            "wow.schedule.Set",
            "t",
            {"key": "k", "rule": {"after": "soon"}, "command": {"type": REMIND, "body": {}}},
            {},
            "CommandValidation",
            400,
        ),
        ("an empty Command-Type", "", "t", {"count": 1}, {}, "BadRequest", 400),
        (
            "a control character in the id",
            "hosttest.Touch",
            "t",
            {"count": 1},
            {"headers": {"Command-Request-Id": "a\tb"}},
            "BadRequest",
            400,
        ),
        ("a refusal by the domain", "hosttest.Refuse", "t", {}, {}, "IllegalState", 400),
    ],
)
async def test_bad_input_is_answered_with_wows_error_code_and_commits_nothing(
    sqlite_db: Path,
    case: str,
    command_type: str,
    target: str,
    body: Any,
    extra: dict[str, Any],
    code: str,
    status: int,
) -> None:
    existing = thing("t")
    ref = {
        "t": existing,
        "missing": thing("missing"),
        "ctx": AggregateRef(
            context_name="nowhere", aggregate_name="thing", tenant_id=TENANT, aggregate_id="t"
        ),
        "agg": AggregateRef(
            context_name=CONTEXT, aggregate_name="gizmo", tenant_id=TENANT, aggregate_id="t"
        ),
    }[target]
    async with serve([make_app()], sqlite_db) as host:
        assert await host.ok("hosttest.CreateThing", existing, {"name": "one"}) == 1
        answer = expect(await host.send(command_type, ref, body, **extra), code, status)
        assert answer["errorMsg"], case
        assert [commit.version for commit in await host.commits()] == [1]
        found = await host.read(existing)
        assert found is not None
        assert (found["version"], found["state"]["touches"]) == (1, 0)
        if target == "missing":
            assert await host.read(ref) is None


async def test_the_answers_say_what_is_wrong(db: Location) -> None:
    ref = thing("t")
    async with serve([make_app()], db) as host:
        await host.ok("hosttest.CreateThing", ref, {"name": "one"})
        unknown = expect(await host.send("hosttest.Nope", ref), "BadRequest", 400)
        assert "hosttest.Nope" in unknown["errorMsg"]
        assert "hosttest.Touch" in unknown["errorMsg"]  # the commands it has
        wrong = expect(
            await host.send("hosttest.Touch", ref, {"count": "many"}), "CommandValidation", 400
        )
        assert "count" in wrong["errorMsg"]
        conflict = expect(
            await host.send("hosttest.Touch", ref, {"count": 1}, version=5),
            "CommandExpectVersionConflict",
            409,
        )
        assert conflict["aggregateVersion"] == 1
        assert "version 1" in conflict["errorMsg"]
        assert "expects 5" in conflict["errorMsg"]
        nowhere = AggregateRef(
            context_name="nowhere", aggregate_name="thing", tenant_id=TENANT, aggregate_id="t"
        )
        missing_context = expect(await host.send("hosttest.Touch", nowhere), "NotFound", 404)
        assert "nowhere" in missing_context["errorMsg"]
        assert CONTEXT in missing_context["errorMsg"]  # what is served
        big = expect(await host.send("hosttest.Touch", ref, content=BIG), "BadRequest", 413)
        assert "256 KiB" in big["errorMsg"]
        # the refusal names the command's aggregate, as Wow's CommandResult does
        assert (big["contextName"], big["aggregateName"], big["aggregateId"]) == (
            CONTEXT,
            "thing",
            "t",
        )


async def test_a_non_ascii_id_is_read_percent_encoded_and_refused_raw(sqlite_db: Path) -> None:
    """A percent-encoded `✓` is the aggregate `/wow/aggregate/.../%E2%9C%93` names; raw UTF-8
    (read by the ASGI server as Latin-1: `â\x9c\x93`) is refused and creates nothing."""
    ref = thing("✓")
    async with serve([make_app()], sqlite_db) as host:
        sent = {
            "Command-Type": "hosttest.CreateThing",
            "Command-Aggregate-Context": ref.context_name,
            "Command-Aggregate-Name": ref.aggregate_name,
            "Command-Tenant-Id": ref.tenant_id,
            "Command-Wait-Stage": "PROCESSED",
            "Content-Type": "application/json",
        }
        body = json.dumps({"name": "one"}).encode()
        raw = await host.client.post(
            "/wow/command/send",
            content=body,
            headers=[(k.encode(), v.encode()) for k, v in sent.items()]
            + [(b"Command-Aggregate-Id", "✓".encode())],
        )
        refused = expect(raw, "BadRequest", 400)
        assert "Command-Aggregate-Id" in refused["errorMsg"]
        assert "percent-encoded" in refused["errorMsg"]
        assert await host.read(ref) is None
        assert await host.read(thing("\u00e2\x9c\x93")) is None
        encoded = await host.client.post(
            "/wow/command/send",
            content=body,
            headers={**sent, "Command-Aggregate-Id": "%E2%9C%93"},
        )
        assert expect(encoded, "Ok", 200)["aggregateId"] == "✓"
        found = await host.read(ref)  # GET /wow/aggregate/.../%E2%9C%93
        assert found is not None
        assert found["state"]["name"] == "one"


async def test_the_right_expected_version_is_decided(db: Location) -> None:
    ref = thing("t")
    async with serve([make_app()], db) as host:
        assert await host.ok("hosttest.CreateThing", ref, {"name": "one"}, version=0) == 1
        assert await host.ok("hosttest.Touch", ref, {"count": 2}, version=1) == 2
        expect(
            await host.send("hosttest.Touch", ref, {"count": 2}, version=1),
            "CommandExpectVersionConflict",
            409,
        )
        assert (await host.state(ref))["touches"] == 2


@pytest.mark.parametrize(
    "header", ["Command-Type", "Command-Aggregate-Context", "Command-Aggregate-Name"]
)
async def test_a_missing_required_header_commits_nothing(sqlite_db: Path, header: str) -> None:
    ref = thing("t")
    async with serve([make_app()], sqlite_db) as host:
        await host.ok("hosttest.CreateThing", ref, {"name": "one"})
        response = await host.send("hosttest.Touch", ref, {"count": 1}, omit=[header])
        # FastAPI's own validation answers these (422, {"detail": [...]}), see the next test
        assert response.status_code in (400, 422)
        assert [commit.version for commit in await host.commits()] == [1]


async def test_a_missing_command_type_is_answered_as_wow_does(sqlite_db: Path) -> None:
    async with serve([make_app()], sqlite_db, start=False) as host:
        response = await host.send("hosttest.Touch", thing("t"), {}, omit=["Command-Type"])
        expect(response, "BadRequest", 400)


async def test_the_answers_function_is_camel_case_as_the_rest(sqlite_db: Path) -> None:
    async with serve([make_app()], sqlite_db, start=False) as host:
        response = await host.send("hosttest.CreateThing", thing("t"), {"name": "one"})
        assert expect(response, "Ok", 200)["function"] == {
            "functionKind": "COMMAND",
            "contextName": CONTEXT,
            "processorName": "thing",
            "name": "Thing.create",
        }


async def test_creating_twice_is_a_duplicate_aggregate_id(db: Location) -> None:
    ref = thing("t")
    async with serve([make_app()], db) as host:
        await host.ok("hosttest.CreateThing", ref, {"name": "first"})
        answer = expect(
            await host.send("hosttest.CreateThing", ref, {"name": "second"}),
            "DuplicateAggregateId",
            400,
        )
        assert answer["aggregateVersion"] == 1
        assert (await host.state(ref))["name"] == "first"
        assert len(await host.commits()) == 1


async def test_a_deleted_aggregate_refuses_every_command_with_410(db: Location) -> None:
    ref = thing("t")
    async with serve([make_app()], db) as host:
        await host.ok("hosttest.CreateThing", ref, {"name": "one"})
        assert await host.ok("wow.DeleteAggregate", ref) == 2
        deleted = await host.commits()
        assert names(deleted[-1]) == ["wow.AggregateDeleted"]
        assert deleted[-1].body[0].body == {}
        for command_type, body in [
            ("hosttest.Touch", {"count": 1}),
            ("hosttest.CreateThing", {"name": "again"}),
            ("hosttest.DoNothing", {}),
            ("wow.DeleteAggregate", {}),
            ("wow.schedule.Cancel", {"key": "k"}),
            ("hosttest.Nope", {}),
        ]:
            answer = expect(
                await host.send(command_type, ref, body), "IllegalAccessDeletedAggregate", 410
            )
            assert answer["aggregateVersion"] == 2, command_type
        found = await host.read(ref)
        assert found is not None
        assert (found["version"], found["deleted"]) == (2, True)
        assert len(await host.commits()) == 2
        # the deletion is a schedule event: the relay hands it to the timers
        await eventually(
            lambda: _handed(host, deleted[-1].id), within=30, what="the deletion handed over"
        )


async def _handed(host: Served, commit_id: str) -> bool:
    return commit_id in host.timers.handed_ids


# --- 2. request ids and tenants ----------------------------------------------------------------


async def test_a_request_id_is_decided_once(db: Location) -> None:
    ref = thing("t")
    async with serve([make_app()], db) as host:
        await host.ok("hosttest.CreateThing", ref, {"name": "one"}, request_id="r-1")
        assert await host.ok("hosttest.Touch", ref, {"count": 3}, request_id="r-2") == 2
        again = expect(
            await host.send("hosttest.Touch", ref, {"count": 4}, request_id="r-2"),
            "DuplicateRequestId",
            400,
        )
        assert (again["aggregateVersion"], again["requestId"]) == (2, "r-2")
        # the creation's request id again, even as another command: a duplicate too
        expect(
            await host.send("hosttest.Touch", ref, {"count": 5}, request_id="r-1"),
            "DuplicateRequestId",
            400,
        )
        commits = await host.commits()
        assert [(c.version, c.request_id) for c in commits] == [(1, "r-1"), (2, "r-2")]
        assert (await host.state(ref))["touches"] == 3


async def test_a_command_without_request_id_is_stored_with_the_one_it_was_answered(
    db: Location,
) -> None:
    ref = thing("t")
    async with serve([make_app()], db, start=False) as host:
        created = expect(await host.send("hosttest.CreateThing", ref, {"name": "one"}), "Ok", 200)
        touched = expect(await host.send("hosttest.Touch", ref, {"count": 1}), "Ok", 200)
        answered = [created["requestId"], touched["requestId"]]
        assert all(answered) and len(set(answered)) == 2
        assert [c.request_id for c in await host.commits()] == answered
        # the id answered is the command's from now on: sent again, it is decided already
        again = await host.send("hosttest.Touch", ref, {"count": 1}, request_id=answered[1])
        expect(again, "DuplicateRequestId", 400)


async def test_a_refused_or_noop_request_id_is_decided_once(db: Location) -> None:
    ref = thing("t")
    async with serve([make_app()], db) as host:
        await host.ok("hosttest.CreateThing", ref, {"name": "one"})
        expect(await host.send("hosttest.Refuse", ref, request_id="r-x"), "IllegalState", 400)
        await host.ok("hosttest.DoNothing", ref, request_id="r-y")
        again = expect(
            await host.send("hosttest.Touch", ref, {"count": 1}, request_id="r-x"),
            "IllegalState",
            400,
        )
        assert "decided before" in again["errorMsg"]
        expect(
            await host.send("hosttest.Touch", ref, {"count": 1}, request_id="r-y"),
            "DuplicateRequestId",
            400,
        )
        # a malformed request decides nothing: the same id, fixed, is decided
        expect(
            await host.send("hosttest.Touch", ref, {"count": "x"}, request_id="r-z"),
            "CommandValidation",
            400,
        )
        assert await host.ok("hosttest.Touch", ref, {"count": 1}, request_id="r-z") == 2
        assert [commit.version for commit in await host.commits()] == [1, 2]


async def test_the_same_request_id_in_another_tenant_is_another_command(db: Location) -> None:
    mine, theirs = thing("t", "tenant-a"), thing("t", "tenant-b")
    async with serve([make_app()], db) as host:
        await host.ok("hosttest.CreateThing", mine, {"name": "a"}, request_id="r-1")
        assert await host.ok("hosttest.CreateThing", theirs, {"name": "b"}, request_id="r-1") == 1
        assert await host.ok("hosttest.Touch", mine, {"count": 1}, request_id="r-2") == 2
        assert await host.ok("hosttest.Touch", theirs, {"count": 7}, request_id="r-2") == 2
        expect(
            await host.send("hosttest.Touch", theirs, {"count": 7}, request_id="r-2"),
            "DuplicateRequestId",
            400,
        )
        assert [(c.tenant_id, c.version) for c in await host.commits()] == [
            ("tenant-a", 1),
            ("tenant-b", 1),
            ("tenant-a", 2),
            ("tenant-b", 2),
        ]
        assert (await host.state(mine))["touches"] == 1
        assert (await host.state(theirs))["touches"] == 7


async def test_a_tenant_cannot_read_or_change_another_tenants_aggregate(db: Location) -> None:
    mine, theirs = thing("shared", "tenant-a"), thing("shared", "tenant-b")
    async with serve([make_app()], db) as host:
        await host.ok("hosttest.CreateThing", mine, {"name": "a"})
        assert await host.read(theirs) is None
        expect(await host.send("hosttest.Touch", theirs, {"count": 1}), "NotFound", 404)
        expect(await host.send("wow.DeleteAggregate", theirs), "NotFound", 404)
        expect(
            await host.send("hosttest.Touch", mine, {"count": 1}, version=0),
            "CommandExpectVersionConflict",
            409,
        )
        # its own aggregate of that id is another one, created at version 1
        assert await host.ok("hosttest.CreateThing", theirs, {"name": "b"}) == 1
        assert await host.ok("wow.DeleteAggregate", theirs) == 2
        found = await host.read(mine)
        assert found is not None
        assert (found["version"], found["deleted"], found["state"]["name"]) == (1, False, "a")
        assert await host.ok("hosttest.Touch", mine, {"count": 1}) == 2
        # the default tenant, (0), is a tenant of its own too
        expect(
            await host.send(
                "hosttest.Touch", thing("shared"), {"count": 1}, omit=["Command-Tenant-Id"]
            ),
            "NotFound",
            404,
        )


# --- 3. one commit per decision ---------------------------------------------------------------


async def test_the_last_confirmation_commits_its_events_and_schedule_together(
    db: Location, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ESHOP_PAYMENT_GRACE_PERIOD", raising=False)
    order = ORDER.ref(TENANT, "o-1")
    items = [{"product_id": "mug", "quantity": 1}, {"product_id": "cap", "quantity": 2}]
    async with serve([eshop_apps()[0]], db) as host:
        await host.ok("eshop.order.CreateOrder", order, {"items": items}, request_id="r-1")
        assert await host.ok("eshop.order.ConfirmOrderStock", order, {"product_id": "mug"}) == 2
        assert (
            await host.ok(
                "eshop.order.ConfirmOrderStock",
                order,
                {"product_id": "cap"},
                request_id="r-3",
                headers={"Command-Header-trace_id": "trace-7", "Command-Owner-Id": "alice"},
            )
            == 3
        )
        commits = await host.commits()
        assert [names(c) for c in commits] == [
            ["eshop.order.OrderCreated"],
            ["eshop.order.OrderStockItemConfirmed"],
            [
                "eshop.order.OrderStockItemConfirmed",
                "eshop.order.OrderStockConfirmed",
                "wow.ScheduleSet",
            ],
        ]
        found = await host.read(order)
        assert found is not None
        assert found["state"]["status"] == "AWAITING_PAYMENT"
        last = found["commits"][-1]
        assert {k: v for k, v in last.items() if k not in ("id", "createTime", "commandId")} == {
            "contextName": "eshop-order",
            "aggregateName": "order",
            "tenantId": TENANT,
            "aggregateId": "o-1",
            "ownerId": "alice",
            "spaceId": "",
            "version": 3,
            "requestId": "r-3",
            "header": {"trace_id": "trace-7"},
            "body": [
                {
                    "id": f"{last['id']}-0",
                    "name": "eshop.order.OrderStockItemConfirmed",
                    "body": {"product_id": "cap"},
                },
                {"id": f"{last['id']}-1", "name": "eshop.order.OrderStockConfirmed", "body": {}},
                {
                    "id": f"{last['id']}-2",
                    "name": "wow.ScheduleSet",
                    "body": {
                        "key": "payment-grace-period",
                        "rule": {"after": "PT20S"},
                        "command": {
                            "type": "eshop.order.CancelOrder",
                            "body": {"cause": {"code": "PAYMENT_TIMEOUT", "detail": ""}},
                            "revision": "2",
                        },
                        "target": None,
                    },
                },
            ],
        }
        assert isinstance(last["createTime"], int)
        assert last["createTime"] > 1_700_000_000_000
        # the relay hands over that one commit (the others schedule nothing), as stored
        await eventually(
            lambda: _handed(host, last["id"]), within=30, what="the schedule handed over"
        )
        assert host.timers.handed_ids == [last["id"]]
        assert host.timers.handed[0].model_dump(mode="json") == last
        # the same confirmation again: a NoOp, nothing more committed
        assert await host.ok("eshop.order.ConfirmOrderStock", order, {"product_id": "cap"}) == 3
        assert len(await host.commits()) == 3


async def test_the_grace_period_is_the_policys(sqlite_db: Path) -> None:
    order = ORDER.ref(TENANT, "o-1")
    async with serve([order_app(timedelta(minutes=30))], sqlite_db, start=False) as host:
        items = [{"product_id": "mug", "quantity": 1}]
        await host.ok("eshop.order.CreateOrder", order, {"items": items})
        await host.ok("eshop.order.ConfirmOrderStock", order, {"product_id": "mug"})
        last = (await host.commits())[-1]
        assert last.body[-1].body["rule"] == {"after": "PT30M"}


async def test_a_decision_that_only_schedules_commits_just_the_schedule_event(db: Location) -> None:
    ref = thing("t")
    async with serve([make_app()], db) as host:
        await host.ok("hosttest.CreateThing", ref, {"name": "one"})
        assert await host.ok("hosttest.ScheduleOnly", ref, {"key": "reminder"}) == 2
        assert await host.ok("hosttest.CancelOnly", ref, {"key": "reminder"}) == 3
        commits = await host.commits()
        assert [[(e.name, e.body) for e in c.body] for c in commits[1:]] == [
            [
                (
                    "wow.ScheduleSet",
                    {
                        "key": "reminder",
                        "rule": {"after": "PT5M"},
                        "command": {"type": REMIND, "body": {"note": "later"}},
                        "target": None,
                    },
                )
            ],
            [("wow.ScheduleCancelled", {"key": "reminder"})],
        ]
        await eventually(lambda: _handed_count(host, 2), within=30, what="both handed over")
        assert host.timers.handed_ids == [commits[1].id, commits[2].id]


async def _handed_count(host: Served, count: int) -> bool:
    return len(host.timers.handed) >= count


async def test_a_noop_commits_nothing(db: Location) -> None:
    ref = thing("t")
    async with serve([make_app()], db) as host:
        await host.ok("hosttest.CreateThing", ref, {"name": "one"})
        answer = expect(await host.send("hosttest.DoNothing", ref), "Ok", 200)
        assert answer["aggregateVersion"] == 1
        assert answer["function"]["name"] == "Thing.do_nothing"
        assert len(await host.commits()) == 1
        found = await host.read(ref)
        assert found is not None
        assert found["version"] == 1


async def test_a_bug_in_domain_code_is_a_500_and_commits_nothing(sqlite_db: Path) -> None:
    ref = thing("t")
    async with serve([make_app()], sqlite_db) as host:
        await host.ok("hosttest.CreateThing", ref, {"name": "one"})
        answer = expect(await host.send("hosttest.Explode", ref), "InternalServerError", 500)
        assert answer["errorMsg"] == "RuntimeError: the domain code has a bug"
        assert len(await host.commits()) == 1
        # the aggregate is whole after it: the next command is decided on version 1
        assert await host.ok("hosttest.Touch", ref, {"count": 1}) == 2


async def test_an_undeclared_scheduled_type_is_a_500_naming_function_and_type(
    sqlite_db: Path,
) -> None:
    ref = thing("t")
    async with serve([make_app()], sqlite_db) as host:
        await host.ok("hosttest.CreateThing", ref, {"name": "one"})
        answer = expect(
            await host.send("hosttest.ScheduleUndeclared", ref), "InternalServerError", 500
        )
        assert answer["errorMsg"].startswith("UndeclaredError: ")
        assert "Thing.schedule_undeclared" in answer["errorMsg"]
        assert REMIND in answer["errorMsg"]
        assert len(await host.commits()) == 1
        assert host.timers.calls == []


# --- 4. sagas ---------------------------------------------------------------------------------


def eshop() -> list[App]:
    return [order_app(), inventory_app]


async def _stock(host: Served, product: str, quantity: int) -> None:
    ref = STOCK.ref(TENANT, product)
    await host.ok("eshop.inventory.ReceiveStock", ref, {"quantity": quantity})


async def _order(host: Served, order_id: str, **items: int) -> AggregateRef:
    ref = ORDER.ref(TENANT, order_id)
    listed = [{"product_id": p, "quantity": q} for p, q in items.items()]
    await host.ok("eshop.order.CreateOrder", ref, {"items": listed})
    return ref


async def _status(host: Served, ref: AggregateRef, status: str) -> bool:
    return bool((await host.state(ref))["status"] == status)


async def test_an_order_for_stocked_products_awaits_payment_with_its_stock_reserved(
    db: Location,
) -> None:
    async with serve(eshop(), db) as host:
        await _stock(host, "mug", 10)
        await _stock(host, "cap", 5)
        order = await _order(host, "o-1", mug=2, cap=1)
        await eventually(
            lambda: _status(host, order, "AWAITING_PAYMENT"), within=30, what="awaiting payment"
        )
        await host.settle()
        mug = await host.state(STOCK.ref(TENANT, "mug"))
        cap = await host.state(STOCK.ref(TENANT, "cap"))
        assert (mug["on_hand"], mug["reserved"]) == (10, {"o-1": 2})
        assert (cap["on_hand"], cap["reserved"]) == (5, {"o-1": 1})
        state = await host.state(order)
        assert state["confirmed_products"] == ["cap", "mug"]
        scheduling = [c for c in await host.commits() if c.schedule_events()]
        assert [(c.aggregate_id, c.version) for c in scheduling] == [("o-1", 3)]
        assert host.timers.handed_ids == [scheduling[0].id]
        # the saga's commands carry its request ids and the causation
        commits = await host.commits()
        reserved = [c for c in commits if c.aggregate_name == "stock" and c.version == 2]
        assert len(reserved) == 2
        for commit in reserved:
            assert commit.request_id.startswith(f"{INVENTORY_SAGA}:")
            assert commit.header["upstream_name"] == "eshop.order.OrderCreated"

        # the customer cancels: the grace period is cancelled with it, the stock released
        cause = {"code": "CUSTOMER", "detail": "changed my mind"}
        assert await host.ok("eshop.order.CancelOrder", order, {"cause": cause}) == 4
        await host.settle()
        mug = await host.state(STOCK.ref(TENANT, "mug"))
        cap = await host.state(STOCK.ref(TENANT, "cap"))
        assert (mug["reserved"], cap["reserved"]) == ({}, {})
        cancelled = [c for c in await host.commits() if c.aggregate_id == "o-1"][-1]
        assert names(cancelled) == ["eshop.order.OrderCancelled", "wow.ScheduleCancelled"]
        assert host.timers.handed_ids == [scheduling[0].id, cancelled.id]


async def test_an_order_for_a_never_stocked_product_is_cancelled_out_of_stock(
    sqlite_db: Path,
) -> None:
    async with serve(eshop(), sqlite_db) as host:
        await _stock(host, "mug", 10)
        order = await _order(host, "o-2", mug=1, ghost=1)
        await eventually(lambda: _status(host, order, "CANCELLED"), within=30, what="cancelled")
        await host.settle()
        state = await host.state(order)
        assert state["cancel_cause"] == {"code": "OUT_OF_STOCK", "detail": ""}
        assert await host.read(STOCK.ref(TENANT, "ghost")) is None
        mug = await host.state(STOCK.ref(TENANT, "mug"))
        assert (mug["on_hand"], mug["reserved"]) == (10, {})  # reserved, then released
        cancelling = [c for c in await host.commits() if "eshop.order.OrderCancelled" in names(c)]
        assert len(cancelling) == 1
        # sent by the saga's @on_rejected, with a request id derived from the refused one
        assert cancelling[0].request_id.startswith(f"{INVENTORY_SAGA}:")
        assert cancelling[0].request_id.endswith(":on_reserve_rejected:0")


async def test_a_shortage_cancels_the_order(sqlite_db: Path) -> None:
    async with serve(eshop(), sqlite_db) as host:
        await _stock(host, "mug", 1)
        order = await _order(host, "o-3", mug=5)
        await eventually(lambda: _status(host, order, "CANCELLED"), within=30, what="cancelled")
        await host.settle()
        assert (await host.state(order))["cancel_cause"] == {"code": "OUT_OF_STOCK", "detail": ""}
        mug = await host.state(STOCK.ref(TENANT, "mug"))
        assert (mug["on_hand"], mug["reserved"]) == (1, {})
        shortage = [c for c in await host.commits() if "eshop.inventory.StockShortage" in names(c)]
        assert [e.body for e in shortage[0].body] == [
            {"order_id": "o-3", "quantity": 5, "available": 1}
        ]


async def test_a_shortage_of_one_product_releases_the_others(sqlite_db: Path) -> None:
    async with serve(eshop(), sqlite_db) as host:
        await _stock(host, "mug", 10)
        await _stock(host, "cap", 1)
        order = await _order(host, "o-4", mug=3, cap=2)
        await eventually(lambda: _status(host, order, "CANCELLED"), within=30, what="cancelled")
        await host.settle()
        mug = await host.state(STOCK.ref(TENANT, "mug"))
        assert (mug["on_hand"], mug["reserved"]) == (10, {})
        assert host.timers.calls == []  # never confirmed: nothing scheduled


async def test_a_saga_asks_an_existing_target_to_schedule_and_cancel(db: Location) -> None:
    saga = SchedulerSaga()
    target, asker = thing("target"), thing("asker")
    async with serve([make_app(saga)], db) as host:
        await host.ok("hosttest.CreateThing", target, {"name": "target"})
        await host.ok("hosttest.CreateThing", asker, {"name": "asker"})
        await host.ok("hosttest.Ask", asker, {"target_id": "target", "key": "k1"})
        await host.settle()
        commits = await host.commits()
        asked, set_ = commits[2], commits[3]
        assert (set_.aggregate_id, set_.version) == ("target", 2)
        assert [(e.name, e.body) for e in set_.body] == [
            (
                "wow.ScheduleSet",
                {
                    "key": "k1",
                    "rule": {"after": "PT10M"},  # ASKED_DELAY
                    "command": {"type": REMIND, "body": {"note": "asked by asker"}},
                    "target": None,
                },
            )
        ]
        assert set_.request_id.startswith("saga:host-test.SchedulerSaga:")
        assert (set_.header["upstream_id"], set_.header["upstream_name"]) == (
            asked.id,
            "hosttest.Asked",
        )
        assert host.timers.handed_ids == [set_.id]

        await host.ok("hosttest.Ask", asker, {"target_id": "target", "key": "k1", "cancel": True})
        await host.settle()
        cancelled = (await host.commits())[-1]
        assert (cancelled.aggregate_id, cancelled.version) == ("target", 3)
        assert [(e.name, e.body) for e in cancelled.body] == [
            ("wow.ScheduleCancelled", {"key": "k1"})
        ]
        assert host.timers.handed_ids == [set_.id, cancelled.id]
        assert saga.rejected == []


async def test_a_saga_hears_that_a_missing_target_refused_its_schedule(sqlite_db: Path) -> None:
    saga = SchedulerSaga()
    asker = thing("asker")
    async with serve([make_app(saga)], sqlite_db) as host:
        await host.ok("hosttest.CreateThing", asker, {"name": "asker"})
        await host.ok("hosttest.Ask", asker, {"target_id": "nobody", "key": "k1"})
        await host.ok("hosttest.Ask", asker, {"target_id": "nobody", "key": "k2", "cancel": True})
        await host.settle()
        assert [(r.command_type, r.error_code, r.ref, r.body["key"]) for r in saga.rejected] == [
            ("wow.schedule.Set", "NotFound", thing("nobody"), "k1"),
            ("wow.schedule.Cancel", "NotFound", thing("nobody"), "k2"),
        ]
        assert saga.rejected[0].body["command"] == {
            "type": REMIND,
            "body": {"note": "asked by asker"},
        }
        assert "nobody" in saga.rejected[0].error_msg
        assert await host.read(thing("nobody")) is None
        assert [c.aggregate_id for c in await host.commits()] == ["asker"] * 3
        assert host.timers.calls == []


# --- 5. at least once: the relay and the sagas after a restart --------------------------------


async def test_a_restarted_relay_does_not_hand_over_again_what_it_recorded(db: Location) -> None:
    ref = thing("t")
    async with serve([make_app()], db) as first:
        await first.ok("hosttest.CreateThing", ref, {"name": "one"})
        await first.ok("hosttest.ScheduleOnly", ref, {"key": "a"})
        await first.ok("hosttest.ScheduleOnly", ref, {"key": "b"})
        await first.settle()
        before = first.timers.handed_ids
        assert len(before) == 2
    async with serve([make_app()], db) as second:
        assert (await second.followers())[RELAY]["behind"] == 0
        await second.ok("hosttest.ScheduleOnly", ref, {"key": "c"})
        await second.settle()
        latest = (await second.commits())[-1]
        assert second.timers.handed_ids == [latest.id]
        assert len(second.timers.calls) == 1
        assert (await second.followers())[RELAY]["position"] == (await second.log())[-1][0]


async def test_a_relay_sets_aside_what_the_timers_refuse_and_loses_none_of_it(
    db: Location,
) -> None:
    bad, good = thing("bad"), thing("good")
    timers = FakeTimers()
    timers.refuse = {"bad"}
    async with serve([make_app()], db, timers=timers) as first:
        await first.ok("hosttest.CreateThing", bad, {"name": "bad"})
        await first.ok("hosttest.ScheduleOnly", bad, {"key": "a"})
        await first.ok("hosttest.CreateThing", good, {"name": "good"})
        await first.ok("hosttest.ScheduleOnly", good, {"key": "a"})
        await eventually(lambda: _handed_count(first, 1), within=10, what="good handed over")
        await first.ok("hosttest.CancelOnly", bad, {"key": "a"})  # queued behind its set
        await first.ok("hosttest.ScheduleOnly", good, {"key": "b"})  # the rest goes on
        await eventually(lambda: _handed_count(first, 2), within=10, what="good again")
        relay = (await first.followers())[RELAY]
        (aside,) = relay["setAside"]
        assert (aside["aggregateId"], aside["commits"]) == ("bad", 2)
        assert aside["reason"] == "RuntimeError: bad is refused" and aside["attempts"] >= 1
        assert {c.aggregate_id for c in timers.handed} == {"good"}
        bad_first = min(at for at, c in await first.log() if c.aggregate == bad and c.version == 2)
        store = first.runtime.host.store
        recorded = await first.runtime.host.run(lambda: store.position(RELAY))
        assert recorded == bad_first - 1  # held back: a restart hands it over again
        assert relay["recorded"] == recorded < relay["position"]
    async with serve([make_app()], db) as second:  # the timers take it now: none lost
        await second.settle()
        assert [c.version for c in second.timers.handed if c.aggregate == bad] == [2, 3]
        assert (await second.followers())[RELAY]["setAside"] == []


async def test_a_commit_admission_refuses_is_passed_over_shown_and_blocks_nothing(
    sqlite_db: Path,
) -> None:
    """The host's own commits pass admission; one written by other means that does not (two
    schedule events with one id) can never be handed over: the relay passes over it, shows it,
    and hands over the rest of the log, the same aggregate's later commits too."""
    odd, good = thing("odd"), thing("good")
    async with serve([make_app()], sqlite_db) as host:
        set_key = {"name": "wow.ScheduleSet", "id": "e"}
        rule, remind = {"after": "PT5M"}, {"type": REMIND, "body": {}}
        events = [{**set_key, "body": {"key": k, "rule": rule, "command": remind}} for k in "ab"]
        base = {
            "contextName": CONTEXT, "aggregateName": "thing", "tenantId": TENANT,
            "aggregateId": "odd", "createTime": 1_800_000_000_000,
        }
        bad = Commit.parse({**base, "id": "odd-1", "version": 1, "body": events})
        later = Commit.parse({**base, "id": "odd-2", "version": 2, "body": events[:1]})
        store = host.runtime.host.store
        await host.runtime.host.run(lambda: store.append(bad))
        await host.runtime.host.run(lambda: store.append(later))
        await host.ok("hosttest.CreateThing", good, {"name": "good"})
        await host.ok("hosttest.ScheduleOnly", good, {"key": "a"})
        await eventually(lambda: _handed_count(host, 2), within=10, what="the rest handed over")
        relay = (await host.followers())[RELAY]
        (refused,) = relay["refused"]
        assert (refused["commitId"], refused["aggregateId"]) == ("odd-1", odd.aggregate_id)
        assert "event id 'e'" in refused["reason"]
        assert relay["setAside"] == []
        assert [c.id for c in host.timers.handed][:1] == ["odd-2"]
        assert {c.aggregate_id for c in host.timers.handed} == {"odd", "good"}


class _SlowTimers(FakeTimers):
    """Fails `slow`'s commits as too slow the first time; its retries then hang on `release`,
    as a hand-over that keeps timing out would, until the test releases them."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.tried = 0

    async def reachable(self) -> bool:
        return True

    async def apply_many(
        self,
        commits: Sequence[Commit] | Admission,
        *,
        later: Horizon | None = None,
        failures: dict[AggregateRef, Exception] | None = None,
        within: float | None = None,
    ) -> None:
        listed = list(commits.commits if isinstance(commits, Admission) else commits)
        if failures is not None and any(c.aggregate_id == "slow" for c in listed):
            self.tried += 1
            if self.tried > 1:
                await self.release.wait()
            else:
                for commit in listed:
                    if commit.aggregate_id == "slow":
                        failures[commit.aggregate] = SlowHandOverError("not handed over in 1 s")
                listed = [c for c in listed if c.aggregate_id != "slow"]
        await super().apply_many(listed, later=later, failures=failures, within=within)


async def test_a_lone_slow_aggregate_is_set_aside_and_its_retries_hold_no_one_back(
    sqlite_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Alone in its batch and too slow while Temporal answers: set aside, not taken for an
    outage; its retry hangs in a task of its own while the rest of the log is handed over."""
    monkeypatch.setattr(aside, "BACKOFF_S", (0.05,))
    timers = _SlowTimers()
    async with serve([make_app()], sqlite_db, timers=timers) as host:
        await host.ok("hosttest.CreateThing", thing("slow"), {"name": "slow"})
        await host.ok("hosttest.ScheduleOnly", thing("slow"), {"key": "a"})

        async def set_aside() -> list[dict[str, Any]]:
            return list((await host.followers())[RELAY]["setAside"])

        (shown,) = await eventually(set_aside, within=10, what="set aside", holds=bool)
        assert "SlowHandOverError" in shown["reason"]
        await eventually(lambda: timers.tried >= 2, within=10, what="its retry hanging")
        for n in range(3):  # the others go on meanwhile
            await host.ok("hosttest.CreateThing", thing(f"g{n}"), {"name": "g"})
            await host.ok("hosttest.ScheduleOnly", thing(f"g{n}"), {"key": "a"})
        await eventually(lambda: _handed_count(host, 3), within=10, what="the others handed")
        assert {c.aggregate_id for c in timers.handed} == {"g0", "g1", "g2"}
        timers.release.set()
        await eventually(set_aside, within=10, what="handed at last", holds=lambda a: not a)
        assert "slow" in {c.aggregate_id for c in timers.handed}


def _advance_failing(
    monkeypatch: pytest.MonkeyPatch,
    follower: str,
    *,
    times: int | None = None,
    when: Callable[[EventStore, int], bool] = lambda store, position: True,
) -> threading.Event:
    """Make `EventStore.advance` raise for `follower` (`times` times, or until undone), as a
    crash between handling commits and recording the position would; the event is set at the
    first failure."""
    real = EventStore.advance
    failed = threading.Event()
    left = [times]

    def advance(self: EventStore, name: str, position: int) -> None:
        if name == follower and left[0] != 0 and when(self, position):
            failed.set()
            if left[0] is not None:
                left[0] -= 1
            raise RuntimeError("crashed before the position was recorded")
        real(self, name, position)

    monkeypatch.setattr(EventStore, "advance", advance)
    return failed


async def _until_set(event: threading.Event, what: str) -> None:
    async def is_set() -> bool:
        return event.is_set()

    await eventually(is_set, within=30, what=what)


async def test_a_commit_handed_over_but_not_recorded_is_handed_over_once_more(
    db: Location, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = thing("t")
    async with serve([make_app()], db) as first:
        await first.ok("hosttest.CreateThing", ref, {"name": "one"})
        await first.settle()
        failed = _advance_failing(monkeypatch, RELAY)
        first.timers.takes = 1  # its retries after the crash fail: this runtime hands over once
        await first.ok("hosttest.ScheduleOnly", ref, {"key": "a"})
        await _until_set(failed, "the relay handed over, then crashed")
        scheduled = (await first.commits())[-1]
        assert first.timers.handed_ids == [scheduled.id]
        assert (await first.followers())[RELAY]["position"] < (await first.log())[-1][0]
    monkeypatch.undo()
    async with serve([make_app()], db) as second:
        await second.settle()
        assert second.timers.handed_ids == [scheduled.id]
        await second.ok("hosttest.ScheduleOnly", ref, {"key": "b"})
        await second.settle()
        latest = (await second.commits())[-1]
        assert second.timers.handed_ids == [scheduled.id, latest.id]
        assert second.timers.handed[0].model_dump() == scheduled.model_dump()


async def test_a_relay_that_failed_to_record_hands_over_again_then_moves_on(
    db: Location, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = thing("t")
    async with serve([make_app()], db) as host:
        await host.ok("hosttest.CreateThing", ref, {"name": "one"})
        await host.settle()
        _advance_failing(monkeypatch, RELAY, times=1)
        await host.ok("hosttest.ScheduleOnly", ref, {"key": "a"})
        await host.settle()
        scheduled = (await host.commits())[-1]
        assert host.timers.handed_ids == [scheduled.id, scheduled.id]
        await host.ok("hosttest.ScheduleOnly", ref, {"key": "b"})
        await host.settle()
        latest = (await host.commits())[-1]
        assert host.timers.handed_ids == [scheduled.id, scheduled.id, latest.id]


async def test_a_saga_restarted_midway_decides_no_command_twice(
    db: Location, monkeypatch: pytest.MonkeyPatch
) -> None:
    def past_the_order(store: EventStore, position: int) -> bool:
        handled = store.commits_after(0, 1000)
        return any("eshop.order.OrderCreated" in names(c) for n, c in handled if n <= position)

    failed = _advance_failing(monkeypatch, INVENTORY_SAGA, when=past_the_order)
    async with serve(eshop(), db) as first:
        await _stock(first, "mug", 10)
        await _stock(first, "cap", 5)
        order = await _order(first, "o-1", mug=2, cap=1)
        await _until_set(failed, "the saga reserved the stock, then crashed")
        reserved = [c for c in await first.commits() if "eshop.inventory.StockReserved" in names(c)]
        assert len(reserved) == 2  # its commands were decided before the crash
    monkeypatch.undo()
    async with serve(eshop(), db, start=False) as idle:
        store = idle.runtime.host.store
        position = await idle.runtime.host.run(lambda: store.position(INVENTORY_SAGA))
        created = next(n for n, c in await idle.log() if c.aggregate_id == "o-1")
        assert position < created  # the saga will handle the order again
    async with serve(eshop(), db) as second:
        await eventually(
            lambda: _status(second, order, "AWAITING_PAYMENT"), within=30, what="awaiting payment"
        )
        await second.settle()
        commits = await second.commits()
        # 2 receipts, the order, 2 reservations (once each, though sent twice), 2 confirmations
        assert len(commits) == 7
        assert [c.id for c in commits if "eshop.inventory.StockReserved" in names(c)] == [
            c.id for c in reserved
        ]
        # each commit holds its request id: the saga's 4, the host's for the 3 sent without one
        requests = [c.request_id for c in commits]
        assert len(set(requests)) == 7
        assert len([r for r in requests if r.startswith("saga:")]) == 4
        mug = await second.state(STOCK.ref(TENANT, "mug"))
        assert mug["reserved"] == {"o-1": 2}


async def test_a_relay_catching_up_hands_each_batch_over_knowing_what_the_log_holds_later(
    db: Location, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Temporal away while one key is set three times: each batch the relay hands over after
    the outage comes with the later changes, so the timers never start the older sets; and
    before the first, the second set as a stop (the third replaces it), so a timer running an
    older schedule of the key ends at once."""
    monkeypatch.setattr(Relay, "batch", 1)
    monkeypatch.setattr(Relay, "read_ahead", 2)  # reading ahead takes several pages
    ref = thing("t")
    timers = FakeTimers()
    async with serve([make_app()], db, timers=timers) as host:
        timers.down = ConnectionError("temporal is down")
        await host.ok("hosttest.CreateThing", ref, {"name": "one"})
        for _ in range(3):
            await host.ok("hosttest.ScheduleOnly", ref, {"key": "a"})
        timers.down = None
        await host.settle()
        scheduling = [c for _, c in await host.log() if c.schedule_events()]
    first, second, latest = scheduling
    assert timers.handed_ids == [second.id, first.id, second.id, latest.id]
    (early, *batches) = timers.calls
    assert [len(call) for call in timers.calls] == [1, 1, 1, 1]
    assert [c.id for c in batches[0] + batches[1] + batches[2]] == [c.id for c in scheduling]
    assert early[0].schedule_events()[0][1] == second.schedule_events()[0][1]
    for call, ahead in zip(timers.calls, timers.ahead, strict=True):
        (commit,) = call
        assert ahead[(ref, "a")] == (latest.version, 0), (commit.version, ahead)


async def test_a_relay_reads_no_further_ahead_than_its_limit(
    db: Location, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the timers away while five keys are set, the relay's read-ahead holds at most
    `read_ahead_limit` commits past the batch it hands over, and lets go of what it passed."""
    monkeypatch.setattr(Relay, "batch", 1)
    monkeypatch.setattr(Relay, "read_ahead_limit", 2)
    ref = thing("t")
    timers = FakeTimers()
    async with serve([make_app()], db, timers=timers) as host:
        timers.down = ConnectionError("temporal is down")
        await host.ok("hosttest.CreateThing", ref, {"name": "one"})
        for n in range(5):
            await host.ok("hosttest.ScheduleOnly", ref, {"key": f"k{n}"})
        timers.down = None
        await host.settle()
        scheduling = [c for _, c in await host.log() if c.schedule_events()]
    assert timers.handed_ids == [c.id for c in scheduling]  # one set a key: nothing to stop
    for n, ahead in enumerate(timers.ahead):  # handing k{n} over: at most k{n+2} ahead
        assert set(ahead) <= {(ref, f"k{k}") for k in range(n, n + 3)}, (n, ahead)
        assert n == 4 or (ref, f"k{n + 1}") in ahead, (n, ahead)


# --- 6. the timers away -----------------------------------------------------------------------


@pytest.mark.parametrize("where", ["connect", "apply_many"])
async def test_commands_go_on_while_the_timers_are_away_and_none_is_lost(
    db: Location, where: str
) -> None:
    refs = [thing(f"t{n}") for n in range(3)]
    timers = FakeTimers()
    async with serve([make_app()], db, timers=timers) as host:
        outage = ConnectionError("temporal is down")
        if where == "connect":
            host.connect.down = outage
        else:
            timers.down = outage
        for ref in refs:
            await host.ok("hosttest.CreateThing", ref, {"name": ref.aggregate_id})
        for key in ("a", "b", "c"):
            for ref in refs:
                await host.ok("hosttest.ScheduleOnly", ref, {"key": key})  # timers down: Ok
                await host.ok("hosttest.Touch", ref, {"count": 1})

        async def failing() -> dict[str, Any]:
            relay = (await host.followers())[RELAY]
            return relay if relay["lastError"] else {}

        relay = await eventually(failing, within=30, what="the relay reports the outage")
        log = await host.log()
        first_scheduling = next(n for n, c in log if c.schedule_events())
        assert relay["position"] < first_scheduling
        assert relay["behind"] == sum(1 for n, _ in log if n > relay["position"]) >= 18
        assert relay["lastError"] == "ConnectionError: temporal is down"
        assert isinstance(relay["failingSince"], float)
        assert timers.calls == []
        attempts = host.connect.attempts if where == "connect" else timers.attempts
        assert attempts >= 1

        host.connect.down = None
        timers.down = None
        await host.settle()
        scheduling = [c for _, c in await host.log() if c.schedule_events()]
        assert len(scheduling) == 9
        assert timers.handed_ids == [c.id for c in scheduling]  # log order, each once
        for ref in refs:
            versions = [c.version for c in timers.handed if c.aggregate_id == ref.aggregate_id]
            assert versions == [2, 4, 6]
        relay = (await host.followers())[RELAY]
        assert (relay["behind"], relay["lastError"], relay["failingSince"]) == (0, None, None)
        assert relay["position"] == (await host.log())[-1][0]


# --- 6b. the guard: a slot the log stopped before it was due is refused ------------------------


def slot_headers(set_commit: Commit, due: int, owner: AggregateRef | None = None) -> dict[str, str]:
    """The message headers a timer's delivery of slot 1 of `set_commit`'s schedule carries."""
    (event,) = [e for e in set_commit.body if e.name == "wow.ScheduleSet"]
    values = {
        **origin_headers(owner or set_commit.aggregate, set_commit.version, event.id),
        "upstream_id": set_commit.id,
        "schedule_timer": f"{set_commit.id}:{event.id}",
        "schedule_key": event.body["key"],
        "schedule_slot": "1",
        "schedule_due": str(due),
    }
    return {f"Command-Header-{name}": value for name, value in values.items()}


async def test_a_slot_the_log_stopped_before_it_was_due_is_refused_once(db: Location) -> None:
    armed, other = REMINDER.ref(TENANT, "a"), REMINDER.ref(TENANT, "b")
    async with serve([reminders_app], db, start=False) as host:
        await host.ok("reminders.Arm", armed, {"millis": 60_000})
        await host.ok("reminders.Arm", other, {"millis": 60_000})
        await host.ok("reminders.Disarm", armed)
        set_commit, disarmed = [c for c in await host.commits() if c.aggregate == armed]
        due = set_commit.create_time + 60_000
        sent = slot_headers(set_commit, due)
        refused = expect(
            await host.send(RING, armed, request_id="slot#1", headers=sent), "IllegalState", 400
        )
        assert f"commit {disarmed.id} (version 2" in refused["errorMsg"]
        assert "cancelled key ring" in refused["errorMsg"]
        again = await host.send(RING, armed, request_id="slot#1", headers=sent)
        assert expect(again, "IllegalState", 400)["errorMsg"].startswith(refused["errorMsg"])
        # the same stop guards a command the schedule sent to another aggregate
        expect(await host.send(RING, other, request_id="to-b#1", headers=sent), "IllegalState", 400)
        # a slot due when the disarm was committed was owed: decided on the state then
        owed = slot_headers(set_commit, disarmed.create_time)
        await host.ok(RING, armed, request_id="owed#1", headers=owed)
        # a schedule of an aggregate this host does not keep: its log is not here to judge
        elsewhere = REMINDER.model_copy(update={"context_name": "elsewhere"}).ref(TENANT, "a")
        foreign = slot_headers(set_commit, due, owner=elsewhere)
        await host.ok(RING, other, request_id="foreign#1", headers=foreign)
        rang = [c for c in await host.commits() if "reminders.Rang" in names(c)]
        assert [(c.aggregate_id, c.request_id) for c in rang] == [
            ("a", "owed#1"),
            ("b", "foreign#1"),
        ]


# --- 6c. a timer's command written by an older build: read through the app's upcasters --------


async def _awaiting_payment(host: Served, order_id: str) -> tuple[AggregateRef, dict[str, str]]:
    """An order whose grace period is set; the headers its timer's delivery of slot 1 carries."""
    order = ORDER.ref(TENANT, order_id)
    items = [{"product_id": "mug", "quantity": 1}]
    await host.ok("eshop.order.CreateOrder", order, {"items": items})
    assert await host.ok("eshop.order.ConfirmOrderStock", order, {"product_id": "mug"}) == 2
    set_commit = (await host.commits())[-1]
    return order, slot_headers(set_commit, set_commit.create_time + 20_000)


def _cancelled(commit: Commit) -> dict[str, Any]:
    (event,) = [e for e in commit.body if e.name == "eshop.order.OrderCancelled"]
    return dict(event.body)


async def test_a_grace_period_scheduled_by_an_older_build_is_decided_through_the_upcaster(
    sqlite_db: Path,
) -> None:
    """A timer started before `CancelOrder` revision 2 sends the body it was given then,
    `{"reason": ...}`, and no revision: the order app's upcaster reads it as a cause and the order
    is cancelled by its timer, decided once."""
    async with serve([order_app()], sqlite_db, start=False) as host:
        order, sent = await _awaiting_payment(host, "o-old")
        assert "Command-Header-command_revision" not in sent
        timer = sent["Command-Header-schedule_timer"]
        old = {"reason": "PAYMENT_TIMEOUT"}
        assert await host.ok(CANCEL_ORDER, order, old, request_id=f"{timer}#1", headers=sent) == 3
        assert (await host.state(order))["status"] == "CANCELLED"
        last = (await host.commits())[-1]
        assert names(last) == ["eshop.order.OrderCancelled"]  # its own timer: nothing to cancel
        assert _cancelled(last) == {
            "cause": {"code": "PAYMENT_TIMEOUT", "detail": ""},
            "items": [{"product_id": "mug", "quantity": 1}],
            "timer": timer,
        }
        again = await host.send(CANCEL_ORDER, order, old, request_id=f"{timer}#1", headers=sent)
        expect(again, "DuplicateRequestId", 400)


async def test_a_timers_command_is_read_at_the_revision_it_carries(sqlite_db: Path) -> None:
    """The body of revision 2 is decided as sent (no upcaster touches it); a body that is not
    the revision its header says is `CommandValidation` (the timer parks), and commits nothing."""
    new = {"cause": {"code": "PAYMENT_TIMEOUT", "detail": "20 s unpaid"}}
    async with serve([order_app()], sqlite_db, start=False) as host:
        order, sent = await _awaiting_payment(host, "o-new")
        at_2 = {**sent, "Command-Header-command_revision": "2"}
        assert await host.ok(CANCEL_ORDER, order, new, request_id="o-new#1", headers=at_2) == 3
        assert (await host.state(order))["cancel_cause"] == new["cause"]
        assert _cancelled((await host.commits())[-1])["cause"] == new["cause"]

        unread, sent = await _awaiting_payment(host, "o-unread")
        before = len(await host.commits())
        old_at_2 = await host.send(
            CANCEL_ORDER, unread, {"reason": "PAYMENT_TIMEOUT"}, request_id="u#1", headers=at_2
        )
        assert "cause" in expect(old_at_2, "CommandValidation", 400)["errorMsg"]
        new_unmarked = await host.send(CANCEL_ORDER, unread, new, request_id="u#2", headers=sent)
        refused = expect(new_unmarked, "CommandValidation", 400)["errorMsg"]
        assert "eshop.order.CancelOrder revision 1 -> 2 failed: KeyError" in refused
        assert len(await host.commits()) == before
        assert (await host.state(unread))["status"] == "AWAITING_PAYMENT"


async def test_a_system_command_a_timer_sends_is_decided_as_sent(db: Location) -> None:
    """`wow.DeleteAggregate` scheduled for later carries no revision and has no upcaster: the
    host decides it, it does not take it for a body it cannot read."""
    ref = REMINDER.ref(TENANT, "deleted-later")
    async with serve([reminders_app], db, start=False) as host:
        await host.ok("reminders.Arm", ref, {"millis": 60_000})
        sent = {
            f"Command-Header-{name}": value
            for name, value in {
                "schedule_timer": "c-1:e-1",
                "schedule_key": "delete-later",
                "schedule_slot": "1",
                "schedule_due": "1800000000000",
            }.items()
        }
        await host.ok("wow.DeleteAggregate", ref, request_id="c-1:e-1#1", headers=sent)
        assert (await host.read(ref) or {}).get("deleted") is True


# --- 7. one host per store file ---------------------------------------------------------------


async def test_a_second_runtime_on_the_same_store_file_is_refused(sqlite_db: Path) -> None:
    async with serve([make_app()], sqlite_db) as host:
        await host.ok("hosttest.CreateThing", thing("t"), {"name": "one"})
        with pytest.raises(StoreInUseError, match="one host per store file") as refused:
            HostRuntime([make_app()], sqlite_db, FakeConnect(FakeTimers()))
        assert str(sqlite_db) in str(refused.value)
        # the first one serves on
        assert await host.ok("hosttest.Touch", thing("t"), {"count": 1}) == 2
    # once it stopped, another may open the file, and finds what it committed
    async with serve([make_app()], sqlite_db, start=False) as again:
        assert (await again.state(thing("t")))["touches"] == 1


# --- 8. the manifest --------------------------------------------------------------------------


def test_the_manifest_lists_functions_schedules_sagas_and_jobs() -> None:
    result = CliRunner().invoke(cli, ["manifest", "--app", "workers.eshop:apps"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    contexts = {c["context"]: c for c in shown["contexts"]}
    assert set(contexts) == {"eshop-order", "eshop-inventory"}
    (order,) = contexts["eshop-order"]["aggregates"]
    assert order["aggregate"] == "eshop-order.order"
    functions = {f["function"]: f for f in order["functions"]}
    assert functions["Order.confirm_stock"] == {
        "function": "Order.confirm_stock",
        "command": "eshop.order.ConfirmOrderStock",
        "creates": False,
        "produces": ["eshop.order.OrderStockItemConfirmed", "eshop.order.OrderStockConfirmed"],
        "schedules": ["eshop.order.CancelOrder"],
        "takes": ["PaymentPolicy", "DecideScope"],
    }
    assert functions["Order.create"]["creates"] is True
    (saga,) = contexts["eshop-inventory"]["sagas"]
    assert saga["saga"] == "InventorySaga"
    handlers = {f["function"]: f for f in saga["functions"]}
    assert {name: f.get("event") for name, f in handlers.items() if "event" in f} == {
        "InventorySaga.on_order_created": "eshop.order.OrderCreated",
        "InventorySaga.on_stock_reserved": "eshop.inventory.StockReserved",
        "InventorySaga.on_stock_shortage": "eshop.inventory.StockShortage",
        "InventorySaga.on_order_cancelled": "eshop.order.OrderCancelled",
    }
    assert handlers["InventorySaga.on_reserve_rejected"]["rejected"] == [
        "eshop.inventory.ReserveStock"
    ]
    assert contexts["eshop-inventory"]["jobs"] == [
        {
            "name": "receive-deliveries",
            "function": "InventorySaga.on_schedule",
            "cron": "0 0 6 * * *",
            "zone": "UTC",
            "scope": "SYSTEM",
            "sharded": False,
            "misfire": "COALESCE",
        }
    ]
    assert contexts["eshop-order"]["jobs"] == []


@pytest.mark.parametrize(
    "reference", ["workers.eshop:nope", "no_such_module_here:app", "workers.eshop", "os:path"]
)
def test_a_bad_app_reference_exits_2_with_one_error_line(reference: str) -> None:
    result = CliRunner().invoke(cli, ["manifest", "--app", reference])
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: --app ")


# --- 9. the OpenAPI ---------------------------------------------------------------------------


async def test_the_openapi_lists_the_command_endpoint_with_wows_headers(sqlite_db: Path) -> None:
    async with serve([make_app()], sqlite_db, start=False) as host:
        response = await host.client.get("/openapi.json")
        assert response.status_code == 200
        send = response.json()["paths"]["/wow/command/send"]["post"]
        parameters = {p["name"]: p for p in send["parameters"]}
        assert {p["in"] for p in parameters.values()} == {"header"}
        assert {name: p.get("required", False) for name, p in parameters.items()} == {
            "Command-Type": True,
            "Command-Aggregate-Context": True,
            "Command-Owner-Id": False,
            "Wow-Space-Id": False,
            "Command-Aggregate-Name": True,
            "Command-Aggregate-Id": False,
            "Command-Tenant-Id": False,
            "Command-Aggregate-Version": False,
            "Command-Request-Id": False,
            "Command-Wait-Stage": False,
            "traceparent": False,
        }
        assert all(p.get("description") for p in parameters.values())
        assert send["requestBody"]["required"] is True
        # Every status one of Wow's codes has (domain code may refuse with any of them).
        assert set(send["responses"]) == {
            "200", "400", "403", "404", "408", "409", "410", "413", "429", "500", "503"
        }  # fmt: skip
        read = response.json()["paths"][
            "/wow/aggregate/{context}/{aggregate}/{tenant_id}/{aggregate_id}"
        ]["get"]["responses"]
        assert read["200"]["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/AggregateView"
        }
        assert read["404"]["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/ErrorInfo"
        }


async def test_an_unknown_aggregate_is_the_404_the_openapi_declares(sqlite_db: Path) -> None:
    async with serve([make_app()], sqlite_db, start=False) as host:
        document = (await host.client.get("/openapi.json")).json()
        read = document["paths"]["/wow/aggregate/{context}/{aggregate}/{tenant_id}/{aggregate_id}"]
        declared = read["get"]["responses"]["404"]
        schema = declared["content"]["application/json"]["schema"]
        assert schema == {"$ref": "#/components/schemas/ErrorInfo"}
        error_info = document["components"]["schemas"]["ErrorInfo"]
        unknown = [
            thing("missing"),
            AggregateRef(
                context_name="nowhere", aggregate_name="thing", tenant_id=TENANT, aggregate_id="t"
            ),
            AggregateRef(
                context_name=CONTEXT, aggregate_name="gizmo", tenant_id=TENANT, aggregate_id="t"
            ),
        ]
        for ref in unknown:
            response = await host.client.get(
                f"/wow/aggregate/{ref.context_name}/{ref.aggregate_name}/{ref.tenant_id}/"
                f"{ref.aggregate_id}"
            )
            assert response.status_code == 404, ref
            body = response.json()
            assert sorted(body) == sorted(error_info["properties"]) == ["errorCode", "errorMsg"]
            assert body["errorCode"] == response.headers["Wow-Error-Code"] == "NotFound"


async def test_the_docs_need_no_internet_every_asset_is_served_by_the_host(sqlite_db: Path) -> None:
    async with serve([make_app()], sqlite_db, start=False) as host:
        await assert_docs_served_offline(host.client)
        assert (await host.client.get("/redoc")).status_code == 404
