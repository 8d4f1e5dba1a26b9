"""The timer workflow: a thin, deterministic shell that runs `timers.core` durably on Temporal.

One workflow per aggregate and key (`wow-timer:…`). It sleeps until the slot is due, checks its
own clock, hands the slot to the `wow.deliver` activity, and applies the outcome. Schedule
changes arrive as the `apply` signal (ingest never waits for a worker; what each did is noted
in the state and the current details); operators retry or cancel through updates, and a
Temporal cancel request is an operator's cancel. A delivery in flight when its schedule changes
is not recalled, and no attempt starts after the change.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict
from temporalio import workflow
from temporalio.common import RawValue, SearchAttributeUpdate
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

with workflow.unsafe.imports_passed_through():
    from wow_temporal.delivery import (
        DELIVERY_PARKED,
        DeliveryOutcome,
        DeliveryRequest,
        ScheduleDetails,
        park_reason,
    )
    from wow_temporal.engine import CONTINUE_AS_NEW_AFTER_EVENTS
    from wow_temporal.engine.payloads import read_payload
    from wow_temporal.engine.waiting import Changes, history_is_long, wait
    from wow_temporal.metrics import record_change_received
    from wow_temporal.search_attributes import SA_DUE, SA_STATUS
    from wow_temporal.settings.delivery import DeliverySettings
    from wow_temporal.timers import core
    from wow_temporal.timers.core import Status, TimerChange, TimerState, Verdict

__all__ = ["DeliverySettings", "TimerInput", "TimerWorkflow"]
# DeliverySettings lives in `wow_temporal.settings.delivery`; it is re-exported here for the
# callers that import it from this module.


_ONE_MISSED_CAP = "wow-one-missed-cap"
"""Patch: a catch-up past `MAX_MISSED_COUNTED` slots is numbered by the engine's one rule
(runs that caught up under 0.1.x replay with the slot numbers, so the request ids, they sent)."""

_CONTINUE_ON_IGNORED = "wow-continue-on-ignored"
"""Patch: ignored changes, and a parked timer, lead to continue-as-new too (runs recorded
before it replay as they ran)."""


_CANCEL_IN_FORCE = "wow-cancel-in-force"
"""Patch: a Temporal cancel request that met a delivery in flight spares a set handed over
after it, before the attempt settled (runs recorded before it cancelled that set too)."""
_CANCEL_IN_SETTLE = "wow-cancel-in-settle"
"""Patch: so does one that came while an attempt a newer set replaced was settling (runs
recorded before it took the request as applying to whatever was in force once it settled)."""
_WAKE_ON_SUGGESTED = "wow-wake-on-suggested"
"""Patch: a timer's wait also ends when Temporal suggests continuing as new, as a job's does
(runs recorded before it waited on)."""
_SHOWN_AS_STATE = "wow-shown-as-state"
"""Patch: what visibility shows is the state's status at every step: a timer with nothing due
ends `NeverDue` (not Completed with no `WowStatus`, read as Delivered), and `WowDue` is moved
back to a slot delivered before it (runs recorded before it replay without those upserts)."""


class TimerInput(BaseModel):
    """The workflow's input, and what it carries across continue-as-new."""

    model_config = ConfigDict(frozen=True)

    state: TimerState
    delivery: DeliverySettings = DeliverySettings()
    continue_as_new_after: int = CONTINUE_AS_NEW_AFTER_EVENTS
    """History length past which the timer continues as new (tests lower it)."""


class _CancelMet:
    """A Temporal cancel request a delivery in flight met: applied once the attempt settles."""

    def __init__(
        self, at: int, came_with: tuple[int, int] | None, in_force: tuple[int, int]
    ) -> None:
        self.at = at
        """The history length of the activation that brought it."""
        self.came_with = came_with
        """The order in force before the changes that came with it; None if none did."""
        self.in_force = in_force
        """The order in force when it came: a change handed over later is newer than it."""


class _Flight:
    """The delivery activity running now, and the slot it delivers."""

    def __init__(self, delivery: core.Delivery, handle: workflow.ActivityHandle[Any]) -> None:
        self.delivery = delivery
        self.handle = handle


@workflow.defn(name="wow.Timer")
class TimerWorkflow:
    """One key of one aggregate: sleeps, delivers each slot until decided, parks failures."""

    @workflow.init
    def __init__(self, raw: RawValue) -> None:
        input, why = read_payload(raw, TimerInput)
        if input is None:  # never fail the task forever on its own input
            workflow.logger.warning("timer cannot read its input: %s", why)
            input = TimerInput(state=core.unreadable_input(why))
        self._state = input.state
        self._input = input
        self._changes = Changes()
        self._flight: _Flight | None = None
        self._activation = -1
        """The history length of the activation that last handed a change over."""
        self._applied_before = input.state.applied
        """The order in force before that activation's changes."""
        self._cancel_met: _CancelMet | None = None
        """A cancel request that interrupted a delivery, if one did."""
        self._retried = ""
        """The request id an operator retried after it was parked (not counted late)."""
        self._operator_cancels: list[str] = []
        """Ids of the operators' cancels taken (an update and its fallback signal are one)."""
        current = workflow.info().typed_search_attributes
        self._shown = core.Shown(current.get(SA_STATUS), current.get(SA_DUE))

    @workflow.run
    async def run(self, raw: RawValue) -> TimerState:
        while True:
            try:
                return await self._run()
            except asyncio.CancelledError:
                # `temporal workflow cancel` or the Web UI's "Request Cancellation".
                self._state = self._cancel_requested()
                if self._state.spec is not None:  # outrun by a newer schedule: it goes on
                    task = asyncio.current_task()
                    if task is not None:
                        task.uncancel()
                    continue
                await self._settle()
                self._show(core.Finish(self._state.status))
                return self._state

    def _cancel_requested(self) -> TimerState:
        """The state after the cancel request: it cancels the order in force when it came. One
        a delivery in flight met is applied once the attempt has settled; a set handed over
        meanwhile is newer and stands (runs recorded before the patch cancelled it)."""
        met, self._cancel_met = self._cancel_met, None
        if met is None:
            length = workflow.info().get_current_history_length()
            came_with = self._applied_before if length == self._activation else None
            return core.cancel_requested(self._state, came_with)
        # As before the patch: changes handed over after the request hid what came with it.
        came_with = self._applied_before if met.at == self._activation else None
        before = core.cancel_requested(self._state, came_with)
        state = core.cancel_requested(self._state, met.came_with, in_force=met.in_force)
        if (state.spec is None) != (before.spec is None) and not workflow.patched(_CANCEL_IN_FORCE):
            return before
        return state

    async def _run(self) -> TimerState:
        while True:
            self._state, next_step = self._step()
            self._show(next_step)
            match next_step:
                case core.Finish():
                    await workflow.wait_condition(workflow.all_handlers_finished)
                    return self._state
                case core.Sleep(until):
                    await self._wait(until)
                case core.AwaitOperator():
                    await self._wait(None)
                case core.Deliver(delivery):
                    await self._deliver(delivery)
            if self._should_continue_as_new():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(self._input.model_copy(update={"state": self._state}))

    def _step(self) -> tuple[core.TimerState, core.Step]:
        """The core's next step; a catch-up past the cap is numbered as the run's history
        says: as 0.1.x did when it was recorded without the patch (asked only then, so no
        other timer's history gains a marker)."""
        now = workflow.now()
        state, next_step = core.step(self._state, now)
        if core.passed_the_cap(next_step) and not workflow.patched(_ONE_MISSED_CAP):
            state, next_step = core.step(self._state, now, numbered_before_0_2=True)
        return state, next_step

    @workflow.signal(name="apply")
    def apply_signal(self, raw: RawValue) -> None:
        """A schedule event of a commit (set, cancel or delete), as ingest hands it over: kept
        by the server until a worker runs the timer, so ingest never waits for one. What it did
        is noted in the state's `last_change` and the current details; one this version cannot
        read is refused there too (the SDK would drop it with a log line only)."""
        change, why = read_payload(raw, TimerChange)
        if change is not None and change.kind == "set" and change.spec is None:
            change, why = None, "a set change carries no spec"
        if change is None:
            workflow.logger.warning("timer refused a change it cannot read: %s", why)
            self._state = core.unreadable(self._state, why)
            workflow.set_current_details(core.details(self._state))
            record_change_received(workflow.metric_meter(), "unknown", "unreadable")
            return
        self._receive(change)

    @workflow.update(name="apply")
    async def apply(self, change: TimerChange) -> Verdict:
        """The same change as an update, answered with what it did once a delivery in flight
        has finished (ingest sends signals now; kept for callers and histories that use it)."""
        answer = self._receive(change)
        if self._flight is not None and self._flight.delivery != self._state.pending:
            await self._settled()
            answer = answer.model_copy(
                update={"reason": f"{answer.reason}; {self._state.last_outcome}"}
            )
        return answer

    @apply.validator
    def _not_stale(self, change: TimerChange) -> None:
        stale = core.stale_reason(self._state, change)
        if stale is not None:
            raise ApplicationError(stale, type="Stale", non_retryable=True)

    @workflow.update(name="retry")
    def retry(self) -> TimerState:
        """An operator's retry of the parked slot, with the same request id."""
        if self._state.pending is not None:
            self._retried = self._state.pending.request_id  # it starts late by design
        self._update(core.retry(self._state))
        return self._state

    @retry.validator
    def _retry_only_parked(self) -> None:
        if self._state.spec is None:
            raise ApplicationError(
                f"there is nothing to retry: {self._state.parked_error or 'no schedule'}; "
                "cancel it, or hand its commit over again",
                type="NotParked",
                non_retryable=True,
            )
        if self._state.status is not Status.PARKED:
            raise ApplicationError(
                f"only a parked timer can be retried; this one is {self._state.status.value}",
                type="NotParked",
                non_retryable=True,
            )

    @workflow.update(name="cancel")
    async def cancel(self, request: str = "") -> TimerState:
        """An operator's cancel: the timer ends; a delivery in flight finishes first."""
        self._operator_cancel(request)
        if self._flight is not None:
            await self._settled()
        return self._state

    @workflow.signal(name="cancel")
    def cancel_signal(self, request: str = "") -> None:
        """An operator's cancel when no worker answered the update in time: a signal, kept in
        the timer's history in order with the changes handed over, so it cancels what was in
        force when it was sent and no set handed over after it (the update, should the server
        still hand it over later, is then the same cancel again: `request` tells)."""
        self._operator_cancel(request)

    def _operator_cancel(self, request: str) -> None:
        if request:
            if request in self._operator_cancels:
                return
            self._operator_cancels = [*self._operator_cancels[-15:], request]
        self._update(core.cancel(self._state))

    @workflow.query(name="state")
    def state(self) -> TimerState:
        """The timer's whole state."""
        return self._state

    def _receive(self, change: TimerChange) -> Verdict:
        """Apply a change; one that changes nothing wakes nothing (a wake-up starts a new
        Temporal timer, a billed action), but the current details tell it at once."""
        length = workflow.info().get_current_history_length()
        if length != self._activation:
            self._activation, self._applied_before = length, self._state.applied
        state, answer = core.receive(self._state, change)
        record_change_received(workflow.metric_meter(), change.kind, answer.outcome)
        if answer.outcome == "ignored":
            self._state = state
            workflow.set_current_details(core.details(state))
            if self._should_continue_as_new() and workflow.patched(_CONTINUE_ON_IGNORED):
                self._changes.bump()  # wake the loop: ignored changes fill the history too
        else:
            self._update(state)
        return answer

    def _update(self, state: TimerState) -> None:
        if state != self._state:
            self._state = state
            self._changes.bump()

    async def _settled(self) -> None:
        """Wait until no delivery is in flight (the main loop records how it ended)."""
        await workflow.wait_condition(lambda: self._flight is None)

    async def _wait(self, until: datetime | None) -> None:
        """Sleep until `until` (forever if None), or until a change arrives."""
        spec = self._state.spec
        label = core.summary(spec, until) if spec is not None else None
        now = workflow.now()
        await wait(self._changes, until, now=now, summary=label, wake_on_suggested=self._wakes)

    def _wakes(self) -> bool:
        """Whether the wait ends on Temporal's suggestion to continue as new: only when the
        loop will then continue as new (else it would wake again at once), and for runs
        recorded after `_WAKE_ON_SUGGESTED`."""
        return self._should_continue_as_new() and workflow.patched(_WAKE_ON_SUGGESTED)

    async def _deliver(self, delivery: core.Delivery) -> None:
        """Run the delivery activity for one slot until it is decided, failed or no longer
        wanted; in the last case no further attempt starts, and the one running finishes."""
        spec = self._state.spec
        assert spec is not None
        settings = self._input.delivery
        request = delivery_request(self._state, delivery).model_copy(
            update={
                "max_failures": settings.max_attempts,
                "retried": delivery.request_id == self._retried,
            }
        )
        handle = workflow.start_activity(
            "wow.deliver",
            request,
            result_type=DeliveryOutcome,
            start_to_close_timeout=settings.attempt_timeout,
            heartbeat_timeout=settings.heartbeat_timeout,
            retry_policy=settings.retry_policy(DELIVERY_PARKED),
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            summary=f"{delivery.request_id}: {core.summary(spec, delivery.due)}",
        )
        self._flight = _Flight(delivery, handle)
        try:
            await workflow.wait_condition(lambda: handle.done() or self._state.pending != delivery)
        except asyncio.CancelledError:
            # A cancel request: note what was in force when it came, since it reaches `run`
            # only once the attempt in flight has settled (a later activation).
            self._cancel_met = self._met_now()
            raise
        finally:
            if not handle.done():
                handle.cancel()
            await self._settle()

    def _met_now(self) -> _CancelMet:
        """What a cancel request meets now: the order in force, and what came with it."""
        length = workflow.info().get_current_history_length()
        came_with = self._applied_before if length == self._activation else None
        return _CancelMet(length, came_with, self._state.applied)

    async def _settle(self) -> None:
        """Await the delivery in flight, if any, and hand how it ended to the core."""
        flight = self._flight
        if flight is None:
            return
        delivery = flight.delivery
        interrupted = False
        while True:
            try:
                outcome: DeliveryOutcome = await asyncio.shield(flight.handle)
            except asyncio.CancelledError:
                interrupted = True  # the run is being cancelled: record this delivery first
                if self._cancel_met is None and workflow.patched(_CANCEL_IN_SETTLE):
                    # It came while an attempt no longer wanted settles: as in `_deliver`.
                    self._cancel_met = self._met_now()
                continue
            except ActivityError as error:
                if isinstance(error.cause, CancelledError):
                    self._state = core.on_abandoned(self._state, delivery)
                else:
                    cause = error.cause
                    reason = park_reason(cause, self._input.delivery.max_attempts)
                    self._state = core.on_failed(self._state, delivery, reason or str(error))
            else:
                decided = outcome.status
                self._state = core.on_outcome(self._state, delivery, decided, _detail(outcome))
            break
        self._flight = None
        if interrupted:
            raise asyncio.CancelledError

    def _show(self, next_step: core.Step) -> None:
        """Show `next_step` in the current details and upsert the search attributes that
        differ from what they show (each upsert is a billed action)."""
        workflow.set_current_details(core.details(self._state))
        wanted = core.to_show(self._shown, next_step, self._state)
        if self._before_shown_as_state(wanted, next_step):
            wanted = core.Shown(None, self._shown.due)  # as such a run showed it
        updates: list[SearchAttributeUpdate[Any]] = []
        if wanted.status != self._shown.status:
            updates.append(
                SA_STATUS.value_unset()
                if wanted.status is None
                else SA_STATUS.value_set(wanted.status)
            )
        if wanted.due is not None and wanted.due != self._shown.due:
            updates.append(SA_DUE.value_set(wanted.due.astimezone(UTC)))
        if updates:
            workflow.upsert_search_attributes(updates)
        self._shown = wanted

    def _before_shown_as_state(self, wanted: core.Shown, next_step: core.Step) -> bool:
        """Whether `wanted` is an upsert runs recorded before `_SHOWN_AS_STATE` did not make
        (asked only then, so no other timer's history gains a marker)."""
        never_due = isinstance(next_step, core.Finish) and next_step.status is Status.NEVER_DUE
        moved_back = (
            isinstance(next_step, core.Deliver)
            and self._shown.due is not None
            and wanted.due != self._shown.due
        )
        return (never_due or moved_back) and not workflow.patched(_SHOWN_AS_STATE)

    def _should_continue_as_new(self) -> bool:
        """Past the history's bound, with no delivery in flight (a parked slot is carried in
        the state; runs recorded before the patch continued only with nothing pending)."""
        long = history_is_long(self._input.continue_as_new_after)
        if not long or self._flight is not None:
            return False
        return self._state.pending is None or workflow.patched(_CONTINUE_ON_IGNORED)


def delivery_request(state: TimerState, delivery: core.Delivery) -> DeliveryRequest:
    """What the delivery of `delivery` sends: the command of the schedule in force, to its
    target, with the scheduling commit's scope and causation and the slot's details."""
    spec = state.spec
    assert spec is not None
    return DeliveryRequest(
        command=spec.command,
        target=spec.target,
        scope=spec.scope,
        request_id=delivery.request_id,
        upstream_id=spec.upstream_id,
        upstream_name=f"{spec.owner.context_name}.{spec.owner.aggregate_name}",
        trace_id=spec.trace_id,
        traceparent=spec.traceparent,
        schedule=ScheduleDetails(
            timer=delivery.timer,
            key=spec.key,
            slot=delivery.slot,
            due=int(delivery.due.timestamp() * 1000),
            skipped=delivery.skipped,
        ),
        owner=spec.owner,
        set_order=state.applied,
    )


def _detail(outcome: DeliveryOutcome) -> str:
    """How the host decided, for the last outcome: its error code and message, if any."""
    if outcome.status == "cancelled":
        return outcome.error_msg
    code = "" if outcome.error_code == "Ok" else outcome.error_code
    return f"{code} {outcome.error_msg}".strip()
