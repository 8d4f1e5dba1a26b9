"""What the tests hand the timers: a commit that schedules one CancelOrder, one that cancels a key
(what a relay hands over), fast delivery settings, and a delivery request with a distinct value
in every field."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta
from typing import Any

from bench.harness.commits import commit as harness_commit
from bench.harness.commits import schedule_set
from wow_temporal.delivery import DeliveryRequest, ScheduleDetails
from wow_temporal.model import AggregateRef, Commit, ScheduledCommand, Scope
from wow_temporal.timers.workflow import DeliverySettings


def fast_delivery(max_attempts: int, **settings: Any) -> DeliverySettings:
    """Delivery retried after 100 ms, then every 200 ms: a failing command parks in a second."""
    return DeliverySettings(
        max_attempts=max_attempts,
        initial_interval=timedelta(milliseconds=100),
        max_interval=timedelta(milliseconds=200),
        **settings,
    )


def commit(after: float) -> dict[str, Any]:
    """One commit of a fresh order scheduling one CancelOrder `after` seconds from now."""
    grace = schedule_set({"after": f"PT{after:.3f}S"}, key="payment-grace-period")
    return harness_commit(uuid.uuid4().hex, grace, commit_id=f"c-{uuid.uuid4().hex[:8]}")


def cancelling(aggregate_id: str, version: int) -> Commit:
    """Commit `{aggregate_id}-{version}` of `shop.order` `aggregate_id` (tenant `t`), cancelling
    key `k`: a commit with a schedule event, no timer to start."""
    return Commit.parse(
        {
            "id": f"{aggregate_id}-{version}",
            "contextName": "shop",
            "aggregateName": "order",
            "tenantId": "t",
            "aggregateId": aggregate_id,
            "version": version,
            "createTime": 1_800_000_000_000,
            "body": [{"id": "e", "name": "wow.ScheduleCancelled", "body": {"key": "k"}}],
        }
    )


_counter = iter(range(1, 1_000_000))


def make_request(
    *,
    request_id: str | None = None,
    command_type: str = "eshop.order.CancelOrder",
    due: int | None = None,
    traceparent: str | None = None,
    aggregate_id: str = "order-1",
) -> DeliveryRequest:
    """A delivery request with distinct values in every field."""
    slot = next(_counter)
    return DeliveryRequest(
        command=ScheduledCommand(type=command_type, body={"reason": "unpaid", "n": [1, 2]}),
        target=AggregateRef(
            context_name="eshop-order",
            aggregate_name="order",
            tenant_id="tenant-t",
            aggregate_id=aggregate_id,
        ),
        scope=Scope(tenant_id="tenant-s", owner_id="owner-7", space_id="space-3"),
        request_id=request_id or f"timer-{slot}#{slot}",
        upstream_id="commit-42",
        upstream_name="eshop-cart.cart",
        trace_id="trace-99",
        traceparent=traceparent,
        schedule=ScheduleDetails(
            timer=f"timer-{slot}",
            key="cancel-unpaid",
            slot=slot,
            due=int(time.time() * 1000) - 5 if due is None else due,
            skipped=2,
        ),
    )
