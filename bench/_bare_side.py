"""The Temporal sides' shared pieces in `bench.rivals`, and its `bare` side: a fresh headless
dev server on `wow_temporal.dev.server`'s flags (its Prometheus `/metrics` on a known port),
the server's own counters read from it, and `Bare`, the bench's handle on the hand-written
Temporal timer of `bench._bare_rivals` (its own process: worker and starter)."""

from __future__ import annotations

import contextlib
import re
import sys
from pathlib import Path

import httpx

from bench.harness import Proc, answers, cpu_seconds, tree_cpu_seconds
from wow_temporal.dev.ports import free_port
from wow_temporal.dev.server import EmbeddedTemporal

Timer = tuple[str, int]  # key, due (epoch ms)

COUNTERS = {
    "persistence_requests": "persistence_requests",
    "persistence_s": "persistence_latency_sum",
    "visibility_requests": "visibility_persistence_requests",
    "service_requests": "service_requests",
}
"""What the server says it did, summed over its labels (services, operations): its database
calls and the seconds they took, its visibility store's calls, the RPCs it served."""


BY_OPERATION = ("service_requests", "persistence_requests")
"""The counters also given by operation (`service_requests:DescribeWorkflowExecution`, ...)."""
_OPERATION = re.compile(r'operation="([^"]*)"')


class DevServer(EmbeddedTemporal):
    """`wow_temporal.dev.server`'s server as `./run dev` starts it, headless, on `tmp`, its
    `/metrics` (always served by the dev server, on a random port otherwise) on a free port."""

    def __init__(self, tmp: Path) -> None:
        self.metrics_port = free_port()
        super().__init__(tmp, headless=True, extra_args=["--metrics-port", str(self.metrics_port)])
        self.http = httpx.AsyncClient(timeout=10)

    async def counters(self) -> dict[str, float]:
        """`COUNTERS` so far, and `BY_OPERATION` by operation; empty if `/metrics` does not
        answer."""
        found = dict.fromkeys(COUNTERS, 0.0)
        metric_of = {metric: name for name, metric in COUNTERS.items()}
        try:
            text = (await self.http.get(f"http://127.0.0.1:{self.metrics_port}/metrics")).text
        except httpx.HTTPError:
            return {}
        for line in text.splitlines():
            head, _, value = line.rpartition(" ")
            name = metric_of.get(head.partition("{")[0])
            if name is not None:
                found[name] += float(value)
                operation = _OPERATION.search(head)
                if operation and name in BY_OPERATION:
                    each = f"{name}:{operation.group(1)}"
                    found[each] = found.get(each, 0.0) + float(value)
        return found

    async def stop(self) -> None:
        await self.http.aclose()
        await super().stop()


class Bare:
    """The dev server and `bench._bare_rivals` (worker and starter, one process); timers
    handed over through its `POST /timers`, as the DBOS side's."""

    name = "bare"

    def __init__(self, tmp: Path, host_url: str) -> None:
        self.tmp = tmp
        self.host_url = host_url
        self.http = httpx.AsyncClient(timeout=120)

    async def start(self) -> None:
        self.server = DevServer(self.tmp / "temporal")
        await self.server.start()
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        argv = [sys.executable, "-m", "bench._bare_rivals", "--port", str(port)]
        argv += ["--host-url", self.host_url, "--address", self.server.address]
        argv += ["--namespace", self.server.namespace]
        self.proc = Proc("the bare app", argv, self.tmp / "bare.log", answers(self.url + "/ready"))
        await self.proc.start()

    async def hand(self, timers: list[Timer]) -> None:
        body = [{"key": key, "due_ms": due} for key, due in timers]
        (await self.http.post(self.url + "/timers", json=body)).raise_for_status()

    def cpu(self) -> dict[str, float]:
        assert self.server.pid is not None
        return {"server": tree_cpu_seconds(self.server.pid), "app": cpu_seconds(self.proc.pid)}

    async def counters(self) -> dict[str, float]:
        return await self.server.counters()

    async def stop(self) -> None:
        await self.http.aclose()
        with contextlib.suppress(AttributeError):
            await self.proc.stop(grace=10)
        with contextlib.suppress(AttributeError):
            await self.server.stop()
