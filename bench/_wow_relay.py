"""The front process of `bench.rivals`' `wow-relay` side: commits handed straight to
`TimerClient.apply_many`, as the domain host's relay hands them (no control API), from a process
of its own so its CPU is counted apart.

Run: `python -m bench._wow_relay --port P` with the `wow-temporal worker`'s environment.
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from bench._rival_app import Timer, serve
from bench.harness import commit, iso_ms, schedule_set
from wow_temporal.connection import connect_timers
from wow_temporal.model import AggregateRef, Commit
from wow_temporal.settings import load_settings
from wow_temporal.timers.client import TimerClient


class Relay:
    """The timers commits go to, connected as the app starts."""

    timers: TimerClient

    @asynccontextmanager
    async def running(self, _: FastAPI) -> AsyncIterator[None]:
        self.timers = await connect_timers(load_settings())
        yield

    async def hand_over(self, timers: list[Timer]) -> None:
        """Each timer a commit of one `wow.ScheduleSet` (as the `wow` side's `POST /commits`),
        the batch in one `apply_many` with `failures`, as the relay hands one over."""
        made = (commit(t.key, schedule_set({"at": iso_ms(t.due_ms)})) for t in timers)
        commits = [Commit.model_validate(c) for c in made]  # as the relay reads them
        failures: dict[AggregateRef, Exception] = {}
        await self.timers.apply_many(commits, failures=failures)
        if failures:
            raise next(iter(failures.values()))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--port", type=int, required=True)
    relay = Relay()
    serve(p.parse_args().port, relay.hand_over, relay.running)


if __name__ == "__main__":
    main()
