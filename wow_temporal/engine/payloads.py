"""What a workflow reads from its raw input, a signal's or an update's: the value, or why it
cannot be read, so that no input ever fails a timer's or a job's task forever (the SDK fails
the task on an input it cannot decode, and drops such a signal with a log line)."""

from __future__ import annotations

from typing import TypeVar

from temporalio import workflow
from temporalio.common import RawValue

__all__ = ["read_payload"]

_T = TypeVar("_T")


def read_payload(raw: RawValue, kind: type[_T]) -> tuple[_T | None, str]:
    """`raw` as `kind`, or None and why not (one line)."""
    try:
        return workflow.payload_converter().from_payload(raw.payload, kind), ""
    except Exception as error:
        return None, f"{type(error).__name__}: {error}".replace("\n", " ")
