"""The chaos soak's judge (`python -m bench.soak`): the host's ledger, one row a request it
received, against what the spec promises of each `wow.ScheduleSet` the relay handed over (the
checks: docs/benchmarks.md, "The chaos soak"). Times are run-relative seconds (`epoch` the
run's start); ledger times are epoch milliseconds, as the host stamps them."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime

from bench.harness.stats import summary
from bench.oracle.verdicts import Findings, Verdicts, positive, zero
from wow_temporal.model import ScheduleRule
from wow_temporal.testing.wow_host import Arrival
from wow_temporal.wire import DUPLICATE_REQUEST_ID, OK

__all__ = ["Deliveries", "Ending", "Row", "Schedule", "judge_deliveries", "rows_of"]

FAILING = "fail"
"""The behaviour of a host that fails until it is healed: its schedules park, by design."""
UNHEALTHY = frozenset({"flaky", "slow"})
"""Hosts whose answers make lateness by design; their deliveries are counted apart."""
DECIDED = ("Ok", "IllegalState")
"""The codes that decide a request id (a refusal is a decision too)."""


@dataclass(frozen=True)
class Row:
    """One request the host received: its code as a host that remembers every decision would
    answer it, and the schedule's headers it carried."""

    request_id: str
    arrived_ms: int
    code: str
    due_ms: int
    slot: int = 1
    skipped: int = 0

    @property
    def timer(self) -> str:
        return self.request_id.rsplit("#", 1)[0]


def rows_of(arrivals: Iterable[Arrival]) -> list[Row]:
    """The ledger of what the host received, in order: a rejected request id that comes again
    is a duplicate, as an accepted one is."""
    decided: set[str] = set()
    rows = []
    for arrival in arrivals:
        request_id = arrival.request_id
        if arrival.behaviour in ("ok", "hang", "reject") and request_id not in decided:
            decided.add(request_id)
            code = OK if arrival.behaviour != "reject" else arrival.error_code
        elif arrival.behaviour in ("ok", "hang", "reject", "duplicate"):
            code = DUPLICATE_REQUEST_ID
        else:
            code = arrival.error_code
        header = arrival.message_header
        rows.append(
            Row(
                request_id=request_id,
                arrived_ms=arrival.received_ms,
                code=code,
                due_ms=int(header("schedule_due") or 0),
                slot=int(header("schedule_slot") or 0),
                skipped=int(header("schedule_skipped") or 0),
            )
        )
    return rows


@dataclass
class Schedule:
    """One `wow.ScheduleSet`, its host's behaviour, and when the relay handed it and the first
    newer change of its key (or its aggregate's deletion) over."""

    timer: str
    aggregate_id: str
    behaviour: str
    key: str
    order: tuple[int, int]
    rule: ScheduleRule
    created: datetime
    applied_at: float | None = None
    """When its own first apply returned; None if never handed over."""
    superseded_at: float | None = None
    """When the first newer change's apply returned: no slot due after it may be sent."""
    superseded_from: float | None = None
    """When that change's apply began."""

    @property
    def recurring(self) -> bool:
        return self.rule.kind == "cron"

    @property
    def handed_live(self) -> bool:
        """Handed over before any newer change was."""
        return self.applied_at is not None and (
            self.superseded_at is None or self.superseded_at > self.applied_at
        )

    def due_ms(self, slot: int) -> int:
        due = self.rule.first_due(self.created)
        assert due is not None
        for _ in range(slot - 1):
            following = self.rule.next_cron(due)
            assert following is not None
            due = following
        return int(due.timestamp() * 1000)


@dataclass
class Deliveries(Findings):
    """The ledger judged: what must be 0, what must have happened, and the lateness (first
    arrival - due, ms) inside and outside the chaos windows, and to the unhealthy hosts."""

    expected: int = 0
    decided_once: int = positive()
    lost: int = zero()
    early: int = zero()
    decided_twice: int = zero()
    wrongly_delivered: int = zero()
    parked_expected: int = 0
    parked: int = positive()
    parked_wrongly: int = zero()
    delivered_after_retry: int = 0
    sent_in_flight: int = 0
    """Requests of a slot due before its schedule's change was handed over that arrived after:
    a command already on its way is not recalled (its target's state guards it)."""
    cron_gaps: int = zero()
    cron_stalled: int = zero()
    lateness_outside: dict[str, float] = field(default_factory=dict)
    lateness_inside: dict[str, float] = field(default_factory=dict)
    lateness_unhealthy: dict[str, float] = field(default_factory=dict)
    latest_outside: list[tuple[int, float, str]] = field(default_factory=list)
    """The latest deliveries due outside the chaos windows: (ms late, due at s, request id)."""
    latest_inside: list[tuple[int, float, str]] = field(default_factory=list)

    def verdicts(self) -> Verdicts:
        """Nothing lost, early, twice or after a change; every expected command decided once;
        the failing host's schedules parked and delivered once after the retry."""
        return super().verdicts() | Verdicts(
            must_be_zero={
                "undecided": self.expected - self.decided_once,
                "parked_unlike_expected": abs(self.parked - self.parked_expected),
                "parked_undelivered": abs(self.parked - self.delivered_after_retry),
            },
            figures={
                f"lateness_outside_{q}_ms": self.lateness_outside[q]
                for q in ("p50", "p99")
                if q in self.lateness_outside
            },
        )


@dataclass(frozen=True)
class Ending:
    """What the run did at its end: which timers were parked, when the failing host was healed,
    and when each live cron timer's cancel began and returned (run s)."""

    parked: frozenset[str]
    healed_at: float
    crons_cancelled: dict[str, tuple[float, float]]
    parked_within_s: float
    """A failing host's slot due this long before the heal has been parked by then."""


def judge_deliveries(
    schedules: Iterable[Schedule],
    rows: Iterable[Row],
    epoch: float,
    ending: Ending,
    inside_chaos: Callable[[float], bool] = lambda _: False,
) -> Deliveries:
    """Compare the host's ledger with what the spec says of each schedule."""
    judged = Deliveries()
    by_timer: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        by_timer[row.timer].append(row)
    late: dict[str, list[float]] = defaultdict(list)
    for schedule in schedules:
        entries = by_timer.get(schedule.timer, [])
        _arrivals(judged, schedule, entries, epoch, ending)
        decisions = _decisions(judged, entries)
        _lateness(judged, schedule, entries, epoch, inside_chaos, late)
        if schedule.timer in ending.parked:
            judged.parked += 1
            healed_ms = (epoch + ending.healed_at) * 1000
            judged.delivered_after_retry += any(
                e.arrived_ms > healed_ms and e.code == OK for e in entries
            )
        if schedule.recurring:
            _cron(judged, schedule, decisions, epoch, ending)
        else:
            _one_shot(judged, schedule, decisions, epoch, ending)
    judged.latest_outside = sorted(judged.latest_outside, reverse=True)[:5]
    judged.latest_inside = sorted(judged.latest_inside, reverse=True)[:5]
    judged.lateness_outside = summary(late["outside"])
    judged.lateness_inside = summary(late["inside"])
    judged.lateness_unhealthy = summary(late["unhealthy"])
    return judged


def _ended(schedule: Schedule, ending: Ending) -> tuple[float | None, float | None]:
    """When the schedule ended (its change's apply returned), and when that began: a live
    cron timer ends with the run's cancel."""
    if schedule.recurring and schedule.superseded_at is None:
        return ending.crons_cancelled[schedule.timer][1], ending.crons_cancelled[schedule.timer][0]
    return schedule.superseded_at, schedule.superseded_from


def _arrivals(
    judged: Deliveries, schedule: Schedule, entries: list[Row], epoch: float, ending: Ending
) -> None:
    """Each request on time, of the slot's due time, and never for a slot due after the
    schedule ended."""
    ended_at, _ = _ended(schedule, ending)
    for entry in entries:
        arrived = entry.arrived_ms / 1000 - epoch
        if entry.due_ms != schedule.due_ms(entry.slot):
            judged.note(f"{entry.request_id}: due header {entry.due_ms} != model")
        if entry.arrived_ms < entry.due_ms:
            judged.problem("early", f"{entry.request_id}: {entry.due_ms - entry.arrived_ms} ms")
        due_at = entry.due_ms / 1000 - epoch
        if not schedule.handed_live or (ended_at is not None and due_at > ended_at):
            judged.problem(
                "wrongly_delivered",
                f"{entry.request_id} ({schedule.behaviour}) due at {due_at:.2f}s arrived at "
                f"{arrived:.2f}s, after its schedule ended at {ended_at}",
            )
        elif ended_at is not None and arrived > ended_at:
            judged.sent_in_flight += 1  # its slot was due before the change: not recalled


def _decisions(judged: Deliveries, entries: list[Row]) -> dict[str, Row]:
    """Each request id's decision (Ok or a refusal); a second one is decided twice."""
    decisions: dict[str, Row] = {}
    for entry in entries:
        if entry.code in DECIDED:
            if entry.request_id in decisions:
                judged.problem("decided_twice", entry.request_id)
            decisions[entry.request_id] = entry
    return decisions


def _lateness(
    judged: Deliveries,
    schedule: Schedule,
    entries: list[Row],
    epoch: float,
    inside_chaos: Callable[[float], bool],
    late: dict[str, list[float]],
) -> None:
    """Each slot's first arrival against its due time, by where it was due."""
    if schedule.behaviour == FAILING:
        return  # parked until the host is healed, by design
    firsts: dict[str, float] = {}
    for entry in entries:
        firsts.setdefault(entry.request_id, entry.arrived_ms - entry.due_ms)
    for request_id, ms in firsts.items():
        due_at = schedule.due_ms(int(request_id.rsplit("#", 1)[1])) / 1000 - epoch
        if schedule.behaviour in UNHEALTHY:
            # Each slot of a flaky or slow host waits for the one before it to be decided.
            late["unhealthy"].append(ms)
        elif inside_chaos(due_at):
            late["inside"].append(ms)
            judged.latest_inside.append((round(ms), round(due_at, 1), request_id))
        else:
            late["outside"].append(ms)
            judged.latest_outside.append((round(ms), round(due_at, 1), request_id))


def _one_shot(
    judged: Deliveries,
    schedule: Schedule,
    decisions: dict[str, Row],
    epoch: float,
    ending: Ending,
) -> None:
    """In force at the end: decided once (parked first if its host fails). Changed more than
    30 s after it was due: decided (it was owed)."""
    behaviour = schedule.behaviour
    due_at = schedule.due_ms(1) / 1000 - epoch
    if schedule.superseded_at is None and schedule.handed_live:
        judged.expected += 1
        parked = schedule.timer in ending.parked
        if behaviour == FAILING:
            judged.parked_expected += 1
            if not parked:
                judged.problem("parked_wrongly", f"{schedule.timer} ({behaviour}) was not parked")
        elif parked:
            judged.problem("parked_wrongly", f"{schedule.timer} ({behaviour}) was parked")
        if len(decisions) == 1:
            judged.decided_once += 1
        else:
            judged.problem("lost", f"{schedule.timer} ({behaviour}) decided {len(decisions)} times")
        return
    changed_from = schedule.superseded_from
    live_at_due = schedule.handed_live and (changed_from is None or changed_from > due_at + 30)
    if live_at_due and not decisions and behaviour != FAILING:
        judged.problem("lost", f"{schedule.timer} ({behaviour}) due {due_at:.1f}s never decided")


def _cron(
    judged: Deliveries,
    schedule: Schedule,
    decisions: dict[str, Row],
    epoch: float,
    ending: Ending,
) -> None:
    """Slot numbers without gaps; a live schedule kept ticking until it ended."""
    slots = sorted((e.slot, e.skipped) for e in decisions.values())
    expected_slot = 1
    for slot, skipped in slots:
        want = slot if schedule.rule.misfire.value == "COALESCE" else expected_slot
        if slot != want or slot - skipped != expected_slot:
            judged.problem(
                "cron_gaps", f"{schedule.timer}: slot {slot} skipped {skipped}, not {expected_slot}"
            )
        expected_slot = slot + 1
    _, ended_from = _ended(schedule, ending)
    if schedule.handed_live and ended_from is not None and schedule.behaviour != FAILING:
        last_due = schedule.due_ms(slots[-1][0]) / 1000 - epoch if slots else None
        first_due = schedule.due_ms(1) / 1000 - epoch
        if first_due < ended_from - 30 and (last_due is None or last_due < ended_from - 30):
            stalled = f"{schedule.timer}: last slot due {last_due}, ended {ended_from:.1f}s"
            judged.problem("cron_stalled", stalled)
    if schedule.superseded_at is None and schedule.handed_live:
        judged.expected += 1
        if schedule.behaviour == FAILING:
            due = schedule.due_ms(1) / 1000 - epoch
            judged.parked_expected += int(due < ending.healed_at - ending.parked_within_s)
        if slots:
            judged.decided_once += 1
