"""The pure core of a recurring job instance: its rule, slots, misfire policy and parking.

Given the state, the time and an input (enable, disable, reschedule, reset, a host override, a
wake-up, a tick's outcome, an operator's retry) it returns the new state and what to do next.
No Temporal, no I/O: `jobs.workflow` is the thin shell that runs these decisions durably.

Slots number the rule's due times from the first enable on (1, 2, …), handled or skipped, for
the instance's whole life; due times that pass while it is disabled take no number. A due time
found already past when the instance looks (no worker ran it, or a tick ran long) is a misfire:
COALESCE runs only the latest of those and counts the others in `skipped`, CATCH_UP runs each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal, get_args

from pydantic import ConfigDict, Field, field_validator

from wow_temporal.engine import Frozen, latest_due, parsed_cron, zoned_text
from wow_temporal.model import JobScope, Misfire, validate_cron, validate_zone, zone_info
from wow_temporal.model.rules import fires_problem

__all__ = [
    "RECENT_TICKS",
    "RULE_FIELDS",
    "AwaitOperator",
    "Handle",
    "HostRule",
    "JobRule",
    "JobState",
    "JobStatus",
    "PendingTick",
    "RuleChange",
    "RuleField",
    "RuleLayer",
    "Sleep",
    "Step",
    "TickOutcome",
    "TickRecord",
    "apply_host",
    "details",
    "disable",
    "enable",
    "initial",
    "misfire_name",
    "notice",
    "on_failed",
    "on_handled",
    "on_interrupted",
    "read_change",
    "read_fields",
    "reschedule",
    "reschedule_error",
    "reschedule_refusal",
    "reset",
    "retry",
    "set_host",
    "shadowed",
    "step",
    "summary",
    "upcoming",
]

MAX_TEXT = 300
"""Characters kept of an error or notice in the state (it travels in every continue-as-new,
query and the current details: a huge message must not push it past Temporal's limits)."""

RECENT_TICKS = 10
"""How many finished ticks the state (and the Web UI's current details) keeps."""

_NOTICES = 5


class JobStatus(StrEnum):
    """What `WowStatus` says of a job instance."""

    ENABLED = "Enabled"
    DISABLED = "Disabled"
    PARKED = "Parked"


RuleSource = Literal["code", "host", "tenant", "operator"]
"""Where a field of the rule in force comes from. The instance's own layer (a tenant's for a
TENANT instance, an operator's otherwise) beats the host's, which beats the code's."""

RuleField = Literal["expression", "zone", "misfire"]
RULE_FIELDS: tuple[RuleField, ...] = get_args(RuleField)


def misfire_name(value: Any) -> Any:
    """A misfire policy's name in any case, `-` for `_` (`catch_up`, `Catch-Up`), as the
    settings read it: `CATCH_UP`. Anything else is left for the enum to refuse."""
    if isinstance(value, str):
        return value.strip().upper().replace("-", "_")
    return value


class JobRule(Frozen):
    """A complete rule: a six-field Spring cron expression, its zone and misfire policy."""

    expression: str
    zone: str = "UTC"
    misfire: Misfire = Misfire.COALESCE

    def next_after(self, instant: datetime) -> datetime | None:
        """The first due time strictly after `instant`, in UTC; None if it never matches."""
        found = parsed_cron(self.expression).next(instant.astimezone(zone_info(self.zone)))
        return None if found is None else found.astimezone(UTC)

    def describe(self) -> str:
        return f"{self.expression} {self.zone}"


class RuleLayer(Frozen):
    """One layer of overrides (host's or the instance's own); None keeps the layer below.
    An unknown key is refused (a misspelt `zon` must not be dropped silently)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    expression: str | None = None
    zone: str | None = None
    misfire: Misfire | None = None

    @field_validator("misfire", mode="before")
    @classmethod
    def _misfire_any_case(cls, value: Any) -> Any:
        return misfire_name(value)

    def over(self, below: RuleLayer) -> RuleLayer:
        """This layer laid over `below`, field by field."""
        return RuleLayer(
            expression=self.expression if self.expression is not None else below.expression,
            zone=self.zone if self.zone is not None else below.zone,
            misfire=self.misfire if self.misfire is not None else below.misfire,
        )

    def without(self, fields: Iterable[RuleField]) -> RuleLayer:
        """This layer with `fields` removed (None: the layer below shows through)."""
        return self.model_copy(update=dict.fromkeys(fields))

    @property
    def empty(self) -> bool:
        return self.expression is None and self.zone is None and self.misfire is None

    def describe(self) -> str:
        """`expression 0 0 7 * * *, zone Asia/Tokyo`, or `nothing`."""
        given = [f"{name} {_shown(getattr(self, name))}" for name in RULE_FIELDS
                 if getattr(self, name) is not None]
        return ", ".join(given) or "nothing"


def _shown(value: object) -> str:
    return value.value if isinstance(value, Misfire) else str(value)


class RuleChange(Frozen):
    """A reschedule as sent: the fields it sets, and those it removes from the instance's own
    layer (given as null), so the host's override or the code's shows through again."""

    layer: RuleLayer = RuleLayer()
    remove: tuple[RuleField, ...] = ()

    @property
    def empty(self) -> bool:
        return self.layer.empty and not self.remove


class HostRule(Frozen):
    """What a worker's settings say of a job (`wow.schedules.<name>.*`)."""

    layer: RuleLayer = RuleLayer()
    enabled: bool | None = None
    """False: keep the SYSTEM instances disabled; True/None: enable them unless they run."""
    partitions: int = Field(default=1, ge=1)
    """How many instances a sharded job has (for the worker; an instance ignores it)."""


class PendingTick(Frozen):
    """The tick being handled, or parked after its handling kept failing."""

    slot: int = Field(ge=1)
    due: datetime
    skipped: int = Field(default=0, ge=0)
    parked: bool = False
    reason: str = ""
    """Why it was parked (the last failure)."""
    retries: int = 0
    """How many times an operator retried it."""


TickOutcome = Literal["handled", "parked", "interrupted"]


class TickRecord(Frozen):
    """A finished tick, for the current details and `show`."""

    slot: int
    due: datetime
    skipped: int
    outcome: TickOutcome
    commands: int = 0
    delivered: int = 0
    rejected: int = 0
    detail: str = ""
    at: datetime


class JobState(Frozen):
    """Everything a job instance knows, carried across continue-as-new."""

    context: str
    job: str
    scope: JobScope = JobScope.SYSTEM
    tenant: str = "(0)"
    partition: int | None = None
    processor: str = ""
    """The subscription that handles ticks: `<processor>.<function>`."""
    code: JobRule
    host: RuleLayer = RuleLayer()
    own: RuleLayer = RuleLayer()
    """The instance's own rule (a tenant's `reschedule`, or an operator's): above the host's."""
    enabled: bool = False
    host_disabled: bool = False
    """Disabled by the host's `enabled: false` (not an operator): enabled again when the
    host's settings no longer say so."""
    next_slot: int = 1
    cursor: datetime | None = None
    """The latest due time passed (handled or skipped), or the instant of the last enable."""
    pending: PendingTick | None = None
    recent: tuple[TickRecord, ...] = ()
    handled: int = 0
    commands: int = 0
    notices: tuple[str, ...] = ()
    """The last refused signals and other things an operator should read."""

    @property
    def rule(self) -> JobRule:
        """The rule in force: the instance's own over the host's over the code's."""
        layered = self.own.over(self.host)
        return JobRule(
            expression=layered.expression or self.code.expression,
            zone=layered.zone or self.code.zone,
            misfire=layered.misfire or self.code.misfire,
        )

    def source(self, field: RuleField) -> RuleSource:
        """Where the field in force comes from."""
        if getattr(self.own, field) is not None:
            return self.owner
        if getattr(self.host, field) is not None:
            return "host"
        return "code"

    @property
    def owner(self) -> Literal["tenant", "operator"]:
        """Whose the instance's own layer is: its tenant's, or an operator's."""
        return "tenant" if self.scope is JobScope.TENANT else "operator"

    @property
    def status(self) -> JobStatus:
        if self.pending is not None and self.pending.parked:
            return JobStatus.PARKED
        return JobStatus.ENABLED if self.enabled else JobStatus.DISABLED

    @property
    def label(self) -> str:
        """`receive-deliveries (0)`, `… partition 2`: the instance as a person names it."""
        where = f" partition {self.partition}" if self.partition is not None else ""
        return f"{self.job} {self.tenant}{where}"


class Sleep(Frozen):
    """Wait until `until` (None: until something changes)."""

    until: datetime | None


class Handle(Frozen):
    """Hand this tick to the handler."""

    tick: PendingTick


class AwaitOperator(Frozen):
    """The pending tick is parked: wait for an operator's retry (or a disable)."""


Step = Sleep | Handle | AwaitOperator


def initial(
    context: str,
    job: str,
    code: JobRule,
    *,
    scope: JobScope = JobScope.SYSTEM,
    tenant: str = "(0)",
    partition: int | None = None,
    processor: str = "",
    host: RuleLayer | None = None,
) -> JobState:
    """A new, disabled instance."""
    return JobState(
        context=context, job=job, scope=scope, tenant=tenant, partition=partition,
        processor=processor, code=code, host=host or RuleLayer(),
    )


def step(state: JobState, now: datetime) -> tuple[JobState, Step]:
    """What the instance does now: handle a tick (taking its slot), sleep, or wait."""
    pending = state.pending
    if pending is not None:
        if pending.parked:
            return state, AwaitOperator()
        return state, Handle(tick=pending) if state.enabled else Sleep(until=None)
    if not state.enabled:
        return state, Sleep(until=None)
    rule = state.rule
    cursor = state.cursor if state.cursor is not None else now
    first = rule.next_after(cursor)
    if first is None or first > now:
        return state, Sleep(until=first)
    if rule.misfire is Misfire.CATCH_UP:
        tick = PendingTick(slot=state.next_slot, due=first)
        taken = 1
    else:  # the latest, numbered past those it skips (`engine.latest_due`: at most a cap)
        latest = latest_due(rule.next_after, first, now)
        tick = PendingTick(
            slot=state.next_slot + latest.skipped, due=latest.due, skipped=latest.skipped
        )
        taken = latest.skipped + 1
    state = state.model_copy(
        update={"pending": tick, "cursor": tick.due, "next_slot": state.next_slot + taken}
    )
    return state, Handle(tick=tick)


def _clip(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def enable(state: JobState, now: datetime) -> JobState:
    """Enable the instance; from the next due time after now. Enabled already: unchanged."""
    if state.enabled:
        return state
    cursor = now if state.cursor is None else max(state.cursor, now)
    return state.model_copy(update={"enabled": True, "cursor": cursor, "host_disabled": False})


def disable(state: JobState) -> JobState:
    """Disable it: no tick starts until it is enabled again (a running one is interrupted by
    the shell, `on_interrupted`); a parked tick stays parked, to be retried when enabled."""
    return state.model_copy(update={"enabled": False, "host_disabled": False})


def reschedule_error(layer: RuleLayer) -> str | None:
    """Why `layer` cannot be a rule (a bad expression or zone, or an expression no time ever
    matches: the instance would never tick), or None."""
    try:
        if layer.zone is not None:
            validate_zone(layer.zone)
        if layer.expression is not None:
            validate_cron(layer.expression)
            return fires_problem(layer.expression, layer.zone)
    except ValueError as error:
        return str(error)
    return None


def reschedule_refusal(change: RuleLayer | RuleChange) -> str | None:
    """Why a reschedule is refused: nothing given, or a bad expression or zone."""
    if isinstance(change, RuleLayer):
        change = RuleChange(layer=change)
    if change.empty:
        return (
            "give at least one of 'expression', 'zone' or 'misfire' (null removes the "
            "instance's own, the host's or the code's then in force)"
        )
    return reschedule_error(change.layer)


def read_change(payload: object, *, null_removes: bool = True) -> RuleChange:
    """A reschedule's JSON object: a field given sets the instance's own, one given as null
    removes it (`null_removes`; else null keeps it, as before `wow.schedule.reset`), one left
    out keeps it. `ValueError` (a pydantic `ValidationError` for a bad field) if it is not."""
    if not isinstance(payload, dict):
        raise ValueError('send one JSON object: {"expression": …, "zone": …, "misfire": …}')
    layer = RuleLayer.model_validate(payload)
    nulls = tuple(f for f in RULE_FIELDS if f in payload and payload[f] is None)
    return RuleChange(layer=layer, remove=nulls if null_removes else ())


def read_fields(payload: object) -> tuple[RuleField, ...] | None:
    """What a reset removes: None (nothing sent, `{}` or `{"fields": null}`) for the whole own
    layer, or the fields `{"fields": ["expression", …]}` names; `ValueError` saying what is
    wrong otherwise."""
    if payload is None:
        return None
    if not isinstance(payload, dict) or set(payload) - {"fields"}:
        raise ValueError('send nothing, or {"fields": ["expression", "zone", "misfire"]} '
                         "(any of them; none: all)")
    fields = payload.get("fields")
    if fields is None:
        return None
    if not isinstance(fields, list) or not all(isinstance(f, str) for f in fields):
        raise ValueError('fields: a list of "expression", "zone" or "misfire"')
    unknown = [f for f in fields if f not in RULE_FIELDS]
    if unknown:
        raise ValueError(f"fields: no rule field {unknown[0][:40]!r} (expression, zone, misfire)")
    return tuple(f for f in RULE_FIELDS if f in fields)


def reschedule(
    state: JobState, change: RuleLayer | RuleChange, now: datetime
) -> JobState:
    """The instance's own rule, field by field over what it had (a `RuleChange` may also
    remove fields); the next due time is counted from now, so a new rule never finds a past
    slot to run."""
    if isinstance(change, RuleLayer):
        change = RuleChange(layer=change)
    own = change.layer.over(state.own.without(change.remove))
    return _new_rule(state.model_copy(update={"own": own}), state, now)


def reset(state: JobState, fields: Iterable[RuleField] | None, now: datetime) -> JobState:
    """Remove the instance's own rule (`fields` of it, or all): the host's override, or the
    code's, is in force again. Nothing to remove: unchanged. A changed rule counts its next
    due time from now, as a reschedule does; slots keep counting."""
    own = RuleLayer() if fields is None else state.own.without(fields)
    return _new_rule(state.model_copy(update={"own": own}), state, now)


def shadowed(state: JobState) -> list[str]:
    """A line for each field of the host's override the instance's own layer hides: `host
    says 0 0 7 * * *, overridden by operator's 0 0 6 * * *; …reset to follow the host`."""
    lines = []
    for name in RULE_FIELDS:
        host, own = getattr(state.host, name), getattr(state.own, name)
        if host is None or own is None or host == own:
            continue
        what = "" if name == "expression" else f"{name} "
        lines.append(
            f"host says {what}{_shown(host)}, overridden by {state.owner}'s {_shown(own)}; "
            f"`schedule reset` (or `--field {name}`) to follow the host"
        )
    return lines


def set_host(state: JobState, host: RuleLayer, now: datetime) -> JobState:
    """The host's override as the worker now has it (replacing the one it had)."""
    return _new_rule(state.model_copy(update={"host": host}), state, now)


def apply_host(state: JobState, rule: HostRule, now: datetime) -> JobState:
    """A worker's settings for the job: its override, and `enabled: false` keeping the
    instance disabled; an instance never enabled yet is enabled (the host enables SYSTEM
    jobs at start), one enabled already is never reset; one the host disabled is enabled
    again once its settings no longer say `enabled: false` (an operator's disable stays)."""
    state = set_host(state, rule.layer, now)
    if rule.enabled is False:
        if not state.enabled:
            return state
        return disable(state).model_copy(update={"host_disabled": True})
    if state.cursor is None or state.host_disabled:
        return enable(state, now)
    return state


def _new_rule(changed: JobState, before: JobState, now: datetime) -> JobState:
    if changed.rule == before.rule:
        return changed
    if changed.cursor is None or not changed.enabled:
        return changed
    return changed.model_copy(update={"cursor": max(changed.cursor, now)})


def on_handled(
    state: JobState, tick: PendingTick, now: datetime, *, commands: int, delivered: int,
    rejected: int,
) -> JobState:
    """The handler ran and every command it derived was decided by its target."""
    record = TickRecord(
        slot=tick.slot, due=tick.due, skipped=tick.skipped, outcome="handled",
        commands=commands, delivered=delivered, rejected=rejected, at=now,
    )
    finished = _finished(state, tick, record)
    if finished is state:  # not the pending tick (a repeated outcome): counted already
        return state
    return finished.model_copy(
        update={"handled": state.handled + 1, "commands": state.commands + commands}
    )


def on_interrupted(state: JobState, tick: PendingTick, now: datetime, detail: str) -> JobState:
    """The tick was stopped by a disable before it finished; its slot is spent."""
    record = TickRecord(
        slot=tick.slot, due=tick.due, skipped=tick.skipped, outcome="interrupted",
        detail=detail, at=now,
    )
    return _finished(state, tick, record)


def on_failed(state: JobState, tick: PendingTick, now: datetime, reason: str) -> JobState:
    """The handler or a send kept failing: park the tick; later slots wait behind it."""
    if state.pending is None or state.pending.slot != tick.slot:
        return state
    reason = _clip(reason)
    parked = tick.model_copy(update={"parked": True, "reason": reason})
    record = TickRecord(
        slot=tick.slot, due=tick.due, skipped=tick.skipped, outcome="parked",
        detail=reason, at=now,
    )
    return state.model_copy(update={"pending": parked, "recent": _keep(state.recent, record)})


def retry(state: JobState) -> JobState:
    """An operator's retry of the parked tick: handled again, with the same request ids."""
    pending = state.pending
    if pending is None or not pending.parked:
        return state
    again = pending.model_copy(update={"parked": False, "retries": pending.retries + 1})
    return state.model_copy(update={"pending": again})


def notice(state: JobState, text: str) -> JobState:
    """Keep `text` (a refused signal, say) for the current details."""
    return state.model_copy(update={"notices": (*state.notices, _clip(text))[-_NOTICES:]})


def _finished(state: JobState, tick: PendingTick, record: TickRecord) -> JobState:
    if state.pending is None or state.pending.slot != tick.slot:
        return state
    return state.model_copy(update={"pending": None, "recent": _keep(state.recent, record)})


def _keep(recent: tuple[TickRecord, ...], record: TickRecord) -> tuple[TickRecord, ...]:
    return (*recent, record)[-RECENT_TICKS:]


def upcoming(state: JobState, now: datetime, count: int = 5) -> list[datetime]:
    """The next `count` due times after now of the rule in force (none while disabled); due
    times already past are a misfire, not upcoming."""
    if not state.enabled:
        return []
    times: list[datetime] = []
    cursor = now if state.cursor is None else max(state.cursor, now)
    if state.pending is not None:
        cursor = max(cursor, state.pending.due)
    while len(times) < count:
        found = state.rule.next_after(cursor)
        if found is None:
            break
        times.append(found)
        cursor = found
    return times


def summary(state: JobState, now: datetime) -> str:
    """The line a person reads in the Web UI: `receive-deliveries (0) → next
    2026-10-21T06:00:00.000Z, 0 0 6 * * * UTC` (times in the rule's zone)."""
    rule = state.rule.describe()
    shown = _in_zone(state)
    pending = state.pending
    if pending is not None and pending.parked:
        return f"{state.label} parked at slot {pending.slot}, {rule}"
    if pending is not None:
        return f"{state.label} → slot {pending.slot} due {shown(pending.due)}, {rule}"
    if not state.enabled:
        return f"{state.label} disabled, {rule}"
    following = upcoming(state, now, 1)
    when = f"next {shown(following[0])}" if following else "never due"
    return f"{state.label} → {when}, {rule}"


def details(state: JobState, now: datetime) -> str:
    """The current details the Web UI shows (Markdown): rule and its sources, next due
    times, the last ticks and anything an operator should read."""
    rule = state.rule
    lines = [f"**{state.status.value}** · {summary(state, now)}"]
    lines.append(
        f"rule `{rule.expression}` ({state.source('expression')}) · zone {rule.zone} "
        f"({state.source('zone')}) · misfire {rule.misfire.value} ({state.source('misfire')})"
    )
    lines.extend(f"shadowed: {text}" for text in shadowed(state))
    if state.processor:
        lines.append(f"handled by {state.processor} · next slot {state.next_slot}")
    pending = state.pending
    if pending is not None and pending.parked:
        lines.append(
            f"parked: slot {pending.slot}: {pending.reason} — retry with "
            "`wow-temporal schedule retry`"
        )
    nexts = upcoming(state, now)
    if nexts:
        lines.append("next: " + ", ".join(_in_zone(state)(t) for t in nexts))
    if state.recent:  # a list, not a table: the Web UI shows Markdown tables unaligned
        ticks = (f"- {_tick_line(record, state)}" for record in reversed(state.recent))
        lines.append("last ticks, latest first:\n" + "\n".join(ticks))
    for text in state.notices:
        lines.append(f"notice: {text}")
    return "\n\n".join(lines)


def _in_zone(state: JobState) -> Callable[[datetime], str]:
    """How the instance's times are shown: in its rule's zone, the zone being the point."""
    zone = zone_info(state.rule.zone)
    return lambda instant: zoned_text(instant, zone)


def _tick_line(record: TickRecord, state: JobState) -> str:
    """One finished tick, read alike as plain text and as Markdown: `slot 3 · due
    2026-10-21T06:00:00.000Z · skipped 0 · handled · 2 commands (2 ok, 0 rejected)`."""
    due = _in_zone(state)(record.due)
    line = f"slot {record.slot} · due {due} · skipped {record.skipped}"
    if record.outcome != "handled":
        return f"{line} · {record.outcome}" + (f": {record.detail}" if record.detail else "")
    return (
        f"{line} · handled · {record.commands} command{'' if record.commands == 1 else 's'} "
        f"({record.delivered} ok, {record.rejected} rejected)"
    )
