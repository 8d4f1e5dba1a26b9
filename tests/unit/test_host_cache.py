"""The host's aggregates in memory: a read that rebuilds an aggregate while a command on it
commits keeps nothing stale (found by `bench/soak_eshop.py`: after a host restart, customers'
reads racing the sagas' commands left orders showing an old state, and the next command on such
an order was answered EventVersionConflict, which timers and sagas take as a refusal)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from workers.eshop import apps
from workers.eshop.stock import STOCK
from wow_temporal.domain.rejection import Rejection
from wow_temporal.host.service import CommandMessage, DomainHost
from wow_temporal.host.store import EventStore
from wow_temporal.model import AggregateRef, Commit

MUG = STOCK.ref("t1", "mug")


class GatedStore(EventStore):
    """Holds the next `load` (on the store's thread) until `release` is set."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.hold_next = False
        self.holding = threading.Event()
        self.release = threading.Event()

    def load(self, ref: AggregateRef) -> list[Commit]:
        if self.hold_next:
            self.hold_next = False
            self.holding.set()
            assert self.release.wait(10)
        return super().load(ref)


def receive(request_id: str) -> CommandMessage:
    return CommandMessage(
        type="eshop.inventory.ReceiveStock", ref=MUG, body={"quantity": 1}, request_id=request_id
    )


async def test_a_read_racing_a_command_leaves_the_aggregate_current(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "domain.db"
    first = DomainHost(apps(), EventStore(db))
    assert (await first.send(receive("r1"))).error_code == "Ok"
    first.close()

    store = GatedStore(db)
    host = DomainHost(apps(), store)  # a restarted host: nothing in memory
    try:
        store.hold_next = True
        command = asyncio.ensure_future(host.send(receive("r2")))
        await asyncio.to_thread(store.holding.wait, 10)  # the command is loading the mug
        queued, run = asyncio.Event(), host.run

        async def run_noting(call: Callable[[], Any]) -> Any:
            queued.set()  # `run` hands `call` to the store's thread before it first waits
            return await run(call)

        monkeypatch.setattr(host, "run", run_noting)
        read = asyncio.ensure_future(host.current(MUG))
        await asyncio.wait_for(queued.wait(), 10)  # its load queues behind: version 1
        store.release.set()
        assert (await command).aggregate_version == 2
        await read

        found = await host.current(MUG)
        assert not isinstance(found, Rejection), found
        _, current = found
        assert current.version == 2, "the read kept the mug from before the command's commit"
        after = await host.send(receive("r3"))
        assert (after.error_code, after.aggregate_version) == ("Ok", 3), after
    finally:
        host.close()
