"""The e-shop soak's judge of its chaos with host replicas (`--replicas N`): each takeover of the
followers within the bound (issue #19), a command answered Ok and every follower running again
soon after PostgreSQL was back; a 5xx a customer was answered is the outage's only inside its
window, a host error anywhere else."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from bench.oracle.eshop import Eshop

__all__ = ["RECOVERY_BOUND_S", "TAKEOVER_LIMIT_S", "Recovery", "judge_recovery"]

TAKEOVER_LIMIT_S = 10.0
"""Issue #19: once the replica running the followers dies, another runs them within this."""
RECOVERY_BOUND_S = 30.0
"""After PostgreSQL is back, a command answered Ok and every follower running within this."""
PG_GRACE_S = 2.0
"""A 5xx this long after PostgreSQL's recovery was seen still counts as the outage's."""


@dataclass
class Recovery:
    """What the chaos did to the replicas and what each took to recover (monotonic s)."""

    replicas: int = 1
    kills: list[tuple[str, bool]] = field(default_factory=list)
    """Each replica SIGKILLed, and whether it ran a follower then."""
    takeovers: list[float] = field(default_factory=list)
    """Seconds from a holder's SIGKILL until every follower ran on a replica again."""
    not_taken_over: int = 0
    """Followers that ran nowhere for `RECOVERY_BOUND_S`, before a kill or after it."""
    pg_window: tuple[float, float] | None = None
    """When PostgreSQL was stopped, and when it was started again."""
    pg_ok: float | None = None
    """The first Ok answer to a customer after PostgreSQL was back."""
    pg_held: float | None = None
    """When every follower ran on a replica again after PostgreSQL was back."""


def judge_recovery(
    judged: Eshop, host_errors: Sequence[tuple[float, str]], seen: Recovery | None
) -> dict[str, float]:
    """The customers' 5xx answers (when, monotonic s, and what) excused only while PostgreSQL
    was away or recovering (+ `PG_GRACE_S`); with replicas, each takeover and PostgreSQL's
    recovery within their bounds. The replicas' figures that were measured (s; none without
    replicas)."""
    window = seen.pg_window if seen is not None else None
    excused = (math.inf, -math.inf)  # nothing, unless PostgreSQL was stopped
    if window is not None and seen is not None:
        back = [t for t in (seen.pg_ok, seen.pg_held) if t is not None]
        excused = (window[0], max(back, default=window[1] + RECOVERY_BOUND_S) + PG_GRACE_S)
    answered = [at for at, _ in host_errors if excused[0] <= at <= excused[1]]
    for at, what in host_errors:
        if not excused[0] <= at <= excused[1]:
            judged.problem("host_errors", what)
    if seen is None:
        return {}
    for took in seen.takeovers:
        if took > TAKEOVER_LIMIT_S:
            judged.problem("takeover_slow", f"every follower ran again {took:.1f}s after")
    for _ in range(seen.not_taken_over):
        judged.problem("takeover_slow", f"a follower ran nowhere {RECOVERY_BOUND_S:g}s after")
    figures = {"replicas": float(seen.replicas), "pg_answered_5xx": float(len(answered))}
    if seen.takeovers:
        figures["takeover_max_ms"] = float(round(max(seen.takeovers) * 1000))
    if window is None:
        return figures  # never stopped: the run's chaos_kinds_missing says so
    stopped, back_at = window
    figures["pg_away_s"] = round(back_at - stopped, 2)
    if answered:
        figures["pg_last_5xx_after_s"] = round(max(answered) - back_at, 1)
    for name, when in (("commands_ok", seen.pg_ok), ("followers_held", seen.pg_held)):
        if when is None:
            judged.problem("postgres_unrecovered", f"{name}: not {RECOVERY_BOUND_S:g}s after")
        else:
            figures[f"pg_{name}_after_s"] = round(when - back_at, 2)
    return figures
