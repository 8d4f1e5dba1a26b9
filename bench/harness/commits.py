"""Commits as a relay hands them over (DESIGN's shape): one aggregate's events, most often
one `wow.ScheduleSet`; and the command the benches' timers send."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from wow_temporal.wire import WireCommand

__all__ = ["CANCEL", "CANCEL_ORDER", "commit", "iso_ms", "schedule_set"]

CANCEL_ORDER = "eshop.order.CancelOrder"
CANCEL = WireCommand(
    type=CANCEL_ORDER,
    context_name="eshop-order",
    aggregate_name="order",
    tenant_id="t1",
    body={"reason": "PAYMENT_TIMEOUT"},
)
"""The command a bench's timer sends, but for its aggregate and request ids."""


def iso_ms(epoch_ms: int) -> str:
    """An instant as ISO-8601 UTC with milliseconds (a rule's `at`)."""
    return datetime.fromtimestamp(epoch_ms / 1000, UTC).isoformat(timespec="milliseconds")


def schedule_set(
    rule: dict[str, Any],
    key: str = "grace",
    command_type: str = CANCEL_ORDER,
    body: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A `wow.ScheduleSet` event: `key` sends `command_type` with `body` as `rule` says."""
    return {
        "name": "wow.ScheduleSet",
        "key": key,
        "rule": rule,
        "command": {"type": command_type, "body": {} if body is None else body},
    }


def commit(
    aggregate_id: str,
    *events: dict[str, Any],
    version: int = 1,
    commit_id: str | None = None,
    tenant_id: str = "t1",
    header: dict[str, str] | None = None,
    created_ms: int | None = None,
) -> dict[str, Any]:
    """A commit of `eshop-order.order` `aggregate_id` at `version` holding `events` (each a
    dict with its `name`; the rest is its body), made now unless `created_ms` says when."""
    return {
        "id": commit_id or f"c{version}-{aggregate_id}",
        "contextName": "eshop-order",
        "aggregateName": "order",
        "tenantId": tenant_id,
        "aggregateId": aggregate_id,
        "version": version,
        "createTime": int(time.time() * 1000) if created_ms is None else created_ms,
        "header": header or {},
        "body": [
            {"id": f"e{i}", "name": e["name"], "body": {k: v for k, v in e.items() if k != "name"}}
            for i, e in enumerate(events)
        ],
    }
