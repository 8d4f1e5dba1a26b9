"""`upcaster_spec`: test an app's upcasters as you test a decision. A body written at an older
revision (`given`) is read as the domain host reads it, through the app's whole upcaster chain and
then its command class (`expect`), or is not (`expect_unreadable`: the host answers
`CommandValidation` and the timer parks). Pure: no server, the same `App.upcasting` the host
uses, so what passes here is what the host decides on."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from wow_temporal.domain.app import App
from wow_temporal.domain.messages import type_name
from wow_temporal.domain.upcasting import Upcast, UpcastError
from wow_temporal.model import explain

__all__ = ["UpcastResult", "UpcasterSpec", "upcaster_spec"]


def _json(body: Mapping[str, Any]) -> str:
    return json.dumps(body, sort_keys=True, ensure_ascii=False, default=str)


def _kind(command: type[BaseModel] | str) -> str:
    return command if isinstance(command, str) else type_name(command)


class UpcastResult:
    """How the app reads a body sent at an older revision, with `expect_*` assertions (each
    returns the result, so they chain)."""

    def __init__(
        self, app: App, sent: str, revision: str, body: Mapping[str, Any], outcome: Upcast | str
    ) -> None:
        self.app = app
        self.sent = f"{sent} revision {revision} {_json(body)}"
        """What was given, for the messages."""
        self.outcome = outcome
        """The chain's result, or why no chain reads the body (the host's `CommandValidation`)."""

    @property
    def command_type(self) -> str | None:
        """The type the app reads the command as (a renamed type's new name); None if unread."""
        return self.outcome.type if isinstance(self.outcome, Upcast) else None

    @property
    def body(self) -> dict[str, Any] | None:
        """The body the chain wrote, before the command class validates it; None if unread."""
        return self.outcome.body if isinstance(self.outcome, Upcast) else None

    @property
    def applied(self) -> list[str]:
        """The upcasters applied, in order (`eshop.order.CancelOrder revision 1 -> 2`)."""
        if not isinstance(self.outcome, Upcast):
            return []
        return [str(one) for one in self.outcome.applied]

    def command(self) -> BaseModel:
        """The command as its class reads the upcast body, the one the aggregate decides on;
        `AssertionError` saying why the host would answer `CommandValidation` instead."""
        read = self._read()
        if isinstance(read, str):
            raise AssertionError(f"expected {self.sent} to be read, but {read}")
        return read

    def _read(self) -> BaseModel | str:
        """The command read as the host reads it, or why it is not (the host's message)."""
        if not isinstance(self.outcome, Upcast):
            return self.outcome
        cls = next(
            (
                function.command
                for model in self.app.models.values()
                for kind, function in model.functions.items()
                if kind == self.outcome.type
            ),
            None,
        )
        if cls is None:  # `Upcasting` refuses at start a chain to a type no aggregate handles
            return f"{self.outcome.type}: no aggregate of {self.app.context} handles it"
        try:
            return cls.model_validate(self.outcome.body)
        except ValidationError as error:
            reason = explain(error)
        except ValueError as error:
            reason = str(error)
        return (
            f"{self.outcome.type}: {reason} (the body after {self._steps()}: "
            f"{_json(self.outcome.body)})"
        )

    def _steps(self) -> str:
        return ", ".join(self.applied) or "no upcaster"

    def expect(self, expected: BaseModel) -> UpcastResult:
        """Assert the app reads the command as `expected`: its type, and its class's reading of
        the upcast body equal to `expected` (by JSON, defaults included)."""
        read = self.command()
        want = (type_name(expected), _json(expected.model_dump(mode="json", by_alias=True)))
        got = (type_name(read), _json(read.model_dump(mode="json", by_alias=True)))
        if got != want:
            raise AssertionError(
                f"{self.sent}, read through {self._steps()}:\n"
                f"expected {want[0]} {want[1]}\nactual   {got[0]} {got[1]}"
            )
        return self

    def expect_json(self, command: type[BaseModel] | str, body: Mapping[str, Any]) -> UpcastResult:
        """Assert the chain writes exactly this type and JSON body (before the class reads it:
        to pin what an upcaster writes, defaults and all)."""
        if not isinstance(self.outcome, Upcast):
            raise AssertionError(f"expected {self.sent} to be upcast, but {self.outcome}")
        want = (_kind(command), _json(body))
        got = (self.outcome.type, _json(self.outcome.body))
        if got != want:
            raise AssertionError(
                f"{self.sent}, upcast through {self._steps()}:\n"
                f"expected {want[0]} {want[1]}\nactual   {got[0]} {got[1]}"
            )
        return self

    def expect_unreadable(self, message: str | None = None) -> UpcastResult:
        """Assert the app cannot read the body (no upcaster path, one failing on it, or a
        result its class refuses): the host answers `CommandValidation` and the timer parks for
        an operator; with `message`, the reason contains it."""
        read = self._read()
        if not isinstance(read, str):
            raise AssertionError(
                f"expected {self.sent} to be unreadable, but it is read through "
                f"{self._steps()} as {type_name(read)} "
                f"{_json(read.model_dump(mode='json', by_alias=True))}"
            )
        if message is not None and message not in read:
            raise AssertionError(
                f"expected {self.sent} to be unreadable with a reason containing {message!r}, "
                f"but the reason is: {read}"
            )
        return self


class UpcasterSpec:
    """An app's upcasters, to `given(...)` bodies of older revisions."""

    def __init__(self, app: App) -> None:
        self.app = app

    def given(
        self, command: type[BaseModel] | str, body: Mapping[str, Any], *, revision: int | str
    ) -> UpcastResult:
        """A `command` (its class, or its type name: a type since renamed) sent with `body` at
        `revision` (a timer's command sent without one is at revision 1), read by the app's
        upcaster chain."""
        kind, sent = _kind(command), str(revision)
        try:
            outcome: Upcast | str = self.app.upcasting.upcast(kind, sent, body)
        except UpcastError as error:
            outcome = f"{kind}: {error}"
        return UpcastResult(self.app, kind, sent, body, outcome)


def upcaster_spec(app: App) -> UpcasterSpec:
    """A spec of `app`'s upcasters, `given(Command, body, revision=1).expect(Command(...))`: the
    app as your host serves it, so a test reads with the upcasters it registers (an `App` with a
    gap in them is refused here as at the host's start)."""
    if not isinstance(app, App):
        raise TypeError(f"upcaster_spec takes an App, not {type(app).__name__}")
    return UpcasterSpec(app)
