"""Which host replica runs each follower of the log (the relay, each saga): the one holding its
lease, a row in the store with a deadline that its holder renews every `RENEW_S` seconds.

A replica that dies or stalls stops renewing; its leases lapse after `TTL_S` and another replica
takes them at its next claim, so a follower is taken over within `TTL_S + RENEW_S` seconds (a
replica that stops cleanly lets go at once). The deadline is the database's clock, so replicas'
clocks need not agree. A replica trusts a lease for `TTL_S * (1 - MARGIN)` after the claim was
sent (its own monotonic clock), so it stops acting before the database lets another replica
take it.

A replica that stalls mid-batch checks its lease again before each request to Temporal (the
relay's `fence`), so it hands nothing over once another replica may run the relay; a saga's
commands carry request ids, so one sent twice is decided once. A position recorded twice or out
of turn never moves a follower back.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, TypeVar

__all__ = ["MARGIN", "RENEW_S", "TTL_S", "LeaseKeeper", "Leases", "SoleLeases", "replica_name"]

logger = logging.getLogger("wow_temporal.host")

T = TypeVar("T")

TTL_S = 5.0
"""How long a lease lasts unless renewed (the database's clock)."""
RENEW_S = 1.0
"""How often a replica renews its leases and claims the lapsed ones."""
MARGIN = 0.3
"""The part of a lease's time a holder gives up at its end: it stops trusting a lease of 5 s
1.5 s before the database lets another replica take it (a request sent just before is then
long answered)."""


def replica_name() -> str:
    """This process's name among the replicas when none is given: `host:pid`."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Leases(Protocol):
    """The store's lease rows (blocking calls)."""

    def claim(self, names: Sequence[str], holder: str, ttl_s: float) -> set[str]:
        """Renew `holder`'s leases among `names` and take the lapsed ones; those it holds."""

    def release(self, names: Sequence[str], holder: str) -> None:
        """Let go of `holder`'s leases among `names` (another replica takes them at once)."""

    def holders(self) -> dict[str, str]:
        """Who holds each lease that has not lapsed."""


class SoleLeases:
    """A store only one host serves (a SQLite file, locked): that host holds every lease."""

    def __init__(self) -> None:
        self._held: dict[str, str] = {}

    def claim(self, names: Sequence[str], holder: str, ttl_s: float) -> set[str]:
        self._held.update(dict.fromkeys(names, holder))
        return set(names)

    def release(self, names: Sequence[str], holder: str) -> None:
        for name in names:
            if self._held.get(name) == holder:
                del self._held[name]

    def holders(self) -> dict[str, str]:
        return dict(self._held)


class LeaseKeeper:
    """Claims and renews the leases of `names` for replica `name`, on a thread of its own (a
    busy store thread never delays a renewal); followers ask `holds` before each step, and
    the relay before each hand-over to Temporal."""

    def __init__(self, leases: Leases, names: Iterable[str], name: str) -> None:
        self.leases = leases
        self.names = sorted(set(names))  # one order: claims of two replicas never deadlock
        self.name = name
        self.holder = f"{name}#{uuid.uuid4().hex[:8]}"
        """What the lease rows hold: the name and this process's own token, so two processes
        given one name (or one restarted under it) never hold a lease together."""
        self.ttl_s = TTL_S
        self.renew_s = RENEW_S
        self._until: dict[str, float] = {}
        self._terms: dict[str, int] = dict.fromkeys(self.names, 0)
        self._changed = asyncio.Event()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="wow-lease")
        self._failing = False
        self._shared = not isinstance(leases, SoleLeases)
        """Replicas share the store: who takes a follower over is worth a log line."""

    def holds(self, name: str) -> bool:
        """True while this replica may run follower `name`."""
        return time.monotonic() < self._until.get(name, 0.0)

    def term(self, name: str) -> int:
        """Counts the times this replica took `name`'s lease: a follower whose term changed
        reads its position again (another replica may have moved it)."""
        return self._terms.get(name, 0)

    async def wait(self, name: str) -> None:
        """Until the leases change, at most `renew_s`."""
        self._changed.clear()
        if not self.holds(name):
            try:
                async with asyncio.timeout(self.renew_s):
                    await self._changed.wait()
            except TimeoutError:
                pass

    async def _call(self, call: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    async def claim(self) -> None:
        """One claim: renew what is held, take what lapsed."""
        sent = time.monotonic()
        try:
            held = await self._call(lambda: self.leases.claim(self.names, self.holder, self.ttl_s))
        except Exception as error:  # the database is away: the leases lapse on their own
            if not self._failing:
                running = ", ".join(name for name in self.names if self.holds(name)) or "none"
                logger.warning(
                    "leases: cannot renew (%s: %s); the followers run here (%s) stop once "
                    "their leases lapse",
                    type(error).__name__,
                    error,
                    running,
                )
            self._failing = True
            return
        if self._failing:
            logger.warning("leases: renewing again")
        self._failing = False
        self._renewed(held, sent + self.ttl_s * (1 - MARGIN))

    def _renewed(self, held: set[str], until: float) -> None:
        for name in held:
            if not self.holds(name):
                self._terms[name] += 1
                if self._shared:
                    logger.info("%s: this replica (%s) runs it now", name, self.name)
            self._until[name] = until
        for name in set(self._until) - held:
            if self.holds(name):
                logger.warning("%s: another replica took it over", name)
            del self._until[name]
        self._changed.set()

    async def run(self) -> None:
        """Claim every `renew_s` seconds until cancelled."""
        while True:
            await self.claim()
            await asyncio.sleep(self.renew_s)

    async def release(self) -> None:
        """Let go of every lease this process holds in the store, trusted here or not (at stop,
        after `run` is cancelled): another replica takes them at its next claim. The release
        queues behind a claim still running on the lease thread, so none is taken after it."""
        self._until.clear()
        try:
            await self._call(lambda: self.leases.release(self.names, self.holder))
        except Exception as error:  # they lapse on their own
            logger.warning("leases: cannot let go (%s: %s)", type(error).__name__, error)
        self._executor.shutdown(wait=True)

    async def holders(self) -> dict[str, str]:
        """Which replica holds each lease (the database's answer; not on the lease thread, so
        reading it never delays a renewal)."""
        held = await asyncio.to_thread(self.leases.holders)
        return {name: holder.rpartition("#")[0] or holder for name, holder in held.items()}
