"""One lock per timer key for the whole process: every `TimerClient` of the process (the control
API's and the relay's in `wow-temporal dev`, say) serialises one key's ingest through it, so
two ingests never read a key's closed run at once and start a stale set after a newer change.

An `asyncio.Lock` binds to one event loop; these locks are taken from any loop and any thread
(a waiter is woken on its own loop), so clients on different loops serialise too. Only within
one process: replicas of a relay rely on their lease (`timers.client.fenced`).
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections import deque
from types import TracebackType

__all__ = ["KeyLock", "KeyLocks", "key_locks"]


class KeyLock:
    """A lock held across `await`s that waiters on any event loop queue for, first come first
    served; a cancelled waiter leaves the queue (or passes the lock on, if it was handed it)."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._held = False
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()

    def locked(self) -> bool:
        """Whether someone holds it (a caller that takes it now would wait)."""
        return self._held

    async def acquire(self) -> None:
        """Wait until the lock is this task's."""
        loop = asyncio.get_running_loop()
        with self._mutex:
            if not self._held:
                self._held = True
                return
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append((loop, waiter))
        try:
            await waiter
        except asyncio.CancelledError:
            self._abandon(loop, waiter)
            raise

    def release(self) -> None:
        """Hand the lock to the next waiter still waiting, or free it."""
        with self._mutex:
            while self._waiters:
                loop, waiter = self._waiters.popleft()
                try:
                    loop.call_soon_threadsafe(self._wake, waiter)
                except RuntimeError:  # its loop has closed: it waits no more
                    continue
                return  # still held: now the waiter's
            self._held = False

    def _wake(self, waiter: asyncio.Future[None]) -> None:
        """On the waiter's loop: give it the lock, or pass it on if it gave up meanwhile."""
        if waiter.cancelled():
            self.release()
        else:
            waiter.set_result(None)

    def _abandon(self, loop: asyncio.AbstractEventLoop, waiter: asyncio.Future[None]) -> None:
        """A waiter cancelled: out of the queue; if it had been handed the lock, pass it on."""
        with self._mutex:
            queued = (loop, waiter) in self._waiters
            if queued:
                self._waiters.remove((loop, waiter))
        # Not queued: the lock was handed to it. Woken already, it holds the lock and gives
        # it up here; not yet, `_wake` sees the cancelled waiter and passes the lock on.
        if not queued and waiter.done() and not waiter.cancelled():
            self.release()

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()


class KeyLocks:
    """The locks of the keys being handed a change, by namespace and workflow id: kept while
    anyone holds a reference (a holder or a waiter), then dropped."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._locks: weakref.WeakValueDictionary[tuple[str, str], KeyLock] = (
            weakref.WeakValueDictionary()
        )

    def lock(self, namespace: str, workflow_id: str) -> KeyLock:
        """The lock of `workflow_id` in `namespace` (the same one for every caller)."""
        with self._mutex:
            found = self._locks.get((namespace, workflow_id))
            if found is None:
                found = self._locks[(namespace, workflow_id)] = KeyLock()
            return found

    def __len__(self) -> int:
        return len(self._locks)


key_locks = KeyLocks()
"""The process's registry: every `TimerClient` takes its key locks from it."""
