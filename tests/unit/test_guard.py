"""The target's guard (`host.guard`): a slot is refused exactly when the owner's log, after the
slot's `wow.ScheduleSet`, cancels its key, sets it anew or deletes the owner before the slot
was due."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wow_temporal.delivery import wire_command
from wow_temporal.host.guard import stop_before_due
from wow_temporal.model import AggregateRef, Commit
from wow_temporal.wire import ORIGIN_HEADERS, SlotOrigin, origin_headers

pytestmark = pytest.mark.unit

OWNER = AggregateRef(context_name="shop", aggregate_name="order", tenant_id="t", aggregate_id="1")
T0 = 1_800_000_000_000
SET = ("wow.ScheduleSet", "grace")


def event(index: int, name: str, key: str) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if name == "wow.ScheduleSet":
        body = {
            "key": key,
            "rule": {"after": "PT1M"},
            "command": {"type": "shop.Cancel", "body": {}},
            "target": None,
        }
    elif name == "wow.ScheduleCancelled":
        body = {"key": key}
    return {"id": f"e{index}", "name": name, "body": body}


def commit(version: int, created: int, *events: tuple[str, str]) -> Commit:
    return Commit.parse(
        {
            "id": f"c{version}",
            "contextName": OWNER.context_name,
            "aggregateName": OWNER.aggregate_name,
            "tenantId": OWNER.tenant_id,
            "aggregateId": OWNER.aggregate_id,
            "version": version,
            "createTime": created,
            "body": [event(i, name, key) for i, (name, key) in enumerate(events)],
        }
    )


def origin(version: int = 1, event_id: str = "e0", due: int = T0 + 60_000) -> SlotOrigin:
    return SlotOrigin(
        owner=OWNER, commit_id=f"c{version}", version=version, event_id=event_id, key="grace",
        due=due,
    )


@pytest.mark.parametrize(
    ("later", "kind"),
    [
        (("wow.ScheduleCancelled", "grace"), "cancel"),
        (("wow.ScheduleSet", "grace"), "set"),
        (("wow.AggregateDeleted", ""), "delete"),
    ],
)
def test_a_stop_committed_before_the_due_time_refuses_the_slot(
    later: tuple[str, str], kind: str
) -> None:
    log = [commit(1, T0, SET), commit(2, T0 + 59_999, ("Touched", ""), later)]
    stop = stop_before_due(origin(), log)
    assert stop is not None and stop.kind == kind
    message = stop.describe(origin())
    assert "commit c2 (version 2, event e1)" in message
    assert "before the slot was due" in message


def test_a_stop_committed_at_or_after_the_due_time_does_not() -> None:
    log = [commit(1, T0, SET), commit(2, T0 + 60_000, ("wow.ScheduleCancelled", "grace"))]
    assert stop_before_due(origin(), log) is None


def test_another_keys_changes_do_not_stop_the_slot() -> None:
    log = [
        commit(1, T0, SET),
        commit(2, T0 + 1, ("wow.ScheduleCancelled", "other"), ("wow.ScheduleSet", "other")),
    ]
    assert stop_before_due(origin(), log) is None


def test_a_stop_before_the_set_in_its_own_commit_does_not_stop_it() -> None:
    log = [commit(1, T0, ("wow.ScheduleCancelled", "grace"), SET)]
    assert stop_before_due(origin(event_id="e1"), log) is None
    log = [commit(1, T0, SET, ("wow.ScheduleCancelled", "grace"))]
    assert stop_before_due(origin(event_id="e0"), log) is not None


def test_a_log_whose_commit_at_the_version_is_another_cannot_judge() -> None:
    log = [commit(1, T0, SET), commit(2, T0 + 1, ("wow.ScheduleCancelled", "grace"))]
    assert stop_before_due(origin(event_id="e9"), log) is None
    other = dataclasses.replace(origin(), commit_id="elsewhere")
    assert stop_before_due(other, log) is None


def test_the_origin_travels_in_headers_and_back() -> None:
    headers = {
        **origin_headers(OWNER, 3, "e-7"),
        "upstream_id": "c3",
        "schedule_key": "grace",
        "schedule_due": str(T0),
    }
    assert set(ORIGIN_HEADERS) <= set(headers)
    assert SlotOrigin.from_headers(headers) == SlotOrigin(
        owner=OWNER, commit_id="c3", version=3, event_id="e-7", key="grace", due=T0
    )
    for missing in (*ORIGIN_HEADERS, "upstream_id", "schedule_due"):
        assert SlotOrigin.from_headers({k: v for k, v in headers.items() if k != missing}) is None
    assert SlotOrigin.from_headers({**headers, "schedule_version": "three"}) is None
    assert SlotOrigin.from_headers({**headers, "schedule_version": "0"}) is None


def test_a_delivery_sends_its_sets_origin() -> None:
    from tests.helpers.builders import make_request

    request = make_request().model_copy(update={"owner": OWNER, "set_order": (4, 1)})
    request = request.model_copy(
        update={"schedule": request.schedule.model_copy(update={"timer": "commit-42:e-1"})}
    )
    headers = wire_command(request).headers
    origin_of = SlotOrigin.from_headers(headers)
    assert origin_of is not None
    assert (origin_of.owner, origin_of.version, origin_of.event_id) == (OWNER, 4, "e-1")
    assert origin_of.commit_id == "commit-42"
    before = request.model_copy(update={"set_order": (0, -1)})  # a run from before the guard
    assert SlotOrigin.from_headers(wire_command(before).headers) is None


CHANGES = st.sampled_from(
    [
        ("wow.ScheduleSet", "grace"),
        ("wow.ScheduleCancelled", "grace"),
        ("wow.ScheduleSet", "other"),
        ("wow.ScheduleCancelled", "other"),
        ("wow.AggregateDeleted", ""),
        ("Touched", ""),
    ]
)


@given(
    st.lists(
        st.tuples(st.integers(0, 120_000), st.lists(CHANGES, min_size=1, max_size=3)),
        max_size=6,
    ),
    st.integers(1, 120_000),
)
def test_refused_exactly_when_a_later_stop_of_the_key_came_before_due(
    later: list[tuple[int, list[tuple[str, str]]]], due_after: int
) -> None:
    log = [commit(1, T0, SET)]
    log += [commit(v, T0 + at, *events) for v, (at, events) in enumerate(later, start=2)]
    slot = origin(due=T0 + due_after)
    expected = next(
        (
            (c.version, i)
            for c in log[1:]
            if c.create_time < slot.due
            for i, (name, key) in enumerate((e.name, e.body.get("key", "")) for e in c.body)
            if name == "wow.AggregateDeleted" or (name != "Touched" and key == "grace")
        ),
        None,
    )
    stop = stop_before_due(slot, log)
    found = None if stop is None else (stop.commit.version, int(stop.event_id[1:]))
    assert found == expected
