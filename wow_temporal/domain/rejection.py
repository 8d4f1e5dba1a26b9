"""A command's refusal: Wow's error code, its message, and the HTTP status Wow gives it."""

from __future__ import annotations

from dataclasses import dataclass

from wow_temporal.errors import WowTemporalError
from wow_temporal.wire import ERROR_STATUS, error_status  # Wow's statuses are the wire's

__all__ = ["ERROR_STATUS", "CommandRejected", "Rejection"]


@dataclass(frozen=True, slots=True)
class Rejection:
    """A refusal: `code` is Wow's error code (`IllegalState`, `NotFound`, …)."""

    code: str
    message: str

    @property
    def status(self) -> int:
        return error_status(self.code)


class CommandRejected(WowTemporalError):
    """Raise it from a command function to refuse the command: a business guard, answered with
    `code` (`IllegalState` by default). A `ValueError` is refused as `IllegalArgument`."""

    def __init__(self, message: str, code: str = "IllegalState") -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def rejection(self) -> Rejection:
        return Rejection(self.code, self.message)
