"""What the relay records as handed over (`host.relay`, `host.follower`), with an in-memory log,
lease and timers: a relay stopped after its hand-over records how far it handed; a step that a
reset overtook (a status read on a lease taken anew) records nothing, so a commit set aside
before it is never passed over."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

import pytest

from tests.helpers.builders import cancelling
from wow_temporal.host.relay import Relay
from wow_temporal.host.service import DomainHost
from wow_temporal.model import AggregateRef, Commit
from wow_temporal.timers.admission import Admission

pytestmark = pytest.mark.unit

T = TypeVar("T")


class Store:
    """The log and the followers' recorded positions; `advancing` holds a record back."""

    shared = False

    def __init__(self, log: list[tuple[int, Commit]]) -> None:
        self.log = log
        self.positions: dict[str, int] = {}

    def position(self, name: str) -> int:
        return self.positions.get(name, 0)

    def advance(self, name: str, position: int) -> None:
        self.positions[name] = max(self.position(name), position)

    def commits_after(self, start: int, limit: int) -> list[tuple[int, Commit]]:
        return [(at, c) for at, c in self.log if at > start][:limit]

    def behind(self, position: int) -> int:
        return sum(1 for at, _ in self.log if at > position)


class Host:
    """What a follower asks of its host; each call waits on `gate` while it is set."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.gate: asyncio.Future[None] | None = None

    def follow(self) -> asyncio.Event:
        return asyncio.Event()

    async def run(self, call: Callable[[], T]) -> T:
        if self.gate is not None:
            await self.gate
        return call()


class Lease:
    name = "r1"

    def __init__(self) -> None:
        self.taken = 1

    def holds(self, name: str) -> bool:
        return True

    def term(self, name: str) -> int:
        return self.taken

    async def wait(self, name: str) -> None:
        await asyncio.sleep(0)


class Timers:
    """Hands over every commit but aggregate `failing`'s; waits on `gate` while it is set, and
    calls `then` once it handed a batch."""

    def __init__(self, failing: str = "") -> None:
        self.handed: list[str] = []
        self.failing = failing
        self.gate: asyncio.Future[None] | None = None
        self.then: Callable[[], None] = lambda: None

    async def apply_many(
        self,
        commits: Sequence[Commit] | Admission,
        *,
        failures: dict[AggregateRef, Exception] | None = None,
        **_: Any,
    ) -> None:
        listed = commits.commits if isinstance(commits, Admission) else commits
        if self.gate is not None:
            await self.gate
        for each in listed:
            if each.aggregate_id == self.failing and failures is not None:
                failures[each.aggregate] = RuntimeError("refused")
            else:
                self.handed.append(each.id)
        self.then()


def relay_over(store: Store, timers: Timers, lease: Lease) -> tuple[Relay, Host]:
    host = Host(store)

    async def connect() -> Timers:
        return timers

    relay = Relay(cast(DomainHost, host), cast(Any, connect))
    relay.lease = cast(Any, lease)
    return relay, host


async def test_a_relay_stopped_after_its_hand_over_records_what_it_handed() -> None:
    store = Store([(1, cancelling("a", 1)), (2, cancelling("b", 1))])
    timers = Timers()
    relay, host = relay_over(store, timers, Lease())
    held = asyncio.get_running_loop().create_future()
    handed = asyncio.Event()

    def hold_the_record() -> None:
        host.gate = held
        handed.set()

    timers.then = hold_the_record
    step = asyncio.create_task(relay.step())
    await asyncio.wait_for(handed.wait(), 5)
    assert timers.handed == ["a-1", "b-1"]
    step.cancel()  # the runtime stops: its task is cancelled while the record waits
    with pytest.raises(asyncio.CancelledError):
        await step
    assert store.position("relay") == 0
    host.gate = None
    await relay.record()
    assert store.position("relay") == 2


async def test_a_step_overtaken_by_a_reset_records_nothing_past_a_commit_set_aside() -> None:
    store = Store([(1, cancelling("a", 1))])
    timers = Timers(failing="a")
    lease = Lease()
    relay, _ = relay_over(store, timers, lease)
    relay._stop_retrying = lambda: None  # type: ignore[method-assign]  # no retry task here
    await relay.step()
    assert [shown.aggregate.aggregate_id for shown in relay.set_aside()] == ["a"]
    store.log.append((2, cancelling("b", 1)))
    timers.gate = asyncio.get_running_loop().create_future()
    step = asyncio.create_task(relay.step())
    await asyncio.sleep(0.01)
    lease.taken = 2  # the lease lapsed and was taken again here meanwhile
    await relay.status({})  # GET /wow/followers on the new term: the relay resets
    timers.gate.set_result(None)
    assert await step == 0
    await relay.record()
    assert store.position("relay") == 0, "a-1 was set aside: nothing past it is recorded"
    await relay.step()  # the next step starts again from what is recorded
    assert "a-1" not in timers.handed and relay.set_aside()
