"""`schedule_spec`, the spec's way to test a recurring job: the real job workflow runs on the
time-skipping test server (`wow-temporal[testing]` installs it), with the handlers in the test's
own process, so a test's fakes see the calls; the commands the handlers derive are recorded (and
answered `Ok`) instead of sent to a host."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from wow_temporal.delivery import DeliveryOutcome, DeliveryRequest, activity_clock
from wow_temporal.domain.app import App
from wow_temporal.domain.commands import Command
from wow_temporal.jobs.client import JobClient, JobInfo
from wow_temporal.jobs.core import JobState, RuleLayer
from wow_temporal.jobs.directory import TenantsWorkflow
from wow_temporal.jobs.tick import TickActivities, TickRequest
from wow_temporal.jobs.workflow import JobWorkflow
from wow_temporal.model import ScheduleTick
from wow_temporal.testing.time_skipping import skip_time, start_time_skipping
from wow_temporal.timers.workflow import DeliverySettings
from wow_temporal.worker import WORKFLOW_RUNNER

__all__ = ["ScheduleSpec", "schedule_spec"]

_SETTLE_TIMEOUT_S = 60.0
"""How long (real time) `advance_time` waits for a tick to be handled before it gives up."""


class _Recorder:
    """Answers every command `Ok` and keeps what each tick derived, once per tick."""

    def __init__(self) -> None:
        self.derived: dict[tuple[str, int], tuple[ScheduleTick, list[Command[Any]]]] = {}
        self.sent: list[DeliveryRequest] = []

    def on_commands(
        self, request: TickRequest, tick: ScheduleTick, commands: list[Command[Any]]
    ) -> None:
        self.derived.setdefault((request.workflow_id, request.slot), (tick, commands))

    async def send(self, request: DeliveryRequest) -> DeliveryOutcome:
        self.sent.append(request)
        return DeliveryOutcome(status="delivered", http_status=200)


class ScheduleSpec:
    """A running spec: enable instances, move the virtual clock, read the ticks and commands."""

    def __init__(
        self, env: WorkflowEnvironment, jobs: JobClient, recorder: _Recorder, offset: timedelta
    ) -> None:
        self.env = env
        self.jobs = jobs
        self._recorder = recorder
        self._offset = offset
        self._context = next(iter(jobs.apps))
        self.started: set[str] = set()

    @property
    def client(self) -> Client:
        return self.env.client

    @property
    def ticks(self) -> list[ScheduleTick]:
        """Every tick handled so far, by due time (instances due at once: by workflow id)."""
        return [tick for tick, _ in self._in_order()]

    @property
    def commands(self) -> list[Command[Any]]:
        """Every command the handlers derived so far, in order."""
        return [c for _, commands in self._in_order() for c in commands]

    def _in_order(self) -> list[tuple[ScheduleTick, list[Command[Any]]]]:
        ordered = sorted(self._recorder.derived.items(), key=lambda item: (item[1][0].due, item[0]))
        return [derived for _, derived in ordered]

    @property
    def sent(self) -> list[DeliveryRequest]:
        """The requests as the host would have received them (request ids, headers' values)."""
        return list(self._recorder.sent)

    async def now(self) -> datetime:
        """The virtual time."""
        return (await self.env.get_current_time()).astimezone(UTC) + self._offset

    async def enable(self, name: str, *, tenant: str | None = None) -> JobInfo:
        """Enable (creating) the job's instance: SYSTEM, or `tenant`'s for a TENANT job."""
        info = await self.jobs.enable(self._context, name, tenant=tenant)
        self.started.add(info.workflow_id)
        return info

    async def disable(self, name: str, *, tenant: str | None = None) -> JobInfo:
        return await self.jobs.disable(self._context, name, tenant=tenant)

    async def reschedule(
        self,
        name: str,
        *,
        tenant: str | None = None,
        expression: str | None = None,
        zone: str | None = None,
        misfire: Any = None,
    ) -> JobInfo:
        rule = RuleLayer(expression=expression, zone=zone, misfire=misfire)
        return await self.jobs.reschedule(self._context, name, rule, tenant=tenant)

    async def retry(self, name: str, *, tenant: str | None = None) -> JobInfo:
        return await self.jobs.retry(self._context, name, tenant=tenant)

    async def show(self, name: str, *, tenant: str | None = None) -> JobInfo:
        return await self.jobs.show(self._context, name, tenant=tenant)

    async def advance_time(self, duration: timedelta) -> None:
        """Move the virtual clock by `duration`, handling every tick due until its end (one due
        exactly at the end included), one slot at a time as a punctual worker would."""
        end = await self.now() + duration
        while True:
            due = await self._next_due()
            if due is None or due > end:
                break
            await self._sleep_until(due)
            await self._settled(due)
        await self._sleep_until(end)

    async def _states(self) -> list[JobState]:
        states = []
        for workflow_id in sorted(self.started):
            handle = self.client.get_workflow_handle(workflow_id)
            await _between_tasks(handle)
            for attempt in range(3):  # the test server can miss a query on a busy machine
                try:
                    states.append(
                        await handle.query(
                            "state", result_type=JobState, rpc_timeout=timedelta(seconds=20)
                        )
                    )
                    break
                except RPCError:
                    if attempt == 2:
                        raise
                    await asyncio.sleep(0.2)
        return states

    async def _next_due(self) -> datetime | None:
        """The earliest time an instance will tick next."""
        dues = []
        for state in await self._states():
            if not state.enabled or (state.pending is not None and state.pending.parked):
                continue
            if state.pending is not None:
                dues.append(state.pending.due)
                continue
            following = state.rule.next_after(state.cursor or await self.now())
            if following is not None:
                dues.append(following)
        return min(dues, default=None)

    async def _sleep_until(self, instant: datetime) -> None:
        """Skip to `instant`; called only once every tick due before it was handled."""
        for attempt in range(3):  # the test server can time a skip out on a busy machine
            gap = instant - await self.now()
            if gap <= timedelta(0):
                return
            try:
                await skip_time(self.env, gap)
                return
            except RPCError:
                if attempt == 2:
                    raise
                await asyncio.sleep(0.2)

    async def _settled(self, due: datetime) -> None:
        """Wait (real time) until no instance has a tick due by `due` left to handle."""
        deadline = asyncio.get_running_loop().time() + _SETTLE_TIMEOUT_S
        while True:
            following = await self._next_due()
            if following is None or following > due:
                return
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(
                    f"the ticks due by {due} were not handled in {_SETTLE_TIMEOUT_S:g}s (real time)"
                )
            await asyncio.sleep(0.02)


_TASK_OUTSTANDING = {
    EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
}
_TASK_EVENTS = _TASK_OUTSTANDING | {
    EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT,
}


async def _between_tasks(handle: WorkflowHandle[Any, Any], within_s: float = 5.0) -> None:
    """Wait (real time, at most `within_s`) until the latest run has no workflow task
    outstanding.

    A query is a workflow task too; on the time-skipping server, one that meets a run's
    continue-as-new leaks that run's time-skipping lock and stalls the clock for tens of
    seconds (see `skip_time`): ask once the run's own task is done.
    """
    deadline = asyncio.get_running_loop().time() + within_s
    while asyncio.get_running_loop().time() < deadline:
        last = None
        async for event in handle.fetch_history_events():
            if event.event_type in _TASK_EVENTS:
                last = event.event_type
        if last not in _TASK_OUTSTANDING:
            return
        await asyncio.sleep(0.01)


async def _virtual_now(env: WorkflowEnvironment, offset_ms: int) -> datetime:
    server = (await env.get_current_time()).astimezone(UTC)
    return server + timedelta(milliseconds=offset_ms)


@asynccontextmanager
async def schedule_spec(
    sagas: Iterable[object],
    *,
    context: str,
    start: datetime,
    env: WorkflowEnvironment | None = None,
    max_attempts: int = 3,
    continue_as_new_after: int | None = None,
) -> AsyncIterator[ScheduleSpec]:
    """Run `sagas`' jobs on the time-skipping test server from the virtual instant `start`.

    `env` shares a running `WorkflowEnvironment.start_time_skipping()` (else one is started and
    stopped); a failing handler is parked after `max_attempts` attempts;
    `continue_as_new_after` (history events) makes instances continue as new sooner.
    """
    if start.tzinfo is None:
        raise ValueError("schedule_spec: start must be timezone-aware, e.g. tzinfo=UTC")
    app = App(context, sagas=sagas)
    own_env = env is None
    if env is None:
        env = await start_time_skipping()
    try:
        offset = start.astimezone(UTC) - (await env.get_current_time()).astimezone(UTC)
        offset_ms = int(offset.total_seconds() * 1000)
        recorder = _Recorder()
        task_queue = f"wow-spec-{uuid.uuid4().hex[:12]}"
        ticks = TickActivities(
            app, recorder, clock=activity_clock, on_commands=recorder.on_commands
        )
        delivery = DeliverySettings(
            max_attempts=max_attempts,
            initial_interval=timedelta(milliseconds=100),
            max_interval=timedelta(milliseconds=200),
        )
        jobs = JobClient(
            env.client,
            app,
            task_queue=task_queue,
            delivery=delivery,
            clock_offset_ms=offset_ms,
            continue_as_new_after=continue_as_new_after,
            resume_closed=False,
            clock=lambda: _virtual_now(env, offset_ms),
        )
        async with Worker(
            env.client,
            task_queue=task_queue,
            workflows=[JobWorkflow, TenantsWorkflow],
            activities=[ticks.tick],
            workflow_runner=WORKFLOW_RUNNER,
        ):
            spec = ScheduleSpec(env, jobs, recorder, timedelta(milliseconds=offset_ms))
            try:
                yield spec
            finally:
                for workflow_id in spec.started:
                    with contextlib.suppress(Exception):  # best effort: it may have ended
                        await env.client.get_workflow_handle(workflow_id).terminate("spec ended")
    finally:
        if own_env:
            await env.shutdown()
