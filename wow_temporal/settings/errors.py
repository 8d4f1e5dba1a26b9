"""What is wrong with settings: `SettingsError`, and the one-line explanation of a validation
error that names each key as the user wrote it (`wow.timers.x` in YAML, `WOW_TIMERS_X`)."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ValidationError

from wow_temporal.errors import WowTemporalError
from wow_temporal.settings.values import kebab

__all__ = ["Loc", "SettingsError", "explain"]

Loc = tuple[str, ...]
"""Where a value sits under `wow`: `("timers", "max-attempts")`."""


class SettingsError(WowTemporalError, ValueError):
    """Settings that cannot be used; the message starts with the key (`wow.timers.x` or `WOW_X`)."""


def explain(
    error: ValidationError,
    origins: Mapping[Loc, str],
    source: str,
    root: type[BaseModel],
    sections: Mapping[str, type[BaseModel]],
) -> str:
    """`key: what is wrong` for each problem, the key as the user wrote it (YAML or env).

    `origins` names the variable each value came from; `root` and `sections` are the models
    whose keys an unknown key is told about. The input is shown for a wrong type, except under
    `wow.api` (but its port), where it may be a token.
    """
    lines = []
    for item in error.errors(include_url=False)[:5]:
        loc: Loc = tuple(str(part) for part in item["loc"] if part != "[key]")
        where = origins.get(loc) or ".".join(("wow", *loc))
        suffix = f" (in {source})" if source and loc not in origins else ""
        message = str(item["msg"]).removeprefix("Value error, ")
        secret = loc[:1] == ("api",) and [kebab(part) for part in loc[1:2]] != ["port"]
        if item["type"] == "extra_forbidden":
            section = root if len(loc) == 1 else sections.get(loc[0], root)
            known = ", ".join(kebab(name) for name in section.model_fields)
            message = f"unknown key; known: {known}"
        elif item["type"] != "value_error" and not secret:
            message += f", got {item['input']!r}"
        lines.append(f"{where}: {message}{suffix}")
    return "; ".join(lines)
