"""A port in TIME_WAIT, for the tests that a server restarted at once can bind its port again."""

from __future__ import annotations

import socket
import time

import pytest

from wow_temporal.dev.ports import free_port


def time_wait_port() -> int:
    """A port whose server side is in TIME_WAIT, as after a quick restart of a server that
    had closed a client's connection."""
    port = free_port()
    with socket.create_server(("127.0.0.1", port)) as listener:
        client = socket.create_connection(("127.0.0.1", port))
        conn, _ = listener.accept()
        conn.close()  # the server closes first: its end of the connection waits out TIME_WAIT
        assert client.recv(1) == b""
        client.close()
    time.sleep(0.05)
    with socket.socket() as plain, pytest.raises(OSError):  # the setup: a plain bind() fails
        plain.bind(("127.0.0.1", port))
    return port
