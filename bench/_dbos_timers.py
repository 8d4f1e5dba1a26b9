"""The DBOS Transact side of `bench.rivals`, as its own process (docs/benchmarks.md): a DBOS app
as its docs show one, a workflow per key (`SetWorkflowID(key)`) that sleeps durably until due
and sends the command in a step; its system database on SQLite or PostgreSQL (`--db`).

Run: `python -m bench._dbos_timers --port P --host-url URL --db sqlite:///PATH|postgresql://…`
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import httpx
from dbos import DBOS, DBOSConfig, SetWorkflowID

from bench._rival_app import Timer, command_client, send_command, serve


class _Host:
    """Where commands go, and one client on the serving event loop (made on first use)."""

    url = ""
    client: httpx.AsyncClient | None = None
    in_flight: asyncio.Semaphore | None = None

    @classmethod
    def http(cls) -> tuple[httpx.AsyncClient, asyncio.Semaphore]:
        """The client and a bound of as many POSTs at once as its connections. Without it a
        cold burst of 1,000 timed its connects out on the saturated loop, and then every POST
        met `PoolTimeout` (encode/httpcore#550): none delivered. wow's worker bounds its
        activities in flight too (200)."""
        if cls.client is None or cls.in_flight is None:
            cls.client = command_client()
            cls.in_flight = asyncio.Semaphore(100)
        return cls.client, cls.in_flight


RETRIES: dict[str, Any] = {"retries_allowed": True, "max_attempts": 10}
"""A command that must arrive is retried (1 s, then doubling: ~17 min in all), as wow's
delivery activity is, not given up after DBOS's default of 3 attempts."""


@DBOS.step(**RETRIES)
async def send(key: str) -> None:
    client, in_flight = _Host.http()
    async with in_flight:
        await send_command(client, _Host.url, key)


@DBOS.workflow()
async def timer(key: str, due_ms: int) -> None:
    """Sleep durably until `due_ms` (epoch ms), then send the command."""
    await DBOS.sleep_async(max(0.0, due_ms / 1000 - time.time()))
    await send(key)


async def start(timers: list[Timer]) -> None:
    """Start one workflow per timer, its id the key (a key started again is the same one)."""
    for t in timers:
        with SetWorkflowID(t.key):
            await DBOS.start_workflow_async(timer, t.key, t.due_ms)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--host-url", required=True, help="the Wow host commands go to")
    p.add_argument("--db", required=True, help="the system database URL (sqlite:/// or PG)")
    args = p.parse_args()
    _Host.url = args.host_url
    config: DBOSConfig = {"name": "rivals-timers", "system_database_url": args.db}
    DBOS(config=config)
    DBOS.launch()
    serve(args.port, start)


if __name__ == "__main__":
    main()
