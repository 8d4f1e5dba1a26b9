"""A command's refusal: Wow's error code, its message, and the HTTP status Wow gives it."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ERROR_STATUS", "CommandRejected", "Rejection"]

ERROR_STATUS: dict[str, int] = {
    "Ok": 200,
    "NotFound": 404,
    "BadRequest": 400,
    "IllegalArgument": 400,
    "IllegalState": 400,
    "RequestTimeout": 408,
    "TooManyRequests": 429,
    "DuplicateRequestId": 400,
    "CommandValidation": 400,
    "EventVersionConflict": 409,
    "DuplicateAggregateId": 400,
    "CommandExpectVersionConflict": 409,
    "SourcingVersionConflict": 409,
    "IllegalAccessDeletedAggregate": 410,
    "IllegalAccessOwnerAggregate": 403,
    "InternalServerError": 500,
}
"""Wow's error codes and their HTTP statuses (Wow's `ErrorHttpStatusMapping`); others are 400."""


@dataclass(frozen=True, slots=True)
class Rejection:
    """A refusal: `code` is Wow's error code (`IllegalState`, `NotFound`, …)."""

    code: str
    message: str

    @property
    def status(self) -> int:
        return ERROR_STATUS.get(self.code, 400)


class CommandRejected(Exception):
    """Raise it from a command function to refuse the command: a business guard, answered with
    `code` (`IllegalState` by default). A `ValueError` is refused as `IllegalArgument`."""

    def __init__(self, message: str, code: str = "IllegalState") -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def rejection(self) -> Rejection:
        return Rejection(self.code, self.message)
