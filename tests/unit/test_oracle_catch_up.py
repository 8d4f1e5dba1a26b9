"""`bench.soak --catch-up`'s judge (`bench.oracle.catch_up`, pure): a set due during the outage that
the log stopped before its due time is a victim, never to be delivered; one the log changed only
once it was due is owed, delivered once; the rest as before (in force: once; superseded: never)."""

from __future__ import annotations

from typing import Any

import pytest

from bench._soak_catch_up import Change, catch_up_commit
from bench.oracle.catch_up import CatchUp, judge_catch_up, logged_sets
from bench.oracle.ledger import Row

pytestmark = pytest.mark.unit

START, END = 1_800_000_000.0, 1_800_000_060.0
"""The outage, epoch seconds."""
OUTAGE_MS = (int(START * 1000), int(END * 1000))
BEFORE = START - 5


def history(aggregate_id: str, *commits: tuple[float, list[Change]]) -> list[dict[str, Any]]:
    """An aggregate's commits at those moments (epoch s), versions from 1."""
    return [
        catch_up_commit(aggregate_id, version, at, changes)
        for version, (at, changes) in enumerate(commits, start=1)
    ]


def due_during(aggregate_id: str, changed_at: float, kind: str = "cancel") -> list[dict[str, Any]]:
    """Set before the outage, due 20 s into it; `kind` committed at `changed_at`."""
    set_first = (BEFORE, [("set", START + 20 - BEFORE)])
    return history(aggregate_id, set_first, (changed_at, [(kind, 90.0)]))


def row(request_id: str, code: str, due_s: float, arrived_s: float | None = None) -> Row:
    """A ledger row as `bench.oracle.ledger.rows_of` makes it (arrived 0.1 s after due)."""
    arrived = due_s + 0.1 if arrived_s is None else arrived_s
    return Row(request_id, int(arrived * 1000), code, int(due_s * 1000))


def judged(log: list[dict[str, Any]], ledger: list[Row]) -> CatchUp:
    return judge_catch_up(log, ledger, OUTAGE_MS)


def faults(judged: CatchUp) -> list[str]:
    """What the judge's verdicts say must be 0 and is not."""
    return [name for name, count in judged.verdicts().must_be_zero.items() if count]


@pytest.mark.parametrize("kind", ["cancel", "set", "delete"])
def test_a_victim_delivered_breaks_the_new_verdict_and_the_old(kind: str) -> None:
    log = due_during("v", START + 10, kind)
    report = judged(log, [row("v-v1:e0#1", "Ok", START + 20)])
    assert (report.victims, report.delivered_though_stopped_before_due) == (1, 1)
    assert report.delivered_though_changed == 1
    stopped = {"delivered_though_changed", "delivered_though_stopped_before_due"}
    assert stopped <= set(faults(report))  # (a replacing set, undelivered here, is lost too)
    assert "delivered_though_stopped_before_due: v-v1:e0" in report.problems


def test_a_victim_refused_and_refused_again_is_not_delivered() -> None:
    """The ledger reads a refusal answered again as a duplicate: only an Ok delivers."""
    log = due_during("v", START + 10)
    refused = [
        row("v-v1:e0#1", "IllegalState", START + 20),
        row("v-v1:e0#1", "DuplicateRequestId", START + 20),
    ]
    report = judged(log, refused)
    assert (report.victims, report.delivered_though_stopped_before_due, faults(report)) == (
        1,
        0,
        [],
    )


def test_an_owed_slot_is_delivered_once_or_counted_lost() -> None:
    log = due_during("o", START + 20)  # the cancel committed at the due time: owed
    delivered = judged(log, [row("o-v1:e0#1", "Ok", START + 20)])
    assert (delivered.owed, delivered.owed_delivered_once, delivered.victims) == (1, 1, 0)
    assert faults(delivered) == [] and delivered.superseded == 0
    lost = judged(log, [])
    assert (lost.owed_lost, faults(lost)) == (1, ["owed_lost"])


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
    assert (report.delivered_once, report.owed_delivered_once, faults(report)) == (1, 1, [])


def test_a_set_is_stopped_by_the_first_later_change_of_its_key_or_deletion() -> None:
    log = history("s", (BEFORE, [("set-cancel", 30.0)]), (START + 40, [("delete", 0.0)]))
    (only,) = logged_sets(log)
    assert (only.timer, only.stopped_ms, only.due_ms) == (
        "s-v1:e0",
        int(BEFORE * 1000),
        1_800_000_025_000,
    )


def test_a_set_in_force_lost_early_or_twice_is_caught() -> None:
    """Three sets in force, due after the outage: one never delivered, one delivered before
    its due time, one delivered twice (two request ids decided Ok)."""
    after = END + 30
    names = ("lost", "early", "twice", "once")
    log = [c for name in names for c in history(name, (BEFORE, [("set", after - BEFORE)]))]
    ledger = [
        row("early-v1:e0#1", "Ok", after, arrived_s=after - 2),
        row("twice-v1:e0#1", "Ok", after),
        row("twice-v1:e0#1", "Ok", after + 1),
        row("once-v1:e0#1", "Ok", after),
        row("once-v1:e0#1", "DuplicateRequestId", after + 1),
    ]
    report = judged(log, ledger)
    assert (report.in_force, report.delivered_once) == (4, 2)
    assert (report.lost, report.early, report.decided_twice) == (2, 1, 1)
    assert faults(report) == ["lost", "decided_twice", "early"]
    assert {"early: early-v1:e0", "lost: lost-v1:e0 (due 1800000090000) decided 0x"} <= set(
        report.problems
    )
