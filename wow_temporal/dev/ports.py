"""Local TCP ports: whether one is free, and a free one to pick. A port asked for is used or
refused with `PortInUseError`, never swapped for another."""

from __future__ import annotations

import random
import socket
from pathlib import Path

__all__ = ["free_port", "port_is_free"]


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
