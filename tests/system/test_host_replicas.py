"""Host replicas on one PostgreSQL database (the suite's real one), each with its own memory, as
separate processes would be: a command decided on a state another replica moved past is decided
again on the new one (a commit conflicts; a refusal or NoOp is checked first), an expected
version is Wow's `CommandExpectVersionConflict`, a request id is decided once across replicas,
and each follower runs on one replica at a time, taken over when its holder stops or stalls,
with nothing skipped."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
import pytest

from bench.harness.postgres import Postgres
from tests.apps.host_app import THING, SchedulerSaga, make_app
from tests.helpers.eventually import eventually
from wow_temporal.domain.rejection import Rejection
from wow_temporal.host import service
from wow_temporal.host.relay import RELAY
from wow_temporal.host.runtime import HostRuntime
from wow_temporal.host.service import CommandMessage, DomainHost
from wow_temporal.host.store import EventStore, RequestRecord, VersionConflictError
from wow_temporal.model import AggregateRef, Commit
from wow_temporal.timers.admission import Admission
from wow_temporal.timers.fold import Horizon
from wow_temporal.wire import CommandResult

TENANT = "t1"


def thing(aggregate_id: str) -> AggregateRef:
    return THING.ref(TENANT, aggregate_id)


def command(
    kind: str, ref: AggregateRef, body: dict[str, Any] | None = None, **kw: Any
) -> CommandMessage:
    return CommandMessage(type=f"hosttest.{kind}", ref=ref, body=body or {}, **kw)


@contextlib.asynccontextmanager
async def replicas(uri: str, count: int = 2) -> AsyncIterator[list[DomainHost]]:
    hosts = [DomainHost([make_app()], EventStore(uri)) for _ in range(count)]
    try:
        yield hosts
    finally:
        for host in hosts:
            host.close()


def answer(result: CommandResult) -> tuple[str, int | None]:
    return result.error_code, result.aggregate_version


async def test_a_commit_meeting_a_refusal_another_replica_recorded_answers_that_refusal(
    postgres: Postgres, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = thing("t")
    async with replicas(postgres.database()) as (a, b):
        assert answer(await a.send(command("CreateThing", ref, {"name": "one"}))) == ("Ok", 1)
        refused = RequestRecord("r1", "", 1, "IllegalState", "the other replica refused it")
        looked_up = b.store.request

        def refused_meanwhile(ref: AggregateRef, request_id: str) -> RequestRecord | None:
            monkeypatch.setattr(b.store, "request", looked_up)
            b.store.decided(ref, refused)  # lands after this replica found nothing
            return None

        monkeypatch.setattr(b.store, "request", refused_meanwhile)
        result = await b.send(command("Touch", ref, {"count": 1}, request_id="r1"))
        assert answer(result) == ("IllegalState", 1), result
        assert [c.version for c in await a.commits(ref)] == [1]


async def test_a_command_that_keeps_conflicting_is_a_500_its_sender_retries(
    postgres: Postgres, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = thing("t")
    async with replicas(postgres.database(), 1) as (a,):
        assert answer(await a.send(command("CreateThing", ref, {"name": "one"}))) == ("Ok", 1)

        def always_taken(commit: Commit) -> int:
            raise VersionConflictError("taken")

        monkeypatch.setattr(service, "_DECIDE_AGAIN_LIMIT", 3)
        monkeypatch.setattr(a.store, "append", always_taken)
        result = await a.send(command("Touch", ref, {"count": 1}, request_id="r1"))
        assert (result.error_code, result.status) == ("InternalServerError", 500), result
        assert "3 times in a row" in result.error_msg
        monkeypatch.undo()
        assert answer(await a.send(command("Touch", ref, {"count": 1}, request_id="r1"))) == (
            "Ok",
            2,
        )


async def test_a_command_decided_on_a_state_another_replica_moved_past_is_decided_again(
    postgres: Postgres,
) -> None:
    ref = thing("t")
    async with replicas(postgres.database()) as (a, b):
        assert answer(await a.send(command("Touch", ref, {"count": 1}))) == ("NotFound", 0)
        assert answer(await b.send(command("CreateThing", ref, {"name": "one"}))) == ("Ok", 1)
        # a kept the thing as missing: its refusal is checked against the store, decided again
        assert answer(await a.send(command("Touch", ref, {"count": 1}))) == ("Ok", 2)
        assert answer(await b.send(command("Touch", ref, {"count": 2}))) == ("Ok", 3)
        # a kept version 2: its commit conflicts, and it decides again on version 3
        assert answer(await a.send(command("Touch", ref, {"count": 4}))) == ("Ok", 4)
        found = await b.current(ref)
        assert not isinstance(found, Rejection), found
        assert (found[1].version, found[1].state.touches) == (4, 7)
        assert [c.version for c in await a.commits(ref)] == [1, 2, 3, 4]


async def test_an_expected_version_is_checked_against_the_store_not_a_replicas_memory(
    postgres: Postgres,
) -> None:
    ref = thing("t")
    async with replicas(postgres.database()) as (a, b):
        assert answer(await a.send(command("CreateThing", ref, {"name": "one"}))) == ("Ok", 1)
        assert answer(await b.send(command("Touch", ref, {"count": 1}))) == ("Ok", 2)
        # a kept version 1; the sender saw version 2
        touch = command("Touch", ref, {"count": 1}, expected_version=2)
        assert answer(await a.send(touch)) == ("Ok", 3)
        stale = await b.send(command("Touch", ref, {"count": 1}, expected_version=2))
        assert answer(stale) == ("CommandExpectVersionConflict", 3)


async def test_a_noop_on_a_state_another_replica_deleted_is_decided_again(
    postgres: Postgres,
) -> None:
    ref = thing("t")
    async with replicas(postgres.database()) as (a, b):
        assert answer(await a.send(command("CreateThing", ref, {"name": "one"}))) == ("Ok", 1)
        deleted = await b.send(CommandMessage(type="wow.DeleteAggregate", ref=ref, body={}))
        assert answer(deleted) == ("Ok", 2)
        nothing = await a.send(command("DoNothing", ref, request_id="r1"))
        assert nothing.error_code == "IllegalAccessDeletedAggregate", nothing


async def test_replicas_deciding_one_aggregate_at_once_lose_no_command(postgres: Postgres) -> None:
    ref = thing("t")
    async with replicas(postgres.database(), 3) as hosts:
        created = await hosts[0].send(command("CreateThing", ref, {"name": "one"}))
        assert answer(created) == ("Ok", 1)
        touches = [
            hosts[n % 3].send(command("Touch", ref, {"count": 1}, request_id=f"r{n}"))
            for n in range(30)
        ]
        results = await asyncio.gather(*touches)
        assert {r.error_code for r in results} == {"Ok"}, [r.error_msg for r in results]
        assert sorted(r.aggregate_version for r in results) == list(range(2, 32))
        commits = await hosts[1].commits(ref)
        assert sorted(c.request_id for c in commits[1:]) == sorted(f"r{n}" for n in range(30))


async def test_a_request_id_sent_to_two_replicas_at_once_is_decided_once(
    postgres: Postgres,
) -> None:
    async with replicas(postgres.database()) as (a, b):
        for n in range(10):
            ref = thing(f"t{n}")
            create = command("CreateThing", ref, {"name": "one"}, request_id=f"create-{n}")
            first, second = await asyncio.gather(a.send(create), b.send(create))
            assert sorted([first.error_code, second.error_code]) == ["DuplicateRequestId", "Ok"]
            assert len(await a.commits(ref)) == 1


async def test_a_refusal_sent_to_two_replicas_at_once_is_answered_the_same(
    postgres: Postgres,
) -> None:
    ref = thing("t")
    async with replicas(postgres.database()) as (a, b):
        assert answer(await a.send(command("CreateThing", ref, {"name": "one"}))) == ("Ok", 1)
        for n in range(10):
            refuse = command("Refuse", ref, request_id=f"refuse-{n}")
            first, second = await asyncio.gather(a.send(refuse), b.send(refuse))
            assert first.error_code == second.error_code == "IllegalState", (first, second)


# --- followers: one replica at a time ---------------------------------------------------------


class Recorder:
    """The timers a replica's relay hands commits to."""

    def __init__(self) -> None:
        self.handed: list[Commit] = []

    async def apply_many(
        self, commits: Sequence[Commit] | Admission, *, later: Horizon | None = None, **_: object
    ) -> None:
        self.handed.extend(commits.commits if isinstance(commits, Admission) else commits)


class Replica:
    """A `HostRuntime` named `name` on `uri`, with fast leases (the tests wait on takeovers)."""

    def __init__(self, uri: str, name: str) -> None:
        self.timers = Recorder()

        async def connect() -> Recorder:
            return self.timers

        self.runtime = HostRuntime([make_app(SchedulerSaga())], uri, connect, replica=name)
        self.runtime.leases.ttl_s, self.runtime.leases.renew_s = 4.0, 0.3
        self.client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.runtime.asgi), base_url="http://replica"
        )
        self.stopped = False

    async def followers(self) -> dict[str, dict[str, Any]]:
        response = await self.client.get("/wow/followers")
        assert response.status_code == 200, response.text
        return {status["name"]: status for status in response.json()}

    def stall(self) -> None:
        """Stop renewing its leases without letting go, as a replica that hangs."""
        self.runtime._tasks[0].cancel()

    def wake(self) -> None:
        """Renew and claim again, as a replica that hung and goes on."""
        self.runtime._tasks[0] = asyncio.create_task(self.runtime.leases.run())

    async def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            await self.client.aclose()
            await self.runtime.stop()


@contextlib.asynccontextmanager
async def running(uri: str, *names: str) -> AsyncIterator[list[Replica]]:
    started = [Replica(uri, name) for name in names]
    try:
        for replica in started:
            replica.runtime.start()
        yield started
    finally:
        for replica in started:
            await replica.stop()


async def holder(replicas: Sequence[Replica], follower: str = RELAY) -> str | None:
    """The one replica every live replica says runs `follower`, once they agree."""
    seen = set()
    for replica in replicas:
        if not replica.stopped:
            status = (await replica.followers())[follower]
            seen.add((status["holder"], status["here"] and replica.runtime.replica))
    holders = {shown for shown, _ in seen}
    here = {name for _, name in seen if name}
    if len(holders) == 1 and here == holders:
        return holders.pop()
    return None


async def schedule_things(host: DomainHost, prefix: str, count: int) -> set[str]:
    """`count` things each scheduling a reminder; their commits' ids. Sent again as is, the
    same commands are duplicates: nothing more is decided."""
    ids = set()
    for n in range(count):
        ref = thing(f"{prefix}{n}")
        for kind, body in (("CreateThing", {"name": "x"}), ("ScheduleOnly", {})):
            request_id = f"{kind}-{ref.aggregate_id}"
            sent = await host.send(command(kind, ref, body, request_id=request_id))
            assert sent.ok or sent.error_code == "DuplicateRequestId", sent
        ids.add((await host.commits(ref))[-1].id)
    return ids


def handed(replicas: Sequence[Replica]) -> set[str]:
    return {commit.id for replica in replicas for commit in replica.timers.handed}


async def test_each_follower_runs_on_one_replica_and_the_followers_view_says_which(
    postgres: Postgres,
) -> None:
    async with running(postgres.database(), "host-a", "host-b") as reps:
        relay_holder = await eventually(lambda: holder(reps), within=20, what="one relay holder")
        saga_holder = await eventually(
            lambda: holder(reps, "saga:host-test.SchedulerSaga"), within=20, what="one saga holder"
        )
        assert {relay_holder, saga_holder} <= {"host-a", "host-b"}
        ids = await schedule_things(reps[0].runtime.host, "a", 3)
        ids |= await schedule_things(reps[1].runtime.host, "b", 3)
        await eventually(lambda: ids <= handed(reps), within=20, what="every schedule handed")


@pytest.mark.parametrize("how", ["stops", "stalls"])
async def test_a_follower_is_taken_over_when_its_replica_stops_or_stalls_skipping_nothing(
    postgres: Postgres, how: str
) -> None:
    async with running(postgres.database(), "host-a", "host-b") as reps:
        first = await eventually(lambda: holder(reps), within=20, what="one relay holder")
        old = next(r for r in reps if r.runtime.replica == first)
        other = next(r for r in reps if r is not old)
        before = await schedule_things(old.runtime.host, "before", 3)
        await eventually(lambda: before <= handed(reps), within=20, what="handed before")
        if how == "stops":
            await old.stop()
        else:
            old.stall()
        meanwhile = await schedule_things(other.runtime.host, "meanwhile", 3)
        taken = await eventually(
            lambda: holder([other]), within=30, what="the other replica took the relay"
        )
        assert taken == other.runtime.replica
        after = await schedule_things(other.runtime.host, "after", 3)
        await eventually(lambda: after <= handed([other]), within=20, what="handed after")
        assert meanwhile <= handed(reps), "a commit made while the relay changed hands was skipped"
        assert not old.runtime.leases.holds(RELAY)
        if how == "stalls":  # awake again: it sees the relay is the other's now
            await old.runtime.leases.claim()
            status = (await old.followers())[RELAY]
            assert (status["holder"], status["here"]) == (other.runtime.replica, False)


async def test_commands_and_followers_go_on_after_postgresql_restarts() -> None:
    """PostgreSQL restarted under a replica (every connection cut): commands are answered Ok
    again (the pool reconnects; one that fails meanwhile is a 500 its sender retries), and the
    relay hands over everything, none skipped."""
    server = Postgres()  # its own: a restart would cut the other tests' connections
    server.start()
    try:
        async with running(server.database(), "host-a") as (replica,):
            host = replica.runtime.host
            before = await schedule_things(host, "before", 2)
            await asyncio.to_thread(server.restart)

            async def schedule_again() -> set[str] | None:
                with contextlib.suppress(AssertionError):
                    return await schedule_things(host, "after", 2)
                return None

            after = await eventually(schedule_again, within=30, what="commands Ok again")
            await eventually(
                lambda: before | after <= handed([replica]), within=30, what="all handed over"
            )
            assert (await replica.followers())[RELAY]["holder"] == "host-a"
    finally:
        server.stop()


async def test_a_replica_taking_a_follower_back_goes_on_from_where_the_other_left_it(
    postgres: Postgres,
) -> None:
    async with running(postgres.database(), "host-a", "host-b") as reps:
        first = await eventually(lambda: holder(reps), within=20, what="one relay holder")
        old = next(r for r in reps if r.runtime.replica == first)
        other = next(r for r in reps if r is not old)
        old.stall()
        await eventually(lambda: holder([other]), within=30, what="the other took the relay")
        meanwhile = await schedule_things(other.runtime.host, "meanwhile", 3)
        await eventually(lambda: meanwhile <= handed([other]), within=20, what="handed there")
        old.wake()
        await other.stop()  # records its position, lets go
        await eventually(lambda: holder([old]), within=30, what="the first took it back")
        later = await schedule_things(old.runtime.host, "later", 2)
        await eventually(lambda: later <= handed([old]), within=20, what="handed after")
        assert not meanwhile & {c.id for c in old.timers.handed}, "handed over twice"
