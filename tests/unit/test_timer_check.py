"""Check before a deploy (`timers.check`): each pending timer's command judged as the domain host
will read it after the deploy (its context and aggregate, the upcasters from the revision it
carries, the body against the function's model); a target another deploy serves is not checked;
the pages, the limit and the progress of a long read."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest

from tests.apps.notes import (
    NOTE,
    REMIND,
    RemindV1,
    Write,
    notes_v1,
    notes_v2,
    text_in_a_message,
)
from wow_temporal import App, Decision, aggregate, on_command, upcaster
from wow_temporal.model import AggregateRef, ScheduledCommand, ScheduleRule, Scope
from wow_temporal.timers import check
from wow_temporal.timers.check import (
    CheckReport,
    Elsewhere,
    Finding,
    Idle,
    check_timers,
    judge,
    judged,
)
from wow_temporal.timers.client import TimerClient
from wow_temporal.timers.core import Status, TimerSpec, TimerState, unreadable_input

pytestmark = pytest.mark.unit

TARGET = NOTE.ref("t1", "n-1")
V1_BODY = {"text": "due after 5 ms"}


@upcaster("notes.Nudge", revision=1, to_type=REMIND, to=1)
def nudge_is_remind(body: dict[str, Any]) -> dict[str, Any]:
    """An older build called the command `notes.Nudge`, its text under `say`."""
    return {"text": body["say"]}


@aggregate("note")
class RemindOnly:
    def __init__(self, state: object) -> None:
        self.state = state

    @on_command(create=True)
    def remind(self, command: RemindV1) -> Decision:
        return Decision.NoOp


@aggregate("draft")
class Draft:
    def __init__(self, state: object) -> None:
        self.state = state

    @on_command(create=True)
    def write(self, command: Write) -> Decision:
        return Decision.NoOp


SPLIT = App(NOTE.context_name, aggregates=[RemindOnly, Draft])
"""The notes context where `note` lost `Write` to another aggregate, `draft`."""


def renaming() -> App:
    return App(
        NOTE.context_name,
        aggregates=[notes_v2().models["note"].cls],
        upcasters=[text_in_a_message, nudge_is_remind],
    )


def command(kind: str = REMIND, body: dict[str, Any] | None = None, revision: str | None = None
            ) -> ScheduledCommand:
    return ScheduledCommand(type=kind, body=V1_BODY if body is None else body, revision=revision)


# --- judge: one command, as the host reads it -------------------------------------------------


def test_a_revision_1_body_is_accepted_by_the_app_that_still_reads_it() -> None:
    assert judge(command(), TARGET, [notes_v1]) is None


def test_a_body_without_revision_is_upcast_from_the_first_and_accepted() -> None:
    assert judge(command(), TARGET, [notes_v2()]) is None


def test_a_body_at_the_revision_the_app_reads_is_accepted() -> None:
    body = {"message": {"text": "hi"}}
    assert judge(command(body=body, revision="2"), TARGET, [notes_v2()]) is None


def test_a_revision_with_no_upcaster_path_is_refused_naming_it() -> None:
    reason = judge(command(), TARGET, [notes_v2(upcasting=False)])
    assert reason == "notes.Remind revision 1: no upcaster reads it (the app reads revision 2)"


def test_a_revision_the_app_never_had_is_refused() -> None:
    reason = judge(command(revision="7"), TARGET, [notes_v2()])
    assert reason == "notes.Remind revision 7: no upcaster reads it (the app reads revision 2)"


def test_an_unknown_type_is_refused() -> None:
    reason = judge(command("notes.Forget"), TARGET, [notes_v2()])
    assert reason == "notes.note has no command notes.Forget (commands: notes.Remind, notes.Write)"


def test_a_system_command_scheduled_for_later_is_accepted() -> None:
    """`wow.DeleteAggregate` 30 days later: every aggregate's, no upcaster needed."""
    assert judge(command("wow.DeleteAggregate", {}), TARGET, [notes_v2()]) is None


def test_a_renamed_type_is_read_through_its_upcasters_chain() -> None:
    assert judge(command("notes.Nudge", {"say": "hi"}), TARGET, [renaming()]) is None


def test_a_renamed_type_whose_upcaster_fails_on_the_body_is_refused() -> None:
    reason = judge(command("notes.Nudge", {"text": "hi"}), TARGET, [renaming()])
    assert reason is not None
    assert reason.startswith("notes.Nudge revision 1 -> 1 as notes.Remind failed: KeyError")


def test_a_body_invalid_after_upcasting_is_refused_naming_the_field() -> None:
    reason = judge(command(body={"text": 5}), TARGET, [notes_v2()])
    assert reason is not None
    assert reason.startswith("notes.Remind: message.text")


def test_a_body_invalid_at_its_own_revision_is_refused() -> None:
    reason = judge(command(body={"note": "x"}), TARGET, [notes_v1])
    assert reason is not None
    assert reason.startswith("notes.Remind: ") and "text" in reason


def test_a_type_another_aggregate_of_the_context_handles_is_refused() -> None:
    draft = AggregateRef(
        context_name="notes", aggregate_name="draft", tenant_id="t1", aggregate_id="d-1"
    )
    assert judge(command("notes.Write", {"millis": 1}), draft, [SPLIT]) is None
    reason = judge(command("notes.Write", {"millis": 1}), TARGET, [SPLIT])
    assert reason == "notes.note has no command notes.Write (commands: notes.Remind)"


def test_an_unknown_aggregate_of_the_context_is_refused() -> None:
    ref = NOTE.ref("t1", "x").model_copy(update={"aggregate_name": "memo"})
    assert judge(command(), ref, [notes_v2()]) == (
        "no aggregate memo in context notes (aggregates: note)"
    )


def test_a_context_not_among_the_apps_is_named() -> None:
    ref = TARGET.model_copy(update={"context_name": "eshop-order"})
    assert judge(command(), ref, [notes_v2()]) == (
        "no context eshop-order among the apps (contexts: notes)"
    )


# --- judged: one timer's state ----------------------------------------------------------------


def state(
    kind: str = REMIND,
    body: dict[str, Any] | None = None,
    target: AggregateRef = TARGET,
    revision: str | None = None,
) -> TimerState:
    rule = ScheduleRule.after(timedelta(days=1))
    spec = TimerSpec(
        timer="c1:e1",
        key="remind",
        owner=target,
        target=target,
        rule=rule,
        command=command(kind, body, revision),
        scope=Scope(tenant_id=target.tenant_id),
        upstream_id="c1",
        first_due=rule.first_due(datetime(2030, 1, 1, tzinfo=UTC)),
    )
    return TimerState(spec=spec)


def test_a_timer_refused_is_a_finding_with_its_command() -> None:
    found = judged("w1", state(), [notes_v2(upcasting=False)])
    assert found == Finding(
        workflow_id="w1",
        outcome="refused",
        reason="notes.Remind revision 1: no upcaster reads it (the app reads revision 2)",
        type=REMIND,
        revision=None,
        target="notes.note n-1",
    )
    assert found.line() == (
        "refused    w1  notes.Remind revision 1: no upcaster reads it (the app reads revision 2)"
    )


def test_a_timer_accepted_is_nothing_to_report() -> None:
    assert judged("w1", state(), [notes_v2()]) is None


def test_a_timer_of_a_context_served_elsewhere_is_not_checked() -> None:
    ref = TARGET.model_copy(update={"context_name": "eshop-order"})
    assert judged("w1", state(target=ref), [notes_v2(upcasting=False)]) == Elsewhere("eshop-order")


def test_a_timer_with_nothing_to_send_is_idle() -> None:
    assert judged("w1", TimerState(status=Status.CANCELLED), [notes_v2()]) == Idle()


def test_a_timer_that_cannot_read_its_input_or_be_read_is_unreadable() -> None:
    parked = judged("w1", unreadable_input("KeyError: spec"), [notes_v2()])
    assert parked == Finding(
        workflow_id="w1", outcome="unreadable", reason="cannot read its input: KeyError: spec"
    )
    unanswered = judged("w2", "no worker answered", [notes_v2()])
    assert unanswered == Finding(
        workflow_id="w2", outcome="unreadable", reason="no worker answered"
    )


# --- the report -------------------------------------------------------------------------------


def test_only_a_refusal_fails_unless_strict_wants_every_timer_read() -> None:
    refused = Finding(workflow_id="a", outcome="refused", reason="r")
    unreadable = Finding(workflow_id="b", outcome="unreadable", reason="u")
    assert not CheckReport(findings=[refused]).passed()
    assert CheckReport(findings=[unreadable]).passed()
    assert not CheckReport(findings=[unreadable]).passed(strict=True)
    assert CheckReport(truncated=True).passed()
    assert not CheckReport(truncated=True).passed(strict=True)
    assert CheckReport(not_checked={"eshop-order": 3}).passed(strict=True)


# --- the read: pages, limit, progress ---------------------------------------------------------


@dataclass
class Execution:
    id: str
    run_id: str = "r"


class FakeTemporal:
    """What a check asks of Temporal: a listing of running timers, in pages."""

    def __init__(self, count: int) -> None:
        self.executions = [Execution(f"w{n}") for n in range(count)]
        self.asked: dict[str, Any] = {}

    def list_workflows(self, query: str, *, limit: int, page_size: int) -> AsyncIterator[Execution]:
        self.asked = {"query": query, "limit": limit, "page_size": page_size}

        async def listing() -> AsyncIterator[Execution]:
            for execution in self.executions[:limit]:
                yield execution

        return listing()


class FakeTimers:
    """A `TimerClient` whose timers' states (or why each cannot be read) are given by id."""

    def __init__(self, count: int, states: Callable[[str], TimerState | str]) -> None:
        self.client = FakeTemporal(count)
        self.states = states
        self.read: list[str] = []

    async def read_state(self, execution: Any) -> TimerState | str:
        self.read.append(execution.id)
        return self.states(execution.id)


async def run_check(timers: FakeTimers, apps: list[App], **options: Any) -> CheckReport:
    return await check_timers(cast(TimerClient, timers), apps, read=timers.read_state, **options)


async def test_a_check_reads_every_running_timer_in_pages_telling_its_progress(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(check, "PAGE", 4)
    other = TARGET.model_copy(update={"context_name": "eshop-order"})
    now = state(body={"message": {"text": "hi"}}, revision="2")
    states: dict[str, TimerState | str] = {
        "w1": state(),
        "w2": "no history",
        "w3": "no history either",
        "w5": state(target=other),
        "w6": TimerState(),
        "w8": now,
    }
    timers = FakeTimers(10, lambda workflow_id: states.get(workflow_id, state(body={"x": 1})))
    told: list[int] = []
    report = await run_check(timers, [notes_v2(upcasting=False)], progress=told.append)
    assert told == [4, 8]
    assert timers.client.asked["page_size"] == 4
    assert "ExecutionStatus = 'Running'" in timers.client.asked["query"]
    assert sorted(timers.read) == [f"w{n}" for n in range(10)]
    assert (report.read, report.checked, report.idle) == (10, 6, 1)
    assert report.not_checked == {"eshop-order": 1}
    assert [f.workflow_id for f in report.refused] == ["w0", "w1", "w4", "w7", "w9"]
    assert [f.workflow_id for f in report.unreadable] == ["w2", "w3"]
    assert [f.reason for f in report.unreadable] == ["no history", "no history either"]
    assert not report.truncated
    assert report.summary() == (
        "10 running timer(s) read: 6 checked, 5 refused, 2 unreadable, 1 with nothing to send, "
        "1 not checked (contexts not among the apps: eshop-order 1)"
    )


async def test_a_check_stops_at_its_limit_and_says_more_were_not_read() -> None:
    timers = FakeTimers(5, lambda _: state())
    report = await run_check(timers, [notes_v2()], limit=3)
    assert timers.client.asked["limit"] == 4  # one more, to know whether there are more
    assert (report.read, report.truncated, report.findings) == (3, True, [])
    assert report.summary().endswith("stopped at the limit of 3: more running timers were not read")
    exact = await run_check(FakeTimers(3, lambda _: state()), [notes_v2()], limit=3)
    assert (exact.read, exact.truncated) == (3, False)
