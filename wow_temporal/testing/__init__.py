"""Test helpers for users' own suites: `aggregate_spec`, to test a decision (its events and the
schedules committed with them), `upcaster_spec`, to test how an app reads a command scheduled at
an older revision, and `schedule_spec`, the spec's way to test a recurring job.

`aggregate_spec` and `upcaster_spec` are pure and imported at once; `schedule_spec` and the
time-skipping server's helpers load Temporal's test server machinery, so they are imported on
first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from wow_temporal.testing.aggregate import (
    AggregateSpec,
    Cancelled,
    ExpectedEvent,
    ExpectedSchedule,
    Scheduled,
    SpecResult,
    aggregate_spec,
)
from wow_temporal.testing.upcasting import UpcasterSpec, UpcastResult, upcaster_spec

if TYPE_CHECKING:
    from wow_temporal.testing.schedule import ScheduleSpec, schedule_spec
    from wow_temporal.testing.time_skipping import skip_time, start_time_skipping
    from wow_temporal.testing.wow_host import Arrival, FakeWowHost, RemoteWowHost

__all__ = [
    "AggregateSpec",
    "Arrival",
    "Cancelled",
    "ExpectedEvent",
    "ExpectedSchedule",
    "FakeWowHost",
    "RemoteWowHost",
    "ScheduleSpec",
    "Scheduled",
    "SpecResult",
    "UpcastResult",
    "UpcasterSpec",
    "aggregate_spec",
    "schedule_spec",
    "skip_time",
    "start_time_skipping",
    "upcaster_spec",
]

_LAZY = {
    "Arrival": "wow_temporal.testing.wow_host",
    "FakeWowHost": "wow_temporal.testing.wow_host",
    "RemoteWowHost": "wow_temporal.testing.wow_host",
    "ScheduleSpec": "wow_temporal.testing.schedule",
    "schedule_spec": "wow_temporal.testing.schedule",
    "skip_time": "wow_temporal.testing.time_skipping",
    "start_time_skipping": "wow_temporal.testing.time_skipping",
}


def __getattr__(name: str) -> Any:
    """Import the Temporal-backed helpers when first asked for (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
