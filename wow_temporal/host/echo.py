"""A domain host that accepts every command: the dev default until a real domain is plugged in.

It speaks Wow's command API (`POST /wow/command/send`), answers `Ok` once per request id and
`DuplicateRequestId` after, and prints each command, so `wow-temporal dev` shows deliveries.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

__all__ = ["create_echo_host"]


def create_echo_host(log: Callable[[str], None] | None = None) -> FastAPI:
    """The echo host's ASGI app; `log` receives one line per command (stdout by default)."""
    emit = log or (lambda line: print(line, file=sys.stdout, flush=True))
    seen: set[str] = set()
    app = FastAPI(title="wow-temporal echo host", docs_url=None, redoc_url=None)

    @app.post("/wow/command/send")
    async def send(request: Request) -> JSONResponse:
        headers = request.headers
        request_id = headers.get("command-request-id", "")
        body: Any = await request.json() if await request.body() else {}
        duplicate = request_id in seen
        seen.add(request_id)
        code = "DuplicateRequestId" if duplicate else "Ok"
        emit(
            f"[echo host] {code:<18} {headers.get('command-type', '?')} → "
            f"{headers.get('command-aggregate-context', '')}."
            f"{headers.get('command-aggregate-name', '')} "
            f"{headers.get('command-aggregate-id', '')} "
            f"(tenant {headers.get('command-tenant-id', '')}, request {request_id}) "
            f"{json.dumps(body, separators=(',', ':'))[:200]}"
        )
        result = {"id": request_id, "requestId": request_id, "errorCode": code, "errorMsg": ""}
        return JSONResponse(result, headers={"Wow-Error-Code": code})

    return app
