"""How the cores show an instant to a person (Web UI details, summaries, verdicts)."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["short_instant"]


def short_instant(instant: datetime) -> str:
    """An instant in UTC as a person reads it: `2026-12-01T10:30Z`, seconds and milliseconds
    only if any."""
    instant = instant.astimezone(UTC)
    text = instant.strftime("%Y-%m-%dT%H:%M")
    if instant.second or instant.microsecond:
        text += instant.strftime(":%S")
        if instant.microsecond:
            text += f".{instant.microsecond // 1000:03d}"
    return text + "Z"
