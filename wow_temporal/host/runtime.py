"""The domain host as one running thing: the store (a SQLite file is locked: one host per file;
a PostgreSQL database is shared by any number of replicas), the command pipeline, its HTTP app,
and the followers (sagas, relay) on tasks of the running loop, each run by the one replica that
holds its lease."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path

from fastapi import FastAPI

from wow_temporal.domain.app import App
from wow_temporal.errors import WowTemporalError
from wow_temporal.host.follower import Follower
from wow_temporal.host.lease import LeaseKeeper, replica_name
from wow_temporal.host.postgres import is_postgres
from wow_temporal.host.relay import Relay, Timers
from wow_temporal.host.sagas import saga_followers
from wow_temporal.host.server import create_host_app
from wow_temporal.host.service import DomainHost, Fallback
from wow_temporal.host.store import EventStore

__all__ = ["HostRuntime", "StoreInUseError"]


class StoreInUseError(WowTemporalError, RuntimeError):
    """Another host process serves this store file."""


class HostRuntime:
    """`apps` served over the store at `db` (a SQLite path or a `postgresql://` URI), with the
    relay handing schedules to the timers `connect` gives (retried until Temporal is reachable:
    commands never wait for it). `replica` names this process among those sharing the store
    (default `host:pid`)."""

    def __init__(
        self,
        apps: Iterable[App],
        db: str | Path,
        connect: Callable[[], Awaitable[Timers]],
        *,
        fallback: Fallback | None = None,
        replica: str | None = None,
    ) -> None:
        self.apps = list(apps)
        self._lock_fd = None if is_postgres(str(db)) else _lock(Path(db))
        try:
            self.host = DomainHost(self.apps, EventStore(db), fallback=fallback)
        except Exception:
            self._unlock()
            raise
        self.relay = Relay(self.host, connect)
        self.followers: list[Follower] = [*saga_followers(self.host, self.apps), self.relay]
        names = [follower.name for follower in self.followers]
        self.leases = LeaseKeeper(self.host.store.leases, names, replica or replica_name())
        for follower in self.followers:
            follower.lease = self.leases
        self.asgi: FastAPI = create_host_app(
            self.host, followers=self.followers, leases=self.leases
        )
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def replica(self) -> str:
        return self.leases.name

    def start(self) -> None:
        """Start the followers on the running loop, and the claims of their leases."""
        self._tasks = [asyncio.create_task(self.leases.run())]
        self._tasks += [asyncio.create_task(follower.run()) for follower in self.followers]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        for follower in self.followers:
            with contextlib.suppress(Exception):  # a position not recorded is read again
                await follower.record()
        await self.leases.release()
        self.host.close()
        self._unlock()

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None


def _lock(db_path: Path) -> int:
    db_path.parent.mkdir(parents=True, exist_ok=True)
    lock_path = db_path.with_name(db_path.name + ".lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StoreInUseError(
            f"{db_path} is served by another domain host (it holds {lock_path}); "
            "one host per store file"
        ) from None
    return fd
