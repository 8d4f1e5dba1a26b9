"""A cron rule that would never be due is refused at every edge, with the reason (#38)."""

from __future__ import annotations

import pytest

from wow_temporal.model import InvalidScheduleError, ScheduleRule
from wow_temporal.model.rules import fires_problem

IN_THE_GAP = "0 30 2 ? 3 SUNL"
"""02:30 on the last Sunday of March: in Europe/Berlin, always inside the DST gap."""


def test_a_cron_no_date_matches_never_fires_in_any_zone() -> None:
    for zone in (None, "UTC", "Europe/Berlin"):
        problem = fires_problem("0 0 0 30 2 *", zone)
        assert problem is not None and "never fires" in problem


def test_a_cron_whose_every_match_is_skipped_by_the_zone_never_fires_there() -> None:
    problem = fires_problem(IN_THE_GAP, "Europe/Berlin")
    assert problem is not None and "never fires in Europe/Berlin" in problem
    assert "DST gap" in problem
    assert fires_problem(IN_THE_GAP, "UTC") is None  # the same rule in UTC fires every year
    assert fires_problem(IN_THE_GAP) is None  # with no zone, only the calendar is asked


def test_a_timer_rule_in_such_a_zone_is_refused_where_rules_come_in() -> None:
    with pytest.raises(InvalidScheduleError, match="never fires in Europe/Berlin"):
        ScheduleRule.cron(IN_THE_GAP, zone="Europe/Berlin")
    read = ScheduleRule.model_validate({"cron": IN_THE_GAP, "zone": "Europe/Berlin"})
    with pytest.raises(InvalidScheduleError, match="never fires in Europe/Berlin"):
        read.check_fires()  # the admission of a commit asks this
    ScheduleRule.cron(IN_THE_GAP, zone="Asia/Tokyo").check_fires()  # no DST: it fires
