"""What timers and jobs share. Pure (no Temporal, no I/O), re-exported here: frozen state
models, how long a run's history grows before it continues as new, the one cache of parsed cron
expressions, the one missed-slot algorithm, and how an instant is shown to a person. Its
Temporal half, imported from its modules: `waiting`, the one way both workflows wait;
`runs` and `history`, the one way both clients read a run and its history; `listing`, the one
way both list. Each core keeps its own state machine for what truly differs.
"""

from __future__ import annotations

from wow_temporal.engine.frozen import CONTINUE_AS_NEW_AFTER_EVENTS, Frozen
from wow_temporal.engine.slots import MAX_MISSED_COUNTED, Latest, NextAfter, latest_due, parsed_cron
from wow_temporal.engine.text import Instant, instant_text, zoned_text

__all__ = [
    "CONTINUE_AS_NEW_AFTER_EVENTS",
    "MAX_MISSED_COUNTED",
    "Frozen",
    "Instant",
    "Latest",
    "NextAfter",
    "instant_text",
    "latest_due",
    "parsed_cron",
    "zoned_text",
]
