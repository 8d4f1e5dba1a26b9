"""The relay's read-ahead and the stops it hands over early (`wow_temporal.timers.readahead`):
pure, and checked against the real `TimerClient` on a simulated Temporal that handing the
early stops first, then every batch in order, ends each key as handing the batches alone."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers.sim_temporal import SimTemporal
from wow_temporal.model import AggregateRef, Commit
from wow_temporal.timers.changes import KeyChange, changes_of
from wow_temporal.timers.client import TimerClient
from wow_temporal.timers.fold import fold
from wow_temporal.timers.readahead import ReadAhead

AGGREGATES = ("a1", "a2")
KEYS = ("k1", "k2")
START = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def owner(aggregate_id: str) -> AggregateRef:
    return AggregateRef(
        context_name="shop", aggregate_name="order", tenant_id="t", aggregate_id=aggregate_id
    )


def commit(aggregate_id: str, version: int, events: list[tuple[str, str]]) -> Commit:
    body: list[dict[str, Any]] = [{"id": "d", "name": "shop.Touched", "body": {}}]
    for n, (kind, key) in enumerate(events):
        if kind == "set":
            payload = {
                "key": key,
                "rule": {"after": f"PT{60 + n}S"},
                "command": {"type": "shop.Cancel", "body": {}},
            }
            body.append({"id": f"e{n}", "name": "wow.ScheduleSet", "body": payload})
        elif kind == "cancel":
            body.append({"id": f"e{n}", "name": "wow.ScheduleCancelled", "body": {"key": key}})
        else:
            body.append({"id": f"e{n}", "name": "wow.AggregateDeleted", "body": {}})
    return Commit.parse(
        {
            "id": f"{aggregate_id}-v{version}",
            "contextName": "shop",
            "aggregateName": "order",
            "tenantId": "t",
            "aggregateId": aggregate_id,
            "version": version,
            "createTime": int(START.timestamp() * 1000),
            "body": body,
        }
    )


event = st.tuples(st.sampled_from(["set", "set", "cancel", "delete"]), st.sampled_from(KEYS))
raw_logs = st.lists(
    st.tuples(st.sampled_from(AGGREGATES), st.lists(event, min_size=1, max_size=3)),
    min_size=1,
    max_size=14,
)


def log_of(raw: list[tuple[str, list[tuple[str, str]]]]) -> list[tuple[int, Commit]]:
    """The log: each aggregate's commits numbered from version 1, at positions from 1."""
    versions = dict.fromkeys(AGGREGATES, 0)
    log = []
    for position, (aggregate_id, events) in enumerate(raw, start=1):
        versions[aggregate_id] += 1
        log.append((position, commit(aggregate_id, versions[aggregate_id], events)))
    return log


def read(log: list[tuple[int, Commit]], after: int = 0) -> ReadAhead:
    ahead = ReadAhead()
    for position, found in log:
        if position > after:
            ahead.add(position, found)
    return ahead


def stops_of(ahead: ReadAhead) -> list[tuple[AggregateRef, str, str, tuple[int, int]]]:
    """What the early stops' commits hand over, as the fold takes them against the horizon."""
    handed = []
    for admitted in ahead.early_stops():
        found = admitted.commit
        items = [((0, e), item) for e, item in enumerate(admitted.changes)]
        folded = fold(found.aggregate, items, ahead.horizon)
        if folded.deletion is not None:
            handed.append((found.aggregate, "", "delete", folded.deletion[1].order))
        for step in folded.steps:
            kind = "stop" if step.stop_only else step.change.kind
            handed.append((found.aggregate, step.key, kind, step.change.order))
    return handed


# --- which stops -------------------------------------------------------------------------------


def test_a_keys_latest_cancel_and_every_deletion_are_handed_over_early() -> None:
    log = log_of(
        [
            ("a1", [("set", "k1")]),
            ("a1", [("cancel", "k1"), ("set", "k2")]),
            ("a2", [("set", "k1"), ("delete", "")]),
            ("a2", [("set", "k2")]),
        ]
    )
    assert stops_of(read(log)) == [
        (owner("a1"), "k1", "cancel", (2, 0)),
        (owner("a2"), "", "delete", (1, 1)),  # it stops a2's running timers, whatever key
    ]


def test_a_key_last_set_is_never_stopped_the_change_before_it_is() -> None:
    log = log_of(
        [
            ("a1", [("set", "k1")]),
            ("a1", [("cancel", "k1")]),
            ("a1", [("set", "k1")]),
            ("a1", [("set", "k2")]),
            ("a1", [("set", "k2"), ("set", "k2")]),
        ]
    )
    assert stops_of(read(log)) == [
        (owner("a1"), "k1", "cancel", (2, 0)),  # the cancel before k1's last set
        (owner("a1"), "k2", "stop", (5, 0)),  # the set k2's last set replaces: a stop only
    ]


def test_one_set_ahead_and_nothing_before_it_has_no_stop() -> None:
    assert not read(log_of([("a1", [("set", "k1")]), ("a2", [("set", "k2")])])).early_stops()


@given(raw_logs)
def test_each_stop_is_below_its_keys_last_set_and_at_its_last_cancel(
    raw: list[tuple[str, list[tuple[str, str]]]],
) -> None:
    log = log_of(raw)
    last: dict[tuple[AggregateRef, str], tuple[str, tuple[int, int]]] = {}
    deleted: dict[AggregateRef, tuple[int, int]] = {}
    for _, found in log:
        for item in changes_of(found):
            if isinstance(item, KeyChange):
                last[found.aggregate, item.key] = (item.change.kind, item.change.order)
            else:
                deleted[found.aggregate] = item.change.order
    handed = stops_of(read(log))
    for aggregate, key, kind, order in handed:
        if kind == "delete":
            assert deleted[aggregate] == order
            continue
        if kind == "stop" and order == deleted.get(aggregate):
            continue  # a key the deletion after its stop stops (the fold's rule)
        last_kind, last_order = last[aggregate, key]
        if last_kind == "set":
            assert order < last_order
        elif kind == "cancel":
            assert order == last_order
    for aggregate, order in deleted.items():
        assert (aggregate, "", "delete", order) in handed
    for (aggregate, key), (last_kind, last_order) in last.items():
        if last_kind == "cancel" and deleted.get(aggregate, (0, -1)) < last_order:
            assert (aggregate, key, "cancel", last_order) in handed


def test_an_early_stop_keeps_its_own_place_and_nothing_else_of_its_commit() -> None:
    log = log_of([("a1", [("set", "k1"), ("set", "k2"), ("cancel", "k2")])])
    (only,) = read(log).early_stops()
    assert [(getattr(c, "key", ""), c.change.order) for c in only.changes] == [("k2", (1, 2))]
    assert only.commit.id == log[0][1].id


# --- only what is new, and what is let go ------------------------------------------------------


def test_stops_handed_over_are_not_handed_again_only_newer_ones() -> None:
    log = log_of([("a1", [("set", "k1")]), ("a1", [("cancel", "k1")])])
    ahead = read(log)
    assert len(ahead.early_stops()) == 1
    ahead.mark_handed()
    assert not ahead.early_stops()
    ahead.add(3, commit("a1", 3, [("set", "k1")]))
    assert not ahead.early_stops()  # the stop is still the cancel handed over
    ahead.add(4, commit("a1", 4, [("cancel", "k1")]))
    assert stops_of(ahead) == [(owner("a1"), "k1", "cancel", (4, 0))]


def test_what_the_relay_passed_is_let_go() -> None:
    log = log_of([("a1", [("set", "k1")]), ("a1", [("cancel", "k1")]), ("a2", [("delete", "")])])
    ahead = read(log)
    ahead.passed(1)
    assert ahead.held() == 2
    assert stops_of(ahead) == [
        (owner("a1"), "k1", "cancel", (2, 0)),
        (owner("a2"), "", "delete", (1, 0)),
    ]
    ahead.passed(2)
    assert ahead.held() == 1
    assert ahead.horizon.keys == {}
    ahead.passed(3)
    assert (ahead.held(), ahead.horizon.deletions, len(ahead.early_stops())) == (0, {}, 0)


def test_a_stop_its_batch_handed_over_is_dropped_while_the_key_is_still_ahead() -> None:
    log = log_of([("a1", [("set", "k1")]), ("a1", [("set", "k1")]), ("a1", [("set", "k1")])])
    ahead = read(log)
    assert stops_of(ahead) == [(owner("a1"), "k1", "stop", (2, 0))]
    ahead.passed(2)
    assert not ahead.early_stops()
    assert ahead.horizon.keys == {(owner("a1"), "k1"): (3, 0)}


# --- the same end as handing the log in order --------------------------------------------------


def hand_in_batches(
    log: list[tuple[int, Commit]], handed: int, size: int, early: int
) -> dict[str, Any]:
    """Hand the log's first `handed` commits over in order (timers run), then the rest in
    batches of `size` as the relay does, reading the rest ahead; `early` times the stops read
    ahead first. Each timer's and deletion record's end."""
    sim = SimTemporal(START)
    sim.worker_during_rpc = 0.0
    timers = TimerClient(sim, start_delay=False)  # type: ignore[arg-type]
    loop = asyncio.new_event_loop()
    try:
        for _, found in log[:handed]:
            loop.run_until_complete(timers.apply_many([found]))
        sim.run_worker()
        rest = log[handed:]
        ahead = ReadAhead()
        for place in range(0, len(rest), size):
            batch = rest[place : place + size]
            reached = batch[-1][0]
            for position, found in rest[place + size :]:
                if position > ahead.scanned:
                    ahead.add(position, found)
            for _ in range(early if place == 0 else 0):
                stops = ahead.early_stops()
                loop.run_until_complete(timers.apply_many(stops, later=ahead.horizon))
            ahead.mark_handed()
            commits = [found for _, found in batch]
            loop.run_until_complete(timers.apply_many(commits, later=ahead.horizon))
            ahead.passed(reached)
    finally:
        loop.close()
    sim.run_worker()
    ends: dict[str, Any] = {}
    for workflow_id, runs in sim.runs.items():
        state = runs[-1].state
        if runs[-1].kind == "deletion":
            ends[workflow_id] = runs[-1].memo.get("deleted")
        else:
            spec = None if state.spec is None else state.spec.timer
            ends[workflow_id] = (state.applied, state.status, spec, state.next_due)
    return ends


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw_logs, st.data())
def test_stops_handed_over_early_once_or_twice_end_each_key_as_the_batches_alone(
    raw: list[tuple[str, list[tuple[str, str]]]], data: st.DataObject
) -> None:
    log = log_of(raw)
    handed = data.draw(st.integers(0, len(log) - 1), label="handed before the gap")
    size = data.draw(st.integers(1, 4), label="batch")
    in_order = hand_in_batches(log, handed, size, early=0)
    assert hand_in_batches(log, handed, size, early=1) == in_order
    assert hand_in_batches(log, handed, size, early=2) == in_order


def test_a_running_timer_whose_cancel_is_batches_away_is_stopped_before_the_first_batch() -> None:
    """The property's point, once by hand: after the gap, before any batch, it is cancelled."""
    log = log_of([("a1", [("set", "k1")]), ("a2", [("set", "k1")]), ("a1", [("cancel", "k1")])])
    sim = SimTemporal(START)
    timers = TimerClient(sim, start_delay=False)  # type: ignore[arg-type]
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(timers.apply_many([log[0][1]]))
        ahead = read(log, after=2)
        loop.run_until_complete(timers.apply_many(ahead.early_stops(), later=ahead.horizon))
    finally:
        loop.close()
    sim.run_worker()
    (run,) = sim.runs["wow-timer:shop.order:t:a1:k1"]
    assert (run.state.status.value, run.state.applied) == ("Cancelled", (2, 0))
    assert "wow-timer:shop.order:t:a2:k1" not in sim.runs  # its batch comes later


def test_the_deletion_ahead_is_recorded_and_stops_the_aggregates_timers() -> None:
    log = log_of([("a1", [("set", "k1"), ("set", "k2")]), ("a1", [("delete", "")])])
    sim = SimTemporal(START)
    timers = TimerClient(sim, start_delay=False)  # type: ignore[arg-type]
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(timers.apply_many([log[0][1]]))
        ahead = read(log, after=1)
        loop.run_until_complete(timers.apply_many(ahead.early_stops(), later=ahead.horizon))
    finally:
        loop.close()
    sim.run_worker()
    for key in KEYS:
        (run,) = sim.runs[f"wow-timer:shop.order:t:a1:{key}"]
        assert run.state.status.value == "Cancelled", key
    assert sim.runs["wow-deleted:shop.order:t:a1"][-1].memo["deleted"]["version"] == 2

