"""The worker's health endpoints, on a port of their own (`wow.worker.health-port`, 8081).

- `GET /livez`: 200 `{"status": "ok"}` while the process runs (it asks nothing of Temporal).
- `GET /readyz`: 200 `{"status": "ready"}` while the worker is connected to Temporal and
  polling; otherwise 503 `{"status": "unready", "reason": "<one line>"}` (connecting, Temporal
  unreachable, shutting down).

A tiny HTTP/1.1 responder on asyncio streams: probes send a bare GET and read a short answer,
so it needs no web framework, and it answers even while the worker's own event loop is busy
connecting. `HEAD` answers like `GET` without a body; any other path is 404, any other method 405.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

__all__ = ["HealthServer", "Readiness"]

log = logging.getLogger(__name__)

_READ_TIMEOUT = 5.0
"""How long a client may take to send its request head before the connection is closed."""
_MAX_HEAD = 8192


class Readiness:
    """Whether the worker is ready, and why not: one line a probe's log can show."""

    def __init__(self, reason: str = "starting") -> None:
        self._reason: str | None = reason

    @property
    def ready(self) -> bool:
        return self._reason is None

    @property
    def reason(self) -> str | None:
        """Why the worker is not ready; None when it is."""
        return self._reason

    def set_ready(self) -> None:
        self._reason = None

    def set_unready(self, reason: str) -> None:
        self._reason = " ".join(reason.split()) or "unready"


class HealthServer:
    """Serves `/livez` and `/readyz` for `readiness` on `host:port` while started."""

    def __init__(self, readiness: Readiness, port: int, host: str = "0.0.0.0") -> None:
        """`host` 0.0.0.0 (every interface): a Kubernetes probe comes to the pod's address."""
        self.readiness = readiness
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        """Listen (raises OSError when the port is taken); `port` 0 picks a free one."""
        self._server = await asyncio.start_server(self._handle, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
            self._server = None

    async def __aenter__(self) -> HealthServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def answer(self, method: str, path: str) -> tuple[int, dict[str, Any]]:
        """The status and JSON body for a request (pure, for the tests)."""
        path = path.split("?", 1)[0]
        if path not in ("/livez", "/readyz"):
            return 404, {"status": "not found", "reason": f"no {path}; try /livez or /readyz"}
        if method not in ("GET", "HEAD"):
            return 405, {"status": "method not allowed", "reason": f"{method}: use GET"}
        if path == "/livez":
            return 200, {"status": "ok"}
        reason = self.readiness.reason
        if reason is None:
            return 200, {"status": "ready"}
        return 503, {"status": "unready", "reason": reason}

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _READ_TIMEOUT)
            if len(head) > _MAX_HEAD:
                return
            method, path, *_ = [*head.split(b"\r\n", 1)[0].decode("latin-1").split(" "), "", ""]
            status, body = self.answer(method.upper(), path or "/")
            payload = (json.dumps(body) + "\n").encode()
            phrase = {200: "OK", 404: "Not Found", 405: "Method Not Allowed"}.get(
                status, "Service Unavailable"
            )
            response = (
                f"HTTP/1.1 {status} {phrase}\r\n"
                "Content-Type: application/json\r\n"
                f"Content-Length: {len(payload)}\r\n"
                "Cache-Control: no-store\r\n"
                "Connection: close\r\n\r\n"
            ).encode()
            writer.write(response if method.upper() == "HEAD" else response + payload)
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
            pass  # a probe that went away or never spoke: nothing to answer
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
