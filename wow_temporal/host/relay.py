"""The relay: hands each commit's schedule events to the timers (`TimerClient.apply_many`) in
log order, then records its position. It reads the log ahead up to its head first, so a set
the log later replaced, cancelled or deleted is never started (`timers.fold.Horizon`). A crash
between the two hands a commit over again, which the timers' idempotency (commit id and
version) makes change nothing: the effect is once.

Commands never wait on it: with Temporal away, commits pile up in the log and the relay hands
them over when it is back, none lost.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any, Protocol

from wow_temporal.host.follower import Follower
from wow_temporal.host.service import DomainHost
from wow_temporal.metrics import IngestMetrics
from wow_temporal.model import Commit
from wow_temporal.timers.client import fenced
from wow_temporal.timers.fold import Horizon

__all__ = ["RELAY", "Relay", "Timers"]

RELAY = "relay"
"""The relay's name in the store's tracking records."""

BEHIND_INTERVAL = 5.0
"""Seconds between the relay's counts of the commits it has yet to read (`wow_relay_behind`)."""

logger = logging.getLogger(__name__)


class Timers(Protocol):
    """What the relay needs of `TimerClient`."""

    async def apply_many(
        self, commits: Sequence[Commit], *, later: Horizon | None = None
    ) -> Any: ...


class Relay(Follower):
    """Follows the log and hands schedule events to the timers; `connect` gives the timers,
    retried until it succeeds, so the relay can start before Temporal is reachable (the
    client it gives reconnects by itself afterwards)."""

    timeout_s = 30.0
    """How long one batch may take to hand over, plus `timeout_per_commit_s` a commit."""
    timeout_per_commit_s = 0.1
    batch = 1000
    """Commits read at once: a relay catching up folds a whole batch, so the changes that stop
    timers go out first and each key gets one change."""
    read_ahead = 500
    """Commits a page while the relay reads the log ahead of the batch it hands over."""

    def __init__(self, host: DomainHost, connect: Callable[[], Awaitable[Timers]]) -> None:
        super().__init__(host, RELAY)
        self._connect = connect
        self._timers: Timers | None = None
        self.handed = 0
        """Commits with schedule events handed over since start."""
        self._counted = -BEHIND_INTERVAL
        self.on_handed: Callable[[list[Commit]], None] | None = None
        """Called with each batch once handed over (the benchmark's lag probe)."""
        self._horizon = Horizon()
        self._scanned = 0
        """How far the log has been read ahead into `_horizon`."""

    def reset(self) -> None:
        super().reset()
        self._horizon.clear()
        self._scanned = 0

    async def handle(self, commits: list[tuple[int, Commit]]) -> int:
        scheduling = [commit for _, commit in commits if commit.has_schedule_events]
        if scheduling:
            within = self.timeout_s
            try:
                if self._timers is None:
                    async with asyncio.timeout(self.timeout_s):
                        self._timers = await self._connect()
                later = await self._read_ahead(commits[-1][0])
                within = self.timeout_s + self.timeout_per_commit_s * len(scheduling)
                async with asyncio.timeout(within):
                    with fenced(self.runs_here):  # nothing sent once the lease lapsed here
                        await self._timers.apply_many(scheduling, later=later)
            except TimeoutError:
                raise TimeoutError(
                    f"the timers did not take {len(scheduling)} commits in {within:.0f} s"
                ) from None
            self.acted = True
            self.handed += len(scheduling)
            metrics = getattr(self._timers, "metrics", None)
            if isinstance(metrics, IngestMetrics):
                await self._measure(metrics, scheduling, commits[-1][0])
            if self.on_handed is not None:
                self.on_handed(scheduling)
        reached = commits[-1][0]
        if self._scanned - reached < self.batch:
            # Within a batch of the head: the next batch folds what is ahead itself, so what
            # was read ahead is let go (it would only grow under a steady load).
            self._horizon.clear()
            self._scanned = reached
        return reached

    async def _read_ahead(self, position: int) -> Horizon:
        """The schedule changes the log holds past `position`, up to its head: a relay
        catching up after an outage never starts a set the log later replaced, cancelled or
        deleted (read once, in pages; each later batch reads only what is new)."""
        start = max(self._scanned, position)
        while True:
            read = partial(self.host.store.commits_after, start, self.read_ahead)
            page = await self.host.run(read)
            if not page:
                break
            self._horizon.extend(commit for _, commit in page if commit.has_schedule_events)
            start = page[-1][0]
            if len(page) < self.read_ahead:
                break
        self._scanned = start
        return self._horizon

    async def _measure(self, metrics: IngestMetrics, handed: list[Commit], position: int) -> None:
        """Record the batch's lag, and how far the log is ahead at most every
        `BEHIND_INTERVAL` seconds (a count over the log: not per batch while catching up); a
        failure to count is not the relay's."""
        behind = None
        now = time.monotonic()
        if now - self._counted >= BEHIND_INTERVAL:
            self._counted = now
            try:
                behind = await self.host.run(lambda: self.host.store.behind(position))
            except Exception as error:  # display only: never fail the hand-over for it
                logger.debug("relay: cannot count the commits behind: %s", error)
        metrics.relayed(handed, behind)
