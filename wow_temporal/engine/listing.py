"""How much one listing answers, for timers and job instances alike (CLI and control API)."""

from __future__ import annotations

__all__ = ["LIST_DEFAULT", "LIST_LIMIT"]

LIST_LIMIT = 1_000
"""The most one listing answers: `--limit` and `?limit=` of timers and schedules alike."""
LIST_DEFAULT = 100
"""How many a listing answers unless told."""
