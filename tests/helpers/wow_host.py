"""The suite's Wow domain host: the library's `FakeWowHost` (records every command, answers as
scripted), one started per test process and reset for every test by the `wow_host`
fixture."""

from __future__ import annotations

import atexit
import threading
from collections.abc import Iterator

import pytest

from wow_temporal.testing.wow_host import FakeWowHost

__all__ = ["shared_wow_host", "wow_host"]

_shared: FakeWowHost | None = None
_shared_lock = threading.Lock()


def shared_wow_host() -> FakeWowHost:
    """The process's one started host (stopped at exit), reset and default again."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = FakeWowHost().start()
            atexit.register(_shared.stop)
        _shared.reset()
        _shared.remember_request_ids = True
        _shared.hang_seconds = 30.0
        return _shared


@pytest.fixture
def wow_host() -> Iterator[FakeWowHost]:
    """A started host with no arrivals, rules or decided ids (shared, reset)."""
    host = shared_wow_host()
    yield host
    host.reset()
