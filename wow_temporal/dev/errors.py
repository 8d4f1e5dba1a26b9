"""What the dev stack refuses or reports: a missing server binary, a data directory or a port
already in use, a server that did not come up or exited while running."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from wow_temporal.errors import WowTemporalError

__all__ = [
    "DataDirInUseError",
    "EmbeddedTemporalError",
    "PortInUseError",
    "TemporalBinaryNotFoundError",
    "TemporalServerExitedError",
]


class TemporalBinaryNotFoundError(WowTemporalError, RuntimeError):
    """A Temporal server binary that pip should have installed is missing."""


class EmbeddedTemporalError(WowTemporalError, RuntimeError):
    """The embedded server failed to start or to answer in time."""


class DataDirInUseError(EmbeddedTemporalError):
    """Another live process runs a server on this data directory (it holds the lock file).

    Two servers on one SQLite database would corrupt each other, and killing the other one's
    server would leave that stack running without Temporal: refuse and change nothing.
    """

    def __init__(self, data_dir: str, owner: Mapping[str, Any]) -> None:
        """`owner` is what the owner recorded in the lock file (possibly incomplete)."""
        self.owner_pid: int | None = owner.get("owner_pid")
        self.address: str | None = owner.get("address")
        self.ui_url: str | None = owner.get("ui_url")
        pid = f"pid {self.owner_pid}" if self.owner_pid else "pid unknown"
        temporal = f"Temporal {self.address}" if self.address else "Temporal starting"
        ui = f"Web UI {self.ui_url}" if self.ui_url else "no Web UI"
        super().__init__(
            f"another wow-temporal dev ({pid}) is using {data_dir}: {temporal}, {ui}; "
            "stop it or use --data-dir"
        )


class PortInUseError(EmbeddedTemporalError):
    """A port that was asked for (or is the documented default) is in use by another program.

    Such a port is refused, never swapped for another: the user would look for it where the
    README or their option says it is.
    """

    def __init__(self, what: str, port: int, host: str, choose: str) -> None:
        """`what` names the port's use, `choose` how to pick another (an option, a variable)."""
        self.what = what
        self.port = port
        self.host = host
        super().__init__(
            f"{what} port {port} on {host} is already in use; free it or choose another with "
            f"{choose}"
        )


class TemporalServerExitedError(EmbeddedTemporalError):
    """The server process exited while it was meant to be running."""
