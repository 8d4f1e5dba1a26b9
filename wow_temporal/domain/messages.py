"""What domain code exchanges: command bodies (which can say which timer sent them), event names,
and the schedule details a delivered command carries."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, PrivateAttr

__all__ = ["CommandBody", "ScheduleInfo", "event_name", "type_name"]


class ScheduleInfo(BaseModel):
    """Which schedule sent a command: its timer, key, slot and due time (`command.schedule`)."""

    model_config = {"frozen": True}

    timer: str
    key: str
    slot: int
    due: int
    """Epoch milliseconds."""

    @property
    def due_at(self) -> datetime:
        return datetime.fromtimestamp(self.due / 1000, UTC)

    @classmethod
    def from_headers(cls, headers: dict[str, str]) -> ScheduleInfo | None:
        """The details from a command's message headers (`schedule_timer`, …), or None when a
        timer did not send it (or the headers are incomplete or malformed)."""
        try:
            return cls(
                timer=headers["schedule_timer"],
                key=headers["schedule_key"],
                slot=int(headers["schedule_slot"]),
                due=int(headers["schedule_due"]),
            )
        except (KeyError, ValueError):
            return None


class CommandBody(BaseModel):
    """A command's body. Subclass it (rather than `BaseModel`) for commands a timer can send, so
    the handler can read `command.schedule`: None unless a timer sent it."""

    _schedule: ScheduleInfo | None = PrivateAttr(default=None)

    @property
    def schedule(self) -> ScheduleInfo | None:
        """The schedule that sent this command, or None for a command sent otherwise."""
        return self._schedule

    def sent_by(self, schedule: ScheduleInfo | None) -> CommandBody:
        """Mark the body as sent by `schedule` (the host does this as it reads a delivery)."""
        self._schedule = schedule
        return self


def type_name(cls: type[Any] | Any, attribute: str = "__wow_type__") -> str:
    """A message's full type name: the class's own `__wow_type__` if set, else `module.QualName`."""
    kind = cls if isinstance(cls, type) else type(cls)
    declared = kind.__dict__.get(attribute)
    if isinstance(declared, str) and declared:
        return declared
    return f"{kind.__module__}.{kind.__qualname__}"


def event_name(cls: type[Any] | Any) -> str:
    """An event's name in a commit (`body[i].name`): `__wow_type__` if the class sets one, else
    its full Python name, as a command's type is."""
    return type_name(cls)
