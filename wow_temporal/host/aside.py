"""What the relay set aside: aggregates whose commits the timers would not take (a key past a
Temporal limit, a run its version cannot read, one that keeps timing out), each retried on its
own with backoff while the rest of the log goes on.

An aggregate set aside keeps its later commits behind the ones that failed, so its changes still
reach the timers in log order. Nothing set aside is lost: the relay records its position no
further than just before the earliest commit set aside (`holds_back`), so a restart hands it
over again.

Pure: no Temporal, no I/O; the relay hands over and reads the clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from wow_temporal.host.follower import SetAside
from wow_temporal.model import AggregateRef, Commit

__all__ = ["BACKOFF_S", "Aside"]

BACKOFF_S = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
"""Seconds before each retry of an aggregate set aside (the last repeats)."""


@dataclass
class _Entry:
    commits: list[tuple[int, Commit]]
    reason: str
    since: float
    attempts: int = 1
    next_try: float = 0.0


@dataclass
class Aside:
    """The aggregates set aside, by aggregate, each with its commits in log order."""

    _entries: dict[AggregateRef, _Entry] = field(default_factory=dict)

    def holds(self, aggregate: AggregateRef) -> bool:
        return aggregate in self._entries

    def put(
        self, aggregate: AggregateRef, commits: list[tuple[int, Commit]], reason: str, now: float
    ) -> None:
        """Set `commits` of `aggregate` aside (after those it holds already), or note that its
        retry failed again (`reason`), and when to try again."""
        entry = self._entries.get(aggregate)
        if entry is None:
            entry = self._entries[aggregate] = _Entry([], reason, now, attempts=0)
        known = {position for position, _ in entry.commits}
        entry.commits += [(at, commit) for at, commit in commits if at not in known]
        entry.commits.sort(key=lambda pair: pair[0])
        entry.reason = reason
        entry.attempts += 1
        entry.next_try = now + BACKOFF_S[min(entry.attempts, len(BACKOFF_S)) - 1]

    def queue(self, aggregate: AggregateRef, commits: list[tuple[int, Commit]]) -> None:
        """Keep later commits of an aggregate set aside behind the ones waiting."""
        entry = self._entries[aggregate]
        known = {position for position, _ in entry.commits}
        entry.commits += [(at, commit) for at, commit in commits if at not in known]

    def due(self, now: float) -> list[tuple[AggregateRef, list[Commit]]]:
        """The aggregates whose retry is due, with their commits in log order."""
        return [
            (aggregate, [commit for _, commit in entry.commits])
            for aggregate, entry in self._entries.items()
            if entry.next_try <= now
        ]

    def release(self, aggregate: AggregateRef, handed: int) -> tuple[int, float] | None:
        """The aggregate's first `handed` commits waiting were handed over: forget them, and it
        with its (attempts, since) when none waits more; None when some came meanwhile (tried
        at once)."""
        entry = self._entries[aggregate]
        del entry.commits[:handed]
        if entry.commits:
            entry.next_try = 0.0
            return None
        del self._entries[aggregate]
        return entry.attempts, entry.since

    def holds_back(self) -> int | None:
        """The position of the earliest commit set aside (None: nothing is)."""
        firsts = [entry.commits[0][0] for entry in self._entries.values() if entry.commits]
        return min(firsts) if firsts else None

    def view(self) -> tuple[SetAside, ...]:
        """What is set aside, as `/wow/followers` shows it."""
        return tuple(
            SetAside(aggregate, len(entry.commits), entry.reason, entry.since, entry.attempts)
            for aggregate, entry in self._entries.items()
        )

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()
