"""The state a core carries: immutable models, and how long a run's history grows with them."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["CONTINUE_AS_NEW_AFTER_EVENTS", "Frozen"]

CONTINUE_AS_NEW_AFTER_EVENTS = 2_000
"""History events after which a timer, a job instance or the tenant directory continues as
new (well under Temporal's 10,240-event warning; each run replays quickly)."""


class Frozen(BaseModel):
    """An immutable state model: the cores return new states, never change one."""

    model_config = ConfigDict(frozen=True)
