"""What a request's query and texts may hold: only the query parameters the route's OpenAPI
declares, each once, and text without control characters (Temporal's visibility cannot search
for a NUL, and no id the timers make holds one).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import Query, Request
from pydantic import BeforeValidator

from wow_temporal.api.errors import ApiError
from wow_temporal.model import NO_CONTROL, has_control

__all__ = ["NO_CONTROL", "WholeNumber", "declared_query_only", "filter_query", "has_control"]


def _digits(value: object) -> object:
    """A number in a query is written in digits: `1.0`, `1e3` or ` 7` is not read as one."""
    if isinstance(value, str) and not (value.isascii() and value.isdigit()):
        raise ValueError(f"a whole number in digits, such as 3, got {value!r}")
    return value


WholeNumber = BeforeValidator(_digits)
"""Marks a query parameter that is a whole number: digits only (pydantic would read `1.0`)."""


def filter_query(description: str, alias: str | None = None) -> Any:
    """A listing's optional text filter: any text without control characters."""
    return Query(alias=alias, pattern=NO_CONTROL, description=description)


def _declared(document: Mapping[str, Any], path: str, method: str) -> dict[str, bool] | None:
    """The query parameters the document declares for one operation, and whether each may
    be repeated (an array); None for a route the document does not describe (`/docs`)."""
    operation = document.get("paths", {}).get(path, {}).get(method.lower())
    if operation is None:
        return None
    return {
        parameter["name"]: parameter.get("schema", {}).get("type") == "array"
        for parameter in operation.get("parameters", [])
        if parameter.get("in") == "query"
    }


async def declared_query_only(request: Request) -> None:
    """Refuse (400) a query parameter the route does not declare, or a single one given more
    than once: either would be answered as if it were not there (`GET /timers?aggregate_id=42`,
    a misspelt filter, would list every timer instead of the one asked for)."""
    route = request.scope.get("route")
    path = getattr(route, "path_format", None)
    if not request.query_params or not isinstance(path, str):
        return
    declared = _declared(request.app.openapi(), path, request.method)
    if declared is None:
        return
    unknown = sorted(set(request.query_params) - set(declared))
    if unknown:
        takes = ", ".join(sorted(declared)) or "none"
        raise ApiError(
            400,
            "UnknownParameter",
            f"unknown query parameter{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(repr(name) for name in unknown)} (this route takes: {takes})",
        )
    repeated = sorted(
        name
        for name, many in declared.items()
        if not many and len(request.query_params.getlist(name)) > 1
    )
    if repeated:
        raise ApiError(
            400,
            "RepeatedParameter",
            f"query parameter{'s' if len(repeated) > 1 else ''} "
            f"{', '.join(repr(name) for name in repeated)} given more than once (one value each)",
        )
