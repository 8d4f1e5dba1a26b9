"""Timers end to end on the dev server: real Temporal, real HTTP Wow host, in-process worker.

Every test uses its own task queue and aggregate ids: the dev server is shared by the session.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

from tests.helpers.quiescent import quiescent
from tests.helpers.timer_rig import (
    AGGREGATE,
    COMMAND,
    CONTEXT,
    DELETED,
    MAX_ATTEMPTS,
    TENANT,
    TRACEPARENT,
    Rig,
    cancelled,
    due_ms,
    request_id,
    rig,
    schedule_set,
)
from tests.helpers.told import told
from tests.helpers.wow_host import wow_host
from wow_temporal.model import AggregateRef, Commit, ScheduledCommand, ScheduleRule, Scope
from wow_temporal.search_attributes import SA_STATUS
from wow_temporal.timers import core
from wow_temporal.timers.attributes import initial_search_attributes
from wow_temporal.timers.client import TIMER_WORKFLOW, TimerClient, TimerError
from wow_temporal.timers.core import Status, TimerChange, TimerSpec
from wow_temporal.timers.workflow import TimerInput

pytestmark = pytest.mark.asyncio(loop_scope="session")

__all__ = ["rig", "wow_host"]  # the fixtures, used by every test here


# --- delivery ---------------------------------------------------------------------------------


async def test_one_shot_is_delivered_once_with_the_wire_headers_never_early(rig: Rig) -> None:
    commit = rig.commit(
        1,
        schedule_set("grace", {"after": "PT1S"}),
        header={"trace_id": "trace-42", "traceparent": TRACEPARENT},
    )
    due = commit["createTime"] + 1000
    async with rig.worker():
        applied = await rig.timers.apply(commit)
        assert [(a.kind, a.outcome) for a in applied] == [("set", "started")]
        state = await rig.result("grace")
        await quiescent(rig.handle("grace"))  # closed: nothing more can arrive
    assert state.status is Status.DELIVERED
    assert state.delivered == 1
    (request,) = rig.host.requests
    assert request.behaviour == "ok"
    assert request.received_ms >= due, f"delivered {due - request.received_ms} ms early"
    expected = {
        "command-type": COMMAND,
        "command-aggregate-context": CONTEXT,
        "command-aggregate-name": AGGREGATE,
        "command-aggregate-id": rig.aggregate_id,
        "command-tenant-id": TENANT,
        "command-owner-id": "owner-1",
        "wow-space-id": "space-1",
        "command-request-id": request_id(commit),
        "command-wait-stage": "PROCESSED",
        "command-header-upstream_id": commit["id"],
        "command-header-upstream_name": f"{CONTEXT}.{AGGREGATE}",
        "command-header-trace_id": "trace-42",
        "command-header-schedule_timer": f"{commit['id']}:e0",
        "command-header-schedule_key": "grace",
        "command-header-schedule_slot": "1",
        "command-header-schedule_due": str(due),
    }
    assert {name: request.header(name) for name in expected} == expected
    # The W3C trace context continues the scheduling commit's trace.
    traceparent = request.header("traceparent")
    assert traceparent is not None
    assert traceparent.split("-")[1] == TRACEPARENT.split("-")[1]
    assert request.body == {"reason": "PAYMENT_TIMEOUT", "key": "grace"}
    shown = await rig.timers.show(rig.workflow_id("grace"))
    assert shown.status == "Delivered"
    assert not shown.running


async def test_no_traceparent_when_the_commit_has_none(rig: Rig) -> None:
    commit = rig.commit(1, schedule_set("grace", {"after": "PT0.2S"}), header={})
    async with rig.worker():
        await rig.timers.apply(commit)
        await rig.result("grace")
    (request,) = rig.host.requests
    assert request.header("traceparent") is None
    assert request.message_header("trace_id") is None
    assert request.received_ms >= due_ms(request)


async def test_target_routes_the_command_to_another_aggregate(rig: Rig) -> None:
    payment_id = uuid.uuid4().hex
    target = {
        "contextName": "eshop-payment",
        "aggregateName": "payment",
        "tenantId": "t2",
        "aggregateId": payment_id,
    }
    commit = rig.commit(1, schedule_set("refund", {"after": "PT0.5S"}, target=target))
    async with rig.worker():
        await rig.timers.apply(commit)
        state = await rig.result("refund")
    assert state.status is Status.DELIVERED
    (request,) = rig.host.requests
    assert request.header("command-aggregate-context") == "eshop-payment"
    assert request.header("command-aggregate-name") == "payment"
    assert request.header("command-aggregate-id") == payment_id
    assert request.header("command-tenant-id") == "t2"
    # Scope and causation stay those of the scheduling commit.
    assert request.header("command-owner-id") == "owner-1"
    assert request.header("wow-space-id") == "space-1"
    assert request.message_header("upstream_id") == commit["id"]
    assert request.message_header("upstream_name") == f"{CONTEXT}.{AGGREGATE}"
    # The timer belongs to the scheduling aggregate.
    info = await rig.timers.show(rig.workflow_id("refund"))
    assert info.aggregate_id == rig.aggregate_id
    assert request.received_ms >= due_ms(request)


async def test_request_ids_are_unique_per_schedule_and_repeat_only_on_redelivery(
    rig: Rig,
) -> None:
    first = rig.commit(1, schedule_set("grace", {"after": "PT1S"}))
    second = rig.commit(2, schedule_set("grace", {"after": "PT0.5S"}))
    async with rig.worker():
        await rig.timers.apply(first)
        assert [a.outcome for a in await rig.timers.apply(second)] == ["handed-over"]
        await rig.result("grace")
        # A later schedule under the same key, after the first one fired: a new timer id.
        # Its first attempt fails, so its request is sent again, with the same id.
        third = rig.commit(3, schedule_set("grace", {"after": "PT0.2S"}))
        rig.host.behave("fail", request_id=request_id(third), times=1)
        assert [a.outcome for a in await rig.timers.apply(third)] == ["started"]
        state = await rig.result("grace")
    assert state.status is Status.DELIVERED
    ids = [r.request_id for r in rig.host.requests]
    assert ids == [request_id(second), request_id(third), request_id(third)]
    assert [r.behaviour for r in rig.host.requests] == ["ok", "fail", "ok"]
    assert request_id(first) not in ids
    assert request_id(second) != request_id(third)
    for request in rig.host.requests:
        assert request.received_ms >= due_ms(request)


async def test_a_replacement_due_earlier_is_delivered_at_its_own_due(rig: Rig) -> None:
    # The first schedule's timer waits in its start delay; the replacement must not wait for it.
    first = rig.commit(1, schedule_set("grace", {"after": "PT20S"}))
    second = rig.commit(2, schedule_set("grace", {"after": "PT0.5S"}))
    async with rig.worker():
        await rig.timers.apply(first)
        await rig.timers.apply(second)
        due = second["createTime"] + 500
        await rig.host.wait_for(lambda host: host.requests, timeout=4)
        state = await rig.result("grace", within=3)
    assert state.status is Status.DELIVERED
    (request,) = rig.host.requests
    assert request.request_id == request_id(second)
    assert due <= request.received_ms <= due + 2000


async def test_a_rejection_is_final_after_one_request(rig: Rig) -> None:
    rig.host.behave("reject")
    commit = rig.commit(1, schedule_set("grace", {"after": "PT0.3S"}))
    async with rig.worker():
        await rig.timers.apply(commit)
        state = await rig.result("grace")
        await quiescent(rig.handle("grace"))
    assert state.status is Status.REJECTED
    assert "IllegalState" in state.last_outcome
    assert [r.behaviour for r in rig.host.requests] == ["reject"]
    shown = await rig.timers.show(rig.workflow_id("grace"))
    assert shown.status == "Rejected"
    assert shown.state is not None and shown.state.status is Status.REJECTED
    found = await rig.listed(lambda found: len(found) == 1, status="Rejected")
    assert found[0].workflow_id == rig.workflow_id("grace")


async def test_failures_park_after_max_attempts_then_retry_delivers_same_request(
    rig: Rig,
) -> None:
    rig.host.behave("fail")
    commit = rig.commit(1, schedule_set("grace", {"after": "PT0.3S"}))
    workflow_id = rig.workflow_id("grace")
    async with rig.worker():
        await rig.timers.apply(commit)
        parked = await rig.listed(lambda found: len(found) == 1, status="Parked")
        assert parked[0].workflow_id == workflow_id
        assert parked[0].running
        assert len(rig.host.requests) == MAX_ATTEMPTS
        shown = await rig.timers.show(workflow_id)
        assert shown.status == "Parked"
        assert shown.state is not None and "500" in shown.state.parked_error
        await quiescent(rig.handle("grace"))  # parked: nothing in flight, no timer to retry
        assert len(rig.host.requests) == MAX_ATTEMPTS
        rig.host.reset()
        rig.host.behave("ok")
        await rig.timers.retry(workflow_id)
        state = await rig.result("grace")
    assert state.status is Status.DELIVERED
    (request,) = rig.host.requests
    assert request.request_id == request_id(commit)
    assert request.behaviour == "ok"
    assert (await rig.timers.show(workflow_id)).status == "Delivered"
    await rig.listed(lambda found: len(found) == 1, status="Delivered")
    await rig.listed(lambda found: found == [], status="Parked")


async def test_a_duplicate_answer_counts_as_delivered(rig: Rig) -> None:
    rig.host.behave("duplicate")
    commit = rig.commit(1, schedule_set("grace", {"after": "PT0.3S"}))
    async with rig.worker():
        await rig.timers.apply(commit)
        state = await rig.result("grace")
    assert state.status is Status.DELIVERED
    assert state.delivered == 1
    assert [r.behaviour for r in rig.host.requests] == ["duplicate"]
    assert (await rig.timers.show(rig.workflow_id("grace"))).status == "Delivered"


# --- cancelling -------------------------------------------------------------------------------


async def test_deleting_the_aggregate_cancels_all_its_pending_timers(rig: Rig) -> None:
    other = Rig(rig.client, rig.host, rig.timers, rig.task_queue, uuid.uuid4().hex)
    async with rig.worker():
        await rig.timers.apply(
            rig.commit(
                1,
                schedule_set("grace", {"after": "PT1H"}),
                schedule_set("remind", {"after": "PT2H"}),
            )
        )
        await other.timers.apply(other.commit(1, schedule_set("grace", {"after": "PT2S"})))
        # The deletion finds the pending timers through visibility: wait until it shows them.
        await rig.listed(lambda found: len(found) == 2, running=True)
        applied = await rig.timers.apply(rig.commit(2, {"name": "order.Deleted"}, DELETED))
        assert sorted((a.workflow_id, a.kind, a.outcome) for a in applied) == [
            (rig.workflow_id("grace"), "delete", "handed-over"),
            (rig.workflow_id("remind"), "delete", "handed-over"),
        ]
        # Both end now, not when they would have been due.
        grace = await rig.result("grace", within=3)
        remind = await rig.result("remind", within=3)
        # Another aggregate's timer is not touched.
        kept = await other.result("grace", within=10)
    assert grace.status is Status.CANCELLED and remind.status is Status.CANCELLED
    assert grace.last_outcome == "cancelled by the aggregate's deletion (version 2)"
    assert kept.status is Status.DELIVERED
    assert [r.aggregate_id for r in rig.host.requests] == [other.aggregate_id]
    gone = await rig.listed(lambda found: len(found) == 2, status="Cancelled")
    assert {i.workflow_id for i in gone} == {rig.workflow_id("grace"), rig.workflow_id("remind")}


async def test_a_set_and_a_delete_in_one_commit_cancel_at_once(rig: Rig) -> None:
    """The commit is folded first: the set it deletes is never started."""
    async with rig.worker():
        applied = await rig.timers.apply(
            rig.commit(1, schedule_set("grace", {"after": "PT1H"}), DELETED)
        )
        assert [(a.kind, a.outcome) for a in applied] == [
            ("set", "ignored"),
            ("delete", "ignored"),
        ]
        assert applied[0].reason.startswith("superseded in this batch by the aggregate's deletion")
        assert applied[1].reason == "no timer of this key was running"
    with pytest.raises(RPCError) as raised:  # no timer was started, so none is billed
        await rig.handle("grace").describe()
    assert raised.value.status == RPCStatusCode.NOT_FOUND
    assert rig.host.requests == []


async def test_cancel_by_key(rig: Rig) -> None:
    async with rig.worker():
        await rig.timers.apply(rig.commit(1, schedule_set("grace", {"after": "PT1H"})))
        await rig.timers.apply(rig.commit(2, cancelled("grace")))
        state = await rig.result("grace", within=3)
    assert state.status is Status.CANCELLED
    assert state.last_outcome == "cancelled by key (version 2)"
    assert rig.host.requests == []
    assert (await rig.timers.show(rig.workflow_id("grace"))).status == "Cancelled"
    await rig.listed(lambda found: len(found) == 1, status="Cancelled")


async def test_cancel_by_key_just_before_due_sends_nothing(rig: Rig) -> None:
    async with rig.worker():
        await rig.timers.apply(rig.commit(1, schedule_set("grace", {"after": "PT1S"})))
        await rig.timers.apply(rig.commit(2, cancelled("grace")))
        state = await rig.result("grace", within=5)
        await quiescent(rig.handle("grace"))
    assert state.status is Status.CANCELLED
    assert rig.host.requests == []


async def test_cancel_by_operator(rig: Rig) -> None:
    async with rig.worker():
        await rig.timers.apply(rig.commit(1, schedule_set("grace", {"after": "PT1H"})))
        async with asyncio.timeout(3):
            state = await rig.timers.cancel(rig.workflow_id("grace"))
        assert state.status is Status.CANCELLED
        final = await rig.result("grace", within=3)
    assert final.status is Status.CANCELLED
    assert final.last_outcome == "cancelled by operator"
    assert rig.host.requests == []
    await rig.listed(lambda found: len(found) == 1, status="Cancelled")


async def test_show_answers_at_once_while_a_timer_waits_to_be_due(rig: Rig) -> None:
    async with rig.worker():
        await rig.timers.apply(rig.commit(1, schedule_set("grace", {"after": "PT10S"})))
        async with asyncio.timeout(9):  # a guard against a hang, not the check
            info = await rig.timers.show(rig.workflow_id("grace"))
        assert info.status == "Scheduled" and info.running
        assert info.state is not None and info.state.status is Status.SCHEDULED
        assert info.due is not None and datetime.now(UTC) < info.due, "answered before it was due"
        assert rig.host.requests == [], "from the waiting timer, not after it delivered"
        await rig.timers.cancel(rig.workflow_id("grace"))


# --- recurring --------------------------------------------------------------------------------


@pytest.mark.parametrize("misfire", ["CATCH_UP", None])
async def test_a_cron_timer_delivers_each_slot_in_order_once_never_early(
    rig: Rig, misfire: str | None
) -> None:
    rule = {"cron": "* * * * * *"}
    if misfire is not None:
        rule |= {"zone": "UTC", "misfire": misfire}
    commit = rig.commit(1, schedule_set("tick", rule))
    async with rig.worker():
        await rig.timers.apply(commit)
        await rig.host.wait_for(lambda host: len(host.requests) >= 4, timeout=15)
        state = await rig.timers.cancel(rig.workflow_id("tick"))
        final = await rig.result("tick")
        settled = len(rig.host.requests)
        await quiescent(rig.handle("tick"))  # cancelled and closed: no more slots
    assert state.status is Status.CANCELLED and final.status is Status.CANCELLED
    requests = rig.host.requests
    assert len(requests) == settled
    slots = [int(r.message_header("schedule_slot") or 0) for r in requests]
    skipped = [int(r.message_header("schedule_skipped") or 0) for r in requests]
    if misfire == "CATCH_UP":
        assert slots == list(range(1, len(slots) + 1))
        assert set(skipped) == {0}
    else:
        # COALESCE (the default) may fold slots missed by a late wake-up into the next one,
        # counted in `skipped`; none is lost, none sent twice.
        assert [s - k for s, k in zip(slots, skipped, strict=True)] == [
            1,
            *(s + 1 for s in slots[:-1]),
        ]
        assert slots[:3] == [1, 2, 3], "a one-second cron fell behind on an idle server"
    assert [r.request_id for r in requests] == [request_id(commit, slot=s) for s in slots]
    assert all(r.behaviour == "ok" for r in requests)
    dues = [due_ms(r) for r in requests]
    first_due = (commit["createTime"] // 1000 + 1) * 1000
    assert dues == [first_due + 1000 * (s - 1) for s in slots]
    for request in requests:
        assert request.received_ms >= due_ms(request)


# --- cost -------------------------------------------------------------------------------------


async def billable_actions(handle: WorkflowHandle[Any, Any]) -> dict[str, int]:
    """Temporal Cloud's billable actions in a workflow's history, by kind."""
    counts = dict.fromkeys(
        ("started", "activities", "retries", "timers", "upserts", "signals", "updates"), 0
    )
    async for event in handle.fetch_history_events():
        kind = event.event_type
        if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            counts["started"] += 1
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            counts["activities"] += 1
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            counts["retries"] += event.activity_task_started_event_attributes.attempt - 1
        elif kind == EventType.EVENT_TYPE_TIMER_STARTED:
            counts["timers"] += 1
        elif kind == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
            counts["upserts"] += 1
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            counts["signals"] += 1
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            counts["updates"] += 1
    counts["total"] = sum(counts.values())
    return counts


async def test_cost_in_billable_actions(
    rig: Rig, record_property: Callable[[str, object], None]
) -> None:
    measured: dict[str, dict[str, int]] = {}
    async with rig.worker():
        await rig.timers.apply(rig.commit(1, schedule_set("one-shot", {"after": "PT0.5S"})))
        await rig.result("one-shot")
        measured["one-shot"] = await billable_actions(rig.handle("one-shot"))

        await rig.timers.apply(rig.commit(1, schedule_set("replace", {"after": "PT2S"})))
        await rig.timers.apply(rig.commit(2, schedule_set("replace", {"after": "PT0.5S"})))
        await rig.result("replace")
        measured["replace"] = await billable_actions(rig.handle("replace"))

        await rig.timers.apply(rig.commit(1, schedule_set("cancel", {"after": "PT2S"})))
        await rig.timers.apply(rig.commit(2, cancelled("cancel")))
        await rig.result("cancel")
        measured["cancel"] = await billable_actions(rig.handle("cancel"))

        rule = {"cron": "* * * * * *", "zone": "UTC", "misfire": "CATCH_UP"}
        await rig.timers.apply(rig.commit(1, schedule_set("cron", rule)))
        await rig.host.wait_for(
            lambda host: (
                sum(r.message_header("schedule_key") == "cron" for r in host.requests) >= 4
            ),
            timeout=15,
        )
        # Measured before the operator's cancel (an update: one more action).
        running = await billable_actions(rig.handle("cron"))
        await rig.timers.cancel(rig.workflow_id("cron"))
        await rig.result("cron")
    slots = running["activities"]
    measured["cron, before cancel"] = running
    measured["cron per slot"] = {
        "slots": slots,
        "total_per_slot_x100": running["total"] * 100 // slots,
        "timers_per_slot_x100": running["timers"] * 100 // slots,
        "upserts_per_slot_x100": running["upserts"] * 100 // slots,
    }
    for name, counts in measured.items():
        print(f"\nbillable actions, {name}: {counts}")
        record_property(f"actions {name}", counts)
    one_shot = measured["one-shot"]
    assert one_shot["total"] <= 2, one_shot
    assert (one_shot["started"], one_shot["activities"], one_shot["retries"]) == (1, 1, 0)
    assert slots >= 4
    # A cron slot costs its sleep and its delivery, and at most one search-attribute upsert.
    assert running["total"] <= 1 + 3 * slots + 1, running


# --- hardening: ids, answers, deletions, in-flight deliveries ---------------------------------


async def test_tenants_whose_ids_join_alike_never_share_a_timer(rig: Rig) -> None:
    """Tenant t1 + aggregate x:y and tenant t1:x + aggregate y, key k: once one workflow."""
    suffix = uuid.uuid4().hex[:6]

    def commit_of(tenant: str, aggregate_id: str, reason: str) -> dict[str, Any]:
        data = rig.commit(5, schedule_set("k", {"after": "PT1S"}))
        data["tenantId"], data["aggregateId"] = tenant, aggregate_id
        data["body"][0]["body"]["command"]["body"] = {"reason": reason}
        return data

    first = commit_of("t1", f"x{suffix}:y", "first")
    second = commit_of(f"t1:x{suffix}", "y", "second")
    async with rig.worker():
        (a,) = await rig.timers.apply(first)
        (b,) = await rig.timers.apply(second)
        assert (a.outcome, b.outcome) == ("started", "started")
        assert a.workflow_id != b.workflow_id
        await rig.host.wait_for(lambda host: len(host.delivered()) >= 2, timeout=15)
        for workflow_id in (a.workflow_id, b.workflow_id):
            await quiescent(rig.client.get_workflow_handle(workflow_id))
    got = sorted(
        (r.header("command-tenant-id"), r.aggregate_id, r.body["reason"])
        for r in rig.host.requests
    )
    assert got == [
        ("t1", f"x{suffix}:y", "first"),
        (f"t1:x{suffix}", "y", "second"),
    ]
    shown = await rig.timers.show(a.workflow_id)
    assert (shown.tenant, shown.aggregate_id) == ("t1", f"x{suffix}:y")


async def test_a_set_of_the_same_version_with_another_rule_is_ignored_and_says_why(
    rig: Rig,
) -> None:
    async with rig.worker():
        await rig.timers.apply(rig.commit(3, schedule_set("grace", {"after": "PT1H"})))
        (same,) = await rig.timers.apply(rig.commit(3, schedule_set("grace", {"after": "PT1S"})))
        assert same.outcome == "handed-over"
        said = await told(rig.timers, same.workflow_id, 3)
        assert said.endswith(": ignored: stale: version 3 ≤ applied 3")
        # Proven from its history, not slept on: the timer never waited for anything shorter
        # than the hour of the rule in force (the ignored PT1S would be a 1 s timer).
        waits = [
            e.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta()
            async for e in rig.handle("grace").fetch_history_events()
            if e.HasField("timer_started_event_attributes")
        ]
        assert waits and min(waits) > timedelta(minutes=30), waits
        await rig.timers.cancel(rig.workflow_id("grace"))
    assert rig.host.requests == []


async def test_a_set_older_than_the_deletion_arriving_after_it_changes_nothing(rig: Rig) -> None:
    """Reordered: the deletion (version 5) is handed over before the set (version 4)."""
    older = rig.commit(4, schedule_set("grace", {"after": "PT0.5S"}))
    deletion = rig.commit(5, DELETED)
    async with rig.worker():
        assert await rig.timers.apply(deletion) == []
        (late,) = await rig.timers.apply(older)
        assert late.outcome == "ignored"
        assert late.reason == f"eshop-order.order {rig.aggregate_id} was deleted at version 5"
        with pytest.raises(RPCError) as absent:  # ignored: no timer was started to send it
            await rig.handle("grace").describe()
        assert absent.value.status == RPCStatusCode.NOT_FOUND
        assert rig.host.requests == []
        recovery = rig.commit(6, schedule_set("grace", {"after": "PT0.2S"}))
        recovered = await rig.timers.apply(recovery)
        assert [a.outcome for a in recovered] == ["started"], "a recovered aggregate schedules"
        await rig.host.wait_for(lambda host: len(host.requests) == 1, timeout=10)
    assert [r.message_header("upstream_id") for r in rig.host.requests] == [recovery["id"]]


async def test_a_deletion_after_a_recovery_raises_the_record_with_no_worker_running(
    rig: Rig,
) -> None:
    """Deleted, recovered, deleted again: the record holds the later deletion, an older one
    handed over late lowers nothing, and none of it waits for a worker (none runs)."""
    timers = TimerClient(rig.client, task_queue=f"{rig.task_queue}-idle")
    owner = Commit.parse(rig.commit(1, DELETED)).aggregate
    assert await timers.apply(rig.commit(2, DELETED)) == []
    (recovered,) = await timers.apply(rig.commit(3, schedule_set("grace", {"after": "PT1H"})))
    assert recovered.outcome == "started"
    await asyncio.wait_for(timers.apply(rig.commit(4, DELETED)), timeout=30)
    assert await timers.deletions.deleted_at(owner) == (4, 0)
    await timers.apply(rig.commit(2, DELETED))
    assert await timers.deletions.deleted_at(owner) == (4, 0)
    (late,) = await timers.apply(rig.commit(3, schedule_set("remind", {"after": "PT1H"})))
    assert late.reason == f"eshop-order.order {rig.aggregate_id} was deleted at version 4"
    await rig.client.get_workflow_handle(rig.workflow_id("grace")).terminate("test over")


class _LaggingVisibility(TimerClient):
    """Ingest whose visibility listing shows nothing yet, as under load: the deletion must
    hold without it."""

    def __init__(self, timers: TimerClient) -> None:
        super().__init__(timers.client, task_queue=timers.task_queue, delivery=timers.delivery)

    async def _running_keys(self, owner: Any) -> list[str]:
        return []


async def test_a_deletion_that_visibility_lags_behind_still_cancels_every_timer(rig: Rig) -> None:
    """A one-shot and a cron key set just before the deletion, not yet visible: neither sends."""
    lagging = _LaggingVisibility(rig.timers)
    async with rig.worker():
        await rig.timers.apply(
            rig.commit(
                1,
                schedule_set("grace", {"after": "PT1S"}),
                schedule_set("tick", {"cron": "* * * * * *"}),
            )
        )
        applied = await lagging.apply(rig.commit(2, DELETED))
        assert applied == [], "visibility showed nothing to cancel"
        grace = await rig.result("grace", within=10)
        tick = await rig.result("tick", within=10)
        for key in ("grace", "tick"):
            await quiescent(rig.handle(key))
    assert rig.host.requests == []
    for state in (grace, tick):
        assert state.status is Status.CANCELLED
        assert state.last_outcome == (
            f"slot 1 not sent: eshop-order.order {rig.aggregate_id} was deleted at version 2"
        )
    await rig.listed(lambda found: len(found) == 2, status="Cancelled")


async def test_a_cancel_that_meets_a_delivery_in_flight_is_handed_over_and_counts_it(
    rig: Rig,
) -> None:
    """The host is slow to answer slot 1: the cancel is handed over at once, the attempt in
    flight is not recalled, none follows it, and the timer says it was delivered."""
    commit = rig.commit(1, schedule_set("grace", {"after": "PT0.3S"}))
    rig.host.behave("hang", request_id=request_id(commit), delay=1.5)
    async with rig.worker():
        await rig.timers.apply(commit)
        await rig.host.wait_for(lambda host: host.requests, timeout=10)
        (answer,) = await rig.timers.apply(rig.commit(2, cancelled("grace")))
        state = await rig.result("grace", within=5)
    assert len(rig.host.requests) == 1, "no attempt after the cancel"
    assert answer.outcome == "handed-over"
    assert state.last_change.startswith("cancel of version 2: cancelled: cancelled ")
    assert state.last_outcome == f"slot 1 of {commit['id']}:e0 was in flight and delivered"
    assert state.status is Status.CANCELLED
    assert state.delivered == 1


async def test_a_deletion_and_a_completion_together_keep_the_delivery(rig: Rig) -> None:
    """Each slot of a cron key is slow; the deletion lands while one is in flight."""
    commit = rig.commit(1, schedule_set("tick", {"cron": "* * * * * *"}))
    rig.host.behave("hang", delay=0.4)
    async with rig.worker():
        await rig.timers.apply(commit)
        await rig.host.wait_for(lambda host: len(host.requests) >= 3, timeout=15)
        await rig.timers.apply(rig.commit(2, DELETED))
        state = await rig.result("tick", within=5)
        await quiescent(rig.handle("tick"))
    decided = [r for r in rig.host.requests if r.behaviour in ("ok", "hang")]
    assert state.delivered == len(decided), "every slot the host decided is counted"
    assert state.status is Status.CANCELLED


# --- one status vocabulary ----------------------------------------------------------------


async def test_a_temporal_cancel_request_is_an_operators_cancel(rig: Rig) -> None:
    """`temporal workflow cancel` (or the Web UI's Request Cancellation) ends it Cancelled."""
    async with rig.worker():
        await rig.timers.apply(rig.commit(1, schedule_set("grace", {"after": "PT1H"})))
        await rig.handle("grace").cancel()
        state = await rig.result("grace", within=5)
        description = await rig.handle("grace").describe()
    assert state.status is Status.CANCELLED
    assert state.last_outcome == "cancelled by a Temporal cancel request"
    assert description.status is not None and description.status.name == "COMPLETED"
    assert (await rig.timers.show(rig.workflow_id("grace"))).status == "Cancelled"
    for spelling in ("Cancelled", "Canceled", "cancelled"):
        await rig.listed(lambda found: len(found) == 1, status=spelling)
    assert rig.host.requests == []


async def test_a_terminated_timer_is_listed_and_found_as_terminated(rig: Rig) -> None:
    async with rig.worker():
        await rig.timers.apply(rig.commit(1, schedule_set("grace", {"after": "PT1H"})))
        await rig.handle("grace").terminate("by hand")
    assert (await rig.timers.show(rig.workflow_id("grace"))).status == "Terminated"
    (found,) = await rig.listed(lambda found: len(found) == 1, status="terminated")
    assert found.status == "Terminated" and not found.running
    await rig.listed(lambda found: found == [], status="Scheduled")


async def test_pending_timers_show_scheduled_then_delivering_and_never_a_stale_status(
    rig: Rig,
) -> None:
    """No `WowStatus` is written on the way: a delivered timer is Completed with none."""
    commit = rig.commit(1, schedule_set("grace", {"after": "PT1S"}))
    rig.host.behave("hang", request_id=request_id(commit), delay=2)
    async with rig.worker():
        await rig.timers.apply(commit)
        (scheduled,) = await rig.listed(lambda found: len(found) == 1, status="Scheduled")
        assert scheduled.status == "Scheduled"
        await rig.host.wait_for(lambda host: host.requests, timeout=10)
        assert (await rig.timers.show(rig.workflow_id("grace"))).status == "Delivering"
        await rig.listed(lambda found: len(found) == 1, status="Delivering")
        await rig.result("grace", within=10)
    description = await rig.handle("grace").describe()
    assert description.typed_search_attributes.get(SA_STATUS) is None
    (delivered,) = await rig.listed(lambda found: len(found) == 1, status="Delivered")
    assert delivered.status == "Delivered"


async def test_with_no_worker_running_a_change_is_handed_over_and_applied_once_one_runs(
    rig: Rig,
) -> None:
    """Ingest never waits for a worker: the change is a signal the server keeps."""
    timers = TimerClient(
        rig.client,
        task_queue=rig.task_queue,
        delivery=rig.timers.delivery,
        answer_timeout=timedelta(hours=1),  # were anything to wait for a worker, it would hang
    )
    first = rig.commit(1, schedule_set("grace", {"after": "PT1H"}))
    second = rig.commit(2, schedule_set("grace", {"after": "PT1S"}))
    await timers.apply(first)
    (answer,) = await asyncio.wait_for(timers.apply(second), timeout=30)
    assert answer.outcome == "handed-over"
    async with rig.worker():
        state = await rig.result("grace", within=15)
    assert state.status is Status.DELIVERED
    assert state.last_change.startswith(f"set of version 2 ({second['id']}:e0): replaced: ")
    assert [r.request_id for r in rig.host.requests] == [request_id(second)]


async def test_with_no_worker_running_an_operators_cancel_says_so_and_still_happens(
    rig: Rig,
) -> None:
    timers = TimerClient(
        rig.client, task_queue=rig.task_queue, answer_timeout=timedelta(seconds=1)
    )
    await timers.apply(rig.commit(1, schedule_set("grace", {"after": "PT2S"})))
    with pytest.raises(TimerError, match=r"no worker answered within 1s .*cancellation requested"):
        await timers.cancel(rig.workflow_id("grace"))
    shown = await timers.show(rig.workflow_id("grace"))
    assert shown.waiting == ["cancel requested by an operator"]
    await asyncio.sleep(2)  # real time: it comes due with the cancel waiting, and still ends so
    async with rig.worker():
        state = await rig.result("grace", within=15)
    assert state.status is Status.CANCELLED
    assert rig.host.requests == []


async def test_a_timer_whose_rule_never_matches_ends_never_due_in_its_state_and_listing(
    rig: Rig,
) -> None:
    """Started before the edge refused such rules: not Delivered with nothing delivered while
    its state says Scheduled, but NeverDue in the state, `WowStatus`, `show` and `list`."""
    owner = AggregateRef(
        context_name=CONTEXT, aggregate_name=AGGREGATE, tenant_id=TENANT,
        aggregate_id=rig.aggregate_id,
    )
    never = ScheduleRule.model_validate({"cron": "0 0 0 30 2 *"})  # as an old input reads it
    spec = TimerSpec(
        timer="c1:e0", key="grace", owner=owner, target=owner, rule=never,
        command=ScheduledCommand(type="eshop.order.CancelOrder", body={}),
        scope=Scope(tenant_id=TENANT), upstream_id="c1", first_due=None,
    )
    state = core.initial(TimerChange(kind="set", version=1, spec=spec))
    async with rig.worker():
        await rig.client.start_workflow(
            TIMER_WORKFLOW,
            TimerInput(state=state, delivery=rig.timers.delivery),
            id=rig.workflow_id("grace"),
            task_queue=rig.task_queue,
            search_attributes=initial_search_attributes(owner, "grace", state),
        )
        ended = await rig.result("grace")
    assert ended.status is Status.NEVER_DUE and ended.delivered == 0
    assert (await rig.handle("grace").describe()).typed_search_attributes.get(SA_STATUS) == (
        "NeverDue"
    )
    shown = await rig.timers.show(rig.workflow_id("grace"))
    assert shown.status == "NeverDue" and shown.state is not None
    assert shown.state.status is Status.NEVER_DUE
    (listed,) = await rig.listed(lambda found: len(found) == 1, status="NeverDue")
    assert listed.status == "NeverDue"
    await rig.listed(lambda found: found == [], status="Delivered")
