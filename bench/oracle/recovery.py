"""The e-shop soak's judge of its chaos with host replicas (`--replicas N`): each takeover of the
followers within the bound (issue #19), a command answered Ok and every follower running again
soon after PostgreSQL was back; a 5xx a customer was answered is the outage's only inside its
window, a host error anywhere else."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from bench.oracle.eshop import Eshop

__all__ = ["RECOVERY_BOUND_S", "TAKEOVER_LIMIT_S", "Recovered", "Recovery", "judge_recovery"]

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


@dataclass
class Recovered:
    """The replicas' figures (run-relative seconds; NaN: not measured)."""

    replicas: int = 1
    replica_kills: list[tuple[str, bool]] = field(default_factory=list)
    takeovers_ms: list[int] = field(default_factory=list)
    pg_away_s: float = math.nan
    """From PostgreSQL's stop until it was started again."""
    pg_commands_ok_after_s: float = math.nan
    """From then until a customer's command was first answered Ok."""
    pg_followers_held_after_s: float = math.nan
    """From then until every follower ran on a replica again."""
    pg_answered_5xx: int = 0
    """Commands answered 5xx while PostgreSQL was away or just back (retried, same id)."""
    pg_last_5xx_after_s: float = math.nan
    """The last of those, after PostgreSQL was back (a replica's pool still reconnecting)."""

    def figures(self) -> dict[str, float]:
        """The figures that were measured (a JSON figure is finite)."""
        figures = {
            "replicas": float(self.replicas),
            "takeover_max_ms": float(max(self.takeovers_ms, default=math.nan)),
            "pg_away_s": self.pg_away_s,
            "pg_commands_ok_after_s": self.pg_commands_ok_after_s,
            "pg_followers_held_after_s": self.pg_followers_held_after_s,
            "pg_answered_5xx": float(self.pg_answered_5xx),
        }
        return {name: value for name, value in figures.items() if math.isfinite(value)}


def judge_recovery(
    judged: Eshop, host_errors: Iterable[tuple[float, str]], seen: Recovery | None
) -> Recovered:
    """The customers' 5xx answers (when, monotonic s, and what) excused only while PostgreSQL
    was away or recovering (+ `PG_GRACE_S`); with replicas, each takeover and PostgreSQL's
    recovery within their bounds."""
    recovered = Recovered()
    window = seen.pg_window if seen is not None else None
    excused = (math.inf, -math.inf)  # nothing, unless PostgreSQL was stopped
    if window is not None and seen is not None:
        back = [t for t in (seen.pg_ok, seen.pg_held) if t is not None]
        excused = (window[0], max(back, default=window[1] + RECOVERY_BOUND_S) + PG_GRACE_S)
    for at, what in host_errors:
        if window is not None and excused[0] <= at <= excused[1]:
            recovered.pg_answered_5xx += 1
            after = round(at - window[1], 1)
            if not after <= recovered.pg_last_5xx_after_s:  # NaN at first
                recovered.pg_last_5xx_after_s = after
        else:
            judged.problem("host_errors", what)
    if seen is None:
        return recovered
    recovered.replicas = seen.replicas
    recovered.replica_kills = seen.kills
    recovered.takeovers_ms = [round(took * 1000) for took in seen.takeovers]
    for took in seen.takeovers:
        if took > TAKEOVER_LIMIT_S:
            judged.problem("takeover_slow", f"every follower ran again {took:.1f}s after")
    for _ in range(seen.not_taken_over):
        judged.problem("takeover_slow", f"a follower ran nowhere {RECOVERY_BOUND_S:g}s after")
    if window is None:
        return recovered  # never stopped: the run's chaos_kinds_missing says so
    stopped, back_at = window
    recovered.pg_away_s = round(back_at - stopped, 2)
    for name, when in (("commands_ok", seen.pg_ok), ("followers_held", seen.pg_held)):
        if when is None:
            judged.problem("postgres_unrecovered", f"{name}: not {RECOVERY_BOUND_S:g}s after")
        else:
            setattr(recovered, f"pg_{name}_after_s", round(when - back_at, 2))
    return recovered
