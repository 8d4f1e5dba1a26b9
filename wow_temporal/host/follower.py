"""A follower of the host's commit log: it handles each commit after its tracked position, in
order, then records the new position, so a restart resumes where it stopped (at least once).

The relay and each saga are followers. A failure to handle a commit is retried with backoff
and reported, never skipped: the position moves only past what was handled. Where several host
replicas share the store, a follower runs only on the replica holding its lease (`host.lease`),
and reads its position again each time that replica takes the lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass

from wow_temporal.host.lease import LeaseKeeper
from wow_temporal.host.service import DomainHost
from wow_temporal.model import AggregateRef, Commit

__all__ = ["Follower", "FollowerStatus", "Refused", "SetAside"]

logger = logging.getLogger("wow_temporal.host")

_BACKOFF_S = (0.2, 0.5, 1.0, 2.0, 5.0)


@dataclass(frozen=True, slots=True)
class FollowerStatus:
    """Where a follower is: its position, how far the log is ahead, and its last failure."""

    name: str
    position: int
    behind: int
    failing_since: float | None
    last_error: str | None
    holder: str | None = None
    """The replica running it (None: none holds its lease now)."""
    here: bool = True
    """Whether this replica runs it."""
    set_aside: tuple[SetAside, ...] = ()
    """What it set aside to retry on its own, so the rest of the log goes on."""
    refused: tuple[Refused, ...] = ()
    """Commits it could never handle, passed over (the latest, since it started)."""
    recorded: int | None = None
    """The position recorded in the store, where a restart resumes: behind `position` while
    commits wait set aside."""


@dataclass(frozen=True, slots=True)
class Refused:
    """A commit of the log a follower can never handle (the relay: one admission refuses)."""

    position: int
    commit_id: str
    aggregate: AggregateRef
    reason: str


@dataclass(frozen=True, slots=True)
class SetAside:
    """An aggregate whose commits a follower could not handle, retried on its own."""

    aggregate: AggregateRef
    commits: int
    """How many of its commits wait."""
    reason: str
    since: float
    """Epoch seconds."""
    attempts: int


class Follower(ABC):
    """Handles the log's commits in order from its tracked position (`name` in the store)."""

    batch = 100
    poll_interval_s = 1.0
    shared_poll_interval_s = 0.25
    """The poll where other replicas commit too (their commits do not wake this one)."""
    record_idle_s = 1.0
    """A batch that acted on nothing is recorded at most this often: re-reading it after a
    crash costs nothing, and each record is a write (an fsync) per commit otherwise."""

    def __init__(self, host: DomainHost, name: str) -> None:
        self.host = host
        self.name = name
        self._waker = host.follow()
        self._position: int | None = None
        self._handled: int | None = None
        """How far commits were handled, recorded or not: a stop that cuts a step off after
        its hand-over records this, so the next holder does not hand them over again."""
        self._recorded: int | None = None
        self._recorded_at = 0.0
        self._generation = 0
        """Counts `reset`s: a step that a reset overtook (a status read on a lease taken anew)
        neither records nor keeps what it reached."""
        self._stepping = 0
        self.acted = False
        """Set by `handle` when it did something for a commit (sent, handed over)."""
        self._failing_since: float | None = None
        self._last_error: str | None = None
        self._attempt = 0
        self.lease: LeaseKeeper | None = None
        """Where replicas share the store, the lease this follower runs under (the runtime
        sets it); None: it always runs here."""
        self._term = 0
        self._poll_s = self.shared_poll_interval_s if host.store.shared else self.poll_interval_s

    def reset(self) -> None:
        """Forget what is kept in memory of the log (another replica may have moved on), and
        the failure it saw then."""
        self._generation += 1
        self._position = None
        self._handled = None
        self._recorded = None
        self._failing_since = None
        self._last_error = None
        self._attempt = 0

    @abstractmethod
    async def handle(self, commits: list[tuple[int, Commit]]) -> int:
        """Handle commits in order; the position of the last one handled (raise to retry).
        Set `acted` if any commit needed something done."""

    async def position(self) -> int:
        if self._position is None:
            self._position = await self.host.run(lambda: self.host.store.position(self.name))
            self._recorded = self._position
        return self._position

    async def record(self) -> None:
        """Record the position reached, if it is not yet (the runtime calls it at stop)."""
        if not self.runs_here():
            return
        reached = max((p for p in (self._position, self._handled) if p is not None), default=None)
        if reached is not None and self.recordable(reached) != self._recorded:
            await self._record(reached)

    def handled(self, reached: int) -> None:
        """Commits up to `reached` are handled (a follower whose `handle` goes on awaiting after
        it acted says so at once); ignored once a reset overtook the step."""
        if not self.overtaken():
            self._handled = reached

    def overtaken(self) -> bool:
        """Whether a reset came during the step running: what it reached is not kept."""
        return self._stepping != self._generation

    def recordable(self, position: int) -> int:
        """How far the log may be recorded as handled once `position` is reached: all of it,
        unless the follower holds back for commits it set aside (a restart handles them, and
        what follows them, again)."""
        return position

    def set_aside(self) -> tuple[SetAside, ...]:
        """What it set aside (none, unless a follower sets commits aside)."""
        return ()

    def refused(self) -> tuple[Refused, ...]:
        """The commits it passed over for good (none, unless a follower refuses commits)."""
        return ()

    async def _record(self, reached: int) -> None:
        position = self.recordable(reached)
        if position == self._recorded:
            return
        await self.host.run(lambda: self.host.store.advance(self.name, position))
        self._recorded = position
        self._recorded_at = time.monotonic()

    async def status(self, holders: dict[str, str] | None = None) -> FollowerStatus:
        """Where it is; `holders` (the leases' holders) says which replica runs it."""
        if not self.runs_here():
            position = await self.host.run(lambda: self.host.store.position(self.name))
            behind = await self.host.run(lambda: self.host.store.behind(position))
            holder = (holders or {}).get(self.name)
            return FollowerStatus(self.name, position, behind, None, None, holder, False)
        self._take_term()
        position = await self.position()
        behind = await self.host.run(lambda: self.host.store.behind(position))
        holder = self.lease.name if self.lease is not None else None
        return FollowerStatus(
            self.name,
            position,
            behind,
            self._failing_since,
            self._last_error,
            holder,
            True,
            self.set_aside(),
            self.refused(),
            self._recorded,
        )

    def runs_here(self) -> bool:
        """Whether this replica may run the follower now (its lease is trusted here)."""
        return self.lease is None or self.lease.holds(self.name)

    def _take_term(self) -> None:
        """On a lease newly taken here: forget what another replica may have moved past."""
        if self.lease is not None and self.lease.term(self.name) != self._term:
            self._term = self.lease.term(self.name)
            self.reset()

    async def _hold(self) -> bool:
        """Whether this replica runs the follower now (waiting a little for the lease if not)."""
        if self.lease is None:
            return True
        if not self.lease.holds(self.name):
            await self.lease.wait(self.name)
            return False
        self._take_term()
        return True

    async def step(self) -> int:
        """Handle one batch; how many commits it moved past (0: none waiting)."""
        start = await self.position()
        commits = await self.host.run(lambda: self.host.store.commits_after(start, self.batch))
        if not commits:
            return 0
        self.acted = False
        self._stepping = self._generation
        reached = await self.handle(commits)
        if self.overtaken():
            return 0  # reset meanwhile: the next step starts again from the recorded position
        self.handled(reached)
        if reached > start:
            if self.acted or time.monotonic() - self._recorded_at >= self.record_idle_s:
                await self._record(reached)
            self._position = reached  # only now: a failure to record handles them again
        return sum(1 for position, _ in commits if position <= reached)

    async def run(self) -> None:
        """Follow the log until cancelled."""
        while True:
            self._waker.clear()
            if not await self._hold():
                continue
            try:
                moved = await self.step()
            except asyncio.CancelledError:
                raise
            except Exception as error:
                await self._failed(error)
                continue
            self._recovered()
            if moved == 0:
                await self.record()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._poll_s):
                        await self._waker.wait()

    async def _failed(self, error: Exception) -> None:
        text = f"{type(error).__name__}: {error}".strip()
        if self._failing_since is None:
            self._failing_since = time.time()
        if text != self._last_error or self._attempt % 20 == 0:
            logger.warning("%s: %s (retrying; nothing is skipped)", self.name, text)
        self._last_error = text
        delay = _BACKOFF_S[min(self._attempt, len(_BACKOFF_S) - 1)]
        self._attempt += 1
        await asyncio.sleep(delay)

    def _recovered(self) -> None:
        if self._failing_since is not None:
            took = time.time() - self._failing_since
            logger.warning("%s: going again after %.1f s", self.name, took)
        self._failing_since = None
        self._last_error = None
        self._attempt = 0
