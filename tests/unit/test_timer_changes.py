"""From a commit to timer changes (`wow_temporal.timers.changes`): kinds, order, versions, specs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from wow_temporal.model import (
    AggregateRef,
    Commit,
    InvalidCommitError,
    Misfire,
    ScheduledCommand,
    ScheduleRule,
    Scope,
)
from wow_temporal.timers import core
from wow_temporal.timers.changes import AggregateChange, KeyChange, changes_of, spec_of

CREATED = datetime(2026, 12, 1, 10, 0, 0, 123_000, tzinfo=UTC)
CREATE_MS = int(CREATED.timestamp() * 1000)
OWNER = AggregateRef(
    context_name="eshop-order", aggregate_name="order", tenant_id="t1", aggregate_id="42"
)
PAYMENT = {
    "contextName": "eshop-payment",
    "aggregateName": "payment",
    "tenantId": "t1",
    "aggregateId": "p7",
}


def schedule_set(
    event_id: str,
    key: str,
    rule: dict[str, Any],
    *,
    command: str = "eshop.order.CancelOrder",
    target: dict[str, str] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "key": key,
        "rule": rule,
        "command": {"type": command, "body": {"orderId": "42"}},
    }
    if target is not None:
        body["target"] = target
    return {"id": event_id, "name": "wow.ScheduleSet", "body": body}


def schedule_cancelled(event_id: str, key: str) -> dict[str, Any]:
    return {"id": event_id, "name": "wow.ScheduleCancelled", "body": {"key": key}}


def aggregate_deleted(event_id: str) -> dict[str, Any]:
    return {"id": event_id, "name": "wow.AggregateDeleted", "body": {}}


def domain(event_id: str, name: str = "OrderCreated") -> dict[str, Any]:
    return {"id": event_id, "name": name, "body": {"orderId": "42", "revision": 1}}


def commit(*events: dict[str, Any], version: int = 3, **fields: Any) -> Commit:
    data: dict[str, Any] = {
        "id": "commit-1",
        "contextName": "eshop-order",
        "aggregateName": "order",
        "tenantId": "t1",
        "aggregateId": "42",
        "ownerId": "owner-9",
        "spaceId": "space-2",
        "version": version,
        "createTime": CREATE_MS,
        "requestId": "req-1",
        "commandId": "cmd-1",
        "header": {"trace_id": "trace-abc", "traceparent": "00-abc-def-01"},
        "body": list(events),
    }
    data.update(fields)
    return Commit.parse(data)


def test_kinds_order_versions_and_indexes() -> None:
    c = commit(
        domain("e0"),
        schedule_set("e1", "cancel", {"after": "PT30M"}),
        domain("e2", "OrderPaid"),
        schedule_cancelled("e3", "remind"),
        schedule_set("e4", "remind", {"at": "2026-12-02T09:00:00Z"}),
        aggregate_deleted("e5"),
        version=7,
    )
    found = changes_of(c)
    assert [type(item) for item in found] == [KeyChange, KeyChange, KeyChange, AggregateChange]
    assert [item.change.kind for item in found] == ["set", "cancel", "set", "delete"]
    assert [item.key for item in found if isinstance(item, KeyChange)] == [
        "cancel",
        "remind",
        "remind",
    ]
    assert all(item.change.version == 7 for item in found)
    orders = [item.change.order for item in found]
    assert orders == sorted(orders), "in commit order"
    assert len(set(orders)) == len(orders), "two events of one commit never share an order"
    assert all(item.change.index >= 0 for item in found)
    # cancel and delete carry no spec; a set carries its own
    assert [item.change.spec is None for item in found] == [False, True, False, True]


def test_later_event_of_the_same_commit_wins_in_the_core() -> None:
    """Cancel then set the same key in one commit: the set (later) is what remains."""
    c = commit(
        schedule_set("e1", "k", {"after": "PT1H"}),
        schedule_cancelled("e2", "k"),
        schedule_set("e3", "k", {"after": "PT2H"}),
    )
    changes = [item.change for item in changes_of(c) if isinstance(item, KeyChange)]
    state = core.initial(changes[0])
    for change in changes[1:]:
        state = core.apply(state, change)
    assert state.spec is not None
    assert state.spec.timer == "commit-1:e3"
    assert state.next_due == CREATED + timedelta(hours=2)
    # the same commit applied again (a redelivered commit) changes nothing
    for change in changes:
        assert core.apply(state, change) == state


def test_a_newer_commit_orders_after_every_event_of_an_older_one() -> None:
    older = changes_of(
        commit(*[domain(f"d{i}") for i in range(5)], schedule_cancelled("x", "k"), version=4)
    )
    newer = changes_of(commit(schedule_set("y", "k", {"after": "PT1M"}), version=5, id="c5"))
    assert older[0].change.order < newer[0].change.order


def test_domain_events_only_or_empty_make_no_changes() -> None:
    assert changes_of(commit()) == []
    assert changes_of(commit(domain("e1"), domain("e2", "OrderShipped"))) == []


def test_spec_fields_of_an_after_rule_for_the_aggregate_itself() -> None:
    c = commit(domain("e0"), schedule_set("e1", "cancel", {"after": "PT30M"}))
    (item,) = changes_of(c)
    assert isinstance(item, KeyChange)
    spec = item.change.spec
    assert spec is not None
    assert spec.key == "cancel"
    assert spec.owner == OWNER
    assert spec.target == OWNER, "the target defaults to the aggregate itself"
    assert spec.rule == ScheduleRule.after(timedelta(minutes=30))
    assert spec.command == ScheduledCommand(type="eshop.order.CancelOrder", body={"orderId": "42"})
    assert spec.scope == Scope(tenant_id="t1", owner_id="owner-9", space_id="space-2")
    assert spec.upstream_id == "commit-1"
    assert spec.trace_id == "trace-abc"
    assert spec.traceparent == "00-abc-def-01"
    assert spec.first_due == CREATED + timedelta(minutes=30)
    assert spec.first_due == datetime(2026, 12, 1, 10, 30, 0, 123_000, tzinfo=UTC)
    assert not spec.recurring


def test_a_given_target_is_used() -> None:
    c = commit(
        schedule_set(
            "e1", "refund", {"after": "PT1H"}, target=PAYMENT, command="eshop.payment.Refund"
        )
    )
    (item,) = changes_of(c)
    spec = item.change.spec
    assert spec is not None
    assert spec.target == AggregateRef(
        context_name="eshop-payment", aggregate_name="payment", tenant_id="t1", aggregate_id="p7"
    )
    assert spec.owner == OWNER, "the timer still belongs to the committing aggregate"
    assert core.summary(spec, spec.first_due) == (
        "Refund → eshop-payment.payment p7, due 2026-12-01T11:00:00.123Z"
    )


def test_at_rule_first_due_is_the_instant() -> None:
    c = commit(schedule_set("e1", "k", {"at": "2026-12-24T18:00:00Z"}))
    spec = changes_of(c)[0].change.spec
    assert spec is not None
    assert spec.first_due == datetime(2026, 12, 24, 18, 0, tzinfo=UTC)


def test_cron_rule_first_due_is_the_first_slot_after_the_commit() -> None:
    c = commit(
        schedule_set("e1", "k", {"cron": "0 */15 * * * *", "zone": "UTC", "misfire": "CATCH_UP"})
    )
    spec = changes_of(c)[0].change.spec
    assert spec is not None
    assert spec.recurring
    assert spec.rule.misfire is Misfire.CATCH_UP
    assert spec.first_due == datetime(2026, 12, 1, 10, 15, tzinfo=UTC)


def test_cron_rule_that_never_matches_has_no_first_due() -> None:
    c = commit(schedule_set("e1", "k", {"cron": "0 0 0 30 2 *", "zone": "UTC"}))
    spec = changes_of(c)[0].change.spec
    assert spec is not None
    assert spec.first_due is None


def test_timer_id_is_distinct_per_schedule_set() -> None:
    first = commit(
        schedule_set("e1", "k", {"after": "PT1M"}),
        schedule_set("e2", "k", {"after": "PT1M"}),
        schedule_set("e3", "other", {"after": "PT1M"}),
    )
    second = commit(schedule_set("e1", "k", {"after": "PT1M"}), id="commit-2", version=4)
    timers = [
        item.change.spec.timer
        for c in (first, second)
        for item in changes_of(c)
        if item.change.spec is not None
    ]
    assert len(timers) == 4
    assert len(set(timers)) == 4, "a replacement never reuses a request id"
    assert timers[0] == "commit-1:e1"


def test_timer_id_is_stable_when_the_same_commit_is_read_again() -> None:
    """Ingest may see a commit twice: the same events make the same changes (idempotent)."""
    events = (schedule_set("e1", "k", {"after": "PT1M"}), schedule_cancelled("e2", "j"))
    assert changes_of(commit(*events)) == changes_of(commit(*events))


def test_trace_headers_are_optional() -> None:
    (item,) = changes_of(commit(schedule_set("e1", "k", {"after": "PT1M"}), header={}))
    spec = item.change.spec
    assert spec is not None
    assert spec.trace_id == ""
    assert spec.traceparent is None


def test_scope_defaults_to_the_tenant_only() -> None:
    c = commit(schedule_set("e1", "k", {"after": "PT1M"}), ownerId="", spaceId="", tenantId="")
    spec = changes_of(c)[0].change.spec
    assert spec is not None
    assert spec.scope == Scope()
    assert spec.owner.tenant_id == ""


def test_spec_of_matches_changes_of() -> None:
    c = commit(domain("e0"), schedule_set("e1", "k", {"after": "PT5M"}))
    envelope, event = c.schedule_events()[0]
    assert spec_of(c, envelope.id, event) == changes_of(c)[0].change.spec  # type: ignore[arg-type]


def test_changes_survive_json_as_the_apply_signal() -> None:
    c = commit(
        schedule_set("e1", "k", {"after": "PT0.5S"}),
        schedule_set("e2", "j", {"cron": "*/10 * * * * *", "zone": "Europe/Amsterdam"}),
        schedule_cancelled("e3", "x"),
        aggregate_deleted("e4"),
    )
    for item in changes_of(c):
        change = item.change
        assert core.TimerChange.model_validate_json(change.model_dump_json()) == change


def test_unknown_system_event_is_rejected_at_parse() -> None:
    with pytest.raises(InvalidCommitError, match=r"wow\.ScheduleMoved"):
        commit({"id": "e1", "name": "wow.ScheduleMoved", "body": {}})


def test_malformed_schedule_set_is_rejected_at_parse() -> None:
    with pytest.raises(InvalidCommitError, match="e1"):
        commit(schedule_set("e1", "bad key!", {"after": "PT1M"}))
