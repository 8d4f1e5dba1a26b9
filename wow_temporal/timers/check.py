"""Check before a deploy: which pending timers' commands the apps about to be deployed refuse.

A timer keeps the command its aggregate scheduled, as JSON, for minutes to months. A deploy that
renames a command, raises its revision without an upcaster, or makes its body invalid would
make the domain host refuse it when it comes due, and the timer park (never silently dropped,
but an operator's work). This reads the running timers, read-only, and judges each one's
command as the host will read it: the pure part, `judge`, mirrors the host's reading of a
timer's command (its context and aggregate, the upcasters from its revision, a timer's command
without one being at the first, then the body against the function's command model).

A timer whose target's context is not among the apps given is not judged (another deploy
serves it): it is counted as not checked, never a failure. A timer whose state cannot be read
(no worker answered the query of a timer past its start delay, or its input is another
version's) is reported as unreadable: it is not known to be refused, so it fails the check
only when asked to (`strict`), as a pipeline that wants every timer proven does.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowExecution
from temporalio.service import RPCError

from wow_temporal.domain.app import App
from wow_temporal.domain.system import SYSTEM_COMMANDS
from wow_temporal.domain.upcasting import FIRST_REVISION, UpcastError
from wow_temporal.engine import history
from wow_temporal.model import AggregateRef, ScheduledCommand, WireModel, explain
from wow_temporal.timers import core
from wow_temporal.timers.core import TimerChange, TimerState
from wow_temporal.timers.operations import CHECK_LIMIT, TimerError, TimerFilter, TimerOperations
from wow_temporal.timers.workflow import TimerInput

__all__ = [
    "PAGE",
    "CheckReport",
    "Elsewhere",
    "Finding",
    "Idle",
    "check_timers",
    "history_state",
    "judge",
    "judged",
    "serving",
]

PAGE = 500
"""How many timers are read (their states at once, `READ_CONCURRENCY` at a time) before the
progress is told."""
READ_CONCURRENCY = 16
"""Timers whose state is read at once (a history fetch or a query each)."""


def serving(target: AggregateRef, apps: Sequence[App]) -> App | None:
    """The app of the target's context among `apps`; None when another deploy serves it."""
    return next((app for app in apps if app.context == target.context_name), None)


def judge(command: ScheduledCommand, target: AggregateRef, apps: Sequence[App]) -> str | None:
    """Why the apps would refuse a timer's `command` to `target`, or None if they accept it.

    As the domain host reads it: the target's context and aggregate must be served, the body is
    upcast from the revision it carries (none: the first, as every command scheduled before its
    class declared one) to the one the app reads (a renamed type too), the aggregate must
    handle the type it ends as, and the body must be valid for that function's command model.
    """
    app = serving(target, apps)
    if app is None:
        served = ", ".join(sorted(app.context for app in apps)) or "none"
        return f"no context {target.context_name} among the apps (contexts: {served})"
    model = app.models.get(target.aggregate_name)
    if model is None:
        known = ", ".join(sorted(app.models)) or "none"
        return (
            f"no aggregate {target.aggregate_name} in context {target.context_name} "
            f"(aggregates: {known})"
        )
    try:
        # A timer's command without a revision is at the first, as the host reads it.
        read = app.upcasting.upcast(command.type, command.revision or FIRST_REVISION, command.body)
    except UpcastError as error:
        return str(error)
    function = model.functions.get(read.type)
    # A system command (`wow.DeleteAggregate` later) is every aggregate's.
    kind = SYSTEM_COMMANDS.get(read.type) or (None if function is None else function.command)
    if kind is None:
        known = ", ".join(sorted(model.functions)) or "none"
        return f"{model.named} has no command {read.type} (commands: {known})"
    try:
        kind.model_validate(read.body)
    except ValidationError as error:
        return f"{read.type}: {explain(error)}"
    except Exception as error:  # a validator's own failure: the host refuses it too
        return f"{read.type}: {type(error).__name__}: {error}"
    return None


class Finding(BaseModel):
    """A timer the check reports: its command refused by the apps, or its state unreadable
    (camelCase in JSON, `workflowId`, as every answer of the CLI and the control API)."""

    model_config = WireModel.model_config

    workflow_id: str
    outcome: Literal["refused", "unreadable"]
    reason: str
    type: str | None = None
    """The command's type as the timer holds it (None when its state cannot be read)."""
    revision: str | None = None
    """The revision the timer's command carries; None: none, read as the first."""
    target: str | None = None
    """The aggregate the command goes to, `context.aggregate id`."""

    def line(self) -> str:
        """One line for a person: outcome, workflow id, why (the reason names the command)."""
        return f"{self.outcome:<10} {self.workflow_id}  {self.reason}"


class CheckReport(BaseModel):
    """What a check read and found."""

    model_config = ConfigDict(frozen=True)

    read: int = 0
    """Running timers read (at most the limit)."""
    checked: int = 0
    """Those whose command was judged against the apps."""
    idle: int = 0
    """Those with nothing to send (a cancelled or deleted key's timer on its way out)."""
    not_checked: dict[str, int] = {}
    """Timers whose target's context is not among the apps, by context: another deploy serves
    them, so they are not judged here (never a failure)."""
    truncated: bool = False
    """More running timers than the limit: those past it were not read."""
    findings: list[Finding] = []

    @property
    def refused(self) -> list[Finding]:
        return [finding for finding in self.findings if finding.outcome == "refused"]

    @property
    def unreadable(self) -> list[Finding]:
        return [finding for finding in self.findings if finding.outcome == "unreadable"]

    def passed(self, *, strict: bool = False) -> bool:
        """No command refused; with `strict`, also every running timer read and judged."""
        if self.refused:
            return False
        return not strict or not (self.unreadable or self.truncated)

    def summary(self) -> str:
        """One line: how many read, judged, refused, unreadable and not checked (and where)."""
        elsewhere = sum(self.not_checked.values())
        text = (
            f"{self.read} running timer(s) read: {self.checked} checked, "
            f"{len(self.refused)} refused, {len(self.unreadable)} unreadable, "
            f"{self.idle} with nothing to send, {elsewhere} not checked"
        )
        if elsewhere:
            counts = sorted(self.not_checked.items())
            contexts = ", ".join(f"{name} {count}" for name, count in counts)
            text += f" (contexts not among the apps: {contexts})"
        if self.truncated:
            text += f"; stopped at the limit of {self.read}: more running timers were not read"
        return text


@dataclass(frozen=True)
class Idle:
    """A timer with nothing to send: a cancelled or deleted key's, on its way out."""


@dataclass(frozen=True)
class Elsewhere:
    """A timer whose target's context is not among the apps: another deploy serves it."""

    context: str


Judged = Finding | Idle | Elsewhere | None
"""What one timer's state is found to be; None: its command is accepted."""


def judged(workflow_id: str, state: TimerState | str, apps: Sequence[App]) -> Judged:
    """A timer's state (as text: why it cannot be read) judged against the apps."""
    if isinstance(state, str):
        return Finding(workflow_id=workflow_id, outcome="unreadable", reason=state)
    spec = state.spec
    if spec is None:
        if state.parked_error:  # its own input could not be read: parked for an operator
            return Finding(workflow_id=workflow_id, outcome="unreadable", reason=state.parked_error)
        return Idle()
    if serving(spec.target, apps) is None:
        return Elsewhere(spec.target.context_name)
    reason = judge(spec.command, spec.target, apps)
    if reason is None:
        return None
    return Finding(
        workflow_id=workflow_id,
        outcome="refused",
        reason=reason,
        type=spec.command.type,
        revision=spec.command.revision,
        target=str(spec.target),
    )


Read = Callable[[WorkflowExecution], Awaitable[TimerState | str]]
"""How a check reads one listed timer's state (or why it cannot)."""


async def check_timers(
    timers: TimerOperations,
    apps: Sequence[App],
    *,
    limit: int = CHECK_LIMIT,
    progress: Callable[[int], None] | None = None,
    read: Read | None = None,
) -> CheckReport:
    """Judge the commands of up to `limit` running timers against `apps`, read-only: listed,
    then each one's state replayed from its history (`history_state`: no worker needed).
    `progress(read)` is told after each page of `PAGE` timers."""
    reader = read or (lambda execution: _state(timers.client, execution))
    query = TimerFilter(running=True).query()
    listed = timers.client.list_workflows(query, limit=limit + 1, page_size=PAGE)
    page: list[WorkflowExecution] = []
    tally = _Tally()
    async for execution in listed:
        if tally.read + len(page) == limit:
            tally.truncated = True
            break
        page.append(execution)
        if len(page) == PAGE:
            await _judge_page(reader, page, apps, tally)
            page = []
            if progress is not None:
                progress(tally.read)
    if page:
        await _judge_page(reader, page, apps, tally)
    return tally.report()


class _Tally:
    """A check's counts and findings as its pages are judged."""

    def __init__(self) -> None:
        self.read = 0
        self.checked = 0
        self.idle = 0
        self.elsewhere: Counter[str] = Counter()
        self.truncated = False
        self.findings: list[Finding] = []

    def add(self, found: Judged) -> None:
        self.read += 1
        if isinstance(found, Idle):
            self.idle += 1
        elif isinstance(found, Elsewhere):
            self.elsewhere[found.context] += 1
        else:
            self.checked += found is None or found.outcome == "refused"
            if found is not None:
                self.findings.append(found)

    def report(self) -> CheckReport:
        return CheckReport(
            read=self.read,
            checked=self.checked,
            idle=self.idle,
            not_checked=dict(self.elsewhere),
            truncated=self.truncated,
            findings=self.findings,
        )


async def _judge_page(
    read: Read, page: list[WorkflowExecution], apps: Sequence[App], tally: _Tally
) -> None:
    """Read the page's states, `READ_CONCURRENCY` at a time, and judge each in listed order."""
    limit = asyncio.Semaphore(READ_CONCURRENCY)

    async def one(execution: WorkflowExecution) -> TimerState | str:
        async with limit:
            return await read(execution)

    states = await asyncio.gather(*(one(execution) for execution in page))
    for execution, state in zip(page, states, strict=True):
        tally.add(judged(execution.id, state, apps))


async def _state(client: Client, execution: WorkflowExecution) -> TimerState | str:
    """The running timer's state, or why it cannot be read (never raises for one timer: a check
    reads them all)."""
    try:
        return await history_state(client, execution)
    except (TimerError, RPCError) as error:
        return f"its history cannot be read: {type(error).__name__}: {error}"


async def history_state(client: Client, execution: WorkflowExecution) -> TimerState:
    """The state a running timer's run is heading to, replayed from its history with the pure
    core, read-only and with no worker: its start input, then each schedule change handed over
    (`apply`, a signal or an update) and each operator's cancel, in order, as the workflow
    applies them, whether a worker has run them yet or not. Only the schedule matters here
    (which command it sends, to whom), not how its deliveries went. A change it cannot read
    it refuses too (left out); an input it cannot read parks it (`unreadable_input`)."""
    state: TimerState | None = None
    async for entry in history.entries(client, execution.id, execution.run_id):
        if entry.kind == "started":
            try:
                state = (await history.decoded(client, entry.payloads, TimerInput)).state
            except Exception as error:  # the timer parks itself on it
                return core.unreadable_input(f"{type(error).__name__}: {error}")
        elif state is None:
            continue
        elif entry.kind == "cancel_requested" or (entry.handed and entry.name == "cancel"):
            state = core.cancel(state)  # an operator's cancel, or Temporal's: it ends
        elif entry.handed and entry.name == "apply":
            change = await _change(client, entry.payloads)
            if change is not None:
                state = core.apply(state, change)
    if state is None:
        raise TimerError(f"no start of timer {execution.id!r} in its history")
    return state


async def _change(client: Client, payloads: Sequence[Payload]) -> TimerChange | None:
    """A schedule change handed over, or None for one the timer cannot read (it refuses it)."""
    try:
        change = await history.decoded(client, payloads, TimerChange)
    except Exception:
        return None
    return None if change.kind == "set" and change.spec is None else change
