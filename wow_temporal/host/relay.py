"""The relay: hands each commit's schedule events to the timers (`TimerClient.apply_many`) in
log order, then records its position. It reads the log ahead first, so a set the log later
replaced, cancelled or deleted is never started (`timers.readahead.ReadAhead`). After a gap (it
starts, takes over from another replica, resumes after a failure, or finds itself more than a
batch behind) it first hands over the deletions and each key's latest stop it read ahead, so a
timer already running in Temporal stops now rather than when its cancel's batch comes. It
reads at most `read_ahead_limit` commits ahead; past that, the target's own guard refuses a
slot the log stopped before it was due. A crash between hand-over and record hands a commit
over again, which the timers' idempotency (commit id and version) makes change nothing.

Commands never wait on it: with Temporal away, commits pile up in the log and the relay hands
them over when it is back, none lost.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any, Protocol

from temporalio.service import RPCError, RPCStatusCode

from wow_temporal.host.aside import Aside
from wow_temporal.host.follower import Follower, Refused, SetAside
from wow_temporal.host.service import DomainHost
from wow_temporal.metrics import IngestMetrics
from wow_temporal.model import AggregateRef, Commit, InvalidCommitError
from wow_temporal.timers.admission import Admission, Admitted, admit
from wow_temporal.timers.client import FenceLapsedError, SlowHandOverError, fenced
from wow_temporal.timers.fold import Horizon
from wow_temporal.timers.readahead import ReadAhead

__all__ = ["RELAY", "Relay", "Timers"]

RELAY = "relay"
"""The relay's name in the store's tracking records."""

REFUSED_SHOWN = 100
"""How many of the commits it passed over for good the relay shows (the latest)."""

BEHIND_INTERVAL = 5.0
"""Seconds between the relay's counts of the commits it has yet to read (`wow_relay_behind`)."""

logger = logging.getLogger(__name__)


class Timers(Protocol):
    """What the relay needs of `TimerClient`: `apply_many` noting each aggregate's failure in
    `failures` rather than failing the others."""

    async def apply_many(
        self,
        commits: Sequence[Commit] | Admission,
        *,
        later: Horizon | None = None,
        failures: dict[AggregateRef, Exception] | None = None,
        within: float | None = None,
    ) -> Any: ...


class Relay(Follower):
    """Follows the log and hands schedule events to the timers; `connect` gives the timers,
    retried until it succeeds, so the relay can start before Temporal is reachable (the
    client it gives reconnects by itself afterwards)."""

    retry_concurrency = 4
    """Aggregates set aside that are retried at once (in a task of their own)."""
    timeout_s = 30.0
    """How long one aggregate's commits of a batch may take to hand over (each phase), and
    connecting to the timers: an aggregate that takes longer is set aside."""
    batch = 1000
    """Commits read at once: a relay catching up folds a whole batch, so the changes that stop
    timers go out first and each key gets one change."""
    read_ahead = 500
    """Commits a page while the relay reads the log ahead of the batch it hands over."""
    read_ahead_limit = 20_000
    """The most commits the relay reads past the batch it hands over (at least `batch`): what
    it holds in memory is their schedule changes, at most one per key and deletion, let go of
    as it passes them. A backlog longer than that is read on as the relay moves through it;
    meanwhile a set beyond the limit may start and be stopped when its batch comes, and the
    target's own guard refuses any slot the log stopped before it was due."""

    def __init__(self, host: DomainHost, connect: Callable[[], Awaitable[Timers]]) -> None:
        super().__init__(host, RELAY)
        self._connect = connect
        self._timers: Timers | None = None
        self.handed = 0
        """Commits with schedule events handed over since start."""
        self.stopped_early = 0
        """Commits of stops read ahead handed over before their batch, since start."""
        self._counted = -BEHIND_INTERVAL
        self.on_handed: Callable[[list[Commit]], None] | None = None
        """Called with each batch once handed over (the benchmark's lag probe)."""
        self._ahead = ReadAhead()
        self._gap = True
        """Whether the relay comes back from a gap: started, took over, or failed last time."""
        self._aside = Aside()
        self._retrying: asyncio.Task[None] | None = None
        self._refused: deque[Refused] = deque(maxlen=REFUSED_SHOWN)

    def reset(self) -> None:
        super().reset()
        self._ahead.clear()
        self._gap = True
        self._aside.clear()  # what this replica set aside is behind its recorded position
        self._stop_retrying()

    def recordable(self, position: int) -> int:
        earliest = self._aside.holds_back()
        return position if earliest is None else min(position, earliest - 1)

    def set_aside(self) -> tuple[SetAside, ...]:
        return self._aside.view()

    def refused(self) -> tuple[Refused, ...]:
        return tuple(self._refused)

    async def run(self) -> None:
        try:
            await super().run()
        finally:
            self._stop_retrying()

    async def step(self) -> int:
        self._retry_set_aside()
        return await super().step()

    async def handle(self, commits: list[tuple[int, Commit]]) -> int:
        try:
            reached = await self._hand(commits)
        except BaseException:
            self._gap = True  # resuming after a failure: the log moved on meanwhile
            raise
        self._gap = False
        return reached

    async def _hand(self, commits: list[tuple[int, Commit]]) -> int:
        """Read ahead, hand over the stops read ahead after a gap, then the batch."""
        reached = commits[-1][0]
        scheduling = [(at, commit) for at, commit in commits if commit.has_schedule_events]
        if scheduling or self._gap or len(commits) >= self.batch:
            later = await self._read_ahead(reached)
            if self._gap or self._ahead.scanned - reached >= self.batch:
                await self._stop_early(later)
        scheduling, admitted = self._admitted(self._behind_set_aside(scheduling))
        if scheduling:
            failures = await self._apply(admitted, self._ahead.horizon)
            if self.overtaken():
                return reached  # reset meanwhile: its state is anew, and nothing is recorded
            self._put_aside(scheduling, failures)
            self.handled(reached)  # what is set aside holds the record back (`recordable`)
            self.acted = True
            handed = [c for _, c in scheduling if not self._aside.holds(c.aggregate)]
            self.handed += len(handed)
            metrics = self._metrics()
            if metrics is not None:
                await self._measure(metrics, handed, reached)
            if self.on_handed is not None:
                self.on_handed(handed)
        self._ahead.passed(reached)
        if self._ahead.scanned - reached < self.batch:
            # Within a batch of the head: the next batch folds what is ahead itself, so what
            # was read ahead is let go (reading ahead each batch would cost a read for nothing).
            self._ahead.clear(reached)
        return reached

    async def _connected(self) -> Timers:
        """The timers, connecting to them first if the relay has not yet."""
        if self._timers is None:
            try:
                async with asyncio.timeout(self.timeout_s):
                    self._timers = await self._connect()
            except TimeoutError:
                raise TimeoutError(f"no timers reached in {self.timeout_s:.0f} s") from None
        return self._timers

    async def _stop_early(self, later: Horizon) -> None:
        """Hand over the deletions and each key's latest stop read ahead that are new (see
        `ReadAhead.early_stops`), so timers running schedules the log stopped end now."""
        stops = self._ahead.early_stops()
        if stops:
            await self._apply(stops, later)  # a stop that failed goes again in its batch
            self.acted = True
            self.stopped_early += len(stops)
            logger.info("relay: handed over the stops of %d commits read ahead", len(stops))
        self._ahead.mark_handed()

    async def _apply(
        self, commits: list[Commit] | Admission, later: Horizon | None
    ) -> dict[AggregateRef, Exception]:
        """Hand `commits` to the timers while the lease holds here; the aggregates that failed,
        each with its error. Raises when every aggregate failed for want of Temporal (an
        outage: the batch is retried whole, nothing set aside)."""
        timers = await self._connected()
        failures: dict[AggregateRef, Exception] = {}
        with fenced(self.runs_here):  # nothing sent once the lease lapsed here
            await timers.apply_many(
                commits, later=later, failures=failures, within=self.timeout_s
            )
        listed = commits.commits if isinstance(commits, Admission) else commits
        every = len(failures) == len({commit.aggregate for commit in listed})
        if failures and every and await self._outage(list(failures.values())):
            raise next(iter(failures.values()))
        return failures

    async def _outage(self, errors: list[Exception]) -> bool:
        """Whether every aggregate of a hand-over failing says Temporal is away, rather than
        that these aggregates cannot be taken: transport errors, or several aggregates all too
        slow, or one too slow while Temporal does not answer a health check either."""
        if all(_unreachable(error) for error in errors):
            return True
        if not all(isinstance(error, SlowHandOverError) for error in errors):
            return False
        reachable = getattr(self._timers, "reachable", None)
        return len(errors) > 1 or (reachable is not None and not await reachable())

    def _admitted(
        self, scheduling: list[tuple[int, Commit]]
    ) -> tuple[list[tuple[int, Commit]], Admission]:
        """The commits admission takes, and them admitted (handed over without checking
        again); one it refuses can never be handed over: it is passed over, logged, counted
        and shown (`refused`), and its aggregate's others go on."""
        kept: list[tuple[int, Commit]] = []
        admitted: list[Admitted] = []
        for at, commit in scheduling:
            try:
                admitted.extend(admit([commit]))
            except InvalidCommitError as error:
                self._refused.append(Refused(at, commit.id, commit.aggregate, str(error)[:500]))
                logger.error("relay: passed over commit %s at %d: %s", commit.id, at, error)
                metrics = self._metrics()
                if metrics is not None:
                    metrics.refused()
                continue
            kept.append((at, commit))
        return kept, Admission(tuple(admitted))

    def _behind_set_aside(
        self, scheduling: list[tuple[int, Commit]]
    ) -> list[tuple[int, Commit]]:
        """Queue the commits of aggregates set aside behind theirs; the others, to hand over."""
        kept: list[tuple[int, Commit]] = []
        for at, commit in scheduling:
            if self._aside.holds(commit.aggregate):
                self._aside.queue(commit.aggregate, [(at, commit)])
            else:
                kept.append((at, commit))
        return kept

    def _put_aside(
        self, scheduling: list[tuple[int, Commit]], failures: dict[AggregateRef, Exception]
    ) -> None:
        """Set aside the aggregates the timers did not take, with their commits and why."""
        now = time.time()
        for aggregate, error in failures.items():
            commits = [(at, commit) for at, commit in scheduling if commit.aggregate == aggregate]
            reason = _reason(error)
            self._aside.put(aggregate, commits, reason, now)
            logger.warning(
                "relay: set aside %s (%d commits): %s; retried on its own, the rest of the log "
                "goes on",
                aggregate,
                len(commits),
                reason,
            )
        if failures:
            self._count_set_aside()

    def _retry_set_aside(self) -> None:
        """Start retrying the aggregates set aside whose retry is due, in a task of their own
        (at most `retry_concurrency` at once), so a slow one never holds the log back."""
        if self._retrying is not None and not self._retrying.done():
            return
        due = self._aside.due(time.time())
        if due and self.runs_here():
            self._retrying = asyncio.create_task(self._retry(due), name="relay: set aside")

    async def _retry(self, due: list[tuple[AggregateRef, list[Commit]]]) -> None:
        limit = asyncio.Semaphore(self.retry_concurrency)

        async def one(aggregate: AggregateRef, commits: list[Commit]) -> None:
            async with limit:
                try:
                    failures = await self._apply(commits, None)
                except FenceLapsedError:
                    return  # the lease lapsed here: the next holder hands it over
                except Exception as error:  # unreachable again: tried again later
                    failures = {aggregate: error}
            if aggregate in failures:
                self._aside.put(aggregate, [], _reason(failures[aggregate]), time.time())
                return
            released = self._aside.release(aggregate, len(commits))
            if released is not None:
                attempts, since = released
                logger.warning(
                    "relay: %s handed over after %d attempts, %.1f s set aside",
                    aggregate,
                    attempts + 1,
                    time.time() - since,
                )

        await asyncio.gather(*(one(aggregate, commits) for aggregate, commits in due))
        self._count_set_aside()
        self._waker.set()  # what was held back may be recorded now

    def _stop_retrying(self) -> None:
        if self._retrying is not None:
            self._retrying.cancel()
            self._retrying = None

    def _count_set_aside(self) -> None:
        metrics = self._metrics()
        if metrics is not None:
            metrics.set_aside(len(self._aside))

    def _metrics(self) -> IngestMetrics | None:
        metrics = getattr(self._timers, "metrics", None)
        return metrics if isinstance(metrics, IngestMetrics) else None

    async def _read_ahead(self, position: int) -> Horizon:
        """The schedule changes the log holds past `position`, up to its head or
        `read_ahead_limit` commits: a relay catching up after an outage never starts a set the
        log later replaced, cancelled or deleted (read in pages; each later batch reads only
        what is new)."""
        start = max(self._ahead.scanned, position)
        end = position + self.read_ahead_limit
        while start < end:
            want = min(self.read_ahead, end - start)
            read = partial(self.host.store.commits_after, start, want)
            page = await self.host.run(read)
            for at, commit in page:
                try:
                    self._ahead.add(at, commit)
                except ValueError as error:  # not admissible: set aside when its batch comes
                    logger.debug("relay: cannot read ahead commit %s: %s", commit.id, error)
            if len(page) < want:
                break
            start = page[-1][0]
        self._ahead.scanned = max(self._ahead.scanned, start)
        return self._ahead.horizon

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


def _unreachable(error: Exception) -> bool:
    """Whether `error` says Temporal could not be reached (an outage), not that this
    aggregate's changes cannot be taken."""
    if isinstance(error, RPCError):
        return error.status in (
            RPCStatusCode.UNAVAILABLE,
            RPCStatusCode.DEADLINE_EXCEEDED,
            RPCStatusCode.CANCELLED,
        )
    return isinstance(error, ConnectionError | TimeoutError)


def _reason(error: Exception) -> str:
    return f"{type(error).__name__}: {error}".strip()[:500]
