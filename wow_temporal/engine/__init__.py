"""What timers and jobs share. Pure (no Temporal, no I/O), re-exported here: frozen state
models, how long a run's history grows before it continues as new, the one cache of parsed cron
expressions, the one missed-slot algorithm, how an instant is shown to a person (`text`), and
list limits (`listing`). Its Temporal half, imported from its modules: `waiting` and
`payloads`, the workflows' one way to wait and to read an input; `runs` and `history`, the
clients' one way to read a run and its history. Each core keeps its own state machine for what
truly differs.
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
