"""Chaos: faults at seeded moments of a run, and the windows they took (lateness is judged
outside them)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

__all__ = ["Chaos", "Fault"]


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
