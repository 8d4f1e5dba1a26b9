"""The status vocabulary (`wow_temporal.timers.status`): read from Temporal, found by filters."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from wow_temporal.timers.status import (
    SHOWN_STATUSES,
    Status,
    parse_status,
    status_clause,
    status_of,
)

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
AHEAD, PASSED = NOW + timedelta(minutes=5), NOW - timedelta(seconds=1)


@pytest.mark.parametrize(
    ("execution", "shown", "due", "status"),
    [
        ("Running", None, AHEAD, Status.SCHEDULED),
        ("Running", None, PASSED, Status.DELIVERING),
        ("Running", None, NOW, Status.DELIVERING),
        ("Running", "Parked", PASSED, Status.PARKED),
        ("Completed", None, PASSED, Status.DELIVERED),
        ("Completed", "Rejected", PASSED, Status.REJECTED),
        ("Completed", "Cancelled", AHEAD, Status.CANCELLED),
        ("Completed", "NeverDue", None, Status.NEVER_DUE),
        ("Canceled", None, AHEAD, Status.CANCELLED),
        ("Terminated", "Parked", PASSED, Status.TERMINATED),
        ("Failed", None, PASSED, Status.FAILED),
        ("TimedOut", None, PASSED, Status.TIMED_OUT),
        ("ContinuedAsNew", None, AHEAD, None),
    ],
)
def test_the_status_is_read_from_the_execution_status_and_wow_status(
    execution: str, shown: str | None, due: datetime | None, status: Status | None
) -> None:
    assert status_of(execution, shown, due, NOW) is status


def test_statuses_written_to_wow_status_are_only_those_temporal_cannot_tell() -> None:
    assert {s.value for s in SHOWN_STATUSES} == {"Parked", "Rejected", "Cancelled", "NeverDue"}


@pytest.mark.parametrize(
    ("text", "status"),
    [
        ("parked", Status.PARKED),
        ("DELIVERED", Status.DELIVERED),
        ("Canceled", Status.CANCELLED),
        (" timedout ", Status.TIMED_OUT),
        ("terminated", Status.TERMINATED),
        ("never-due", Status.NEVER_DUE),
        ("neverdue", Status.NEVER_DUE),
    ],
)
def test_any_case_and_temporals_spelling_are_accepted(text: str, status: Status) -> None:
    assert parse_status(text) is status


def test_an_unknown_status_names_every_known_one() -> None:
    with pytest.raises(ValueError, match="unknown timer status 'Sleeping'; one of Scheduled, "):
        parse_status("Sleeping")


def test_each_status_has_a_query_that_reads_like_its_definition() -> None:
    assert status_clause(Status.SCHEDULED, NOW) == (
        "ExecutionStatus = 'Running' AND WowStatus IS NULL"
        " AND WowDue > '2026-12-01T10:00:00.000000Z'"
    )
    assert status_clause(Status.DELIVERING, NOW).endswith("WowDue <= '2026-12-01T10:00:00.000000Z'")
    assert status_clause(Status.DELIVERED, NOW) == (
        "ExecutionStatus = 'Completed' AND WowStatus IS NULL"
    )
    assert status_clause(Status.PARKED, NOW) == "WowStatus = 'Parked'"
    assert status_clause(Status.NEVER_DUE, NOW) == "WowStatus = 'NeverDue'"
    assert status_clause(Status.CANCELLED, NOW) == (
        "(WowStatus = 'Cancelled' OR ExecutionStatus = 'Canceled')"
    )
    assert status_clause(Status.TERMINATED, NOW) == "ExecutionStatus = 'Terminated'"
    assert status_clause(Status.TIMED_OUT, NOW) == "ExecutionStatus = 'TimedOut'"
