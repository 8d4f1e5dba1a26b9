"""Temporal identities: the workflow ids of timers, job instances and deletion records, readable
and injective.

Each `{part}` of an id has `%` and `:` percent-encoded (`%25`, `%3A`), and a context name its `.`
(`%2E`) too, so two different aggregates, tenants or keys never share an id; parts without those
characters read as they are (`wow-timer:eshop-order.order:t1:42:payment-grace-period`).
"""

from __future__ import annotations

import re

from wow_temporal.errors import WowTemporalError
from wow_temporal.model import AggregateRef

__all__ = [
    "DELETION_ID_PREFIX",
    "JOB_ID_PREFIX",
    "TIMER_ID_PREFIX",
    "InvalidIdError",
    "decode_part",
    "deletion_record_id",
    "encode_part",
    "job_workflow_id",
    "parse_job_workflow_id",
    "parse_timer_workflow_id",
    "timer_workflow_id",
]

TIMER_ID_PREFIX = "wow-timer:"
"""Every timer workflow id starts with this."""

JOB_ID_PREFIX = "wow-job:"
"""Every job instance's workflow id starts with this."""

DELETION_ID_PREFIX = "wow-deleted:"
"""Every deletion record's workflow id starts with this (see `timers.deletion`)."""

_ESCAPES = {"%": "%25", ":": "%3A", ".": "%2E"}
_ESCAPED = re.compile(r"%(25|3A|2E)", re.IGNORECASE)
_UNESCAPES = {"25": "%", "3A": ":", "2E": "."}


class InvalidIdError(WowTemporalError, ValueError):
    """Text that is not a workflow id of the kind asked for; the message says why."""


def encode_part(value: str, *, dot: bool = False) -> str:
    """`value` with `%` and `:` (and `.` if `dot`) percent-encoded, for one part of an id."""
    if "%" not in value and ":" not in value and not (dot and "." in value):
        return value
    return "".join(_ESCAPES[c] if c in "%:" or (dot and c == ".") else c for c in value)


def decode_part(text: str) -> str:
    """The value an encoded part stands for (the inverse of `encode_part`)."""
    return _ESCAPED.sub(lambda match: _UNESCAPES[match[1].upper()], text)


def _aggregate_part(ref: AggregateRef) -> str:
    return f"{encode_part(ref.context_name, dot=True)}.{encode_part(ref.aggregate_name)}"


def timer_workflow_id(owner: AggregateRef, key: str) -> str:
    """The timer of `key` on `owner`: `wow-timer:{context}.{aggregate}:{tenant}:{id}:{key}`."""
    return (
        f"{TIMER_ID_PREFIX}{_aggregate_part(owner)}:{encode_part(owner.tenant_id)}:"
        f"{encode_part(owner.aggregate_id)}:{encode_part(key)}"
    )


def deletion_record_id(aggregate: AggregateRef) -> str:
    """The record of `aggregate`'s deletion: `wow-deleted:{context}.{aggregate}:{tenant}:{id}`."""
    return (
        f"{DELETION_ID_PREFIX}{_aggregate_part(aggregate)}:{encode_part(aggregate.tenant_id)}:"
        f"{encode_part(aggregate.aggregate_id)}"
    )


def parse_timer_workflow_id(workflow_id: str) -> tuple[AggregateRef, str]:
    """The owner and key a timer workflow id names; `InvalidIdError` if it is not one."""
    if not workflow_id.startswith(TIMER_ID_PREFIX):
        raise InvalidIdError(
            f"not a timer id: {workflow_id!r} (timer ids start with {TIMER_ID_PREFIX!r})"
        )
    parts = workflow_id[len(TIMER_ID_PREFIX) :].split(":")
    if len(parts) != 4 or "." not in parts[0]:
        raise InvalidIdError(
            f"not a timer id: {workflow_id!r} (expected "
            f"{TIMER_ID_PREFIX}{{context}}.{{aggregate}}:{{tenant}}:{{aggregate id}}:{{key}})"
        )
    named, tenant, aggregate_id, key = parts
    context, aggregate = named.split(".", 1)
    try:
        owner = AggregateRef(
            context_name=decode_part(context),
            aggregate_name=decode_part(aggregate),
            tenant_id=decode_part(tenant),
            aggregate_id=decode_part(aggregate_id),
        )
    except ValueError as error:
        raise InvalidIdError(f"not a timer id: {workflow_id!r} ({error})") from None
    return owner, decode_part(key)


def job_workflow_id(
    context: str, name: str, *, tenant: str | None = None, partition: int | None = None
) -> str:
    """A job instance: `wow-job:{context}:{name}` (SYSTEM), `…:{name}:tenant:{tenant}` (a
    TENANT job's instance), `…:{name}:partition:{n}` (a sharded one's)."""
    base = f"{JOB_ID_PREFIX}{encode_part(context)}:{encode_part(name)}"
    if tenant is not None:
        return f"{base}:tenant:{encode_part(tenant)}"
    if partition is not None:
        return f"{base}:partition:{partition}"
    return base


def parse_job_workflow_id(workflow_id: str) -> tuple[str, str, str | None, int | None]:
    """(context, name, tenant, partition) of a job instance id; `InvalidIdError` if not one."""
    shape = (
        f"expected {JOB_ID_PREFIX}{{context}}:{{name}}, optionally followed by "
        ":tenant:{tenant} or :partition:{n}"
    )
    if not workflow_id.startswith(JOB_ID_PREFIX):
        raise InvalidIdError(f"not a job instance id: {workflow_id!r} ({shape})")
    parts = workflow_id[len(JOB_ID_PREFIX) :].split(":")
    if len(parts) == 2:
        return decode_part(parts[0]), decode_part(parts[1]), None, None
    if len(parts) == 4 and parts[2] == "tenant":
        return decode_part(parts[0]), decode_part(parts[1]), decode_part(parts[3]), None
    if len(parts) == 4 and parts[2] == "partition" and parts[3].isascii() and parts[3].isdigit():
        return decode_part(parts[0]), decode_part(parts[1]), None, int(parts[3])
    raise InvalidIdError(f"not a job instance id: {workflow_id!r} ({shape})")
