"""What `bench.rivals`' own processes (`bench._bare_rivals`, `bench._dbos_timers`,
`bench._wow_relay`) share: `POST /timers` taking a batch of `{key, due_ms}` and `GET /ready`,
and the command a timer sends, posted and read as wow's delivery does."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager

import httpx
import uvicorn
from fastapi import FastAPI
from pydantic import BaseModel

from bench.harness.commits import CANCEL
from wow_temporal.delivery import classify
from wow_temporal.wire import COMMAND_SEND_PATH, REQUEST_ID_HEADER, command_headers


class Timer(BaseModel):
    key: str
    due_ms: int


def command_client() -> httpx.AsyncClient:
    """An HTTP client on the settings of wow's `CommandSender`: 100 connections, 10 s."""
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=100)
    return httpx.AsyncClient(timeout=10.0, limits=limits, verify=False)


async def send_command(client: httpx.AsyncClient, host_url: str, key: str) -> None:
    """One POST of `CANCEL` to aggregate `key`, request id `key`, its answer read as wow's
    delivery reads it (`classify`: a technical failure raised, to be retried; delivered, a
    `DuplicateRequestId` included, or refused ends it)."""
    command = dataclasses.replace(CANCEL, aggregate_id=key, request_id=key)
    headers = {**command_headers(command), REQUEST_ID_HEADER: key}
    url = host_url + COMMAND_SEND_PATH
    classify(await client.post(url, json=dict(CANCEL.body), headers=headers))


def serve(
    port: int,
    start: Callable[[list[Timer]], Awaitable[object]],
    lifespan: Callable[[FastAPI], AbstractAsyncContextManager[None]] | None = None,
) -> None:
    """Serve `POST /timers` (`start` each batch) until told to stop; `GET /ready` answers once
    `lifespan` has entered (the process connected, its worker running)."""
    app = FastAPI(lifespan=lifespan)

    @app.post("/timers")
    async def timers(batch: list[Timer]) -> dict[str, int]:
        await start(batch)
        return {"started": len(batch)}

    @app.get("/ready")
    async def ready() -> dict[str, bool]:
        return {"ready": True}

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
