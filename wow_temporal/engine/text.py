"""How an instant is shown to a person, the one format of the CLI, the control API's JSON, the
demo and the Web UI texts: ISO-8601 with milliseconds, in UTC (`2026-12-05T06:00:00.000Z`),
or in a zone where the zone is the point (`2026-12-05T07:00:00.000+01:00`, a job's or a cron's
due times)."""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo
from typing import Annotated, Any

from pydantic import PlainSerializer, WrapSerializer

__all__ = ["Instant", "instant_text", "shown_instants", "zoned_text"]


def instant_text(instant: datetime) -> str:
    """`instant` in UTC, to the millisecond (cut, not rounded): `2026-12-05T06:00:00.000Z`.

    A naive datetime is read as UTC (the cores keep aware ones; a naive one is a bug elsewhere,
    not a reason to print nothing)."""
    if instant.tzinfo is None:
        instant = instant.replace(tzinfo=UTC)
    return instant.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def zoned_text(instant: datetime, zone: tzinfo | None = None) -> str:
    """`instant` in `zone` (default: the zone it carries), to the millisecond, with that
    zone's offset at that instant: `2026-12-05T07:00:00.000+01:00`; UTC itself as `Z`."""
    if instant.tzinfo is None:
        instant = instant.replace(tzinfo=UTC)
    if zone is not None:
        instant = instant.astimezone(zone)
    text = instant.isoformat(timespec="milliseconds")
    return text.removesuffix("+00:00") + "Z" if text.endswith("+00:00") else text


Instant = Annotated[datetime, PlainSerializer(instant_text, return_type=str, when_used="json")]
"""A datetime shown in JSON as `instant_text` writes it (read as any ISO-8601 instant): for the
models the CLI and the control API answer with, never for a workflow's state, whose payload
keeps the microseconds."""


def shown_instants(*paths: tuple[str, ...]) -> WrapSerializer:
    """A model's JSON with the instants at `paths` (keys from its top) as `instant_text` writes
    them, for a workflow's own state shown to a person: the model, and its payload, keep the
    microseconds. Pydantic documents the model itself (the lambda has no return annotation)."""

    def shown(data: Any) -> Any:
        for *outer, last in paths:
            node = data
            for name in outer:
                node = node.get(name) if isinstance(node, dict) else None
            if isinstance(node, dict) and isinstance(node.get(last), str):
                node[last] = instant_text(datetime.fromisoformat(node[last]))
        return data

    return WrapSerializer(lambda value, handler: shown(handler(value)), when_used="json")
