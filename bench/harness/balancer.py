"""One address in front of several host replicas, as a Kubernetes Service is: each TCP connection
goes to the next backend in turn, skipping one that refuses it (a replica that is down), so a
connection is cut only when its replica dies under it.

In the bench's own loop (`Balancer`), or a process of its own:
`python -m bench.harness.balancer --port P --to 127.0.0.1:8001,127.0.0.1:8002`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import socket

__all__ = ["Balancer"]

_CHUNK = 64 * 1024


class Balancer:
    """A round-robin TCP proxy on 127.0.0.1 over `backends` (`(host, port)`s)."""

    def __init__(self, backends: list[tuple[str, int]]) -> None:
        self.backends = list(backends)
        self._turn = itertools.count()
        self._server: asyncio.Server | None = None
        self.port = 0
        self.refused = 0
        """Connections a backend refused (tried on the next one)."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self, port: int = 0) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        start = next(self._turn)
        for step in range(len(self.backends)):
            host, port = self.backends[(start + step) % len(self.backends)]
            try:
                return await asyncio.wait_for(asyncio.open_connection(host, port), 2)
            except (OSError, TimeoutError):
                self.refused += 1
        return None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        _no_delay(writer)
        upstream = await self._connect()
        if upstream is None:
            writer.close()
            return
        up_reader, up_writer = upstream
        _no_delay(up_writer)
        pumps = [
            asyncio.create_task(_pump(reader, up_writer)),
            asyncio.create_task(_pump(up_reader, writer)),
        ]
        await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        for task in pumps:
            task.cancel()
        for closing in (writer, up_writer):
            closing.close()


def _no_delay(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, asyncio.CancelledError):
        while chunk := await reader.read(_CHUNK):
            writer.write(chunk)
            await writer.drain()


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host or "127.0.0.1", int(port)


async def _main(port: int, backends: list[tuple[str, int]]) -> None:
    balancer = Balancer(backends)
    await balancer.start(port)
    print(f"balancing {balancer.url} over {len(backends)} backends", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--to", required=True, help="host:port,host:port,...")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_main(args.port, [_address(part) for part in args.to.split(",")]))
