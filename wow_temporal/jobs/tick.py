"""The tick activity: run a job's handler for one slot and send the commands it derives.

Commands go from here to the domain host (the timers' wire protocol, `delivery.py`), never
through workflow history, so a tick may derive thousands. Progress is kept in the heartbeat
details: an attempt after a lost worker resumes after the last command decided, and the
technical failures of the handler or the host count towards parking the tick.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta
from typing import Any, NoReturn, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from wow_temporal.delivery import (
    DeliveryFailure,
    DeliveryOutcome,
    DeliveryRequest,
    ScheduleDetails,
    UnreadableCommand,
    refuse_early,
    spent,
)
from wow_temporal.domain.app import App, Job
from wow_temporal.domain.commands import Command
from wow_temporal.domain.saga import SagaContext
from wow_temporal.jobs.core import HostRule
from wow_temporal.metrics import record_tick
from wow_temporal.model import ScheduleTick, Scope
from wow_temporal.tracing import continued_span

__all__ = [
    "EARLY_TICK",
    "TICK_FAILURE",
    "TICK_PARKED",
    "CommandSink",
    "TickActivities",
    "TickRequest",
    "TickResult",
    "request_id",
]

TICK_FAILURE = "TickFailure"
"""A technical failure of the handler or of a send: retried."""
_FAILING = "the handler or the host"
"""What a tick's failed attempts failed on, in its parking message."""

TICK_PARKED = "TickParked"
"""The handler or the host failed `max_failures` times: the tick is parked (final)."""
EARLY_TICK = "EarlyTick"
"""An attempt before the slot is due: retried when it is."""

log = logging.getLogger(__name__)

T = TypeVar("T")


class CommandSink(Protocol):
    """Where a tick's commands go: `delivery.CommandSender`, or a recorder in `testing`."""

    async def send(self, request: DeliveryRequest) -> DeliveryOutcome: ...


class TickRequest(BaseModel):
    """One slot of one job instance, to handle."""

    model_config = ConfigDict(frozen=True)

    workflow_id: str
    context: str
    job: str
    tenant: str
    partition: int | None = None
    slot: int = Field(ge=1)
    due: int
    """Epoch milliseconds (virtual time in `schedule_spec`)."""
    skipped: int = 0
    max_failures: int = Field(default=10, ge=1)
    clock_offset_ms: int = 0
    """Added to the worker's clock for the never-early check (`schedule_spec`'s virtual time)."""


class TickResult(BaseModel):
    """How a handled tick went: the commands it derived and how their targets decided."""

    model_config = ConfigDict(frozen=True)

    commands: int = 0
    delivered: int = 0
    rejected: int = 0
    duplicates: int = 0
    host: HostRule | None = None
    """The worker's override of the job, brought back to the instance (None: none known)."""


class _Progress(BaseModel):
    """What the heartbeat details carry from one attempt to the next."""

    sent: int = 0
    """Commands decided so far, in order: an attempt resumes after them."""
    delivered: int = 0
    rejected: int = 0
    duplicates: int = 0
    failures: int = 0


def request_id(workflow_id: str, slot: int, index: int) -> str:
    """A command's request id: `{workflow id}#{slot}:{index}`, the same each time the tick runs."""
    return f"{workflow_id}#{slot}:{index}"


def _count(progress: _Progress, delivery: DeliveryRequest, outcome: DeliveryOutcome) -> None:
    """Count a command the host decided: delivered (perhaps a duplicate) or rejected (logged)."""
    if outcome.status == "delivered":
        progress.delivered += 1
        progress.duplicates += outcome.duplicate
        return
    progress.rejected += 1
    log.info(
        "%s %s rejected by %s: %s %s",
        delivery.command.type, delivery.request_id, delivery.target,
        outcome.error_code, outcome.error_msg,
    )


class TickActivities:
    """The `wow.tick` activity of one `App`, sending through `sink` (register the bound method)."""

    def __init__(
        self,
        app: App,
        sink: CommandSink,
        *,
        clock: Callable[[], float] = time.time,
        on_commands: Callable[[TickRequest, ScheduleTick, list[Command[Any]]], None]
        | None = None,
        host: Mapping[str, HostRule] | None = None,
    ) -> None:
        """`on_commands` sees what each attempt's handler derived (`schedule_spec` records it);
        `host` is the worker's override of each job, handed back with each tick's result."""
        self.app = app
        self.sink = sink
        self.clock = clock
        self.on_commands = on_commands
        self.host = host

    @activity.defn(name="wow.tick")
    async def tick(self, request: TickRequest) -> TickResult:
        """Handle one tick: call the handler, send each command it returns until decided."""
        info = activity.info()
        progress = _Progress()
        if info.heartbeat_details:
            progress = _Progress.model_validate(info.heartbeat_details[0])
        early_ms = request.due - (self.clock() * 1000 + request.clock_offset_ms)
        refuse_early(
            early_ms,
            f"refusing to run slot {request.slot} of {request.workflow_id} early: "
            f"due in {early_ms:.0f} ms",
            EARLY_TICK,
        )
        job = self.app.jobs.get(request.job)
        if job is None:
            raise ApplicationError(
                f"this worker's app ({self.app.context}) has no job {request.job}: run a worker "
                "with the app that declares it, then retry the tick",
                type=TICK_PARKED,
                non_retryable=True,
            )
        attributes: dict[str, str | int | bool] = {
            "wow.job": request.job,
            "wow.tenant": request.tenant,
            "wow.instance": request.workflow_id,
            "wow.slot": request.slot,
            "wow.skipped": request.skipped,
            "wow.attempt": info.attempt,
        }
        with continued_span(f"wow.tick {request.job}", None, attributes) as span:
            result = await self._handle(request, job, progress, info.heartbeat_timeout)
            if span is not None:
                span.set_attribute("wow.commands", result.commands)
                span.set_attribute("wow.delivered", result.delivered)
                span.set_attribute("wow.rejected", result.rejected)
            return result

    async def _handle(
        self,
        request: TickRequest,
        job: Job,
        progress: _Progress,
        heartbeat_timeout: timedelta | None,
    ) -> TickResult:
        """Derive the slot's commands and send each until decided, resuming after those an
        earlier attempt sent (`progress`); the handler's failure is retried, then parked."""
        tick = ScheduleTick(
            tenant_id=request.tenant,
            slot=request.slot,
            due=request.due,
            skipped=request.skipped,
            partition=request.partition,
        )
        try:
            commands = await self._derive(job, tick, progress)
        except (asyncio.CancelledError, ApplicationError):
            raise
        except Exception as error:  # the handler's own failure: retried, then parked
            self._failed(request, progress, f"{job.processor} failed: {error!r}")
        if self.on_commands is not None:
            self.on_commands(request, tick, commands)
        beat = heartbeat_timeout.total_seconds() / 3 if heartbeat_timeout else 1.0
        last_beat = time.monotonic()
        for index in range(progress.sent, len(commands)):
            command = commands[index]
            delivery = _delivery(request, job, command, index)
            try:
                outcome = await _heartbeating(
                    self.sink.send(delivery), progress, finish_when_cancelled=True
                )
            except UnreadableCommand as error:
                # A job's command is built at tick time by the code deployed now: one the host
                # cannot read is the handler's data, not a deploy; refused, the tick goes on.
                log.warning("%s slot %d, command %d: %s", request.workflow_id, request.slot,
                            index, error)
                outcome = DeliveryOutcome(
                    status="rejected",
                    error_code=error.error_code or "CommandValidation",
                    error_msg=error.message,
                    http_status=error.http_status or 400,
                )
            except DeliveryFailure as error:
                self._failed(request, progress, f"command {index} of {len(commands)}: {error}")
            progress.sent = index + 1
            _count(progress, delivery, outcome)
            if time.monotonic() - last_beat >= beat:  # heartbeats are billed: only if long
                activity.heartbeat(progress.model_dump())
                last_beat = time.monotonic()
        log.info(
            "%s slot %d: %d commands (%d delivered, %d rejected)",
            request.workflow_id, request.slot, len(commands), progress.delivered,
            progress.rejected,
        )
        record_tick("handled", request.skipped)
        return TickResult(
            commands=len(commands),
            delivered=progress.delivered,
            rejected=progress.rejected,
            duplicates=progress.duplicates,
            host=None if self.host is None else self.host.get(request.job, HostRule()),
        )

    async def _derive(
        self, job: Job, tick: ScheduleTick, progress: _Progress
    ) -> list[Command[Any]]:
        """Call the handler (a plain `def` in a thread, an `async def` here), heartbeating
        while it runs so a long handler is not mistaken for a lost worker."""
        context = SagaContext(self.app.context, job.name)
        if job.is_async:
            handling: Awaitable[Any] = job.handler(tick, context)
        else:
            handling = asyncio.to_thread(job.handler, tick, context)
        returned = await _heartbeating(handling, progress, finish_when_cancelled=False)
        if returned is None:
            return []
        commands = list(returned)
        for position, item in enumerate(commands):
            if not isinstance(item, Command):
                raise TypeError(
                    f"item {position} of what {job.processor} returned is "
                    f"{type(item).__name__}, not a Command (use context.command(ref, body))"
                )
        return commands

    def _failed(self, request: TickRequest, progress: _Progress, reason: str) -> NoReturn:
        """Count a technical failure; raise it to be retried, or park the tick at the budget."""
        progress.failures += 1
        activity.heartbeat(progress.model_dump())
        attempt = max(activity.info().attempt, progress.failures)
        if attempt >= request.max_failures:  # the retry policy's last attempt: park here
            log.warning(
                "parking %s slot %d after %d attempts, %d failures: %s",
                request.workflow_id, request.slot, attempt, progress.failures, reason,
            )
            why = spent(attempt, progress.failures, request.max_failures, _FAILING)
            raise ApplicationError(
                f"{why}; last: {reason}",
                type=TICK_PARKED,
                non_retryable=True,
                category=ApplicationErrorCategory.BENIGN,
            )
        log.warning(
            "%s slot %d failed (%d of %d before parking): %s",
            request.workflow_id, request.slot, progress.failures, request.max_failures, reason,
        )
        raise ApplicationError(reason, type=TICK_FAILURE, category=ApplicationErrorCategory.BENIGN)


async def _heartbeating(
    work: Awaitable[T], progress: _Progress, *, finish_when_cancelled: bool
) -> T:
    """Await `work`, heartbeating meanwhile so a slow host or handler is not taken for a lost
    worker. Cancelled (a disable): a send in flight still finishes, so nothing reaches the host
    after the activity has stopped; a handler is abandoned (it sends nothing itself)."""
    task = asyncio.ensure_future(work)
    timeout = activity.info().heartbeat_timeout
    beat = timeout.total_seconds() / 3 if timeout else None
    cancelled = False
    while not task.done():
        try:
            await asyncio.wait({task}, timeout=beat)
        except asyncio.CancelledError:
            if not finish_when_cancelled:
                task.cancel()
                raise
            cancelled = True
            continue
        if not task.done():
            activity.heartbeat(progress.model_dump())
    if cancelled:
        raise asyncio.CancelledError
    return task.result()


def _delivery(request: TickRequest, job: Job, command: Command[Any], index: int) -> DeliveryRequest:
    """The wire request of the tick's `index`-th command."""
    return DeliveryRequest(
        command=command.scheduled(),
        target=command.ref,
        scope=Scope(tenant_id=command.ref.tenant_id),
        request_id=request_id(request.workflow_id, request.slot, index),
        upstream_id=f"{request.workflow_id}#{request.slot}",
        upstream_name=f"{request.context}.schedule",
        schedule=ScheduleDetails(
            timer=request.workflow_id,
            key=job.name,
            slot=request.slot,
            due=request.due,
            skipped=request.skipped,
        ),
        max_failures=request.max_failures,
    )
