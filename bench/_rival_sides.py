"""`bench.rivals`' sides, one shape: a side's store (a dev server, PostgreSQL, or DBOS's SQLite
file), its processes started and handed timers through the front one, its CPU by process and its
server's own counters read, all stopped."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import httpx

from bench.harness import (
    CLI,
    Proc,
    answers,
    commit,
    cpu_seconds,
    iso_ms,
    schedule_set,
    tree_cpu_seconds,
    worker_env,
)
from bench.harness.postgres import Postgres
from bench.harness.prometheus import label, samples, scrape
from wow_temporal.dev.ports import free_port
from wow_temporal.dev.server import EmbeddedTemporal

SIDES = ("wow", "wow-relay", "bare", "dbos-sqlite", "dbos-pg")
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


class DevServer(EmbeddedTemporal):
    """The server as `./run dev` starts it, headless, its `/metrics` on a known free port."""

    def __init__(self, tmp: Path) -> None:
        self.metrics_port = free_port()
        super().__init__(tmp, headless=True, extra_args=["--metrics-port", str(self.metrics_port)])
        self.http = httpx.AsyncClient(timeout=10)

    async def counters(self) -> dict[str, float]:
        """`COUNTERS` so far, and `BY_OPERATION` by operation; empty if `/metrics` does not
        answer."""
        found = dict.fromkeys(COUNTERS, 0.0)
        metric_of = {metric: name for name, metric in COUNTERS.items()}
        text = await scrape(self.http, f"http://127.0.0.1:{self.metrics_port}/metrics")
        if not text:
            return {}
        for metric, labels, value in samples(text):
            name = metric_of.get(metric)
            if name is not None:
                found[name] += value
                operation = label(labels, "operation")
                if operation and name in BY_OPERATION:
                    each = f"{name}:{operation}"
                    found[each] = found.get(each, 0.0) + value
        return found

    async def stop(self) -> None:
        await self.http.aclose()
        await super().stop()


class Side:
    """One side (a name of `SIDES`) on `tmp`, its commands going to the host at `host_url`;
    `wow_env`: settings of the wow sides' worker and front."""

    def __init__(self, name: str, tmp: Path, host_url: str, wow_env: dict[str, str]) -> None:
        self.name = name
        self.tmp = tmp
        self.host_url = host_url
        self.wow_env = wow_env
        self.http = httpx.AsyncClient(timeout=120)
        self.server = None if name.startswith("dbos") else DevServer(tmp / "temporal")
        self.pg = Postgres(fsync=True) if name == "dbos-pg" else None
        self.procs: dict[str, Proc] = {}

    async def start(self) -> None:
        """Its store, then its processes, until each answers."""
        db = f"sqlite:///{self.tmp / 'dbos.sqlite'}"
        if self.server is not None:
            await self.server.start()
        if self.pg is not None:
            await asyncio.to_thread(self.pg.start)
            db = await asyncio.to_thread(self.pg.database)
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.procs = self._processes(port, db)
        await asyncio.gather(*(p.start() for p in self.procs.values()))

    def _processes(self, port: int, db: str) -> dict[str, Proc]:
        """Its processes by the name their CPU is counted under, the front (at `port`) last."""
        ready = answers(self.url + "/ready")
        if self.server is None:
            argv = self._app("bench._dbos_timers", port, "--db", db)
            return {"dbos": Proc("the DBOS app", argv, self.tmp / "dbos.log", ready)}
        address, namespace = self.server.address, self.server.namespace
        if self.name == "bare":
            server = ["--address", address, "--namespace", namespace]
            argv = self._app("bench._bare_rivals", port, *server)
            return {"app": Proc("the bare app", argv, self.tmp / "bare.log", ready)}
        env = worker_env(address, namespace, self.host_url, **self.wow_env)
        worker = Proc.worker(self.tmp / "worker.log", env)
        if self.name == "wow":
            api_env = {**env, "WOW_API_PORT": str(port)}
            api = Proc(
                "the control API", [str(CLI), "api"], self.tmp / "api.log", ready, env=api_env
            )
            return {"worker": worker, "api": api}
        argv = [sys.executable, "-m", "bench._wow_relay", "--port", str(port)]
        relay = Proc("the relay", argv, self.tmp / "relay.log", ready, env=env)
        return {"worker": worker, "relay": relay}

    def _app(self, module: str, port: int, *args: str) -> list[str]:
        """The command line of one of `bench._rival_app`'s processes."""
        flags = ["--port", str(port), "--host-url", self.host_url, *args]
        return [sys.executable, "-m", module, *flags]

    async def hand(self, timers: list[Timer]) -> None:
        """Start these timers in one request: the wow side's a `POST /commits` of a commit of
        one `wow.ScheduleSet` (rule `at`) each, the others' a `POST /timers`."""
        if self.name == "wow":
            commits = [commit(key, schedule_set({"at": iso_ms(due)})) for key, due in timers]
            path, body = "/commits", commits[0] if len(commits) == 1 else commits
        else:
            path, body = "/timers", [{"key": key, "due_ms": due} for key, due in timers]
        (await self.http.post(self.url + path, json=body)).raise_for_status()

    def cpu(self) -> dict[str, float]:
        """CPU seconds each of its processes has used so far (a server's or PostgreSQL's with
        its children)."""
        used: dict[str, float] = {}
        if self.server is not None:
            assert self.server.pid is not None
            used["server"] = tree_cpu_seconds(self.server.pid)
        used |= {name: cpu_seconds(proc.pid) for name, proc in self.procs.items()}
        if self.pg is not None:
            used["postgres"] = tree_cpu_seconds(self.pg.pid)
        return used

    async def counters(self) -> dict[str, float]:
        """Its server's own counters so far (none but a Temporal side's)."""
        return {} if self.server is None else await self.server.counters()

    async def stop(self) -> None:
        await self.http.aclose()
        await asyncio.gather(*(p.stop(grace=10) for p in self.procs.values()))
        if self.server is not None:
            await self.server.stop()
        if self.pg is not None:
            await asyncio.to_thread(self.pg.stop)
