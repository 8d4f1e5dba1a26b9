"""The fold of a batch before ingest touches Temporal (`wow_temporal.timers.fold`): pure, checked
against handing every change over one by one, in the log's order, to the timer core."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from wow_temporal.model import AggregateRef, Commit
from wow_temporal.timers import core
from wow_temporal.timers.changes import AggregateChange, KeyChange, changes_of
from wow_temporal.timers.core import TimerChange, TimerState
from wow_temporal.timers.fold import Horizon, Position, fold

OWNER = AggregateRef(context_name="shop", aggregate_name="order", tenant_id="t", aggregate_id="1")
KEYS = ("a", "b", "c")


def commit(version: int, *events: tuple[str, str]) -> Commit:
    body = []
    for n, (kind, key) in enumerate(events):
        if kind == "set":
            payload = {
                "key": key,
                "rule": {"after": "PT1M"},
                "command": {"type": "shop.Cancel", "body": {}},
            }
            body.append({"id": f"e{n}", "name": "wow.ScheduleSet", "body": payload})
        elif kind == "cancel":
            body.append({"id": f"e{n}", "name": "wow.ScheduleCancelled", "body": {"key": key}})
        else:
            body.append({"id": f"e{n}", "name": "wow.AggregateDeleted", "body": {}})
    return Commit.parse(
        {
            "id": f"c{version}",
            "contextName": OWNER.context_name,
            "aggregateName": OWNER.aggregate_name,
            "tenantId": OWNER.tenant_id,
            "aggregateId": OWNER.aggregate_id,
            "version": version,
            "createTime": int(datetime(2026, 12, 1, tzinfo=UTC).timestamp() * 1000),
            "body": body,
        }
    )


def items_of(commits: list[Commit]) -> list[tuple[Position, KeyChange | AggregateChange]]:
    return [((n, e), item) for n, c in enumerate(commits) for e, item in enumerate(changes_of(c))]


events = st.tuples(st.sampled_from(["set", "set", "cancel", "delete"]), st.sampled_from(KEYS))
batches = st.lists(
    st.tuples(st.integers(1, 12), st.lists(events, min_size=1, max_size=3)),
    max_size=8,
    unique_by=lambda commit: commit[0],  # a version is one commit (the same twice is below)
)


def one_by_one(items: list[tuple[Position, KeyChange | AggregateChange]]) -> dict[str, TimerState]:
    """Each key's state if every change were handed over alone, in the log's order: a set
    older than the latest deletion is ignored (the record), a deletion cancels every key."""
    ordered = sorted(items, key=lambda pair: pair[1].change.order)
    deleted = max(
        (i.change.order for _, i in items if isinstance(i, AggregateChange)), default=None
    )
    states: dict[str, TimerState] = {}
    for _, item in ordered:
        if isinstance(item, AggregateChange):
            for key in KEYS:
                if key in states or any(
                    isinstance(i, KeyChange) and i.key == key for _, i in items
                ):
                    states[key] = core.apply(states.get(key, TimerState()), item.change)
            continue
        if item.change.kind == "set" and deleted is not None and item.change.order < deleted:
            continue
        states[item.key] = core.apply(states.get(item.key, TimerState()), item.change)
    return states


@given(batches)
def test_the_fold_ends_each_key_as_handing_every_change_over_in_order(
    raw: list[tuple[int, list[tuple[str, str]]]],
) -> None:
    items = items_of([commit(version, *evs) for version, evs in raw])
    folded = fold(OWNER, items)
    expected = one_by_one(items)
    got = {step.key: core.apply(TimerState(), step.change) for step in folded.steps}
    for key, state in expected.items():
        if state.spec is None:  # cancelled or deleted: a key never handed over stays empty
            assert key not in got or got[key].spec is None, key
        else:
            assert got[key].spec == state.spec, key


@given(batches)
def test_every_change_is_answered_once_and_no_set_is_started_that_the_batch_changes_later(
    raw: list[tuple[int, list[tuple[str, str]]]],
) -> None:
    items = items_of([commit(version, *evs) for version, evs in raw])
    folded = fold(OWNER, items)
    handed = {step.at for step in folded.steps}
    if folded.deletion is not None:
        handed.add(folded.deletion[0])
    for at, _ in items:
        assert (at in handed) != (at in folded.skipped), at
    for step in folded.steps:
        if step.change.kind != "set":
            continue
        for _, item in items:
            if isinstance(item, AggregateChange) or item.key == step.key:
                assert item.change.order <= step.change.order
    assert [step.at for step in folded.steps] == sorted(step.at for step in folded.steps)


def test_a_set_the_log_changes_later_is_folded_away_but_a_cancel_never_is() -> None:
    page = [commit(3, ("set", "a"), ("set", "b")), commit(4, ("cancel", "c"))]
    later = Horizon()
    later.extend([commit(5, ("cancel", "a")), commit(6, ("set", "c"))])
    folded = fold(OWNER, items_of(page), later)
    steps = [(s.key, s.change.kind, s.stop_only) for s in folded.steps]
    # a's set is never started, but what a ran before stops now (a cancel at its version)
    assert steps == [("a", "cancel", True), ("b", "set", False), ("c", "cancel", False)]
    assert folded.skipped[(0, 0)].startswith("the log changes key a later (version 5)")
    deleted = Horizon()
    deleted.extend([commit(9, ("delete", ""))])
    moot = fold(OWNER, items_of(page), deleted)
    steps = [(s.key, s.change.kind, s.stop_only) for s in moot.steps]
    assert steps == [("a", "cancel", True), ("b", "cancel", True), ("c", "cancel", False)]
    assert "the log deletes" in moot.skipped[(0, 1)]


def test_a_set_after_the_deletion_of_the_batch_is_kept_and_the_rest_cancelled() -> None:
    items = items_of(
        [commit(3, ("set", "a"), ("set", "b")), commit(4, ("delete", "")), commit(5, ("set", "a"))]
    )
    folded = fold(OWNER, items)
    assert folded.deletion is not None and folded.deletion[1].version == 4
    steps = {s.key: s.change for s in folded.steps}
    assert steps["a"].kind == "set" and steps["a"].version == 5
    assert steps["b"] == TimerChange(kind="delete", version=4, index=0)
    assert folded.skipped[(0, 0)].startswith("superseded in this batch by a set of version 5")


def test_the_same_commit_twice_is_handed_over_once() -> None:
    items = items_of([commit(3, ("set", "a")), commit(3, ("set", "a"))])
    folded = fold(OWNER, items)
    assert [s.at for s in folded.steps] == [(0, 0)]
    assert "is in this batch again" in folded.skipped[(1, 0)]


PRIOR = core.apply(
    TimerState(),
    TimerChange(
        kind="set",
        version=0,
        spec=changes_of(commit(99, ("set", "a")))[0].change.spec,  # type: ignore[union-attr]
    ),
)
"""A timer already running an older schedule (version 0) of each key when the batch comes."""


@given(batches, batches)
def test_a_running_older_schedule_stops_as_soon_as_a_batch_changes_its_key(
    raw: list[tuple[int, list[tuple[str, str]]]],
    ahead: list[tuple[int, list[tuple[str, str]]]],
) -> None:
    items = items_of([commit(version, *evs) for version, evs in raw])
    later = Horizon()
    later.extend([commit(version + 12, *evs) for version, evs in ahead])
    folded = fold(OWNER, items, later)
    for key in KEYS:
        state = PRIOR
        steps = [s for s in folded.steps if s.key == key]
        changes = [s.change for s in steps if s.stops] + [s.change for s in steps if not s.stops]
        if not steps and folded.deletion is not None:  # the deletion's pass over running keys
            changes = [folded.deletion[1]]
        for change in changes:
            state = core.apply(state, change)
        touched = any(isinstance(i, AggregateChange) or i.key == key for _, i in items)
        if touched:  # whatever of it the batch hands over or folds away, the prior stops now
            assert state.spec != PRIOR.spec, (key, folded)
        else:
            assert state == PRIOR
