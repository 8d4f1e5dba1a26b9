"""The bare Temporal side of `bench.rivals`, as its own process: the minimum a Temporal user
writes for a keyed one-shot timer that delivers a command. A workflow per key
(`bench._bare_delayed.DelayedTimer`, id = the key) started with `start_delay` until its due
time, one activity that POSTs the command to the Wow host (the request `wow.deliver` and the
DBOS side make), a worker on the SDK's defaults (sandbox on, default data converter), and the
starter, all in this one process so its CPU is counted here.

`POST /timers` takes a batch of `{key, due_ms}` and starts their workflows one after another
(as `bench._dbos_timers` does: the same plan, handed the same way); `GET /ready` answers once
the worker runs.

Run: `python -m bench._bare_rivals --port P --host-url URL --address HOST:PORT [--namespace N]`
"""

from __future__ import annotations

import argparse
import asyncio
import time
from datetime import timedelta
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI
from pydantic import BaseModel
from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker

from bench._bare_delayed import DelayedTimer
from bench.harness.commits import CANCEL_ORDER
from wow_temporal.delivery import classify
from wow_temporal.wire import COMMAND_SEND_PATH, REQUEST_ID_HEADER, WireCommand, command_headers

QUEUE = "bench-bare-rivals"
BODY = {"reason": "PAYMENT_TIMEOUT"}

app = FastAPI()


class Timer(BaseModel):
    key: str
    due_ms: int


class Poster:
    """The activity: one POST of the command to aggregate `key`, request id `key`, its answer
    read as wow's delivery reads it (`classify`: a technical failure raised and retried by
    Temporal's default policy; delivered, a `DuplicateRequestId` included, or refused ends it)."""

    def __init__(self, host_url: str) -> None:
        self.url = host_url + COMMAND_SEND_PATH
        limits = httpx.Limits(max_connections=100, max_keepalive_connections=100)
        self.client = httpx.AsyncClient(timeout=10.0, limits=limits, verify=False)

    @activity.defn(name="bench.post")
    async def post(self, key: str) -> None:
        command = WireCommand(
            type=CANCEL_ORDER,
            context_name="eshop-order",
            aggregate_name="order",
            tenant_id="t1",
            aggregate_id=key,
            request_id=key,
            body=BODY,
        )
        headers = {**command_headers(command), REQUEST_ID_HEADER: key}
        classify(await self.client.post(self.url, json=BODY, headers=headers))


class _Temporal:
    """The client the starter uses (connected in `serve`)."""

    client: Client | None = None


@app.post("/timers")
async def start_timers(timers: list[Timer]) -> dict[str, int]:
    """Start one workflow per timer, its id the key, delayed until its due time."""
    client = _Temporal.client
    assert client is not None
    for t in timers:
        wait = t.due_ms / 1000 - time.time()
        await client.start_workflow(
            DelayedTimer.run,
            t.key,
            id=t.key,
            task_queue=QUEUE,
            start_delay=timedelta(seconds=wait) if wait > 0 else None,
        )
    return {"started": len(timers)}


@app.get("/ready")
async def ready() -> dict[str, Any]:
    return {"ready": _Temporal.client is not None}


async def serve(args: argparse.Namespace) -> None:
    """Connect, run the worker, serve the starter until told to stop."""
    client = await Client.connect(args.address, namespace=args.namespace)
    poster = Poster(args.host_url)
    worker = Worker(client, task_queue=QUEUE, workflows=[DelayedTimer], activities=[poster.post])
    async with worker:
        _Temporal.client = client
        config = uvicorn.Config(
            app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False
        )
        await uvicorn.Server(config).serve()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--host-url", required=True, help="the Wow host commands go to")
    p.add_argument("--address", required=True, help="the Temporal frontend, host:port")
    p.add_argument("--namespace", default="default")
    asyncio.run(serve(p.parse_args()))


if __name__ == "__main__":
    main()
