"""The catch-up soak's judge (`python -m bench.soak --catch-up`): what the host received after a
relay caught up with a Temporal outage, against the log. A set no later change stopped is in
force (delivered once); one due during the outage is owed if the log stopped it at or after its
due time (delivered once), a victim if before (never delivered: only the target's guard stops
it); every other set is superseded (never delivered). More: docs/benchmarks.md."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bench.oracle.ledger import Row
from bench.oracle.verdicts import Findings, positive, zero
from wow_temporal.wire import DUPLICATE_REQUEST_ID, OK

__all__ = ["CatchUp", "LoggedSet", "judge_catch_up", "logged_sets"]


@dataclass(frozen=True)
class LoggedSet:
    """One `wow.ScheduleSet` of the log, and the first change that stopped it (if any)."""

    timer: str
    created_ms: int
    due_ms: int
    stopped_ms: int | None
    """createTime of the first later cancel or set of its key, or its aggregate's deletion."""


def logged_sets(log: Iterable[dict[str, Any]]) -> list[LoggedSet]:
    """Every set of the log (wire commits; `after` rules), with when the log first stopped it."""
    events: dict[str, list[tuple[tuple[int, int], dict[str, Any], dict[str, Any]]]]
    events = defaultdict(list)
    for commit in log:
        for index, event in enumerate(commit["body"]):
            events[commit["aggregateId"]].append(((commit["version"], index), commit, event))
    found = []
    for history in events.values():
        history.sort(key=lambda entry: entry[0])
        for at, (_, commit, event) in enumerate(history):
            if event["name"] != "wow.ScheduleSet":
                continue
            key, created = event["body"]["key"], commit["createTime"]
            after = float(event["body"]["rule"]["after"][2:-1])
            stops = (
                later["createTime"]
                for _, later, change in history[at + 1 :]
                if change["name"] == "wow.AggregateDeleted" or change["body"].get("key") == key
            )
            found.append(
                LoggedSet(
                    timer=f"{commit['id']}:{event['id']}",
                    created_ms=created,
                    due_ms=created + int(after * 1000),
                    stopped_ms=next(stops, None),
                )
            )
    return found


@dataclass
class CatchUp(Findings):
    """The log's sets judged against what the host received."""

    in_force: int = 0
    """Sets still in force at the end of the log (each must be delivered once)."""
    superseded: int = 0
    """Sets the log replaced, cancelled or deleted, but the owed (none may be delivered)."""
    delivered_once: int = positive()
    lost: int = zero()
    decided_twice: int = zero()
    early: int = zero()
    delivered_though_changed: int = zero()
    """Sets delivered though the log had replaced, cancelled or deleted them."""
    victims: int = positive()
    """Sets handed over before the outage and due during it that the log stopped before they
    were due (counted in `superseded` too)."""
    delivered_though_stopped_before_due: int = zero()
    """Victims delivered (the target's guard refuses them)."""
    owed: int = 0
    """Sets handed over before the outage and due during it that the log changed only at or
    after their due time: the slot was owed, each must be delivered once."""
    owed_delivered_once: int = positive()
    owed_lost: int = zero()


def judge_catch_up(
    log: Iterable[dict[str, Any]], rows: Iterable[Row], outage_ms: tuple[int, int]
) -> CatchUp:
    """Each set of the log (wire commits) against the host's ledger; `outage_ms`: when the
    server went down and came back (epoch ms)."""
    judged = CatchUp()
    delivered, first = _decisions(rows)
    start, end = outage_ms
    for logged in logged_sets(log):
        timer = logged.timer
        if timer in first and first[timer].arrived_ms < first[timer].due_ms:
            judged.problem("early", timer)
        if delivered[timer] > 1:
            judged.problem("decided_twice", f"{timer} {delivered[timer]}x")
        during = logged.created_ms < start <= logged.due_ms < end
        stopped = logged.stopped_ms
        owed = during and stopped is not None and stopped >= logged.due_ms
        if stopped is None or owed:
            _must_deliver_once(judged, logged, delivered[timer], owed=owed)
        else:
            _must_not_deliver(judged, logged, delivered[timer] > 0, victim=during)
    return judged


def _decisions(rows: Iterable[Row]) -> tuple[Counter[str], dict[str, Row]]:
    """Per timer: how many of its requests were decided Ok (a refusal answered again reads as
    a duplicate in the ledger, so only Ok counts), and its first Ok or duplicate row."""
    delivered: Counter[str] = Counter()
    first: dict[str, Row] = {}
    for row in rows:
        if row.code not in (OK, DUPLICATE_REQUEST_ID):
            continue
        delivered[row.timer] += row.code == OK
        first.setdefault(row.timer, row)
    return delivered, first


def _must_deliver_once(judged: CatchUp, logged: LoggedSet, count: int, *, owed: bool) -> None:
    """A set in force, or owed: delivered exactly once, else lost."""
    if owed:
        judged.owed += 1
        judged.owed_delivered_once += count == 1
    else:
        judged.in_force += 1
        judged.delivered_once += count == 1
    if count != 1:
        lost = "owed_lost" if owed else "lost"
        judged.problem(lost, f"{logged.timer} (due {logged.due_ms}) decided {count}x")


def _must_not_deliver(judged: CatchUp, logged: LoggedSet, delivered: bool, *, victim: bool) -> None:
    """A set the log stopped: never delivered; a victim's delivery is counted apart too."""
    judged.superseded += 1
    judged.victims += victim
    if not delivered:
        return
    judged.problem("delivered_though_changed", logged.timer)
    if victim:
        judged.problem("delivered_though_stopped_before_due", logged.timer)
