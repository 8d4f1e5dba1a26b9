"""Revisions and upcasters: a command scheduled long ago is read by the code deployed now.

A `CommandBody` declares the revision of its shape (`__wow_revision__ = 2`, an integer or a
string, as Axon's `@Revision`); a scheduled command carries the revision it was written with
(`ScheduledCommand.revision`, sent as the message header `command_revision`; absent: the first).
An `App` registers upcasters, pure functions from a body of one revision to the next
(`@upcaster(CancelOrder, revision=1)`), and the host chains them up to the current revision
before the body is validated; a type renamed is an upcaster too (`to_type=`). A chain with a
gap, or one that leads nowhere the app reads, refuses the `App` at start, naming it.

Pure: no I/O; the host applies it to each command it receives.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from wow_temporal.domain.messages import type_name
from wow_temporal.errors import WowTemporalError
from wow_temporal.wire import REVISION_HEADER

__all__ = [
    "FIRST_REVISION",
    "REVISION_HEADER",
    "Upcast",
    "UpcastError",
    "Upcaster",
    "Upcasting",
    "revision_of",
    "upcaster",
]

FIRST_REVISION = "1"
"""The revision of a body whose class declares none, and of one sent without a revision."""

_REVISION = re.compile(r"[A-Za-z0-9_.:-]{1,64}")

Body = dict[str, Any]


def _text(revision: object, what: str) -> str:
    """A revision as text: an integer or a short string of letters, digits, `_.:-`."""
    if isinstance(revision, bool) or not isinstance(revision, int | str):
        raise ValueError(f"{what}: a revision is an integer or a string, not {revision!r}")
    text = str(revision)
    if not _REVISION.fullmatch(text):
        raise ValueError(f"{what}: revision {text!r} is not 1 to 64 of letters, digits, _.:-")
    return text


def revision_of(cls: type[Any]) -> str | None:
    """The revision a command class declares (`__wow_revision__`), as text; None if none."""
    declared = cls.__dict__.get("__wow_revision__")
    return None if declared is None else _text(declared, f"{cls.__qualname__}.__wow_revision__")


@dataclass(frozen=True)
class Upcaster:
    """Reads a `type` body of `revision` and returns the `to_type` body of `to_revision`."""

    type: str
    revision: str
    to_revision: str
    to_type: str
    function: Callable[[Body], Body] = field(compare=False)

    def __call__(self, body: Mapping[str, Any]) -> Body:
        """The next revision's body; a result that is not a JSON object is a bug in it."""
        result = self.function(dict(body))
        if not isinstance(result, dict):
            raise TypeError(
                f"the upcaster of {self.type} revision {self.revision} returned "
                f"{type(result).__name__}, not the body (a dict)"
            )
        return result

    def __str__(self) -> str:
        renamed = f" as {self.to_type}" if self.to_type != self.type else ""
        return f"{self.type} revision {self.revision} -> {self.to_revision}{renamed}"


def upcaster(
    command: type[Any] | str,
    *,
    revision: int | str,
    to: int | str | None = None,
    to_type: type[Any] | str | None = None,
) -> Callable[[Callable[[Body], Body]], Upcaster]:
    """Mark a pure function from a `command` body of `revision` to the next one: `to`
    (`revision + 1` for an integer revision), of `to_type` for a type renamed (default the
    same type). Register the result with `App(..., upcasters=[...])`."""
    kind = command if isinstance(command, str) else type_name(command)
    renamed = kind if to_type is None else to_type if isinstance(to_type, str) else None
    renamed = renamed or type_name(to_type)
    start = _text(revision, f"upcaster of {kind}")
    if to is None:
        if not isinstance(revision, int) or isinstance(revision, bool):
            raise ValueError(f"upcaster of {kind} revision {start}: give `to=` for a string one")
        to = revision + 1
    end = _text(to, f"upcaster of {kind}")
    if (renamed, end) == (kind, start):
        raise ValueError(f"upcaster of {kind} revision {start}: it leads to itself")

    def mark(function: Callable[[Body], Body]) -> Upcaster:
        return Upcaster(kind, start, end, renamed, function)

    return mark


class UpcastError(WowTemporalError, ValueError):
    """A body the app cannot bring to a revision it reads (no upcaster path, or an upcaster
    that failed on it): the command cannot be read as sent."""


@dataclass(frozen=True)
class Upcast:
    """A command as the app reads it: its type and body now, and the upcasters applied."""

    type: str
    body: Body
    applied: tuple[Upcaster, ...] = ()


class Upcasting:
    """An app's upcasters, checked whole against the revisions its commands are at."""

    def __init__(self, upcasters: Iterable[Upcaster], current: Mapping[str, str]) -> None:
        """`current`: each command type the app reads, with its revision. `ValueError` names
        a duplicate, a chain with a gap, or one leading to a type the app does not read."""
        self.current = dict(current)
        self._next: dict[tuple[str, str], Upcaster] = {}
        for one in upcasters:
            if not isinstance(one, Upcaster):
                raise ValueError(f"{one!r} is not an upcaster: decorate it with @upcaster(...)")
            if (one.type, one.revision) in self._next:
                raise ValueError(f"two upcasters of {one.type} revision {one.revision}")
            self._next[one.type, one.revision] = one
        for one in self._next.values():
            self._check(one)

    def _check(self, start: Upcaster) -> None:
        kind, revision = start.type, start.revision
        for _ in range(len(self._next) + 1):
            step = self._next.get((kind, revision))
            if step is None:
                break
            kind, revision = step.to_type, step.to_revision
        else:
            raise ValueError(f"the upcasters from {start} go round in a circle")
        reads = self.current.get(kind)
        if reads is None:
            raise ValueError(
                f"the upcasters from {start} lead to {kind}, which no aggregate of the app "
                "handles"
            )
        if reads != revision:
            raise ValueError(
                f"a gap in the upcasters from {start}: they reach {kind} revision {revision}, "
                f"but no upcaster reads it, and the app reads revision {reads}"
            )

    def upcast(self, kind: str, revision: str | None, body: Mapping[str, Any]) -> Upcast:
        """`body`, a `kind` body at `revision` (None: as the app reads it now), chained up to
        the revision the app reads; `UpcastError` saying why it cannot be. A type no aggregate
        of the app lists and no upcaster reads (a system command such as `wow.DeleteAggregate`,
        or one the aggregate will refuse as unknown) is left as sent."""
        if revision is None:
            return Upcast(kind, dict(body))
        applied: list[Upcaster] = []
        current = dict(body)
        for _ in range(len(self._next) + 1):
            if self.current.get(kind) == revision:
                return Upcast(kind, current, tuple(applied))
            step = self._next.get((kind, revision))
            if step is None:
                break
            try:
                current = step(current)
            except Exception as error:  # the body is not what that revision says
                raise UpcastError(f"{step} failed: {type(error).__name__}: {error}") from None
            applied.append(step)
            kind, revision = step.to_type, step.to_revision
        reads = self.current.get(kind)
        if reads is None and not applied:
            return Upcast(kind, current)  # none of its aggregates' (a system command): as sent
        if reads is None:
            raise UpcastError(f"{kind} revision {revision}: the app has no command {kind}")
        raise UpcastError(
            f"{kind} revision {revision}: no upcaster reads it (the app reads revision {reads})"
        )
