"""How the demo puts the morning job back (`wow_temporal.dev.demo.restoring`): a reset when the
job had no rule of its own, else its own fields again, a null removing each it did not have."""

from __future__ import annotations

from wow_temporal.dev.demo import restoring

NONE = {"expression": None, "zone": None, "misfire": None}


def test_a_job_with_no_rule_of_its_own_is_reset() -> None:
    assert restoring({"own": NONE, "expression": "0 0 6 * * *"}) == ("/wow.schedule.reset", None)
    assert restoring({"status": "Enabled"}) == ("/wow.schedule.reset", None)


def test_a_job_with_a_rule_of_its_own_gets_exactly_that_back() -> None:
    found = {"own": {**NONE, "zone": "Asia/Tokyo"}}
    assert restoring(found) == (
        "/wow.schedule.reschedule", {"expression": None, "zone": "Asia/Tokyo", "misfire": None}
    )
