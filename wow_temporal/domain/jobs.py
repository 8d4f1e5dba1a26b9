"""`@on_schedule`: a saga method that handles a recurring job's ticks."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from wow_temporal.model import JobScope, Misfire, validate_cron, validate_key, validate_zone
from wow_temporal.model.rules import fires_problem

__all__ = ["JOB_ATTRIBUTE", "JobDefinition", "check_handler", "on_schedule"]

JOB_ATTRIBUTE = "__wow_job__"
"""The attribute `@on_schedule` sets on the method it decorates."""

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class JobDefinition:
    """What `@on_schedule` declares: the job's name and its rule as the code gives it."""

    name: str
    cron: str
    zone: str = "UTC"
    scope: JobScope = JobScope.SYSTEM
    sharded: bool = False
    misfire: Misfire = Misfire.COALESCE


def on_schedule(
    name: str,
    cron: str,
    zone: str = "UTC",
    scope: JobScope = JobScope.SYSTEM,
    sharded: bool = False,
    misfire: Misfire = Misfire.COALESCE,
) -> Callable[[F], F]:
    """Declare a saga method `(tick, context) -> list[Command]` as the handler of job `name`,
    due each time `cron` (six Spring fields) matches in `zone`.

    A bad name, cron (or one no time ever matches), zone, scope or signature raises
    `ValueError` naming the job, here.
    """
    definition = _checked(name, cron, zone, scope, sharded, misfire)

    def decorate(function: F) -> F:
        check_handler(function, definition.name, bound=False)
        setattr(function, JOB_ATTRIBUTE, definition)
        return function

    return decorate


def _checked(
    name: Any, cron: Any, zone: Any, scope: Any, sharded: Any, misfire: Any
) -> JobDefinition:
    try:
        validate_key(name, "job name")
    except ValueError as error:
        raise ValueError(f"@on_schedule: {error}") from None
    where = f"job {name}"
    try:
        validate_cron(cron)
    except ValueError as error:
        raise ValueError(f"{where}: cron {cron!r}: {error}") from None
    try:
        validate_zone(zone)
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None
    problem = fires_problem(cron, zone)
    if problem is not None:
        raise ValueError(f"{where}: {problem}")
    try:
        scope = JobScope(scope)
        misfire = Misfire(misfire)
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None
    if not isinstance(sharded, bool):
        raise ValueError(f"{where}: sharded is True or False, not {sharded!r}")
    if sharded and scope is not JobScope.SYSTEM:
        raise ValueError(f"{where}: only a SYSTEM job can be sharded (by log partition)")
    return JobDefinition(name, cron, zone, scope, sharded, misfire)


def check_handler(function: Callable[..., Any], job: str, *, bound: bool) -> None:
    """Refuse a handler that cannot be called as `(tick, context)` (after `self`, unbound)."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        raise ValueError(f"job {job}: its handler is not a function") from None
    positional = [
        p
        for p in signature.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    required_keywords = [
        p.name
        for p in signature.parameters.values()
        if p.kind is p.KEYWORD_ONLY and p.default is p.empty
    ]
    wanted = 2 if bound else 3
    required = [p for p in positional if p.default is p.empty]
    varargs = any(p.kind is p.VAR_POSITIONAL for p in signature.parameters.values())
    fits = (len(positional) >= wanted or varargs) and len(required) <= wanted
    if not fits or required_keywords:
        shown = "(tick, context)" if bound else "(self, tick, context)"
        raise ValueError(
            f"job {job}: the handler {getattr(function, '__qualname__', function)!r} must take "
            f"{shown}; it takes {signature}"
        )
