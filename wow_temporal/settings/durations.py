"""Durations in settings: `1s`, `500ms`, `2m`, `1h`, `1d`, ISO `PT1S`, or a number of seconds,
and the positive and non-negative duration types the models use."""

from __future__ import annotations

import math
import re
from datetime import timedelta
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator

__all__ = ["Duration", "GraceDuration", "parse_duration", "show_duration"]

_UNIT_DURATION = re.compile(r"([+-]?\d+(?:\.\d+)?)\s*(ns|us|µs|ms|s|m|h|d)", re.IGNORECASE)
_ISO_DURATION = re.compile(
    r"([+-]?)P(?:(\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?)?",
    re.IGNORECASE,
)
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
}


def parse_duration(value: Any) -> timedelta:
    """A duration from `1s`, `500ms`, `2m`, `1h`, `1d`, ISO `PT1S`, or a number of seconds.

    Raises ValueError with a message saying what is accepted.
    """
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool):
        raise ValueError(f"invalid duration {value!r}: {_DURATION_FORMS}")
    if isinstance(value, int | float):
        return _seconds(float(value), value)
    if isinstance(value, str):
        text = value.strip()
        try:
            return _seconds(float(text), value)
        except ValueError:
            pass
        if match := _UNIT_DURATION.fullmatch(text):
            return _seconds(float(match[1]) * _UNIT_SECONDS[match[2].lower()], value)
        if (
            (match := _ISO_DURATION.fullmatch(text))
            and any(match.groups()[1:])
            and (not text.upper().endswith("T"))
        ):
            sign = -1.0 if match[1] == "-" else 1.0
            days, hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups()[1:])
            total = days * 86400 + hours * 3600 + minutes * 60 + seconds
            return _seconds(sign * total, value)
    raise ValueError(f"invalid duration {value!r}: {_DURATION_FORMS}")


_DURATION_FORMS = "use e.g. 1s, 500ms, 2m, 1h, PT1S or a number of seconds"


def _seconds(seconds: float, original: Any) -> timedelta:
    if not math.isfinite(seconds):
        raise ValueError(f"invalid duration {original!r}: {_DURATION_FORMS}")
    try:
        return timedelta(seconds=seconds)
    except OverflowError:
        raise ValueError(f"duration {original!r} is too large") from None


def _positive(value: timedelta) -> timedelta:
    if value <= timedelta(0):
        raise ValueError(f"must be a positive duration, got {show_duration(value)}")
    return value


def show_duration(value: timedelta) -> str:
    """A duration in seconds (`90s`), as the error messages show it."""
    return f"{value.total_seconds():g}s"


def _not_negative(value: timedelta) -> timedelta:
    if value < timedelta(0):
        raise ValueError(f"must not be a negative duration, got {show_duration(value)}")
    return value


Duration = Annotated[timedelta, BeforeValidator(parse_duration), AfterValidator(_positive)]
"""A positive duration in any form `parse_duration` reads."""
GraceDuration = Annotated[timedelta, BeforeValidator(parse_duration), AfterValidator(_not_negative)]
"""A duration of zero or more (a grace period)."""
