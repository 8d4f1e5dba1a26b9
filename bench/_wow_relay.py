"""The `wow-relay` side of `bench.rivals`: wow-temporal's second ingest path, the one the domain
host's relay takes, measured against bare Temporal. Commits go straight to
`TimerClient.apply_many` (no control API, no HTTP body of commits), from a process of its own
so its CPU is counted apart; the dev server and the `wow-temporal worker` are the `wow` side's.

The process: `POST /timers` takes a batch of `{key, due_ms}`, makes each a commit of one
`wow.ScheduleSet` (as the `wow` side's `POST /commits` body) and hands the batch over as the
relay does (`apply_many` with `failures`: one aggregate cannot stop the others); `GET /ready`
answers once it is connected.

Run: `python -m bench._wow_relay --port P` with the `wow-temporal worker`'s environment.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI
from pydantic import BaseModel

from bench._bare_side import DevServer, Timer
from bench.harness import (
    Proc,
    answers,
    commit,
    cpu_seconds,
    iso_ms,
    schedule_set,
    tree_cpu_seconds,
    worker_env,
)
from wow_temporal.connection import connect_timers
from wow_temporal.dev.ports import free_port
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


class WowRelay:
    """The `wow` side's dev server and worker; commits handed over by this module's process."""

    name = "wow-relay"

    def __init__(self, tmp: Path, host_url: str, settings: dict[str, str] | None = None) -> None:
        self.tmp = tmp
        self.host_url = host_url
        self.settings = settings or {}  # `--wow-env`: the worker's and the relay's
        self.http = httpx.AsyncClient(timeout=120)

    async def start(self) -> None:
        self.server = DevServer(self.tmp / "temporal")
        await self.server.start()
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        env = worker_env(self.server.address, self.server.namespace, self.host_url, **self.settings)
        self.worker = Proc.worker(self.tmp / "worker.log", env)
        argv = [sys.executable, "-m", "bench._wow_relay", "--port", str(port)]
        self.relay = Proc(
            "the relay", argv, self.tmp / "relay.log", answers(self.url + "/ready"), env=env
        )
        await asyncio.gather(self.worker.start(), self.relay.start())

    async def hand(self, timers: list[Timer]) -> None:
        body = [{"key": key, "due_ms": due} for key, due in timers]
        (await self.http.post(self.url + "/timers", json=body)).raise_for_status()

    def cpu(self) -> dict[str, float]:
        assert self.server.pid is not None
        return {
            "server": tree_cpu_seconds(self.server.pid),
            "worker": cpu_seconds(self.worker.pid),
            "relay": cpu_seconds(self.relay.pid),
        }

    async def counters(self) -> dict[str, float]:
        return await self.server.counters()

    async def stop(self) -> None:
        await self.http.aclose()
        with contextlib.suppress(AttributeError):
            await asyncio.gather(self.relay.stop(grace=10), self.worker.stop(grace=10))
        with contextlib.suppress(AttributeError):
            await self.server.stop()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--port", type=int, required=True)
    asyncio.run(serve(p.parse_args().port))


if __name__ == "__main__":
    main()
