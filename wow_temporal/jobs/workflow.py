"""The job instance workflow: a thin, deterministic shell that runs `jobs.core` on Temporal.

One long-lived workflow per instance (`wow-job:…`). It sleeps until the rule is next due, hands
each slot to the `wow.tick` activity, and applies the outcome. Operators drive it with the
updates `wow.schedule.enable|disable|reschedule|reset` (validated, answered) and the signals of
the same names (for the Web UI's "Send a Signal" and `temporal workflow signal`; a signal that
cannot be applied, or of no such name, is logged and shown in the current details, and changes
nothing).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError
from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

with workflow.unsafe.imports_passed_through():
    from wow_temporal.delivery import park_reason
    from wow_temporal.engine import CONTINUE_AS_NEW_AFTER_EVENTS
    from wow_temporal.engine.payloads import read_payload
    from wow_temporal.engine.waiting import Changes, history_is_long, wait
    from wow_temporal.ids import parse_job_workflow_id
    from wow_temporal.jobs import core
    from wow_temporal.jobs.core import HostRule, JobState, PendingTick
    from wow_temporal.jobs.tick import TICK_PARKED, TickRequest, TickResult
    from wow_temporal.search_attributes import SA_STATUS
    from wow_temporal.settings.delivery import DeliverySettings

__all__ = [
    "DISABLE",
    "ENABLE",
    "HOST",
    "RESCHEDULE",
    "RESET",
    "RETRY",
    "HostRule",
    "JobInput",
    "JobWorkflow",
]

ENABLE = "wow.schedule.enable"
DISABLE = "wow.schedule.disable"
RESCHEDULE = "wow.schedule.reschedule"
RESET = "wow.schedule.reset"
"""Remove the instance's own rule (or some fields of it): the host's, or the code's, again."""
RETRY = "wow.schedule.retry"
HOST = "wow.schedule.host"
"""The worker's host override (`wow.schedules.<name>.*`), brought to the instance at start."""


class JobInput(BaseModel):
    """The workflow's input, and what it carries across continue-as-new."""

    model_config = ConfigDict(frozen=True)

    state: JobState
    delivery: DeliverySettings = DeliverySettings()
    clock_offset_ms: int = 0
    """Virtual time (`schedule_spec`): added to the workflow's clock; 0 in production."""
    continue_as_new_after: int = CONTINUE_AS_NEW_AFTER_EVENTS
    enabled_at: datetime | None = None
    """A new instance created by an enable (one call, not two): enabled by its first task, as
    of this instant (the caller's now, so a slow worker start is a misfire, not a delay)."""


JOB_WORKFLOW = "wow.Job"
"""The job workflow's type, by name: its run takes its input raw (`JobInput` as JSON), so
that one it cannot read disables it with a notice instead of failing every workflow task."""


def _unreadable(why: str) -> JobInput:
    """The input of an instance that cannot read its own: disabled (it ticks on no rule of
    its own), with a notice saying why; the worker's settings, an operator's enable and
    reschedule still reach it."""
    workflow.logger.warning("job instance cannot read its input: %s", why)
    context, name, tenant, partition = _identity(workflow.info().workflow_id)
    state = JobState(
        context=context,
        job=name,
        tenant=tenant or "(0)",
        partition=partition,
        code=core.JobRule(expression=NEVER),
    )
    return JobInput(state=core.notice(state, f"cannot read its input: {why}"[:500]))


def _identity(workflow_id: str) -> tuple[str, str, str | None, int | None]:
    try:
        return parse_job_workflow_id(workflow_id)
    except ValueError:
        return "?", workflow_id, None, None


NEVER = "0 0 0 30 2 *"
"""A Spring cron rule that never matches (February 30th): the code's rule of an instance that
cannot read its input (internal; a rule from outside that never fires is refused)."""

NULL_REMOVES = "wow.schedule.reschedule-null-removes"
"""The patch under which a reschedule's field given as null removes the instance's own (it
kept it before): histories recorded before replay as they ran."""


@workflow.defn(name=JOB_WORKFLOW)
class JobWorkflow:
    """One job instance: ticks on its rule, applies the misfire policy, parks failing ticks."""

    @workflow.init
    def __init__(self, raw: RawValue) -> None:
        input, why = read_payload(raw, JobInput)
        if input is None:  # never fail the task forever on its own input
            input = _unreadable(why)
        self._input = input.model_copy(update={"enabled_at": None})
        self._state = input.state
        if input.enabled_at is not None:
            self._state = core.enable(self._state, min(self._now(), input.enabled_at))
        self._changes = Changes()
        self._running: workflow.ActivityHandle[TickResult] | None = None
        self._shown_status: str | None = workflow.info().typed_search_attributes.get(SA_STATUS)

    @workflow.run
    async def run(self, raw: RawValue) -> JobState:
        while True:
            self._state, next_step = core.step(self._state, self._now())
            self._show()
            match next_step:
                case core.Sleep(until=until):
                    await self._wait(until)
                case core.AwaitOperator():
                    await self._wait(None)
                case core.Handle(tick=tick):
                    await self._handle(tick)
            if self._should_continue_as_new():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(self._input.model_copy(update={"state": self._state}))

    # --- control: updates (answered) and signals (fire and forget) ---------------------------

    @workflow.update(name=ENABLE)
    def enable(self) -> JobState:
        """Enable the instance: ticks from the next due time after now."""
        self._change(core.enable(self._state, self._now()))
        return self._state

    @workflow.update(name=DISABLE)
    async def disable(self) -> JobState:
        """Disable it; answered once no tick is running, so nothing is sent after the answer."""
        self._change(core.disable(self._state))
        await workflow.wait_condition(lambda: self._running is None)
        return self._state

    @workflow.update(name=RESCHEDULE)
    def reschedule(self, rule: Any) -> JobState:
        """Give the instance its own rule: a field given sets it, one given as null removes
        it (the host's or the code's then in force), one left out keeps it."""
        self._change(core.reschedule(self._state, self._read_change(rule), self._now()))
        return self._state

    @reschedule.validator
    def _valid_rule(self, rule: Any) -> None:
        try:
            change = core.read_change(rule)
        except ValueError as error:
            raise ApplicationError(
                _first_line(error), type="InvalidRule", non_retryable=True
            ) from None
        error_text = core.reschedule_refusal(change)
        if error_text is not None:
            raise ApplicationError(error_text, type="InvalidRule", non_retryable=True)

    @workflow.update(name=RESET)
    def reset(self, request: Any = None) -> JobState:
        """Remove the instance's own rule (all of it, or `{"fields": [...]}`): the host's
        override, or the code's, in force again. Nothing to remove: answered all the same."""
        self._change(core.reset(self._state, core.read_fields(request), self._now()))
        return self._state

    @reset.validator
    def _valid_reset(self, request: Any = None) -> None:
        try:
            core.read_fields(request)
        except ValueError as error:
            raise ApplicationError(str(error), type="InvalidRule", non_retryable=True) from None

    @workflow.update(name=RETRY)
    def retry(self) -> JobState:
        """An operator's retry of the parked tick, with the same request ids."""
        self._change(core.retry(self._state))
        return self._state

    @retry.validator
    def _only_parked(self) -> None:
        pending = self._state.pending
        if pending is None or not pending.parked:
            raise ApplicationError(
                f"only a parked instance can be retried; {self._state.label} is "
                f"{self._state.status.value}",
                type="NotParked",
                non_retryable=True,
            )

    @workflow.update(name=HOST)
    def host(self, rule: HostRule) -> JobState:
        """The worker's override of the job, and whether its settings enable it."""
        self._change(core.apply_host(self._state, rule, self._now()))
        return self._state

    @host.validator
    def _valid_host(self, rule: HostRule) -> None:
        error = core.reschedule_error(rule.layer)
        if error is not None:
            raise ApplicationError(error, type="InvalidRule", non_retryable=True)

    @workflow.signal(name=HOST)
    def host_signal(self, payload: Any = None) -> None:
        """The worker's settings sent as a signal, when no worker answered the update."""
        try:
            rule = HostRule.model_validate(payload)
        except ValidationError as error:
            self._refused(f"{HOST} signal refused: {_first_line(error)}")
            return
        error_text = core.reschedule_error(rule.layer)
        if error_text is not None:
            self._refused(f"{HOST} signal refused: {error_text}")
            return
        self._change(core.apply_host(self._state, rule, self._now()))

    @workflow.signal(name=ENABLE)
    def enable_signal(self, payload: Any = None) -> None:
        """Enable, from now; or from `{"at": epoch ms}` when the client sent it while no worker
        ran (slots due since are then a misfire, as they would have been), never later."""
        at = self._now()
        if isinstance(payload, dict) and isinstance(payload.get("at"), int):
            sent = datetime.fromtimestamp(payload["at"] / 1000, UTC)
            at = min(at, sent)
        self._change(core.enable(self._state, at))

    @workflow.signal(name=DISABLE)
    def disable_signal(self, ignored: Any = None) -> None:
        self._change(core.disable(self._state))

    @workflow.signal(name=RESCHEDULE)
    def reschedule_signal(self, payload: Any = None) -> None:
        """A reschedule sent as a signal: applied if valid, else logged and shown."""
        try:
            change = self._read_change(payload)
        except ValueError as error:
            self._refused(f"{RESCHEDULE} signal refused: {_first_line(error)}")
            return
        error_text = core.reschedule_refusal(change)
        if error_text is not None:
            self._refused(f"{RESCHEDULE} signal refused: {error_text}")
            return
        self._change(core.reschedule(self._state, change, self._now()))

    @workflow.signal(name=RESET)
    def reset_signal(self, payload: Any = None) -> None:
        """A reset sent as a signal (nothing, or `{"fields": [...]}`): applied if valid, else
        logged and shown."""
        try:
            fields = core.read_fields(payload)
        except ValueError as error:
            self._refused(f"{RESET} signal refused: {error}")
            return
        self._change(core.reset(self._state, fields, self._now()))

    @workflow.signal(dynamic=True)
    def unknown_signal(self, name: str, args: Sequence[RawValue]) -> None:
        """A signal of no name above (`wow.schedule.bogus`, say): logged and shown under the
        notices, and nothing else changes. It does not wake the instance, so it issues no
        command: a history recorded before this handler, that left such a signal unhandled,
        replays the same."""
        known = ", ".join((ENABLE, DISABLE, RESCHEDULE, RESET, HOST))
        self._refused(f"{name[:100]} signal refused: no such signal (send {known})", wake=False)

    @workflow.query(name="state")
    def state(self) -> JobState:
        """The instance's whole state."""
        return self._state

    # --- the shell ---------------------------------------------------------------------------

    def _now(self) -> datetime:
        return workflow.now() + timedelta(milliseconds=self._input.clock_offset_ms)

    def _read_change(self, payload: Any) -> core.RuleChange:
        """A reschedule's payload; a null in it removes the field only under `NULL_REMOVES`
        (asked only when there is a null: a history from before the patch, whose client sent
        null for each field left out, replays as it ran, keeping them)."""
        nulls = isinstance(payload, dict) and any(
            payload.get(f, 0) is None for f in core.RULE_FIELDS
        )
        return core.read_change(payload, null_removes=nulls and workflow.patched(NULL_REMOVES))

    def _change(self, state: JobState) -> None:
        if state != self._state:
            self._state = state
            self._changes.bump()
            self._show()

    def _refused(self, text: str, *, wake: bool = True) -> None:
        """Log `text` and show it under the notices; `wake` the instance to look again (not
        waking, it only sets the current details: no command)."""
        workflow.logger.warning("%s: %s", workflow.info().workflow_id, text)
        self._state = core.notice(self._state, text)
        if not wake:
            workflow.set_current_details(core.details(self._state, self._now()))
            return
        self._changes.bump()
        self._show()

    async def _wait(self, until: datetime | None) -> None:
        """Sleep until `until` (forever if None), or until something changes."""
        now = self._now()
        await wait(self._changes, until, now=now, summary=core.summary(self._state, now))

    async def _handle(self, tick: PendingTick) -> None:
        """Run the tick activity until it ends, or until a disable interrupts it."""
        settings = self._input.delivery
        state = self._state
        request = TickRequest(
            workflow_id=workflow.info().workflow_id,
            context=state.context,
            job=state.job,
            tenant=state.tenant,
            partition=state.partition,
            slot=tick.slot,
            due=int(tick.due.timestamp() * 1000),
            skipped=tick.skipped,
            max_failures=settings.max_attempts,
            clock_offset_ms=self._input.clock_offset_ms,
        )
        handle = workflow.start_activity(
            "wow.tick",
            request,
            result_type=TickResult,
            start_to_close_timeout=timedelta(hours=24),
            heartbeat_timeout=settings.heartbeat_timeout,
            retry_policy=settings.retry_policy(TICK_PARKED),
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            summary=f"{state.label} slot {tick.slot}",
        )
        self._running = handle
        try:
            await workflow.wait_condition(lambda: handle.done() or not self._state.enabled)
            if not handle.done():
                handle.cancel()
            try:
                result = await handle
            except ActivityError as error:
                if isinstance(error.cause, CancelledError):
                    self._state = core.on_interrupted(
                        self._state, tick, self._now(), "interrupted by a disable"
                    )
                else:
                    cause = error.cause
                    reason = park_reason(cause, self._input.delivery.max_attempts, "the tick")
                    self._state = core.on_failed(self._state, tick, self._now(), reason)
            else:
                self._state = core.on_handled(
                    self._state,
                    tick,
                    self._now(),
                    commands=result.commands,
                    delivered=result.delivered,
                    rejected=result.rejected,
                )
                if result.host is not None:  # the worker's override, if it has changed
                    self._state = core.set_host(self._state, result.host.layer, self._now())
        finally:
            self._running = None

    def _show(self) -> None:
        """The current details, and `WowStatus` when it changed (each upsert is billed)."""
        workflow.set_current_details(core.details(self._state, self._now()))
        status = self._state.status.value
        if status != self._shown_status:
            workflow.upsert_search_attributes([SA_STATUS.value_set(status)])
            self._shown_status = status

    def _should_continue_as_new(self) -> bool:
        return self._running is None and history_is_long(self._input.continue_as_new_after)


def _first_line(error: Exception) -> str:
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "payload"
        return f"{where}: {first['msg']}"
    return str(error).splitlines()[0]
