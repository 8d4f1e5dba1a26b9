"""Finding the methods a domain decorator marked (`@on_command`, `@on_event`, `@on_schedule`…)."""

from __future__ import annotations

import inspect
from typing import Any

__all__ = ["marked"]


def marked(cls: type, marker: str) -> list[tuple[str, Any, Any]]:
    """`(attribute, mark, function)` for each method of `cls` whose function carries the
    attribute `marker` (static and class methods unwrapped), in name order."""
    found = []
    for attribute in dir(cls):
        function = inspect.getattr_static(cls, attribute, None)
        if isinstance(function, (staticmethod, classmethod)):
            function = function.__func__
        mark = getattr(function, marker, None)
        if mark is not None and callable(function):
            found.append((attribute, mark, function))
    return found
