"""The front process of `bench.rivals`' `wow-relay` side (`bench._wow_sides.WowRelay`):
wow-temporal's second ingest path, the one the domain host's relay takes. Commits go straight
to `TimerClient.apply_many` (no control API, no HTTP body of commits), from a process of its own
so its CPU is counted apart.

The process: `POST /timers` takes a batch of `{key, due_ms}`, makes each a commit of one
`wow.ScheduleSet` (as the `wow` side's `POST /commits` body) and hands the batch over as the
relay does (`apply_many` with `failures`: one aggregate cannot stop the others); `GET /ready`
answers once it is connected.

Run: `python -m bench._wow_relay --port P` with the `wow-temporal worker`'s environment.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import uvicorn
from fastapi import FastAPI
from pydantic import BaseModel

from bench.harness import commit, iso_ms, schedule_set
from wow_temporal.connection import connect_timers
from wow_temporal.model import AggregateRef, Commit
from wow_temporal.settings import load_settings
from wow_temporal.timers.client import TimerClient

app = FastAPI()


class _Timer(BaseModel):
    key: str
    due_ms: int


class _Relay:
    """The timers the process hands commits to (connected in `serve`)."""

    timers: TimerClient | None = None


@app.post("/timers")
async def hand_over(timers: list[_Timer]) -> dict[str, int]:
    """Hand the timers' commits over in one `apply_many`, as a relay's batch."""
    client = _Relay.timers
    assert client is not None
    made = (commit(t.key, schedule_set({"at": iso_ms(t.due_ms)})) for t in timers)
    commits = [Commit.model_validate(c) for c in made]  # as the relay reads them from its store
    failures: dict[AggregateRef, Exception] = {}
    await client.apply_many(commits, failures=failures)
    if failures:
        raise next(iter(failures.values()))
    return {"handed": len(timers)}


@app.get("/ready")
async def ready() -> dict[str, Any]:
    return {"ready": _Relay.timers is not None}


async def serve(port: int) -> None:
    _Relay.timers = await connect_timers(load_settings())
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    await uvicorn.Server(config).serve()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--port", type=int, required=True)
    asyncio.run(serve(p.parse_args().port))


if __name__ == "__main__":
    main()
