"""The DBOS Transact side of `bench.rivals`, as its own process: a DBOS app as its docs show one
(configured and launched in `main`, FastAPI served by uvicorn), a workflow per key
(`SetWorkflowID(key)`) that sleeps durably until its due time and then sends one command to the
Wow host in a step (one HTTP POST, the same request `wow.deliver` makes).

`POST /timers` takes a batch of `{key, due_ms}` and starts their workflows
(`DBOS.start_workflow_async`); `GET /ready` answers once DBOS is launched. The system database is
DBOS's SQLite default (a file) or PostgreSQL (`--db postgresql://…`), on DBOS's default pool.

Run: `python -m bench._dbos_timers --port P --host-url URL --db sqlite:///PATH|postgresql://…`
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import time
from typing import Any

import httpx
import uvicorn
from dbos import DBOS, DBOSConfig, SetWorkflowID
from fastapi import FastAPI
from pydantic import BaseModel

from wow_temporal.delivery import classify
from wow_temporal.wire import COMMAND_SEND_PATH, REQUEST_ID_HEADER, WireCommand, command_headers

app = FastAPI()
CANCEL = WireCommand(
    type="eshop.order.CancelOrder",
    context_name="eshop-order",
    aggregate_name="order",
    tenant_id="t1",
    body={"reason": "PAYMENT_TIMEOUT"},
)
"""The command every timer sends (the one bench.timers and the wow side send), its aggregate
id the timer's key."""


class _Host:
    """Where commands go, and one pooled client on the serving event loop (made on first use)."""

    url = ""
    sync = False
    client: httpx.AsyncClient | None = None
    in_flight: asyncio.Semaphore | None = None

    @classmethod
    def http(cls) -> tuple[httpx.AsyncClient, asyncio.Semaphore]:
        """The client (the settings of wow's `CommandSender`: 100 connections, 10 s) and a
        bound of as many POSTs at once. Without it a cold burst of 1,000 on the saturated
        loop timed its connects out, after which every POST met `PoolTimeout` (httpcore's
        pool poisoned, encode/httpcore#550): no timer delivered. wow's worker bounds its
        activities in flight too (200)."""
        if cls.client is None or cls.in_flight is None:
            limits = httpx.Limits(max_connections=100, max_keepalive_connections=100)
            cls.client = httpx.AsyncClient(timeout=10.0, limits=limits, verify=False)
            cls.in_flight = asyncio.Semaphore(100)
        return cls.client, cls.in_flight


class Timer(BaseModel):
    key: str
    due_ms: int


RETRIES: dict[str, Any] = {"retries_allowed": True, "max_attempts": 10}
"""A command that must arrive is retried (1 s, then doubling: ~17 min in all), as wow's
delivery activity is, not given up after DBOS's default of 3 attempts (a workflow in ERROR,
its command never sent)."""


def _headers(key: str) -> dict[str, str]:
    """The headers of the command a timer sends: `CANCEL` to aggregate `key`, request id `key`."""
    command = dataclasses.replace(CANCEL, aggregate_id=key, request_id=key)
    return {**command_headers(command), REQUEST_ID_HEADER: key}


@DBOS.step(**RETRIES)
async def send_command(key: str) -> None:
    """One POST of the command to the host, its request id the key, its answer read as wow's
    delivery reads it (`classify`: a technical failure raised and retried; delivered, a
    `DuplicateRequestId` included, or refused ends it)."""
    client, in_flight = _Host.http()
    async with in_flight:
        response = await client.post(
            _Host.url + COMMAND_SEND_PATH, json=dict(CANCEL.body), headers=_headers(key)
        )
    classify(response)


@DBOS.workflow()
async def timer(key: str, due_ms: int) -> None:
    """Sleep durably until `due_ms` (epoch ms), then send the command."""
    await DBOS.sleep_async(max(0.0, due_ms / 1000 - time.time()))
    await send_command(key)


@DBOS.step(**RETRIES)
def send_command_sync(key: str) -> None:
    """`send_command` for the synchronous workflow (`--sync`): a blocking POST."""
    url, body = _Host.url + COMMAND_SEND_PATH, dict(CANCEL.body)
    classify(httpx.post(url, json=body, headers=_headers(key), timeout=10.0))


@DBOS.workflow()
def timer_sync(key: str, due_ms: int) -> None:
    """`timer` as a synchronous workflow (`--sync`): a thread of DBOS's executor each."""
    DBOS.sleep(max(0.0, due_ms / 1000 - time.time()))
    send_command_sync(key)


@app.post("/timers")
async def start_timers(timers: list[Timer]) -> dict[str, int]:
    """Start one workflow per timer, its id the key (a key started again is the same one)."""
    for t in timers:
        with SetWorkflowID(t.key):
            if _Host.sync:
                await asyncio.to_thread(DBOS.start_workflow, timer_sync, t.key, t.due_ms)
            else:
                await DBOS.start_workflow_async(timer, t.key, t.due_ms)
    return {"started": len(timers)}


@app.get("/ready")
async def ready() -> dict[str, Any]:
    return {"ready": True}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--host-url", required=True, help="the Wow host commands go to")
    p.add_argument("--db", required=True, help="the system database URL (sqlite:/// or PG)")
    p.add_argument("--sync", action="store_true", help="synchronous workflows, a thread each")
    args = p.parse_args()
    _Host.url, _Host.sync = args.host_url, args.sync
    config: DBOSConfig = {"name": "rivals-timers", "system_database_url": args.db}
    DBOS(config=config)
    DBOS.launch()
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
