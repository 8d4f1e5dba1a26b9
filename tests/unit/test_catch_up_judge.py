"""`bench.soak --catch-up`'s oracle (`judge_catch_up`, pure): a set due during the outage that
the log stopped before its due time is a victim, never to be delivered; one the log changed only
once it was due is owed, delivered once; the rest as before (in force: once; superseded: never)."""

from __future__ import annotations

from typing import Any

import pytest

from bench.soak import CatchUpReport, Change, _catch_up_commit, judge_catch_up, logged_sets

pytestmark = pytest.mark.unit

START, END = 1_800_000_000.0, 1_800_000_060.0
"""The outage, epoch seconds."""
OUTAGE_MS = (int(START * 1000), int(END * 1000))
BEFORE = START - 5


def history(aggregate_id: str, *commits: tuple[float, list[Change]]) -> list[dict[str, Any]]:
    """An aggregate's commits at those moments (epoch s), versions from 1."""
    return [
        _catch_up_commit(aggregate_id, version, at, changes)
        for version, (at, changes) in enumerate(commits, start=1)
    ]


def due_during(aggregate_id: str, changed_at: float, kind: str = "cancel") -> list[dict[str, Any]]:
    """Set before the outage, due 20 s into it; `kind` committed at `changed_at`."""
    set_first = (BEFORE, [("set", START + 20 - BEFORE)])
    return history(aggregate_id, set_first, (changed_at, [(kind, 90.0)]))


def row(request_id: str, code: str, due_s: float, arrived_s: float | None = None) -> dict[str, Any]:
    """A ledger row as `bench.soak.ledger` writes it."""
    arrived = due_s + 0.1 if arrived_s is None else arrived_s
    return {
        "requestId": request_id,
        "arrivedMs": int(arrived * 1000),
        "code": code,
        "dueMs": int(due_s * 1000),
    }


def judged(log: list[dict[str, Any]], ledger: list[dict[str, Any]]) -> CatchUpReport:
    report = CatchUpReport(aggregates=0, commits=len(log), outage_s=60)
    judge_catch_up(report, log, ledger, OUTAGE_MS)
    return report


@pytest.mark.parametrize("kind", ["cancel", "set", "delete"])
def test_a_victim_delivered_breaks_the_new_verdict_and_the_old(kind: str) -> None:
    log = due_during("v", START + 10, kind)
    report = judged(log, [row("v-v1:e0#1", "Ok", START + 20)])
    assert (report.victims, report.delivered_though_stopped_before_due) == (1, 1)
    assert report.delivered_though_changed == 1 and not report.ok
    assert report.problems[0] == "delivered though the log stopped before it was due: v-v1:e0"


def test_a_victim_refused_and_refused_again_is_not_delivered() -> None:
    """The ledger reads a refusal answered again as a duplicate: only an Ok delivers."""
    log = due_during("v", START + 10)
    refused = [
        row("v-v1:e0#1", "IllegalState", START + 20),
        row("v-v1:e0#1", "DuplicateRequestId", START + 20),
    ]
    report = judged(log, refused)
    assert (report.victims, report.delivered_though_stopped_before_due, report.ok) == (1, 0, True)


def test_an_owed_slot_is_delivered_once_or_counted_lost() -> None:
    log = due_during("o", START + 20)  # the cancel committed at the due time: owed
    delivered = judged(log, [row("o-v1:e0#1", "Ok", START + 20)])
    assert (delivered.owed, delivered.owed_delivered_once, delivered.victims) == (1, 1, 0)
    assert delivered.ok and delivered.superseded == 0
    lost = judged(log, [])
    assert (lost.owed_lost, lost.ok) == (1, False)


def test_a_replacing_set_is_in_force_and_a_backlog_set_changed_after_due_is_superseded() -> None:
    """A v2 set committed during the outage, due in it, cancelled after that: handed over with
    its cancel (folded away), so superseded, never owed; the owed set's replacement is in
    force."""
    backlog = history(
        "b",
        (BEFORE, [("set", 120.0)]),
        (START + 1, [("set", 4.0)]),
        (START + 30, [("cancel", 0.0)]),
    )
    owed = due_during("o", START + 25, "set")
    ledger = [row("o-v1:e0#1", "Ok", START + 20), row("o-v2:e0#1", "Ok", START + 25 + 90)]
    report = judged(backlog + owed, ledger)
    assert (report.superseded, report.victims, report.owed, report.in_force) == (2, 0, 1, 1)
    assert (report.delivered_once, report.owed_delivered_once, report.ok) == (1, 1, True)


def test_a_set_is_stopped_by_the_first_later_change_of_its_key_or_deletion() -> None:
    log = history("s", (BEFORE, [("set-cancel", 30.0)]), (START + 40, [("delete", 0.0)]))
    (only,) = logged_sets(log)
    assert (only.timer, only.stopped_ms, only.due_ms) == (
        "s-v1:e0",
        int(BEFORE * 1000),
        1_800_000_025_000,
    )
