"""How much one listing answers, and how its visibility query names a value, for timers and job
instances alike (CLI and control API)."""

from __future__ import annotations

from pydantic import ConfigDict
from pydantic.alias_generators import to_camel

__all__ = ["FILTER_CONFIG", "LIST_DEFAULT", "LIST_LIMIT", "quoted"]

LIST_LIMIT = 1_000
"""The most one listing answers: `--limit` and `?limit=` of timers and schedules alike."""
LIST_DEFAULT = 100
"""How many a listing answers unless told."""
FILTER_CONFIG = ConfigDict(
    frozen=True, alias_generator=to_camel, validate_by_name=True, validate_by_alias=True
)
"""A listing's filters (`TimerFilter`, `JobFilter`): snake_case in Python, camelCase on the
wire, as the control API's query parameters are."""


def quoted(value: str) -> str:
    """`value` as a string literal of a visibility query: single quotes, `\\` and `'` escaped
    (the one rule of every query wow-temporal makes, as typed in the Web UI's search box)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
