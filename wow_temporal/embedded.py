"""The old import path of the embedded servers' helpers, kept until 0.2: they now live in
`wow_temporal.dev` (server, ports, binaries, errors), `wow_temporal.search_attributes` and
`wow_temporal.testing` (`skip_time`, `start_time_skipping`)."""

from wow_temporal.dev.binaries import find_temporal_cli, find_test_server
from wow_temporal.dev.errors import (
    DataDirInUseError,
    EmbeddedTemporalError,
    PortInUseError,
    TemporalBinaryNotFoundError,
    TemporalServerExitedError,
)
from wow_temporal.dev.ports import free_port
from wow_temporal.dev.server import DEFAULT_DATA_DIR, DEV_DYNAMIC_CONFIG, EmbeddedTemporal
from wow_temporal.search_attributes import SEARCH_ATTRIBUTES, register_search_attributes
from wow_temporal.testing.time_skipping import skip_time, start_time_skipping

__all__ = [
    "DEFAULT_DATA_DIR",
    "DEV_DYNAMIC_CONFIG",
    "SEARCH_ATTRIBUTES",
    "DataDirInUseError",
    "EmbeddedTemporal",
    "EmbeddedTemporalError",
    "PortInUseError",
    "TemporalBinaryNotFoundError",
    "TemporalServerExitedError",
    "find_temporal_cli",
    "find_test_server",
    "free_port",
    "register_search_attributes",
    "skip_time",
    "start_time_skipping",
]
