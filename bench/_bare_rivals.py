"""The bare Temporal side of `bench.rivals`, as its own process (docs/benchmarks.md): a workflow
per key (`bench._bare_delayed`) started with `start_delay` until due, one activity that POSTs the
command, worker (SDK defaults) and starter (`POST /timers`) in this one process.

Run: `python -m bench._bare_rivals --port P --host-url URL --address HOST:PORT [--namespace N]`
"""

from __future__ import annotations

import argparse
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

from fastapi import FastAPI
from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker

from bench._bare_delayed import DelayedTimer
from bench._rival_app import Timer, command_client, send_command, serve

QUEUE = "bench-bare-rivals"


class BareTimers:
    """The worker and the starter, on one client connected as the app starts."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.http = command_client()

    @asynccontextmanager
    async def running(self, _: FastAPI) -> AsyncIterator[None]:
        """Connected, the worker running (on `DelayedTimer` and `post`) while the app serves."""
        self.client = await Client.connect(self.args.address, namespace=self.args.namespace)
        workflows, activities = [DelayedTimer], [self.post]
        async with Worker(
            self.client, task_queue=QUEUE, workflows=workflows, activities=activities
        ):
            yield

    async def start(self, timers: list[Timer]) -> None:
        """Start one workflow per timer, one after another, its id the key, delayed until due."""
        for t in timers:
            wait = t.due_ms / 1000 - time.time()
            await self.client.start_workflow(
                DelayedTimer.run,
                t.key,
                id=t.key,
                task_queue=QUEUE,
                start_delay=timedelta(seconds=wait) if wait > 0 else None,
            )

    @activity.defn(name="bench.post")
    async def post(self, key: str) -> None:
        """The command to aggregate `key`, retried on Temporal's default policy."""
        await send_command(self.http, self.args.host_url, key)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--host-url", required=True, help="the Wow host commands go to")
    p.add_argument("--address", required=True, help="the Temporal frontend, host:port")
    p.add_argument("--namespace", default="default")
    bare = BareTimers(p.parse_args())
    serve(bare.args.port, bare.start, bare.running)


if __name__ == "__main__":
    main()
