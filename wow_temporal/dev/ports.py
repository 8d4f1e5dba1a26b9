"""Local TCP ports: whether one is free, and a free one to pick. A port asked for is used or
refused with `PortInUseError`, never swapped for another; `DevPort` is one port of the dev
stack as asked for (0: any free port), with the flag and the variable that choose it."""

from __future__ import annotations

import random
import socket
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from wow_temporal.dev.errors import PortInUseError

__all__ = ["DevPort", "DevPorts", "clashing", "dev_ports", "free_port", "port_is_free"]

LOOPBACK = "127.0.0.1"
"""Where every port of the dev stack listens."""


@dataclass(frozen=True)
class DevPort:
    """One port of `wow-temporal dev`: what listens there, the port asked for (0: any free
    port), and the flag and variable that choose it, named in a refusal."""

    what: str
    port: int
    flag: str
    variable: str

    @property
    def choose(self) -> str:
        """How to choose another, as a refusal says it."""
        return f"{self.flag} or {self.variable} (0: any free port)"

    def chosen(self, taken: Iterable[int] = ()) -> DevPort:
        """This port, a free one picked (and not in `taken`) if it asks for any."""
        if self.port:
            return self
        avoid = set(taken)
        port = free_port(LOOPBACK)
        while port in avoid:
            port = free_port(LOOPBACK)
        return replace(self, port=port)

    def check(self) -> None:
        """`PortInUseError` naming the flag and the variable if the port is taken now."""
        if self.port and not port_is_free(self.port, LOOPBACK):
            raise PortInUseError(self.what, self.port, LOOPBACK, self.choose)


def clashing(ports: Iterable[DevPort]) -> str | None:
    """What is wrong when two of `ports` ask for the same port (0 never clashes), else None:
    both would pass the check, and the second to start would fail with the first running."""
    seen: dict[int, DevPort] = {}
    for port in ports:
        first = seen.setdefault(port.port, port) if port.port else port
        if first is not port:
            return (
                f"{first.flag} ({first.what}) and {port.flag} ({port.what}) both ask for port "
                f"{port.port}; give one of them another (0: any free port)"
            )
    return None


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free right now on `host`, from below the ephemeral range.

    The kernel hands out ephemeral ports to every outgoing connection too, so a port it picked
    for `bind(0)` may be some client's before a server binds it; ports below that range are
    only ever taken on purpose.
    """
    low = _ephemeral_low()
    for _ in range(64):
        port = random.randrange(10_000, low)
        if port_is_free(port, host):
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        found: int = sock.getsockname()[1]
        return found


def _ephemeral_low() -> int:
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768
    return low if low > 10_100 else 32_768


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server could listen on `port` on `host` right now.

    Binds with SO_REUSEADDR as the servers do (uvicorn, the Go Temporal server), so a port
    left in TIME_WAIT by a quick restart counts as free, and one another socket listens on
    does not.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


@dataclass(frozen=True)
class DevPorts:
    """Every port `wow-temporal dev` listens on, as asked for by its flags or else its
    settings; `ui` is None when headless, `metrics` when they are pushed over OTLP. The
    Temporal server picks its own internal ports (HTTP API, its metrics, membership)."""

    temporal: DevPort
    ui: DevPort | None
    host: DevPort
    api: DevPort
    metrics: DevPort | None

    def all(self) -> list[DevPort]:
        """The ports in the order the stack starts them."""
        return [p for p in (self.temporal, self.ui, self.metrics, self.host, self.api) if p]

    def chosen(self) -> DevPorts:
        """The services' ports with any free port picked now (distinct), to print and check;
        the Temporal server's are left as asked, picked when it starts."""
        taken = {p.port for p in self.all() if p.port}
        metrics = None if self.metrics is None else self.metrics.chosen(taken)
        if metrics is not None:
            taken.add(metrics.port)
        host = self.host.chosen(taken)
        api = self.api.chosen({*taken, host.port})
        return replace(self, metrics=metrics, host=host, api=api)


def dev_ports(
    temporal: int,
    ui: int | None,
    host: int,
    api: int,
    metrics: int | None,
) -> DevPorts:
    """The dev stack's ports as asked for (0: any free port), named by their flags and
    variables; `ui` None when headless, `metrics` None when no port serves them."""
    return DevPorts(
        temporal=DevPort("Temporal gRPC", temporal, "--temporal-port", "WOW_DEV_TEMPORAL_PORT"),
        ui=None if ui is None else DevPort("Temporal Web UI", ui, "--ui-port", "WOW_DEV_UI_PORT"),
        host=DevPort("domain host", host, "--host-port", "WOW_DEV_HOST_PORT"),
        api=DevPort("control API", api, "--api-port", "WOW_API_PORT"),
        metrics=None
        if metrics is None
        else DevPort("metrics", metrics, "--metrics-port", "WOW_WORKER_METRICS_PORT"),
    )
