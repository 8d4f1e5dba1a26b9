"""The value types the settings models share (ports, task queues, pollers, log format, cron
fields) and their base model: frozen, kebab-case keys in YAML, snake_case in Python."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict

from wow_temporal.model import CronText, Misfire, ZoneName, validate_key
from wow_temporal.model.rules import firing

__all__ = [
    "AnyPort",
    "AtLeastOne",
    "CronSetting",
    "JobName",
    "LogFormat",
    "MisfireSetting",
    "Pollers",
    "PortOrOff",
    "Section",
    "TaskQueue",
    "ZoneSetting",
    "blank_is_none",
    "fold",
    "kebab",
]


def blank_is_none(value: Any) -> Any:
    """An empty string (e.g. `WOW_API_TOKEN=`) means "not set"."""
    if isinstance(value, str) and not value.strip():
        return None
    return value


def kebab(name: str) -> str:
    """A field's key as written in YAML: `poll_interval` -> `poll-interval`."""
    return name.replace("_", "-")


def _misfire(value: Any) -> Any:
    """Misfire names case-insensitively, `-` for `_` (`catch-up`), as Spring binds enums."""
    if isinstance(value, str):
        return value.strip().upper().replace("-", "_")
    return value


def _job_name(value: str) -> str:
    return validate_key(value, "job name")


def _log_format(value: Any) -> Any:
    """`text` or `json`, case-insensitively."""
    return value.strip().lower() if isinstance(value, str) else value


def _task_queue(value: str) -> str:
    if not value or value != value.strip() or any(c.isspace() for c in value) or len(value) > 200:
        raise ValueError(
            f"must be a task queue name: 1 to 200 characters, no spaces, got {value!r}"
        )
    return value


def _pollers(value: Any) -> Any:
    """`auto`, any case, or a whole number of at least 1."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"must be auto or a number of pollers of at least 1, got {value!r}")
    return value


def _port_or_off(value: int) -> int:
    if not 0 <= value <= 65535:
        raise ValueError(f"must be a port from 1 to 65535, or 0 for off, got {value}")
    return value


def _any_port(value: int) -> int:
    if not 0 <= value <= 65535:
        raise ValueError(f"must be a port from 1 to 65535, or 0 for any free port, got {value}")
    return value


def _at_least_one(value: int) -> int:
    if value < 1:
        raise ValueError(f"must be at least 1, got {value}")
    return value


PortOrOff = Annotated[int, AfterValidator(_port_or_off)]
"""A port of an optional endpoint (health, metrics): 0 turns it off."""
AnyPort = Annotated[int, AfterValidator(_any_port)]
"""A port a server must listen on: 0 picks any free port (the process prints which)."""
AtLeastOne = Annotated[int, AfterValidator(_at_least_one)]
LogFormat = Annotated[Literal["text", "json"], BeforeValidator(_log_format)]
TaskQueue = Annotated[str, AfterValidator(_task_queue)]
Pollers = Annotated[Literal["auto"] | int, BeforeValidator(_pollers)]
CronSetting = Annotated[
    CronText | None,
    BeforeValidator(blank_is_none),
    AfterValidator(lambda expression: None if expression is None else firing(expression)),
]
ZoneSetting = Annotated[ZoneName | None, BeforeValidator(blank_is_none)]
MisfireSetting = Annotated[Misfire | None, BeforeValidator(_misfire)]
JobName = Annotated[str, AfterValidator(_job_name)]


class Section(BaseModel):
    """Frozen, kebab-case keys in YAML (`poll-interval`), snake_case in Python."""

    model_config = ConfigDict(
        frozen=True,
        alias_generator=kebab,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )


def fold(name: str) -> str:
    """A job name compared case-blind with `-` and `_` the same."""
    return name.lower().replace("-", "_")
