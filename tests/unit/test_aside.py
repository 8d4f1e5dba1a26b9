"""What the relay sets aside (`host.aside`): each aggregate's commits kept in log order behind
the ones that failed, retried with backoff, and the position the relay may record held back to
just before the earliest of them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers.builders import cancelling
from wow_temporal.host.aside import BACKOFF_S, Aside
from wow_temporal.model import AggregateRef

pytestmark = pytest.mark.unit


def ref(aggregate_id: str) -> AggregateRef:
    return AggregateRef(
        context_name="shop", aggregate_name="order", tenant_id="t", aggregate_id=aggregate_id
    )


def test_an_aggregate_set_aside_is_retried_with_backoff_and_released() -> None:
    aside = Aside()
    aside.put(ref("a"), [(7, cancelling("a", 1))], "boom", now=100.0)
    assert aside.holds(ref("a")) and not aside.holds(ref("b"))
    assert aside.due(100.0 + BACKOFF_S[0] - 0.01) == []
    assert aside.due(100.0 + BACKOFF_S[0]) == [(ref("a"), [cancelling("a", 1)])]
    aside.put(ref("a"), [], "boom again", now=101.0)  # its retry failed
    assert aside.due(101.0 + BACKOFF_S[1] - 0.01) == []
    (shown,) = aside.view()
    assert (shown.reason, shown.attempts, shown.since, shown.commits) == ("boom again", 2, 100.0, 1)
    assert aside.release(ref("a"), 1) == (2, 100.0)
    assert len(aside) == 0 and aside.holds_back() is None


def test_later_commits_wait_behind_and_the_position_is_held_back() -> None:
    aside = Aside()
    aside.put(ref("a"), [(7, cancelling("a", 1))], "boom", now=0.0)
    aside.put(ref("b"), [(5, cancelling("b", 1))], "boom", now=0.0)
    read_again = [(9, cancelling("a", 2)), (7, cancelling("a", 1))]
    aside.queue(ref("a"), read_again)  # a commit read again is kept once
    assert aside.holds_back() == 5
    assert dict(aside.due(1e9))[ref("a")] == [cancelling("a", 1), cancelling("a", 2)]
    aside.release(ref("b"), 1)
    assert aside.holds_back() == 7


def test_commits_queued_while_a_retry_runs_stay_and_are_tried_at_once() -> None:
    aside = Aside()
    aside.put(ref("a"), [(7, cancelling("a", 1))], "boom", now=0.0)
    (_, handing), = aside.due(1e9)
    aside.queue(ref("a"), [(9, cancelling("a", 2))])  # came while the retry ran
    assert aside.release(ref("a"), len(handing)) is None
    assert aside.due(0.0) == [(ref("a"), [cancelling("a", 2)])] and aside.holds_back() == 9


@given(st.integers(1, 30))
def test_the_backoff_never_shrinks_and_stops_at_its_last(failures: int) -> None:
    aside = Aside()
    waits = []
    now = 0.0
    for _ in range(failures):
        aside.put(ref("a"), [(1, cancelling("a", 1))], "boom", now=now)
        (entry,) = [e for e in aside._entries.values()]
        waits.append(entry.next_try - now)
    assert waits == sorted(waits) and max(waits) <= BACKOFF_S[-1]
