"""`bench.soak`'s judge (`bench.oracle.ledger`, pure): hand-made ledgers against hand-made
schedules, each fault the soak exists to find caught (lost, early, decided twice, delivered
after a change, parked wrongly, a cron gap), and the slots it must let be (one in flight at a
change, one owed)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bench.oracle import Verdicts
from bench.oracle.ledger import Deliveries, Ending, Row, Schedule, judge_deliveries, rows_of
from wow_temporal.model import ScheduleRule
from wow_temporal.testing.wow_host import Arrival
from wow_temporal.wire import MESSAGE_HEADER_PREFIX, REQUEST_ID_HEADER

pytestmark = pytest.mark.unit

EPOCH = 1_800_000_000.0
"""The run's start, epoch seconds; every other time is run-relative seconds."""
END = Ending(parked=frozenset(), healed_at=100.0, crons_cancelled={}, parked_within_s=5.0)


def one_shot(name: str, behaviour: str = "ok", **times: float | None) -> Schedule:
    """A set committed at 10 s, due 5 s later (15 s), handed over at 10.5 s."""
    return Schedule(
        timer=f"c1-{name}:e0",
        aggregate_id=name,
        behaviour=behaviour,
        key="k1",
        order=(1, 0),
        rule=ScheduleRule.model_validate({"after": "PT5S"}),
        created=datetime.fromtimestamp(EPOCH + 10, UTC),
        applied_at=times.get("applied_at", 10.5),
        superseded_at=times.get("superseded_at"),
        superseded_from=times.get("superseded_from"),
    )


def row(schedule: Schedule, arrived_s: float, code: str = "Ok", slot: int = 1) -> Row:
    """The host's row of the schedule's slot, arrived at `arrived_s` (run s)."""
    due = schedule.due_ms(slot)
    return Row(f"{schedule.timer}#{slot}", int((EPOCH + arrived_s) * 1000), code, due, slot)


def judge(schedules: list[Schedule], rows: list[Row], ending: Ending = END) -> Deliveries:
    return judge_deliveries(schedules, rows, EPOCH, ending)


def faults(judged: Deliveries) -> dict[str, float]:
    return {k: v for k, v in judged.verdicts().must_be_zero.items() if v}


def test_a_schedule_delivered_once_on_time_passes() -> None:
    s = one_shot("a")
    judged = judge([s], [row(s, 15.2), row(s, 16.0, "DuplicateRequestId")])
    assert (judged.expected, judged.decided_once, faults(judged)) == (1, 1, {})
    assert judged.lateness_outside["n"] == 1 and judged.lateness_outside["max"] == 200


def test_one_lost_one_early_and_one_twice_delivered_command_are_each_caught() -> None:
    lost, early, twice, once = (one_shot(n) for n in ("lost", "early", "twice", "once"))
    rows = [row(early, 14.0), row(twice, 15.1), row(twice, 15.3), row(once, 15.1)]
    judged = judge([lost, early, twice, once], rows)
    assert (judged.lost, judged.early, judged.decided_twice) == (1, 1, 1)
    assert faults(judged) == {"lost": 1, "early": 1, "decided_twice": 1, "undecided": 1}
    assert judged.decided_once == 3  # one request id, decided twice: the fault is its own
    assert "lost: c1-lost:e0 (ok) decided 0 times" in judged.problems


def test_a_slot_due_after_its_schedule_ended_is_wrongly_delivered() -> None:
    """Cancelled at 12 s (handed over), due at 15 s: nothing may arrive."""
    s = one_shot("c", superseded_at=12.0, superseded_from=11.9)
    judged = judge([s], [row(s, 15.1)])
    assert (judged.wrongly_delivered, judged.expected) == (1, 0)
    assert faults(judged) == {"wrongly_delivered": 1}


def test_a_set_handed_over_after_its_change_must_never_arrive() -> None:
    s = one_shot("late", applied_at=13.0, superseded_at=12.0, superseded_from=11.9)
    assert judge([s], [row(s, 15.1)]).wrongly_delivered == 1


def test_a_slot_in_flight_at_its_change_is_not_recalled() -> None:
    """Due at 15 s, changed at 16 s, arrived at 16.5 s: on its way already, counted apart."""
    s = one_shot("f", superseded_at=16.0, superseded_from=15.9)
    judged = judge([s], [row(s, 16.5)])
    assert (judged.sent_in_flight, judged.wrongly_delivered, faults(judged)) == (1, 0, {})


def test_a_slot_changed_long_after_it_was_due_is_owed() -> None:
    s = one_shot("o", superseded_at=60.0, superseded_from=59.0)
    assert judge([s], []).lost == 1
    assert judge([s], [row(s, 15.5)]).lost == 0


def test_a_failing_hosts_schedule_is_parked_then_delivered_once_after_the_heal() -> None:
    s = one_shot("fail-1", "fail")
    healed = Ending(frozenset({s.timer}), 100.0, {}, 5.0)
    judged = judge([s], [row(s, 15.1, "ServiceUnavailable"), row(s, 100.5)], healed)
    assert (judged.parked, judged.parked_expected, judged.delivered_after_retry) == (1, 1, 1)
    assert faults(judged) == {}
    not_parked = judge([s], [row(s, 100.5)])
    assert faults(not_parked) == {"parked_wrongly": 1, "parked_unlike_expected": 1}


def test_a_healthy_schedule_parked_is_caught() -> None:
    s = one_shot("p")
    judged = judge([s], [row(s, 15.1)], Ending(frozenset({s.timer}), 100.0, {}, 5.0))
    assert judged.parked_wrongly == 1


def cron(misfire: str) -> Schedule:
    """Every 5 s from the commit at 10 s (due 15, 20, 25, ...), live to the run's cancel."""
    return Schedule(
        timer="c1-cron:e1",
        aggregate_id="cron",
        behaviour="ok",
        key="tick",
        order=(1, 1),
        rule=ScheduleRule.model_validate({"cron": "*/5 * * * * *", "misfire": misfire}),
        created=datetime.fromtimestamp(EPOCH + 10, UTC),
        applied_at=10.5,
    )


@pytest.mark.parametrize(("misfire", "gaps"), [("CATCH_UP", 1), ("COALESCE", 1)])
def test_a_cron_slot_missing_is_a_gap(misfire: str, gaps: int) -> None:
    s = cron(misfire)
    cancelled = Ending(frozenset(), 100.0, {s.timer: (21.0, 21.5)}, 5.0)
    whole = [row(s, 15.1, slot=1), row(s, 20.1, slot=2)]
    assert faults(judge([s], whole, cancelled)) == {}
    gap = [row(s, 15.1, slot=1), row(s, 25.1, slot=3)]
    assert judge([s], gap, cancelled).cron_gaps == gaps


def test_a_cron_that_stopped_ticking_long_before_its_end_is_stalled() -> None:
    s = cron("CATCH_UP")
    cancelled = Ending(frozenset(), 100.0, {s.timer: (90.0, 90.5)}, 5.0)
    assert judge([s], [row(s, 15.1, slot=1)], cancelled).cron_stalled == 1


def arrival(request_id: str, behaviour: str, code: str = "") -> Arrival:
    headers = {
        REQUEST_ID_HEADER.lower(): request_id,
        f"{MESSAGE_HEADER_PREFIX}schedule_due".lower(): "5",
    }
    return Arrival(headers, None, b"", 7, behaviour, 200, code)  # type: ignore[arg-type]


def test_the_ledger_reads_a_refusal_answered_again_as_a_duplicate() -> None:
    rows = rows_of(
        [
            arrival("t#1", "reject", "IllegalState"),
            arrival("t#1", "reject", "IllegalState"),
            arrival("u#1", "fail", "ServiceUnavailable"),
            arrival("u#1", "ok"),
            arrival("u#1", "duplicate", "DuplicateRequestId"),
        ]
    )
    codes = [r.code for r in rows]
    assert codes == [
        "IllegalState",
        "DuplicateRequestId",
        "ServiceUnavailable",
        "Ok",
        "DuplicateRequestId",
    ]
    assert rows[0].due_ms == 5 and rows[0].timer == "t"


def test_verdicts_pass_only_with_every_zero_zero_and_every_positive_positive() -> None:
    ok = Verdicts(must_be_zero={"lost": 0}, must_be_positive={"seen": 3})
    assert (ok.passed, ok.line()) == (True, "PASS")
    broken = ok | Verdicts(must_be_zero={"early": 1}, must_be_positive={"parked": float("nan")})
    assert broken.broken == ["early", "parked"]
    assert broken.line() == "MISS: early, parked"
