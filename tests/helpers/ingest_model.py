"""A model of ingest (issue #26): the real `TimerClient` (fold, hand-over, restarts, deletion
records, operators' cancels) against a simulated Temporal (`tests.helpers.sim_temporal`), driven
by a hypothesis state machine through run boundaries, interleaved ingests of one key, catch-ups
after an outage, a worker away and back, operators' cancels and terminations, and visibility
lagging or down. Run by `tests/unit/test_ingest_model.py` (bounded) and `bench/ingest_model.py`;
the same scenarios run on the real dev server in `tests/system/test_ingest_order.py`.

Invariants, checked after every step:
- never early: no command is delivered before its slot is due;
- decided once: no request id is delivered twice;
- nothing the log changed: no set is delivered once a newer change of its key, or its
  aggregate's deletion, has been handed over (or was in the batch, or ahead in the log, when
  it was handed over);
- an operator's cancel or termination holds for every set handed over before it;
and at the end, nothing lost: each key's latest set, still in force, is delivered once (a
Temporal cancel request may end a set handed over before it, never one handed over after).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime
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

from tests.helpers.sim_temporal import SimTemporal
from wow_temporal.ids import timer_workflow_id
from wow_temporal.model import AggregateRef, Commit
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
    handed: int | None = None
    """The step at which it was handed over (started, handed to a run, or folded away)."""
    moot: bool = False
    """Handed over with the log read ahead holding a newer change: never to be started."""


event = st.one_of(
    st.tuples(st.just("set"), st.sampled_from(KEYS), st.integers(1, 90)),
    st.tuples(st.just("cancel"), st.sampled_from(KEYS), st.just(0)),
    st.tuples(st.just("delete"), st.just(""), st.just(0)),
)


class IngestModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.sim = SimTemporal(START)
        self.timers = TimerClient(self.sim, task_queue="model")  # type: ignore[arg-type]
        self.log: list[Commit] = []
        self.handed_upto = 0
        self.step = 0
        self.versions = dict.fromkeys(AGGREGATES, 0)
        self.sets: dict[str, SetEvent] = {}
        self.changes: list[tuple[str, str, tuple[int, int], int]] = []
        """Changes known to Temporal's side: (aggregate, key or "" for a deletion, order,
        the step at which ingest knew of it)."""
        self.ended_by_operator: dict[tuple[str, str], int] = {}
        self.cancel_requested: dict[tuple[str, str], int] = {}

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

    # --- the log and its hand-over ---------------------------------------------------------

    @rule(aggregate_id=st.sampled_from(AGGREGATES), events=st.lists(event, min_size=1, max_size=3))
    def commit(self, aggregate_id: str, events: list[tuple[str, str, int]]) -> None:
        self.versions[aggregate_id] += 1
        version = self.versions[aggregate_id]
        commit_id = f"{aggregate_id}-v{version}"
        body = []
        for n, (kind, key, after) in enumerate(events):
            if kind == "set":
                payload = {
                    "key": key,
                    "rule": {"after": f"PT{after}S"},
                    "command": {"type": "shop.Cancel", "body": {}},
                }
                body.append({"id": f"e{n}", "name": "wow.ScheduleSet", "body": payload})
            elif kind == "cancel":
                body.append({"id": f"e{n}", "name": "wow.ScheduleCancelled", "body": {"key": key}})
            else:
                body.append({"id": f"e{n}", "name": "wow.AggregateDeleted", "body": {}})
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
            if envelope.name == "wow.ScheduleSet":
                timer = f"{commit_id}:{envelope.id}"
                due = scheduled.rule.first_due(commit.created_at)  # type: ignore[union-attr]
                assert due is not None
                key = scheduled.key  # type: ignore[union-attr]
                self.sets[timer] = SetEvent(aggregate_id, key, (version, index), timer, due)
        self.log.append(commit)

    def _known(self, commits: list[Commit]) -> None:
        """Ingest now knows these commits' changes (handed over, folded or read ahead)."""
        for commit in commits:
            for index, (envelope, scheduled) in enumerate(commit.schedule_events()):
                key = getattr(scheduled, "key", "")
                self.changes.append(
                    (commit.aggregate_id, key, (commit.version, index), self.step)
                )
                if envelope.name == "wow.ScheduleSet":
                    found = self.sets[f"{commit.id}:{envelope.id}"]
                    found.handed = self.step if found.handed is None else found.handed

    def _sets_of(self, commits: list[Commit]) -> list[SetEvent]:
        return [
            self.sets[f"{commit.id}:{envelope.id}"]
            for commit in commits
            for envelope, _ in commit.schedule_events()
            if envelope.name == "wow.ScheduleSet"
        ]

    @precondition(lambda self: self.handed_upto < len(self.log))
    @rule(count=st.integers(1, 6), read_ahead=st.booleans())
    def hand_over(self, count: int, read_ahead: bool) -> None:
        """A relay's batch: the next commits of the log, maybe knowing the rest (catch-up)."""
        self._next_step()
        batch = self.log[self.handed_upto : self.handed_upto + count]
        self._known(batch)
        known = Horizon()  # what ingest knows beside each set: its batch, and what is ahead
        known.extend(batch)
        later = None
        if read_ahead:
            later = Horizon()
            later.extend(self.log[self.handed_upto + count :])
            known.extend(self.log[self.handed_upto + count :])
        for found in self._sets_of(batch):
            if known.supersedes(owner(found.aggregate_id), found.key, _as_set(found)):
                found.moot = True
        self.run(self.timers.apply_many(batch, later=later))
        self.handed_upto += len(batch)

    @precondition(lambda self: len(self.log) - self.handed_upto >= 2)
    @rule()
    def two_requests_at_once(self) -> None:
        """The next two commits as two `POST /commits` in flight together (either may land
        first): one client, so its per-key order holds."""
        self._next_step()
        first, second = self.log[self.handed_upto : self.handed_upto + 2]
        self._known([first, second])

        async def both() -> None:
            await asyncio.gather(self.timers.apply(first), self.timers.apply(second))

        self.run(both())
        self.handed_upto += 2

    # --- time, the worker and operators ----------------------------------------------------

    @rule(seconds=st.sampled_from([1, 5, 20, 60, 120]))
    def advance(self, seconds: int) -> None:
        self._next_step()
        self.sim.advance(seconds)

    @rule(up=st.booleans())
    def worker(self, up: bool) -> None:
        self._next_step()
        self.sim.worker_up = up
        self.sim.run_worker()

    @rule(state=st.sampled_from(["ok", "lagging", "down"]))
    def visibility(self, state: str) -> None:
        self.sim.visibility = state

    @rule(aggregate_id=st.sampled_from(AGGREGATES), key=st.sampled_from(KEYS))
    def operator_cancels(self, aggregate_id: str, key: str) -> None:
        self._next_step()
        workflow_id = timer_workflow_id(owner(aggregate_id), key)
        try:
            self.run(self.timers.cancel(workflow_id))
        except TimerError as error:
            if "no worker answered" not in str(error):
                return  # not running, or no such timer: nothing was cancelled
        self.ended_by_operator[aggregate_id, key] = self.step

    @rule(aggregate_id=st.sampled_from(AGGREGATES), key=st.sampled_from(KEYS))
    def operator_terminates(self, aggregate_id: str, key: str) -> None:
        self._next_step()
        workflow_id = timer_workflow_id(owner(aggregate_id), key)
        latest = self.sim.latest(workflow_id)
        if latest is None or latest.status.name != "RUNNING":
            return
        try:
            self.run(self.sim.get_workflow_handle(workflow_id).terminate("by hand"))
        except RPCError:
            return  # it ended meanwhile (a worker ran it)
        self.ended_by_operator[aggregate_id, key] = self.step

    @rule(aggregate_id=st.sampled_from(AGGREGATES), key=st.sampled_from(KEYS))
    def temporal_cancel_request(self, aggregate_id: str, key: str) -> None:
        """The Web UI's Request Cancellation: it ends the schedule in force, or is outrun by
        a set handed over with it (kept: nothing lost), never a set handed over after it."""
        self._next_step()
        workflow_id = timer_workflow_id(owner(aggregate_id), key)
        latest = self.sim.latest(workflow_id)
        if latest is None or latest.status.name != "RUNNING":
            return
        self.run(self.sim.get_workflow_handle(workflow_id).cancel())
        self.cancel_requested[aggregate_id, key] = self.step

    # --- invariants ------------------------------------------------------------------------

    @invariant()
    def never_early_decided_once_nothing_the_log_changed(self) -> None:
        seen: set[str] = set()
        for delivery in self.sim.delivered:
            assert delivery.at >= delivery.due, f"early: {delivery}"
            assert delivery.request_id not in seen, f"decided twice: {delivery.request_id}"
            seen.add(delivery.request_id)
            timer = delivery.request_id.rsplit("#", 1)[0]
            found = self.sets[timer]
            assert found.handed is not None, f"delivered before it was handed over: {found}"
            assert not found.moot, f"started though its batch or the log ahead changes it: {found}"
            delivered_step = delivery.step
            for aggregate_id, key, order, known in self.changes:
                if aggregate_id != found.aggregate_id or key not in ("", found.key):
                    continue
                if order > found.order and known < delivered_step:
                    raise AssertionError(
                        f"{timer} (version {found.order}) delivered at step {delivered_step} "
                        f"though {key or 'the deletion'} of version {order} was known at "
                        f"step {known}"
                    )
            ended = self.ended_by_operator.get((found.aggregate_id, found.key))
            if ended is not None and found.handed < ended < delivered_step:
                raise AssertionError(f"{timer} delivered after an operator ended it")

    def _finish(self) -> None:
        """Everything handed over, a worker up, time past every due: nothing lost."""
        self.sim.visibility = "ok"
        self._next_step()
        if self.handed_upto < len(self.log):
            self._known(self.log[self.handed_upto :])
            self.run(self.timers.apply_many(self.log[self.handed_upto :]))
            self.handed_upto = len(self.log)
        self.sim.worker_up = True
        self._next_step()
        for _ in range(3):
            self.sim.advance(200)
        self.never_early_decided_once_nothing_the_log_changed()
        delivered = {d.request_id.rsplit("#", 1)[0] for d in self.sim.delivered}
        for found in self.sets.values():
            later = [
                order
                for aggregate_id, key, order, _ in self.changes
                if aggregate_id == found.aggregate_id
                and key in ("", found.key)
                and order > found.order
            ]
            ended = max(
                self.ended_by_operator.get((found.aggregate_id, found.key), 0),
                self.cancel_requested.get((found.aggregate_id, found.key), 0),
            )
            if later or (found.handed is not None and ended > found.handed):
                continue
            assert found.timer in delivered, f"lost: {found} (log {[c.id for c in self.log]})"


def _as_set(found: SetEvent) -> TimerChange:
    return TimerChange(kind="set", version=found.order[0], index=found.order[1])
