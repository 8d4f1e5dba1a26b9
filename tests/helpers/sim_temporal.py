"""A simulated Temporal for the model of ingest (`tests/helpers/ingest_model.py`): the part of the
client `TimerClient` and `DeletionRecords` call, with Temporal's semantics where ingest's order
depends on them, a simulated worker that runs each timer run through the pure core, and the
domain host that decides each delivery.

Modelled: runs of a workflow id (running, completed, terminated, continued as new), id reuse
and conflict policies, signals and cancel requests buffered until a worker runs the timer, the
SDK's activation order (signals and updates first, then a cancel request), a run's result and
history read by run id, the deletion record's memo, and visibility (lagging, down, or slow:
a listing that answers no sooner than the caller gives up).
What the real client must survive: an RPC the server applied whose response is lost (the
caller sees `UNAVAILABLE`; `lose`), a signal refused past a run's signal limit (Temporal's
10,000, scaled down: `signal_limit`; `INVALID_ARGUMENT`), an update that waits a while for a
worker and times out (`update_waits` turns of the loop, other calls running meanwhile), and
one accepted by a worker busy with a delivery in flight, whose answer times out.

The delivery: the activity checks the deletion record, then sends the command the real
`wire_command` builds from the `DeliveryRequest` the workflow would build; the command may be
in flight across the model's steps (`delivery_takes`: the host answers that much later, and
only while a worker runs the activity), and the host's answer may be lost (the activity tries
again: the host answers a request id it decided as it did). The host decides each request id
once, refusing (`rejected`) a slot its log (`committed`) stopped before it was due, with
`wow_temporal.host.guard` as the domain host does (`guard=False` removes it). While a command
is in flight its run applies signals but steps no further, as the workflow waits for it.

Not modelled: start delays (a timer sleeps in its workflow until due either way), the wire of
the client's calls (payloads are the models themselves, except in history events, which are
real protos encoded by the pydantic data converter), an activity cancelled before it sent its
command (in flight means sent), and a command in flight when its run is terminated (never
answered: taken as not sent).
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any

from temporalio.api.common.v1 import Payloads
from temporalio.api.history.v1 import (
    HistoryEvent,
    WorkflowExecutionSignaledEventAttributes,
    WorkflowExecutionStartedEventAttributes,
)
from temporalio.client import WorkflowExecutionStatus, WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from wow_temporal.delivery import DeliveryRequest, wire_command
from wow_temporal.host.guard import stop_before_due
from wow_temporal.model import AggregateRef, Commit
from wow_temporal.search_attributes import SA_KEY
from wow_temporal.timers import core
from wow_temporal.timers.core import TimerState
from wow_temporal.timers.deletion import DeletionRecord
from wow_temporal.timers.workflow import TimerInput, delivery_request
from wow_temporal.wire import SlotOrigin

__all__ = ["Delivered", "SimTemporal"]

RUNNING = WorkflowExecutionStatus.RUNNING


@dataclass(frozen=True)
class Delivered:
    """A command the simulated host decided: which slot, when, and when it was due."""

    request_id: str
    at: datetime
    """When the host decided it."""
    due: datetime
    set_order: tuple[int, int]
    step: int
    """The model's step in which the host decided it (`SimTemporal.step`)."""
    sent: int
    """The model's step in which it was sent (the activity posted it; it cannot be recalled)."""


@dataclass
class _Flight:
    """A command sent to the host and not answered yet (or its answer lost)."""

    delivery: core.Delivery
    request: DeliveryRequest
    answer_at: datetime
    """The host answers no earlier: the command takes time."""
    sent: int


@dataclass
class _Run:
    workflow_id: str
    run_id: str
    kind: str  # "timer" or "deletion"
    state: Any  # TimerState or DeletionRecord
    status: WorkflowExecutionStatus = RUNNING
    started: TimerInput | DeletionRecord | None = None
    inbox: list[tuple[str, Any]] = field(default_factory=list)
    """Signals and updates a worker has yet to see, in the order the server took them."""
    history: list[tuple[str, Any]] = field(default_factory=list)
    cancel_requested: bool = False
    cancel_seen: bool = False
    operator_cancels: list[str] = field(default_factory=list)
    received: int = 0
    signals: int = 0
    """Signals the server took for this run (the limit counts them)."""
    memo: dict[str, Any] = field(default_factory=dict)
    flight: _Flight | None = None


class _Description(SimpleNamespace):
    async def memo_value(self, key: str, default: Any = None) -> Any:
        return self.memo.get(key, default)


_SIMS = itertools.count(1)


class SimTemporal:
    """One namespace's workflows, a clock, a worker that is up or down, and the host."""

    def __init__(
        self,
        now: datetime,
        seed: int = 0,
        *,
        continue_as_new_after: int = 6,
        guard: bool = True,
    ) -> None:
        self.now = now
        self.rng = random.Random(seed)
        self.runs: dict[str, list[_Run]] = {}
        self.worker_up = True
        self.visibility = "ok"
        """"ok", "lagging" (shows nothing), "down" (raises), "slow" (never answers: the
        caller's own timeout ends the call)."""
        self.continue_as_new_after = continue_as_new_after
        self.worker_during_rpc = 0.3
        self.step = 0
        """Set by the model driving it: which of its steps runs now."""
        self.guard = guard
        """The target's guard (`host.guard`): off, the host decides every slot it is sent."""
        self.log: dict[AggregateRef, list[Commit]] = {}
        """The owners' logs as the host reads them: every commit committed, in version order."""
        self.delivered: list[Delivered] = []
        self.rejected: list[Delivered] = []
        """Slots the host refused: its log stopped them before they were due."""
        self.decided: dict[str, core.Decided] = {}
        self.delivery_takes: tuple[float, ...] = (0,)
        """Seconds a command takes until the host answers, one picked per command."""
        self.lose = 0.0
        """The chance that the answer to a call the server applied (or a host's) is lost."""
        self.signal_limit: int | None = None
        """Signals a run takes before the server refuses more (Temporal's 10,000)."""
        self.update_waits = 0
        """Turns of the loop an update waits for a worker before it times out."""
        self._ids = itertools.count(1)
        self.data_converter = pydantic_data_converter
        self.namespace = f"sim-{next(_SIMS)}"
        """A namespace of its own: its keys' locks are no other test's (they are process-wide)."""
        self.service_client = SimpleNamespace(config=SimpleNamespace(runtime=None))

    def committed(self, commit: Commit) -> None:
        """The owner's log holds `commit` now (the host reads it when it judges a slot)."""
        self.log.setdefault(commit.aggregate, []).append(commit)

    # --- the client's calls ------------------------------------------------------------------

    async def _rpc(self) -> None:
        """Each call may be overtaken by another in flight (ingests interleave here), and a
        worker may run meanwhile (it does not wait for ingest)."""
        if self.rng.random() < self.worker_during_rpc:
            self.run_worker()
        for _ in range(self.rng.randint(0, 3)):
            await asyncio.sleep(0)

    def _answered(self) -> None:
        """The server applied the call; its answer may be lost on the way back."""
        if self.rng.random() < self.lose:
            raise RPCError("the answer was lost", RPCStatusCode.UNAVAILABLE, b"")

    def _signalled(self, run: _Run) -> None:
        """Refuse a signal past the run's limit, as the server does."""
        if self.signal_limit is not None and run.signals >= self.signal_limit:
            raise RPCError(
                "exceeded workflow execution limit for signal events",
                RPCStatusCode.INVALID_ARGUMENT,
                b"",
            )
        run.signals += 1

    def latest(self, workflow_id: str) -> _Run | None:
        runs = self.runs.get(workflow_id)
        return runs[-1] if runs else None

    async def start_workflow(self, run_fn: Any, arg: Any, *, id: str, **options: Any) -> Any:
        await self._rpc()
        latest = self.latest(id)
        reuse = options.get("id_reuse_policy", WorkflowIDReusePolicy.ALLOW_DUPLICATE)
        conflict = options.get("id_conflict_policy", WorkflowIDConflictPolicy.FAIL)
        signal = options.get("start_signal")
        if latest is not None and latest.status == RUNNING:
            if conflict == WorkflowIDConflictPolicy.USE_EXISTING:
                if signal:
                    self._signalled(latest)
                    self._take(latest, signal, options["start_signal_args"][0])
                self._answered()
                return SimpleNamespace(id=id, result_run_id=latest.run_id)
            if conflict == WorkflowIDConflictPolicy.TERMINATE_EXISTING:
                latest.status = WorkflowExecutionStatus.TERMINATED
            else:
                raise WorkflowAlreadyStartedError(id, "wow", run_id=latest.run_id)
        elif latest is not None and reuse == WorkflowIDReusePolicy.REJECT_DUPLICATE:
            raise WorkflowAlreadyStartedError(id, "wow", run_id=latest.run_id)
        kind = "deletion" if isinstance(arg, DeletionRecord) else "timer"
        state = arg if kind == "deletion" else arg.state
        run = _Run(id, f"run-{next(self._ids)}", kind, state, started=arg)
        run.memo = dict(options.get("memo") or {})
        self.runs.setdefault(id, []).append(run)
        if signal:
            self._signalled(run)
            self._take(run, signal, options["start_signal_args"][0])
        self._answered()
        return SimpleNamespace(id=id, result_run_id=run.run_id)

    def _take(self, run: _Run, name: str, arg: Any) -> None:
        run.inbox.append((name, arg))
        run.history.append((name, arg))

    def get_workflow_handle(
        self, workflow_id: str, *, run_id: str | None = None, result_type: Any = None
    ) -> _Handle:
        return _Handle(self, workflow_id, run_id)

    def list_workflows(self, query: str, limit: int | None = None) -> AsyncIterator[Any]:
        return self._listed(query)

    async def _listed(self, query: str) -> AsyncIterator[Any]:
        await self._rpc()
        if self.visibility == "down":
            raise RPCError("visibility is down", RPCStatusCode.UNAVAILABLE, b"")
        if self.visibility == "slow":
            await asyncio.Event().wait()
        if self.visibility == "lagging":
            return
        for workflow_id, runs in list(self.runs.items()):
            run = runs[-1]
            if run.kind != "timer" or run.status != RUNNING:
                continue
            key = workflow_id.rsplit(":", 1)[1]
            aggregate_id = workflow_id.rsplit(":", 2)[1]
            if f"WowAggregateId = '{aggregate_id}'" in query:
                yield SimpleNamespace(typed_search_attributes={SA_KEY: key})

    # --- the worker --------------------------------------------------------------------------

    def run_worker(self) -> None:
        """What a worker does now: each running timer takes its signals, then steps."""
        if not self.worker_up:
            return
        for workflow_id in list(self.runs):
            run = self.latest(workflow_id)
            if run is not None and run.kind == "timer" and run.status == RUNNING:
                self._activate(run)

    def _activate(self, run: _Run) -> None:
        """One activation: the signals first, then a cancel request; a command in flight is
        settled (or still awaited), then the timer steps: sleeps, sends, or ends."""
        state: TimerState = run.state
        before, came = state.applied, bool(run.inbox)
        for name, arg in run.inbox:
            run.received += 1
            if name == "apply":
                state, _ = core.receive(state, arg)
            elif name == "cancel":
                if arg and arg in run.operator_cancels:
                    continue
                run.operator_cancels.append(arg)
                state = core.cancel(state)
        run.inbox.clear()
        if run.cancel_requested:  # the SDK applies it after the signals that came with it
            run.cancel_requested = False
            state = core.cancel_requested(state, before if came else None)
        if run.flight is not None:
            outcome = self._host(run.flight)
            if outcome is None:
                run.state = state
                return  # the workflow waits for its command's answer
            state = core.on_outcome(state, run.flight.delivery, outcome, "")
            run.flight = None
        while True:
            state, step = core.step(state, self.now)
            if isinstance(step, core.Finish):
                run.state = state
                run.status = WorkflowExecutionStatus.COMPLETED
                return
            if isinstance(step, core.Deliver):
                sent = self._send(run, state, step.delivery)
                if isinstance(sent, _Flight):
                    outcome = self._host(sent)
                    if outcome is None:
                        run.flight = sent
                        break
                else:
                    outcome = sent
                state = core.on_outcome(state, step.delivery, outcome, "")
                continue
            break
        run.state = state
        if (
            run.received >= self.continue_as_new_after
            and state.pending is None
            and run.flight is None
        ):
            run.status = WorkflowExecutionStatus.CONTINUED_AS_NEW
            successor = _Run(run.workflow_id, f"run-{next(self._ids)}", "timer", state)
            successor.started = TimerInput(state=state)
            self.runs[run.workflow_id].append(successor)

    def _send(
        self, run: _Run, state: TimerState, delivery: core.Delivery
    ) -> _Flight | core.Decided:
        """The delivery activity: the deletion record checked (`cancelled`: nothing is sent),
        then the command the workflow's request makes is sent to the host."""
        request = delivery_request(state, delivery)
        record = self.latest(_deletion_id(run.workflow_id))
        if record is not None and "deleted" in record.memo:
            deleted = DeletionRecord.model_validate(record.memo["deleted"])
            if deleted.order > request.set_order:
                return "cancelled"
        takes = timedelta(seconds=self.rng.choice(self.delivery_takes))
        return _Flight(delivery, request, self.now + takes, self.step)

    def _host(self, flight: _Flight) -> core.Decided | None:
        """The host's answer to a command in flight, None while there is none: it comes once
        the command has taken its time, while a worker runs the activity, unless lost (the
        activity tries again). The host decides a request id once, and answers a repeat so."""
        if not self.worker_up or self.now < flight.answer_at:
            return None
        request_id = flight.delivery.request_id
        outcome = self.decided.get(request_id)
        if outcome is None:
            outcome = "rejected" if self._stopped(flight.request) else "delivered"
            self.decided[request_id] = outcome
            record = Delivered(
                request_id,
                self.now,
                flight.delivery.due,
                flight.request.set_order,
                self.step,
                flight.sent,
            )
            (self.rejected if outcome == "rejected" else self.delivered).append(record)
        if self.rng.random() < self.lose:
            return None
        return outcome

    def _stopped(self, request: DeliveryRequest) -> bool:
        """The domain host's guard: the slot's origin, read from the command's headers, judged
        against the owner's log from the set's version on (`host.service`'s `_stopped`)."""
        if not self.guard:
            return False
        origin = SlotOrigin.from_headers(wire_command(request).headers)
        if origin is None:
            return False
        commits = [c for c in self.log.get(origin.owner, []) if c.version >= origin.version]
        return stop_before_due(origin, commits) is not None

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
        self.run_worker()


def _deletion_id(timer_id: str) -> str:
    """The deletion record's id for a timer's aggregate (`wow-deleted:` + its owner part)."""
    owner = timer_id.removeprefix("wow-timer:").rsplit(":", 1)[0]
    return f"wow-deleted:{owner}"


@dataclass
class _Accepted:
    """An update a worker accepted; its answer."""

    state: Any
    """None: not answered in time (a command in flight ends first)."""

    async def result(self, **options: Any) -> Any:
        if self.state is None:
            raise WorkflowUpdateRPCTimeoutOrCancelledError()
        return self.state


class _Handle:
    def __init__(self, sim: SimTemporal, workflow_id: str, run_id: str | None) -> None:
        self.sim = sim
        self.id = workflow_id
        self.run_id = run_id

    def _run(self) -> _Run:
        runs = self.sim.runs.get(self.id, [])
        for run in reversed(runs):
            if self.run_id is None or run.run_id == self.run_id:
                return run
        raise RPCError("workflow not found", RPCStatusCode.NOT_FOUND, b"")

    async def describe(self) -> _Description:
        await self.sim._rpc()
        run = self._run()
        return _Description(
            id=self.id,
            status=run.status,
            run_id=run.run_id,
            memo=run.memo,
            typed_search_attributes={},
            close_time=None,  # not kept by the sim; shown as "ended" only
        )

    async def result(self, *, follow_runs: bool = True, rpc_timeout: Any = None) -> Any:
        await self.sim._rpc()
        run = self._run()
        assert run.status == WorkflowExecutionStatus.COMPLETED, "read only once completed"
        return run.state

    async def signal(self, name: str, arg: Any = None, *, args: list[Any] | None = None) -> None:
        if args is not None:
            (arg,) = args
        await self.sim._rpc()
        run = self._run()
        if run.status != RUNNING:
            raise RPCError("workflow execution already completed", RPCStatusCode.NOT_FOUND, b"")
        self.sim._signalled(run)
        self.sim._take(run, name, arg)
        self.sim._answered()

    async def cancel(self) -> None:
        """A cancel request: once per run (the server ignores a second one)."""
        await self.sim._rpc()
        run = self._run()
        if not run.cancel_seen:
            run.cancel_requested = run.cancel_seen = True

    async def terminate(self, reason: str | None = None) -> None:
        await self.sim._rpc()
        run = self._run()
        if run.status != RUNNING:
            raise RPCError("workflow execution already completed", RPCStatusCode.NOT_FOUND, b"")
        run.status = WorkflowExecutionStatus.TERMINATED

    async def execute_update(self, name: str, *, args: list[Any], **options: Any) -> Any:
        return await (await self.start_update(name, args=args)).result()

    async def start_update(self, name: str, *, args: list[Any], **options: Any) -> _Accepted:
        """Accepted and applied at once by a worker that is up; with none, the RPC waits a
        while (other calls run meanwhile, a worker may come) and times out as the real one
        does. A worker busy with a command in flight accepts it, and it applies once the
        command is answered: its answer times out."""
        await self.sim._rpc()
        run = self._run()
        for _ in range(self.sim.update_waits):
            if self.sim.worker_up:
                break
            await asyncio.sleep(0)
        if not self.sim.worker_up or run.status != RUNNING:
            raise WorkflowUpdateRPCTimeoutOrCancelledError()
        assert name == "cancel"
        self.sim._take(run, "cancel", args[0])
        self.sim._activate(run)
        return _Accepted(None if run.flight is not None else run.state)

    async def fetch_history_events(self) -> AsyncIterator[HistoryEvent]:
        run = self._run()
        converter = self.sim.data_converter
        started = await converter.encode([run.started])
        yield HistoryEvent(
            workflow_execution_started_event_attributes=WorkflowExecutionStartedEventAttributes(
                input=Payloads(payloads=started)
            )
        )
        for name, arg in run.history:
            payloads = await converter.encode([arg])
            yield HistoryEvent(
                workflow_execution_signaled_event_attributes=WorkflowExecutionSignaledEventAttributes(
                    signal_name=name, input=Payloads(payloads=payloads)
                )
            )
