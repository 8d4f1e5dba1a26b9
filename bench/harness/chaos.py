"""Chaos: faults at seeded moments of a run, the windows they took (lateness is judged outside
them), and the restarts they do."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from wow_temporal.logs import CORE_LOGGER, configure_temporal_runtime

__all__ = ["Chaos", "Fault", "print_tail", "quiet_while_down", "restart"]


@dataclass(frozen=True)
class Fault:
    """At `at` (run-relative seconds), `act` (kill, pause, restart), named `what`."""

    at: float
    what: str
    act: Callable[[], Awaitable[None]]


@dataclass
class Chaos:
    """What was done when (run-relative seconds): `inside(t)` is true from `lead` seconds
    before a fault to `recovery` seconds after it ended."""

    lead: float = 2.0
    recovery: float = 10.0
    windows: list[tuple[str, float, float]] = field(default_factory=list)
    planned: list[str] = field(default_factory=list)
    """What the run planned to do, by name (`missing` compares)."""

    def inside(self, at: float) -> bool:
        return any(start - self.lead <= at <= end + self.recovery for _, start, end in self.windows)

    async def run(self, faults: Sequence[Fault], clock: Callable[[], float]) -> None:
        """Do the faults in time order, one after the other, each when its moment comes."""
        for fault in sorted(faults, key=lambda f: f.at):
            await asyncio.sleep(max(0.0, fault.at - clock()))
            began = clock()
            await fault.act()
            self.windows.append((fault.what, began, clock()))
            print(f"  chaos: {fault.what} down {began:6.1f}s .. {clock():6.1f}s", file=sys.stderr)

    def missing(self) -> int:
        """How many faults were planned but not done, or done but not planned (by name)."""
        done, wanted = Counter(what for what, _, _ in self.windows), Counter(self.planned)
        return sum(((wanted - done) + (done - wanted)).values())


class Restartable(Protocol):
    """A process or a server: killed at once, started again."""

    async def kill(self) -> Any: ...

    async def start(self) -> None: ...


async def restart(procs: Sequence[Restartable], pause: float) -> None:
    """SIGKILL them together, wait `pause` seconds, start them again together."""
    await asyncio.gather(*(p.kill() for p in procs))
    await asyncio.sleep(pause)
    await asyncio.gather(*(p.start() for p in procs))


def print_tail(
    chaos: Chaos,
    latest: Mapping[str, Iterable[tuple[int, float, str]]],
    problems: Iterable[str],
) -> None:
    """A soak's text report's last lines: the latest arrivals by where they were due (ms late,
    due at s, what), the chaos done, and what broke."""
    for where, arrivals in latest.items():
        for late, due_at, what in arrivals:
            print(f"  late {where}: {late} ms, due at {due_at}s, {what}")
    for what, began, ended in chaos.windows:
        print(f"  chaos {what}: {began:.1f}s .. {ended:.1f}s")
    for line in problems:
        print(f"  ! {line}")


def quiet_while_down() -> None:
    """Only errors logged: the SDK core's retry warnings while the server is down are noise."""
    configure_temporal_runtime()
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    logging.getLogger(CORE_LOGGER).setLevel(logging.ERROR)
