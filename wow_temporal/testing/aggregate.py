"""`aggregate_spec`: test a decision, its events and the schedules committed with them, given an
aggregate's history. Pure: the command runs through the same core as the domain host
(`AggregateModel.handle`), with no server."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from wow_temporal.domain.aggregate import AggregateModel, Current, Decided
from wow_temporal.domain.app import App
from wow_temporal.domain.messages import CommandBody, ScheduleInfo, event_name, type_name
from wow_temporal.domain.rejection import Rejection
from wow_temporal.ids import timer_workflow_id
from wow_temporal.model import (
    AggregateDeleted,
    AggregateRef,
    ScheduleCancelled,
    ScheduledCommand,
    ScheduleRule,
    ScheduleSet,
)

__all__ = [
    "AggregateSpec",
    "Cancelled",
    "ExpectedEvent",
    "ExpectedSchedule",
    "Scheduled",
    "SpecResult",
    "aggregate_spec",
]


@dataclass(frozen=True, slots=True)
class Scheduled:
    """An expected `wow.ScheduleSet`: `command` (a body, compared by type and JSON) sent to
    `target` (None: the aggregate itself) each time `rule` is due, under `key`."""

    key: str
    rule: ScheduleRule
    command: BaseModel
    target: AggregateRef | None = None


@dataclass(frozen=True, slots=True)
class Cancelled:
    """An expected `wow.ScheduleCancelled` of the schedule under `key`."""

    key: str


ExpectedEvent = BaseModel | type[BaseModel]
"""An expected event: an instance (compared by name and JSON body) or a class (by name only)."""

ExpectedSchedule = (
    Scheduled
    | Cancelled
    | ScheduleSet
    | ScheduleCancelled
    | tuple[str, ScheduleRule, BaseModel]
    | tuple[str, ScheduleRule, BaseModel, AggregateRef | None]
)
"""An expected schedule change; a tuple `(key, rule, command[, target])` is a `Scheduled`."""

_Wire = tuple[str, dict[str, Any]]
_SYSTEM_EVENTS = (ScheduleSet, ScheduleCancelled, AggregateDeleted)


def _name(event: BaseModel | type[BaseModel]) -> str:
    """An event's name in a commit: a system event's `wow.` name, else `event_name`."""
    kind = event if isinstance(event, type) else type(event)
    if issubclass(kind, _SYSTEM_EVENTS):
        return kind.NAME
    return event_name(kind)


def _body(model: BaseModel) -> dict[str, Any]:
    """A model's JSON body as `AggregateModel.handle` writes events and scheduled commands."""
    return model.model_dump(mode="json", by_alias=True)


def _wire_event(event: BaseModel | Scheduled | Cancelled) -> _Wire:
    if isinstance(event, Scheduled | Cancelled):
        event = _schedule_event(event)
    if not isinstance(event, BaseModel):
        raise TypeError(f"given takes events (pydantic models), not {type(event).__name__}")
    return _name(event), _body(event)


def _scheduled_command(command: BaseModel) -> ScheduledCommand:
    """The command as a schedule carries it: its type name and JSON body (as `DecideScope`)."""
    if isinstance(command, ScheduledCommand):
        return command
    return ScheduledCommand(type=type_name(command), body=_body(command))


def _schedule_event(expected: object) -> ScheduleSet | ScheduleCancelled:
    if isinstance(expected, ScheduleSet | ScheduleCancelled):
        return expected
    if isinstance(expected, tuple) and len(expected) in (3, 4):
        expected = Scheduled(*expected)
    if isinstance(expected, Cancelled):
        return ScheduleCancelled(key=expected.key)
    if isinstance(expected, Scheduled):
        return ScheduleSet(
            key=expected.key,
            rule=expected.rule,
            command=_scheduled_command(expected.command),
            target=expected.target,
        )
    raise TypeError(
        "expect_schedules takes Scheduled(key, rule, command, target), Cancelled(key) or a "
        f"(key, rule, command[, target]) tuple, not {expected!r}"
    )


def _json(body: Mapping[str, Any]) -> str:
    return json.dumps(body, sort_keys=True, ensure_ascii=False, default=str)


def _show_event(event: _Wire) -> str:
    return f"{event[0]} {_json(event[1])}"


def _show_schedule(change: ScheduleSet | ScheduleCancelled) -> str:
    if isinstance(change, ScheduleCancelled):
        return f"cancel {change.key}"
    target = "itself" if change.target is None else str(change.target)
    return (
        f"set {change.key} {change.rule.describe()}: {change.command.type} "
        f"{_json(change.command.body)} -> {target}"
    )


def _listing(lines: Sequence[str]) -> str:
    return "\n".join(f"  {line}" for line in lines) if lines else "  (none)"


def _differs(what: str, expected: Sequence[str], actual: Sequence[str]) -> str:
    first = next(
        (i for i, (e, a) in enumerate(zip(expected, actual, strict=False)) if e != a),
        min(len(expected), len(actual)),
    )
    return (
        f"{what} differ at #{first + 1}\nexpected {what}:\n{_listing(expected)}\n"
        f"actual {what}:\n{_listing(actual)}"
    )


class SpecResult:
    """What a command decided in an `aggregate_spec`, with `expect_*` assertions (each returns
    the result, so they chain) and the aggregate's `state` after the decided events."""

    def __init__(
        self, spec: AggregateSpec, command_type: str, outcome: Decided | Rejection, current: Current
    ) -> None:
        self.spec = spec
        self.command_type = command_type
        self.outcome = outcome
        self._current = current

    @property
    def state(self) -> Any:
        """The state after applying the decided events (as it was, if rejected)."""
        return self._current.state

    @property
    def version(self) -> int:
        return self._current.version

    @property
    def deleted(self) -> bool:
        return self._current.deleted

    @property
    def rejection(self) -> Rejection | None:
        return self.outcome if isinstance(self.outcome, Rejection) else None

    @property
    def decided(self) -> Decided | None:
        return self.outcome if isinstance(self.outcome, Decided) else None

    @property
    def events(self) -> list[tuple[str, dict[str, Any]]]:
        """The decided events but the schedule changes, as `(name, JSON body)`, in order."""
        decided = self.decided
        skip = (ScheduleSet.NAME, ScheduleCancelled.NAME)
        return [] if decided is None else [e for e in decided.events if e[0] not in skip]

    @property
    def schedules(self) -> list[ScheduleSet | ScheduleCancelled]:
        """The schedules the decision sets or cancels, in order."""
        decided = self.decided
        return [] if decided is None else decided.schedule_changes

    def _summary(self) -> str:
        if isinstance(self.outcome, Rejection):
            return f"{self.command_type} was rejected: {self.outcome.code}: {self.outcome.message}"
        events = [_show_event(e) for e in self.events]
        schedules = [_show_schedule(s) for s in self.schedules]
        return (
            f"{self.command_type} decided events:\n{_listing(events)}\n"
            f"and schedules:\n{_listing(schedules)}"
        )

    def _decided(self, expected: str) -> Decided:
        if isinstance(self.outcome, Rejection):
            raise AssertionError(f"expected {expected}, but {self._summary()}")
        return self.outcome

    def expect_events(self, *expected: ExpectedEvent) -> SpecResult:
        """Assert the decided events (schedule changes aside) are exactly these, in order."""
        self._decided("events")
        actual = self.events
        if len(actual) == len(expected) and all(
            _name(e) == a[0] and (isinstance(e, type) or _body(e) == a[1])
            for e, a in zip(expected, actual, strict=True)
        ):
            return self
        shown = [
            f"{_name(e)} (any body)" if isinstance(e, type) else _show_event(_wire_event(e))
            for e in expected
        ]
        found = [
            f"{a[0]} (any body)" if isinstance(e, type) and _name(e) == a[0] else _show_event(a)
            for e, a in zip([*expected, *([None] * len(actual))], actual, strict=False)
        ]
        raise AssertionError(f"{self.command_type}: " + _differs("events", shown, found))

    def expect_schedules(self, *expected: ExpectedSchedule) -> SpecResult:
        """Assert the schedules set and cancelled are exactly these, in order (none if none is
        given), by key, rule (`ScheduleRule` equality), command type and JSON body, and target."""
        self._decided("schedules")
        wanted = [_schedule_event(e) for e in expected]
        actual = self.schedules
        if len(actual) == len(wanted) and all(
            _same_schedule(w, a) for w, a in zip(wanted, actual, strict=True)
        ):
            return self
        shown = [_show_schedule(w) for w in wanted]
        found = [_show_schedule(a) for a in actual]
        if shown == found:  # the same text, yet different (e.g. a rule's instant's precision)
            found = [repr(a) for a in actual]
            shown = [repr(w) for w in wanted]
        raise AssertionError(f"{self.command_type}: " + _differs("schedules", shown, found))

    def expect_rejection(self, code: str, message: str | None = None) -> SpecResult:
        """Assert the command was refused with Wow's error `code` (and, if given, a message
        containing `message`)."""
        rejection = self.rejection
        if rejection is None:
            raise AssertionError(f"expected a rejection {code}, but {self._summary()}")
        if rejection.code != code or (message is not None and message not in rejection.message):
            wanted = code if message is None else f"{code} with a message containing {message!r}"
            raise AssertionError(f"expected a rejection {wanted}, but {self._summary()}")
        return self

    def expect_no_commit(self) -> SpecResult:
        """Assert the command was accepted and changed nothing: no event, nothing scheduled
        (`Decision.NoOp`)."""
        decided = self._decided("no commit (NoOp)")
        if decided.events:
            raise AssertionError(f"expected no commit (NoOp), but {self._summary()}")
        return self

    def then(self) -> AggregateSpec:
        """The spec given everything so far, this decision's commit included (if it decided
        one), to send the next command."""
        decided = self.decided
        if decided is None or not decided.events:
            return self.spec
        return self.spec._given_commit(decided.events)


def _same_schedule(
    expected: ScheduleSet | ScheduleCancelled, actual: ScheduleSet | ScheduleCancelled
) -> bool:
    if isinstance(expected, ScheduleCancelled) or isinstance(actual, ScheduleCancelled):
        return (
            isinstance(expected, ScheduleCancelled)
            and isinstance(actual, ScheduleCancelled)
            and expected.key == actual.key
        )
    return (
        expected.key == actual.key
        and expected.rule == actual.rule
        and expected.command.type == actual.command.type
        and expected.command.body == actual.command.body
        and expected.target == actual.target
    )


class AggregateSpec:
    """One aggregate instance's history (`given`) and the command to decide on it (`when`);
    immutable (`given` returns a new spec), so one spec can start many tests."""

    def __init__(
        self,
        app: App,
        model: AggregateModel,
        ref: AggregateRef,
        commits: tuple[tuple[_Wire, ...], ...] = (),
    ) -> None:
        self.app = app
        self.model = model
        self.ref = ref
        self.commits = commits

    def given(self, *events: BaseModel | Scheduled | Cancelled) -> AggregateSpec:
        """The aggregate's history with one more commit of these events (domain events, or
        system ones such as `AggregateDeleted()`); `given()` with none adds nothing."""
        if not events:
            return self
        return self._given_commit(tuple(_wire_event(e) for e in events))

    def given_deleted(self) -> AggregateSpec:
        """The history with the aggregate deleted (`wow.AggregateDeleted`)."""
        return self.given(AggregateDeleted())

    def _given_commit(self, events: Sequence[_Wire]) -> AggregateSpec:
        return AggregateSpec(self.app, self.model, self.ref, (*self.commits, tuple(events)))

    def current(self) -> Current:
        """The aggregate as the given history leaves it, sourced commit by commit."""
        current = self.model.new(self.ref.aggregate_id)
        for version, commit in enumerate(self.commits, start=1):
            self.model.source(current, version, commit)
        return current

    def schedule_info(
        self, key: str, *, slot: int = 1, due: int = 0, owner: AggregateRef | None = None
    ) -> ScheduleInfo:
        """What a command sent by the timer of `key` on `owner` (this aggregate) carries, for
        `when(command, schedule=...)`."""
        timer = timer_workflow_id(owner or self.ref, key)
        return ScheduleInfo(timer=timer, key=key, slot=slot, due=due)

    def when(self, command: BaseModel, *, schedule: ScheduleInfo | None = None) -> SpecResult:
        """Decide `command` (a body, or a system command such as `SetSchedule`) on the given
        history, as sent by `schedule`'s timer if given. A function's bug raises here."""
        if not isinstance(command, BaseModel):
            raise TypeError(f"when takes a command body (a pydantic model), not {command!r}")
        if schedule is None and isinstance(command, CommandBody):
            schedule = command.schedule
        body = command.model_dump(mode="json", by_alias=True)
        return self.when_json(type_name(command), body, schedule=schedule)

    def when_json(
        self,
        command_type: str,
        body: Mapping[str, Any],
        *,
        schedule: ScheduleInfo | None = None,
    ) -> SpecResult:
        """Decide a command as the wire carries it: its type name and JSON body (to test
        unknown types and bodies that do not validate)."""
        current = self.current()
        services = self.app.bound[self.model.named.aggregate_name]
        outcome = self.model.handle(current, self.ref, command_type, body, services, schedule)
        if isinstance(outcome, Decided) and outcome.events:
            self.model.source(current, current.version + 1, outcome.events)
        return SpecResult(self, command_type, outcome, current)


def aggregate_spec(
    aggregate_cls: type,
    services: Iterable[object] = (),
    context: str = "test",
    tenant_id: str = "t1",
    aggregate_id: str = "a1",
) -> AggregateSpec:
    """A spec of the instance `aggregate_id` of `tenant_id`, `given(...).when(...)`; the class is
    read by `App(context, ...)`, so a missing service is refused as the host refuses it."""
    app = App(context, aggregates=[aggregate_cls], services=services)
    (model,) = app.models.values()
    return AggregateSpec(app, model, model.named.ref(tenant_id, aggregate_id))
