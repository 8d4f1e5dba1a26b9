"""The root of every public error of the package: `except WowTemporalError` catches whatever
wow-temporal itself raises, and nothing of Python's, Temporal's or pydantic's.

Each error is defined beside the code that raises it and importable from there (`TimerError`
from `wow_temporal.timers.client`, …); one that callers catch as a built-in (a `ValueError`, a
`LookupError`, a `RuntimeError`) keeps that base beside this one. This module imports nothing
of the package, so every module can derive from it.
"""

from __future__ import annotations

__all__ = ["WowTemporalError"]


class WowTemporalError(Exception):
    """An error wow-temporal raises: every public exception class of the package derives
    from it (directly, or through its family's base such as `TimerError`)."""
