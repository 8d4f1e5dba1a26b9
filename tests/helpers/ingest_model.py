"""A model of ingest (issues #26, #36): the real `TimerClient` (fold, hand-over, restarts,
deletion records, operators' cancels) against a simulated Temporal and domain host
(`tests.helpers.sim_temporal`), driven by a hypothesis state machine through run boundaries,
interleaved ingests of one key, a relay that lags and catches up, a second process handing
over (its per-key locks its own), a worker away and back, commands in flight across steps,
lost answers, a signal limit, operators' cancels and terminations, and visibility lagging,
down or slow. Run by `tests/unit/test_ingest_model.py` (bounded, or longer from a seed);
the same scenarios run on the real dev server in `tests/system/test_ingest_order.py`.

A change is known when it is committed: the log (`commit`) is what the host reads, whatever
ingest has handed over. The relay hands the log over in batches (`hand_over`), as far behind
as the steps make it; after a gap it reads the log ahead to its head and, stops first, hands
over the read-ahead's cancels and deletions before its next batch (`catch_up`). A second
process hands over any range of the log again, at once with the relay's next batch
(`another_process`): a replica resuming from an older checkpoint, a host posting its backlog.

Invariants, checked after every step:
- never early: no command is decided before its slot is due;
- decided once: the host decides each request id once;
- known when committed (`COMMITTED_CHECKED`): no slot is delivered whose key the log
  cancelled or set anew, or whose aggregate it deleted, after its set and before it was due
  (the change's `createTime` before the slot's due time); the host refuses no slot the log
  held at its due time (a change committed at or after it does not refuse it: it was owed);
- an operator's cancel or termination holds for every set handed over before it;
- what the relay read (`RELAY_CHECKED`, a target without the guard, one process): no slot is
  sent once the relay has handed over a newer change of its key or its aggregate's deletion,
  or read a newer cancel or deletion ahead at a catch-up, and no set the relay's batch or
  read-ahead changed is ever started;
and at the end, nothing lost: each key's latest set, still in force, is delivered once (a
Temporal cancel request may end a set handed over before it, never one handed over after). A
set the log changed after it was due may go undelivered: ingest never starts a set its batch
or read-ahead changes, and a timer applies a change it was handed before it sends.

Configurations: `IngestModel` (the target's guard, two processes, lost answers and a signal
limit), `GuardlessIngestModel` (no guard, one process, no faults: what the relay alone
keeps). Mutations (`GUARD`, `STOPS_FIRST` off) must be caught: `tests/unit/test_ingest_model.py`.

Not modelled: the relay's read-ahead limit, and the faults in the guard-less configuration (a
stop that cannot be handed over stops nothing there; the guard is what holds then).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from temporalio.service import RPCError

from tests.helpers.sim_temporal import Delivered, SimTemporal
from wow_temporal.ids import timer_workflow_id
from wow_temporal.model import AggregateRef, Commit
from wow_temporal.timers.admission import Admission, Admitted
from wow_temporal.timers.changes import changes_of
from wow_temporal.timers.client import TimerClient, TimerError
from wow_temporal.timers.core import TimerChange
from wow_temporal.timers.fold import Horizon

AGGREGATES = ("a1", "a2")
KEYS = ("k1", "k2")
START = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def owner(aggregate_id: str) -> AggregateRef:
    return AggregateRef(
        context_name="shop", aggregate_name="order", tenant_id="t", aggregate_id=aggregate_id
    )


@dataclass
class SetEvent:
    """A `wow.ScheduleSet` in the log, and what became of it."""

    aggregate_id: str
    key: str
    order: tuple[int, int]
    timer: str
    due: datetime
    first_handed: int | None = None
    """The step of the first hand-over that held it (it may be in Temporal since)."""
    last_handed: int | None = None
    """The step of the latest hand-over that held it."""
    moot: bool = False
    """Handed over by the relay with its batch or read-ahead holding a newer change."""


@dataclass(frozen=True)
class Change:
    """A schedule event of the log after which an older set of its key no longer holds."""

    aggregate_id: str
    key: str
    """"" for the aggregate's deletion."""
    kind: str
    order: tuple[int, int]
    committed: datetime

    def stops(self, found: SetEvent) -> bool:
        """Whether it comes after `found` and ends it (its key's, or its aggregate's end)."""
        return (
            self.aggregate_id == found.aggregate_id
            and self.key in ("", found.key)
            and self.order > found.order
        )


event = st.one_of(
    st.tuples(st.just("set"), st.sampled_from(KEYS), st.integers(1, 90)),
    st.tuples(st.just("set"), st.sampled_from(KEYS), st.sampled_from([5, 30, 90])),
    st.tuples(st.just("cancel"), st.sampled_from(KEYS), st.just(0)),
    st.tuples(st.just("delete"), st.just(""), st.just(0)),
)
"""Sets twice as often as cancels or deletions (a deletion ends an aggregate's every key)."""


class IngestModel(RuleBasedStateMachine):
    """The full configuration: the target guards, two processes hand over, faults happen."""

    GUARD = True
    """The domain host's guard (`host.guard`)."""
    STOPS_FIRST = True
    """The relay hands over its read-ahead's stops before its next batch after a gap."""
    PROCESSES = 2
    FAULTS = True
    """Lost answers (the server applied the call) and a signal limit per run."""
    COMMITTED_CHECKED = True
    """Check that a change is known when committed (holds with the guard)."""
    RELAY_CHECKED = False
    """Check what the relay read (holds with one process and no faults, guard or not)."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.sim = SimTemporal(START, guard=self.GUARD)
        self.sim.delivery_takes = (0, 0, 10, 60)
        self.sim.update_waits = 3
        if self.FAULTS:
            self.sim.lose = 0.05
            self.sim.signal_limit = 8
        self.processes = [  # the answer timeout ends a slow visibility's listing (real time: long
            # enough that a loaded machine's pause does not end a listing that answers)
            TimerClient(  # type: ignore[arg-type]
                self.sim, task_queue="model", answer_timeout=timedelta(milliseconds=50)
            )
            for _ in range(self.PROCESSES)
        ]
        self.log: list[Commit] = []
        self.handed_upto = 0
        self.read_upto = 0
        """How far the relay has read the log (its read-ahead ends here)."""
        self.step = 0
        self.versions = dict.fromkeys(AGGREGATES, 0)
        self.sets: dict[str, SetEvent] = {}
        self.changes: list[Change] = []
        """The log's cancels, sets and deletions, with when each was committed."""
        self.read: list[tuple[Change, int]] = []
        """What the relay read, and the step: handed over, or read ahead at a catch-up."""
        self.ended_by_operator: dict[tuple[str, str], int] = {}
        self.maybe_ended: dict[tuple[str, str], int] = {}
        """Ends that may have applied (a Temporal cancel request, an answer lost)."""

    @initialize(seed=st.integers(0, 2**16))
    def seeded(self, seed: int) -> None:
        self.sim.rng.seed(seed)

    def teardown(self) -> None:
        try:
            self._finish()
        finally:
            self.loop.close()

    def _next_step(self) -> None:
        self.step += 1
        self.sim.step = self.step

    def run(self, coroutine: Any) -> Any:
        return self.loop.run_until_complete(coroutine)

    @property
    def relay(self) -> TimerClient:
        return self.processes[0]

    # --- the log ---------------------------------------------------------------------------

    @rule(aggregate_id=st.sampled_from(AGGREGATES), events=st.lists(event, min_size=1, max_size=3))
    def commit(self, aggregate_id: str, events: list[tuple[str, str, int]]) -> None:
        """A commit of the aggregate, now: the host's log holds it at once."""
        self._next_step()
        self.versions[aggregate_id] += 1
        version = self.versions[aggregate_id]
        commit_id = f"{aggregate_id}-v{version}"
        body = [_envelope(n, kind, key, after) for n, (kind, key, after) in enumerate(events)]
        created = int(self.sim.now.timestamp() * 1000)
        commit = Commit.parse(
            {
                "id": commit_id,
                "contextName": "shop",
                "aggregateName": "order",
                "tenantId": "t",
                "aggregateId": aggregate_id,
                "version": version,
                "createTime": created,
                "body": body,
            }
        )
        for index, (envelope, scheduled) in enumerate(commit.schedule_events()):
            key = getattr(scheduled, "key", "")
            kind = {"wow.ScheduleSet": "set", "wow.ScheduleCancelled": "cancel"}.get(
                envelope.name, "delete"
            )
            self.changes.append(
                Change(aggregate_id, key, kind, (version, index), commit.created_at)
            )
            if kind == "set":
                timer = f"{commit_id}:{envelope.id}"
                due = scheduled.rule.first_due(commit.created_at)  # type: ignore[union-attr]
                assert due is not None
                self.sets[timer] = SetEvent(aggregate_id, key, (version, index), timer, due)
        self.log.append(commit)
        self.sim.committed(commit)

    @rule(
        data=st.data(),
        kind=st.sampled_from(["cancel", "set", "delete"]),
        then=st.sampled_from(["", "due", "catch-up, due"]),
    )
    def stop_shortly_before_due(self, data: st.DataObject, kind: str, then: str) -> None:
        """The relay hands the log over up to a set still in force (if it has not yet), the
        clock runs to a second before it is due, and the log then cancels its key, sets it
        anew or deletes its aggregate. `then`: the slot falls due before the relay hands that
        over (what the guard must refuse), or the relay catches up first (reading the stop
        ahead: what its stops first must end)."""
        pending = [
            found
            for found in self.sets.values()
            if found.due - timedelta(seconds=1) > self.sim.now
            and not found.moot
            and not any(change.stops(found) for change in self.changes)
        ]
        if not pending:
            return
        found = data.draw(st.sampled_from(sorted(pending, key=lambda f: f.timer)))
        if found.first_handed is None:
            at = next(n for n, c in enumerate(self.log) if c.id == found.timer.split(":")[0])
            self.hand_over(at + 1 - self.handed_upto)
        self._next_step()
        self.sim.advance((found.due - self.sim.now).total_seconds() - 1)
        events = [(kind, "" if kind == "delete" else found.key, 30)]
        self.commit(found.aggregate_id, events)
        if then.startswith("catch-up") and self.read_upto < len(self.log):
            self.catch_up()
        if then:
            self.sim.advance(2)

    # --- hand-over: the relay, and another process -----------------------------------------

    def _attempted(self, commits: list[Commit]) -> None:
        """A hand-over of `commits` began: each set may be in Temporal from now on."""
        for found in self._sets_of(commits):
            found.last_handed = self.step
            if found.first_handed is None:
                found.first_handed = self.step

    def _handed(self, commits: list[Commit]) -> None:
        """The relay handed `commits` over: what they change is what it read."""
        held = {(commit.aggregate_id, commit.version) for commit in commits}
        self.read.extend(
            (change, self.step)
            for change in self.changes
            if (change.aggregate_id, change.order[0]) in held
        )

    def _sets_of(self, commits: list[Commit]) -> list[SetEvent]:
        return [
            self.sets[f"{commit.id}:{envelope.id}"]
            for commit in commits
            for envelope, _ in commit.schedule_events()
            if envelope.name == "wow.ScheduleSet"
        ]

    def _relay_batch(self, count: int) -> tuple[list[Commit], Horizon]:
        """The relay's next batch, and its horizon: the batch and the read-ahead after it."""
        self.read_upto = max(self.read_upto, self.handed_upto)
        end = min(self.handed_upto + count, len(self.log))
        batch = self.log[self.handed_upto : end]
        later = Horizon()
        later.extend(self.log[end : self.read_upto])
        known = Horizon()
        known.extend(self.log[self.handed_upto : self.read_upto])
        for found in self._sets_of(batch):
            if known.supersedes(owner(found.aggregate_id), found.key, _as_set(found)):
                found.moot = True
        self._attempted(batch)
        return batch, later

    def _relay_done(self, batch: list[Commit]) -> None:
        self._handed(batch)
        self.handed_upto += len(batch)

    @precondition(lambda self: self.handed_upto < len(self.log))
    @rule(count=st.integers(1, 6))
    def hand_over(self, count: int) -> None:
        """The relay's next batch (what it has read ahead judges its sets); a failed batch is
        handed over again (the relay retries it)."""
        self._next_step()
        batch, later = self._relay_batch(count)
        try:
            self.run(self.relay.apply_many(batch, later=later))
        except RPCError:
            return
        self._relay_done(batch)

    @precondition(lambda self: self.read_upto < len(self.log))
    @rule()
    def catch_up(self) -> None:
        """After a gap the relay reads the log ahead to its head and hands over, stops first,
        the read-ahead's cancels and deletions (each at its own order) before its next batch."""
        self._next_step()
        self.read_upto = len(self.log)
        ahead = self.log[self.handed_upto : self.read_upto]
        stops = [stop for commit in ahead for stop in _stops_of(commit)]
        self.read.extend(
            (change, self.step)
            for change in self.changes
            if change.kind != "set" and any(_holds(stop, change) for stop in stops)
        )
        if self.STOPS_FIRST and stops:
            try:
                self.run(self.relay.apply_many(Admission(tuple(stops))))
            except RPCError:
                return  # the relay is behind again: its next catch-up or batch retries

    @precondition(lambda self: len(self.log) - self.handed_upto >= 2)
    @rule(across=st.booleans())
    def two_requests_at_once(self, across: bool) -> None:
        """The next two commits as two `POST /commits` in flight together (either may land
        first): through one process (its per-key order holds) or two (locks not shared)."""
        self._next_step()
        first, second = self.log[self.handed_upto : self.handed_upto + 2]
        self._attempted([first, second])
        other = self.processes[-1] if across else self.relay

        async def both() -> None:
            await asyncio.gather(self.relay.apply(first), other.apply(second))

        try:
            self.run(both())
        except RPCError:
            return
        self._relay_done([first, second])

    @precondition(lambda self: len(self.processes) > 1 and len(self.log) > 0)
    @rule(data=st.data(), count=st.integers(1, 4), relay_count=st.integers(0, 3))
    def another_process(self, data: st.DataObject, count: int, relay_count: int) -> None:
        """Another process hands a range of the log over again (a replica resuming from an
        older checkpoint, a host posting its backlog), at once with the relay's next batch."""
        self._next_step()
        start = data.draw(st.integers(0, len(self.log) - 1))
        commits = self.log[start : start + count]
        self._attempted(commits)
        batch, later = self._relay_batch(relay_count)

        async def both() -> list[Any]:
            return await asyncio.gather(
                self.processes[1].apply_many(commits),
                self.relay.apply_many(batch, later=later),
                return_exceptions=True,
            )

        theirs, ours = self.run(both())
        for answer in (theirs, ours):
            if isinstance(answer, BaseException) and not isinstance(answer, RPCError):
                raise answer
        if not isinstance(ours, BaseException):
            self._relay_done(batch)

    # --- time, the worker and operators ----------------------------------------------------

    @rule(seconds=st.sampled_from([1, 5, 20, 60, 120, 600]))
    def advance(self, seconds: int) -> None:
        self._next_step()
        self.sim.advance(seconds)

    @rule(up=st.booleans())
    def worker(self, up: bool) -> None:
        self._next_step()
        self.sim.worker_up = up
        self.sim.run_worker()

    @rule(state=st.sampled_from(["ok", "lagging", "down", "slow"]))
    def visibility(self, state: str) -> None:
        self.sim.visibility = state

    @rule(
        action=st.sampled_from(["cancel", "terminate", "request"]),
        aggregate_id=st.sampled_from(AGGREGATES),
        key=st.sampled_from(KEYS),
    )
    def operator(self, action: str, aggregate_id: str, key: str) -> None:
        """An operator's cancel (`wow-temporal timers cancel`), a termination, or the Web
        UI's Request Cancellation."""
        self._next_step()
        workflow_id = timer_workflow_id(owner(aggregate_id), key)
        if action == "cancel":
            self._operator_cancels(aggregate_id, key, workflow_id)
            return
        latest = self.sim.latest(workflow_id)
        if latest is None or latest.status.name != "RUNNING":
            return
        if action == "terminate":
            self._operator_terminates(aggregate_id, key, workflow_id)
        else:
            self._temporal_cancel_request(aggregate_id, key, workflow_id)

    def _operator_cancels(self, aggregate_id: str, key: str, workflow_id: str) -> None:
        try:
            self.run(self.relay.cancel(workflow_id))
        except TimerError as error:
            told = str(error)
            if "no worker answered" not in told and "accepted by a worker" not in told:
                return  # not running, or no such timer: nothing was cancelled
        except RPCError:
            self.maybe_ended[aggregate_id, key] = self.step  # the answer was lost
            return
        self.ended_by_operator[aggregate_id, key] = self.step

    def _operator_terminates(self, aggregate_id: str, key: str, workflow_id: str) -> None:
        try:
            self.run(self.sim.get_workflow_handle(workflow_id).terminate("by hand"))
        except RPCError:
            return  # it ended meanwhile (a worker ran it)
        self.ended_by_operator[aggregate_id, key] = self.step

    def _temporal_cancel_request(self, aggregate_id: str, key: str, workflow_id: str) -> None:
        """It ends the schedule in force, or is outrun by a set handed over with it (kept:
        nothing lost), never a set handed over after it."""
        self.run(self.sim.get_workflow_handle(workflow_id).cancel())
        self.maybe_ended[aggregate_id, key] = self.step

    # --- invariants ------------------------------------------------------------------------

    @invariant()
    def never_early_decided_once(self) -> None:
        seen: set[str] = set()
        for decided in [*self.sim.delivered, *self.sim.rejected]:
            assert decided.at >= decided.due, f"early: {decided}"
            assert decided.request_id not in seen, f"decided twice: {decided.request_id}"
            seen.add(decided.request_id)
            found = self._set_of(decided)
            assert found.first_handed is not None, f"sent before it was handed over: {found}"
            ended = self.ended_by_operator.get((found.aggregate_id, found.key))
            assert found.last_handed is not None
            if ended is not None and found.last_handed < ended < decided.sent:
                raise AssertionError(f"{found.timer} sent after an operator ended it")

    @invariant()
    def known_when_committed(self) -> None:
        """No slot delivered that the log stopped before it was due; none refused it held."""
        if not self.COMMITTED_CHECKED:
            return
        for delivered in self.sim.delivered:
            found = self._set_of(delivered)
            stop = self._stopped_before(found, delivered.due)
            if stop is not None:
                raise AssertionError(
                    f"{delivered.request_id} (version {found.order}) due {delivered.due:%T} "
                    f"delivered at {delivered.at:%T} though the log's {stop.kind} of version "
                    f"{stop.order} was committed at {stop.committed:%T}, before it was due"
                )
        for rejected in self.sim.rejected:
            found = self._set_of(rejected)
            assert self._stopped_before(found, rejected.due) is not None, (
                f"{rejected.request_id} refused though the log held it when it was due"
            )

    @invariant()
    def nothing_the_relay_read(self) -> None:
        """No slot sent after the relay read a newer change of its key (handed over, or a
        stop read ahead at a catch-up); no set the relay's batch or read-ahead changed ran."""
        if not self.RELAY_CHECKED:
            return
        for delivered in self.sim.delivered:
            found = self._set_of(delivered)
            assert not found.moot, f"started though its batch or read-ahead changes it: {found}"
            for change, step in self.read:
                if change.stops(found) and step < delivered.sent:
                    raise AssertionError(
                        f"{delivered.request_id} (version {found.order}) sent at step "
                        f"{delivered.sent} though the relay read the {change.kind} of version "
                        f"{change.order} at step {step}"
                    )

    def _set_of(self, decided: Delivered) -> SetEvent:
        return self.sets[decided.request_id.rsplit("#", 1)[0]]

    def _stopped_before(self, found: SetEvent, due: datetime) -> Change | None:
        """The first change of the log that ends `found`, committed before `due`."""
        return next((c for c in self.changes if c.stops(found) and c.committed < due), None)

    def _finish(self) -> None:
        """Everything handed over, a worker up, time past every due: nothing lost."""
        self.sim.visibility = "ok"
        self.sim.lose = 0.0
        self.sim.worker_up = True
        self._next_step()
        for _ in range(10):  # a run at its signal limit refuses until it continues as new,
            # which waits for a command in flight (up to a minute)
            if self.handed_upto >= len(self.log):
                break
            rest = self.log[self.handed_upto :]
            self._attempted(rest)
            try:
                self.run(self.relay.apply_many(rest))
            except RPCError:
                self.sim.advance(30)
                continue
            self._relay_done(rest)
        assert self.handed_upto == len(self.log), "the log could not be handed over"
        self._next_step()
        for _ in range(3):
            self.sim.advance(600)
        self.never_early_decided_once()
        self.known_when_committed()
        self.nothing_the_relay_read()
        delivered = {self._set_of(d).timer for d in self.sim.delivered}
        for found in self.sets.values():
            later = [c for c in self.changes if c.stops(found)]
            slot = (found.aggregate_id, found.key)
            ended = max(self.ended_by_operator.get(slot, 0), self.maybe_ended.get(slot, 0))
            if later or (found.first_handed is not None and ended > found.first_handed):
                continue
            assert found.timer in delivered, f"lost: {found} (log {[c.id for c in self.log]})"


class GuardlessIngestModel(IngestModel):
    """A target without the guard, one process, no faults: what the relay alone keeps (a
    change it read stops what it can, though committed after the slot was due)."""

    GUARD = False
    PROCESSES = 1
    FAULTS = False
    COMMITTED_CHECKED = False
    RELAY_CHECKED = True


def _envelope(n: int, kind: str, key: str, after: int) -> dict[str, Any]:
    if kind == "set":
        payload = {
            "key": key,
            "rule": {"after": f"PT{after}S"},
            "command": {"type": "shop.Cancel", "body": {}},
        }
        return {"id": f"e{n}", "name": "wow.ScheduleSet", "body": payload}
    if kind == "cancel":
        return {"id": f"e{n}", "name": "wow.ScheduleCancelled", "body": {"key": key}}
    return {"id": f"e{n}", "name": "wow.AggregateDeleted", "body": {}}


def _stops_of(commit: Commit) -> list[Admitted]:
    """The commit's cancels and deletions, each admitted on its own: the commit with just that
    change, at its own order (as the relay's read-ahead hands its stops over)."""
    return [
        Admitted(commit, (item,)) for item in changes_of(commit) if item.change.kind != "set"
    ]


def _holds(stop: Admitted, change: Change) -> bool:
    """Whether the stop `stop` (from `_stops_of`) is `change`."""
    (item,) = stop.changes
    return stop.commit.aggregate_id == change.aggregate_id and item.change.order == change.order


def _as_set(found: SetEvent) -> TimerChange:
    return TimerChange(kind="set", version=found.order[0], index=found.order[1])
