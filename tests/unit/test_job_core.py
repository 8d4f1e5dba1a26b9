"""The pure core of a recurring job instance (`wow_temporal.jobs.core`): examples and models.

The examples walk each requirement once; the properties and the model-based test drive the core
the way `jobs.workflow` does (step, handle or park the tick, retry, enable, disable, reschedule,
set the host's override, let time pass with no worker) and check every tick it hands out against
due times enumerated independently with `CronExpression.next`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
)
from hypothesis.stateful import rule as step_rule

from wow_temporal.cron import CronExpression
from wow_temporal.engine import slots as engine_slots
from wow_temporal.jobs import core
from wow_temporal.jobs.core import (
    AwaitOperator,
    Handle,
    JobRule,
    JobState,
    JobStatus,
    PendingTick,
    RuleLayer,
    Sleep,
)
from wow_temporal.model import JobScope, Misfire

T0 = datetime(2026, 1, 5, 0, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)
US = timedelta(microseconds=1)
EVERY_5S = "*/5 * * * * *"
EVERY_MINUTE = "0 * * * * *"
NEVER = "0 0 0 30 2 *"
NIGHTLY = "0 30 2 * * *"

Field = Literal["expression", "zone", "misfire"]
FIELDS: tuple[Field, ...] = ("expression", "zone", "misfire")


# ---------------------------------------------------------------- an independent reference


def ref_next(expression: str, zone: str, after: datetime) -> datetime | None:
    """The rule's first due time strictly after `after`, in UTC, straight from the cron."""
    found = CronExpression.parse(expression).next(after.astimezone(ZoneInfo(zone)))
    return None if found is None else found.astimezone(UTC)


def ref_dues(expression: str, zone: str, after: datetime, until: datetime) -> list[datetime]:
    """Every due time in (after, until], in order."""
    dues: list[datetime] = []
    found = ref_next(expression, zone, after)
    while found is not None and found <= until:
        dues.append(found)
        found = ref_next(expression, zone, found)
    return dues


def is_due(expression: str, zone: str, instant: datetime) -> bool:
    """`instant` is a due time of the rule (the cron's next after a second before it)."""
    return instant.microsecond == 0 and ref_next(expression, zone, instant - SECOND) == instant


def wall_matches(expression: str, zone: str, instant: datetime) -> bool:
    """The wall-clock time of `instant` in `zone` matches the expression's fields."""
    wall = instant.astimezone(ZoneInfo(zone)).replace(tzinfo=UTC)
    return CronExpression.parse(expression).next(wall - SECOND) == wall


def job(
    expression: str = EVERY_5S,
    zone: str = "UTC",
    misfire: Misfire = Misfire.COALESCE,
    **kwargs: object,
) -> JobState:
    """A new, disabled instance of `receive-deliveries` with that code rule."""
    return core.initial(
        "eshop", "receive-deliveries", JobRule(expression=expression, zone=zone, misfire=misfire),
        processor="eshop-deliveries.receive", **kwargs,  # type: ignore[arg-type]
    )


def take(state: JobState, now: datetime) -> tuple[JobState, PendingTick]:
    """Step at `now`, expecting a tick to handle."""
    state, next_step = core.step(state, now)
    assert isinstance(next_step, Handle), next_step
    assert next_step.tick.due <= now, "handed out early"
    return state, next_step.tick


def handled(state: JobState, tick: PendingTick, now: datetime) -> JobState:
    """The handler ran `tick` with one command."""
    return core.on_handled(state, tick, now, commands=1, delivered=1, rejected=0)


def run_until(
    state: JobState, now: datetime, until: datetime
) -> tuple[JobState, list[PendingTick]]:
    """A worker that always runs: step at every wake-up up to `until`, handling every tick."""
    ticks: list[PendingTick] = []
    while now <= until:
        state, next_step = core.step(state, now)
        if isinstance(next_step, Handle):
            assert next_step.tick.due <= now
            ticks.append(next_step.tick)
            state = handled(state, next_step.tick, now)
            continue
        assert isinstance(next_step, Sleep)
        if next_step.until is None:
            break
        assert next_step.until > now
        now = next_step.until
    return state, ticks


# ---------------------------------------------------------------- slots


def test_first_slot_is_the_first_due_after_the_first_enable() -> None:
    """Slot 1 is the first due time strictly after the enable instant, never earlier."""
    start = T0 + timedelta(seconds=3)
    state = core.enable(job(), start)
    assert state.enabled and state.status is JobStatus.ENABLED
    first = T0 + timedelta(seconds=5)

    state, next_step = core.step(state, start)
    assert next_step == Sleep(until=first)
    state, next_step = core.step(state, first - US)
    assert next_step == Sleep(until=first), "never early, not even by a microsecond"

    state, tick = take(state, first)
    assert (tick.slot, tick.due, tick.skipped, tick.parked) == (1, first, 0, False)
    assert state.next_slot == 2


def test_enable_on_a_due_time_does_not_take_it() -> None:
    """Enabling exactly at a due time starts from the one after it."""
    state = core.enable(job(), T0)
    _, next_step = core.step(state, T0)
    assert next_step == Sleep(until=T0 + 5 * SECOND)


def test_a_disabled_new_instance_sleeps_forever() -> None:
    """A new instance is disabled and sleeps until something changes, taking no slot."""
    state = job()
    assert state.status is JobStatus.DISABLED
    state, next_step = core.step(state, T0 + timedelta(hours=1))
    assert next_step == Sleep(until=None)
    assert state.next_slot == 1 and state.pending is None


def test_slots_count_every_due_time_handled_or_skipped() -> None:
    """Handled one by one, then coalesced after an outage: the slots still count every due."""
    state = core.enable(job(), T0)
    state, ticks = run_until(state, T0, T0 + 20 * SECOND)
    assert [t.slot for t in ticks] == [1, 2, 3, 4]
    assert [t.due for t in ticks] == [T0 + 5 * SECOND * i for i in range(1, 5)]
    # No worker for a minute: 12 due times pass, the latest runs as slot 16.
    state, tick = take(state, T0 + 80 * SECOND + 2 * SECOND)
    assert (tick.slot, tick.due, tick.skipped) == (16, T0 + 80 * SECOND, 11)
    state = handled(state, tick, T0 + 82 * SECOND)
    state, tick = take(state, T0 + 85 * SECOND)
    assert (tick.slot, tick.skipped) == (17, 0)


def test_each_instance_numbers_its_own_slots_from_one() -> None:
    """Two partitions, enabled at different times and interleaved, both start at slot 1."""
    one = core.enable(job(partition=0), T0)
    two = core.enable(job(partition=1), T0 + timedelta(minutes=1))
    one, ticks_one = run_until(one, T0, T0 + timedelta(minutes=2))
    two, first_two = take(two, T0 + timedelta(minutes=1, seconds=5))
    assert first_two.slot == 1
    assert [t.slot for t in ticks_one] == list(range(1, 25))
    assert one.label == "receive-deliveries (0) partition 0"
    assert two.label == "receive-deliveries (0) partition 1"


# ---------------------------------------------------------------- misfire


def test_coalesce_runs_only_the_latest_missed_slot() -> None:
    """Ten due times pass with no worker: COALESCE runs the tenth, skipping nine."""
    state = core.enable(job(EVERY_MINUTE), T0)
    now = T0 + timedelta(minutes=10, seconds=30)
    state, tick = take(state, now)
    assert (tick.slot, tick.due, tick.skipped) == (10, T0 + timedelta(minutes=10), 9)
    state = handled(state, tick, now)
    state, next_step = core.step(state, now)
    assert next_step == Sleep(until=T0 + timedelta(minutes=11))
    assert state.recent[-1].skipped == 9 and state.recent[-1].outcome == "handled"


def test_catch_up_runs_each_missed_slot_in_order() -> None:
    """Ten due times pass with no worker: CATCH_UP runs all ten, in order, none skipped."""
    state = core.enable(job(EVERY_MINUTE, misfire=Misfire.CATCH_UP), T0)
    now = T0 + timedelta(minutes=10, seconds=30)
    ticks: list[PendingTick] = []
    for _ in range(10):
        state, tick = take(state, now)
        ticks.append(tick)
        state = handled(state, tick, now)
    assert [(t.slot, t.due, t.skipped) for t in ticks] == [
        (i, T0 + timedelta(minutes=i), 0) for i in range(1, 11)
    ]
    _, next_step = core.step(state, now)
    assert next_step == Sleep(until=T0 + timedelta(minutes=11))


@pytest.mark.parametrize("misfire", list(Misfire))
def test_time_spent_disabled_is_not_a_misfire(misfire: Misfire) -> None:
    """An hour disabled: enabling again starts from the next due time, with the next slot."""
    state = core.enable(job(EVERY_MINUTE, misfire=misfire), T0)
    state, ticks = run_until(state, T0, T0 + timedelta(minutes=2))
    assert [t.slot for t in ticks] == [1, 2]
    state = core.disable(state)
    _, next_step = core.step(state, T0 + timedelta(minutes=30))
    assert next_step == Sleep(until=None)
    again = T0 + timedelta(hours=1, seconds=10)
    state = core.enable(state, again)
    state, next_step = core.step(state, again)
    assert next_step == Sleep(until=T0 + timedelta(hours=1, minutes=1))
    state, tick = take(state, T0 + timedelta(hours=1, minutes=1))
    assert (tick.slot, tick.skipped) == (3, 0)


@pytest.mark.parametrize("misfire", list(Misfire))
def test_a_long_handler_delays_the_next_slot_then_the_policy_decides(misfire: Misfire) -> None:
    """Slot 1 runs 3½ minutes: meanwhile it is handed out again, then the policy decides."""
    state = core.enable(job(EVERY_MINUTE, misfire=misfire), T0)
    state, tick = take(state, T0 + timedelta(minutes=1))
    later = T0 + timedelta(minutes=4, seconds=30)
    state, again = take(state, later)
    assert again == tick, "the running tick, not a new one"
    state = handled(state, tick, later)
    state, following = take(state, later)
    if misfire is Misfire.COALESCE:
        assert (following.slot, following.due, following.skipped) == (
            4, T0 + timedelta(minutes=4), 2
        )
    else:
        assert (following.slot, following.due, following.skipped) == (
            2, T0 + timedelta(minutes=2), 0
        )


def test_a_never_matching_rule_sleeps_forever() -> None:
    """A rule with no due time (30 February) never hands out a tick."""
    state = core.enable(job(NEVER), T0)
    state, next_step = core.step(state, T0 + timedelta(days=400))
    assert next_step == Sleep(until=None)
    assert core.upcoming(state, T0) == []
    assert "never due" in core.summary(state, T0)


# ---------------------------------------------------------------- parking


@pytest.mark.parametrize("misfire", list(Misfire))
def test_a_parked_tick_blocks_later_slots_until_retried(misfire: Misfire) -> None:
    """Parked slot 1 waits for the operator; retried, it runs again with its slot and due."""
    state = core.enable(job(EVERY_MINUTE, misfire=misfire), T0)
    state, tick = take(state, T0 + timedelta(minutes=1))
    state = core.on_failed(state, tick, T0 + timedelta(minutes=1, seconds=5), "host down")
    assert state.status is JobStatus.PARKED
    assert state.recent[-1].outcome == "parked"
    for minutes in (2, 5, 30):
        state, next_step = core.step(state, T0 + timedelta(minutes=minutes))
        assert next_step == AwaitOperator()
    assert "parked at slot 1" in core.summary(state, T0 + timedelta(minutes=30))
    assert "host down" in core.details(state, T0 + timedelta(minutes=30))

    state = core.retry(state)
    assert state.status is JobStatus.ENABLED
    now = T0 + timedelta(minutes=30, seconds=20)
    state, again = take(state, now)
    assert (again.slot, again.due, again.skipped) == (tick.slot, tick.due, tick.skipped)
    assert again.retries == 1 and not again.parked
    state = handled(state, again, now)
    state, following = take(state, now)
    if misfire is Misfire.COALESCE:
        assert (following.slot, following.due, following.skipped) == (
            30, T0 + timedelta(minutes=30), 28
        )
    else:
        assert (following.slot, following.due, following.skipped) == (
            2, T0 + timedelta(minutes=2), 0
        )


def test_retry_without_a_parked_tick_changes_nothing() -> None:
    """Retry of an instance with nothing parked (idle or running) is a no-op."""
    state = core.enable(job(), T0)
    assert core.retry(state) == state
    state, _ = take(state, T0 + 5 * SECOND)
    assert core.retry(state) == state


def test_a_parked_tick_stays_parked_across_disable_and_enable() -> None:
    """Disabled while parked, it stays parked; enabled and retried, the same slot runs."""
    state = core.enable(job(), T0)
    state, tick = take(state, T0 + 5 * SECOND)
    state = core.on_failed(state, tick, T0 + 6 * SECOND, "boom")
    state = core.disable(state)
    assert state.status is JobStatus.PARKED
    state, next_step = core.step(state, T0 + timedelta(minutes=1))
    assert next_step == AwaitOperator()
    state = core.enable(state, T0 + timedelta(minutes=2))
    state = core.retry(state)
    state, again = take(state, T0 + timedelta(minutes=2))
    assert (again.slot, again.due) == (1, tick.due)


def test_an_interrupted_tick_spends_its_slot() -> None:
    """A tick stopped by a disable is finished: after enabling, the next slot follows."""
    state = core.enable(job(), T0)
    state, tick = take(state, T0 + 5 * SECOND)
    state = core.disable(state)
    state = core.on_interrupted(state, tick, T0 + 6 * SECOND, "disabled")
    assert state.pending is None and state.recent[-1].outcome == "interrupted"
    state = core.enable(state, T0 + timedelta(minutes=1))
    state, following = take(state, T0 + timedelta(minutes=1, seconds=5))
    assert following.slot == 2


def test_a_running_tick_survives_disable_and_is_handed_out_again_when_enabled() -> None:
    """Disabled while running (the shell did not interrupt it): enabled, the same tick resumes."""
    state = core.enable(job(), T0)
    state, tick = take(state, T0 + 5 * SECOND)
    state = core.disable(state)
    state, next_step = core.step(state, T0 + timedelta(minutes=1))
    assert next_step == Sleep(until=None)
    state = core.enable(state, T0 + timedelta(minutes=2))
    _, again = take(state, T0 + timedelta(minutes=2))
    assert again == tick


# ---------------------------------------------------------------- enable, reschedule, layers


def test_enable_of_an_enabled_instance_changes_nothing() -> None:
    """A worker that starts later never resets an enabled instance: its misfires still count."""
    state = core.enable(job(EVERY_MINUTE), T0)
    state, _ticks = run_until(state, T0, T0 + timedelta(minutes=1))
    later = T0 + timedelta(minutes=10, seconds=30)
    assert core.enable(state, later) == state
    state, tick = take(core.enable(state, later), later)
    assert (tick.slot, tick.skipped) == (10, 8)


@pytest.mark.parametrize(
    "layer",
    [
        RuleLayer(expression="*/7 * * * * *"),
        RuleLayer(zone="Asia/Kathmandu"),
        RuleLayer(misfire=Misfire.CATCH_UP),
        RuleLayer(expression="30 */2 * * * *", zone="America/St_Johns"),
    ],
)
@pytest.mark.parametrize("how", ["reschedule", "set_host"])
def test_a_new_rule_never_runs_a_past_slot(layer: RuleLayer, how: str) -> None:
    """No worker for an hour, then a new rule: the next due is after the change."""
    state = core.enable(job(EVERY_MINUTE), T0)
    state, _ = run_until(state, T0, T0 + timedelta(minutes=1))
    now = T0 + timedelta(hours=1, seconds=1)
    if how == "reschedule":
        state = core.reschedule(state, layer, now)
    else:
        state = core.set_host(state, layer, now)
    state, next_step = core.step(state, now)
    assert isinstance(next_step, Sleep) and next_step.until is not None
    assert next_step.until > now
    rule = state.rule
    assert next_step.until == ref_next(rule.expression, rule.zone, now)
    state, tick = take(state, next_step.until)
    assert tick.slot == 2 and tick.skipped == 0


def test_rescheduling_to_the_same_rule_keeps_the_misfires() -> None:
    """Rescheduling to the rule already in force is no change: missed slots still count."""
    state = core.enable(job(EVERY_MINUTE), T0)
    now = T0 + timedelta(minutes=5, seconds=1)
    state = core.reschedule(state, RuleLayer(expression=EVERY_MINUTE), now)
    assert state.source("expression") == "operator"
    _, tick = take(state, now)
    assert (tick.slot, tick.skipped) == (5, 4)


def test_layers_own_over_host_over_code() -> None:
    """The instance's own layer beats the host's, which beats the code's, field by field."""
    state = job(EVERY_MINUTE, "UTC", Misfire.COALESCE)
    assert state.rule == JobRule(expression=EVERY_MINUTE)
    assert all(state.source(f) == "code" for f in FIELDS)

    state = core.set_host(state, RuleLayer(expression=EVERY_5S, zone="Europe/Berlin"), T0)
    assert state.rule == JobRule(expression=EVERY_5S, zone="Europe/Berlin")
    assert [state.source(f) for f in FIELDS] == ["host", "host", "code"]

    state = core.reschedule(state, RuleLayer(zone="Asia/Tokyo"), T0)
    state = core.reschedule(state, RuleLayer(misfire=Misfire.CATCH_UP), T0)
    assert state.rule == JobRule(
        expression=EVERY_5S, zone="Asia/Tokyo", misfire=Misfire.CATCH_UP
    )
    assert [state.source(f) for f in FIELDS] == ["host", "operator", "operator"]

    # The host changes its override: the instance's own fields still win.
    state = core.set_host(state, RuleLayer(zone="Europe/Paris", misfire=Misfire.COALESCE), T0)
    assert state.rule == JobRule(
        expression=EVERY_MINUTE, zone="Asia/Tokyo", misfire=Misfire.CATCH_UP
    )
    assert [state.source(f) for f in FIELDS] == ["code", "operator", "operator"]


def test_a_tenant_instance_names_the_tenant_as_source() -> None:
    """A TENANT instance's own rule is the tenant's."""
    state = job(scope=JobScope.TENANT, tenant="acme")
    state = core.reschedule(state, RuleLayer(expression=EVERY_MINUTE), T0)
    assert state.source("expression") == "tenant"
    assert state.source("zone") == "code"
    assert state.label == "receive-deliveries acme"


layers = st.builds(
    RuleLayer,
    expression=st.none() | st.sampled_from([EVERY_5S, EVERY_MINUTE, "*/7 * * * * *"]),
    zone=st.none() | st.sampled_from(["UTC", "Europe/Berlin", "Asia/Kathmandu"]),
    misfire=st.none() | st.sampled_from(list(Misfire)),
)


@settings(max_examples=200, deadline=None)
@given(
    host=layers,
    owns=st.lists(layers, max_size=4),
    scope=st.sampled_from(list(JobScope)),
)
def test_layering_property(host: RuleLayer, owns: list[RuleLayer], scope: JobScope) -> None:
    """For any host layer and reschedules, each field comes from the highest layer setting it."""
    state = core.set_host(job("0 0 * * * *", "America/New_York", scope=scope), host, T0)
    own: dict[str, object] = {}
    for layer in owns:
        state = core.reschedule(state, layer, T0)
        own.update({f: getattr(layer, f) for f in FIELDS if getattr(layer, f) is not None})
    code = {"expression": "0 0 * * * *", "zone": "America/New_York", "misfire": Misfire.COALESCE}
    for f in FIELDS:
        if f in own:
            expected, source = own[f], ("tenant" if scope is JobScope.TENANT else "operator")
        elif getattr(host, f) is not None:
            expected, source = getattr(host, f), "host"
        else:
            expected, source = code[f], "code"
        assert getattr(state.rule, f) == expected
        assert state.source(f) == source


# ---------------------------------------------------------------- reset, null, shadowed


def test_reset_brings_the_host_override_back_and_counts_from_now() -> None:
    """The demo's case: an operator pinned the code's rule, the host then said 07:00; the
    shadowed line says so, and a reset puts the host's rule in force from now on."""
    state = core.enable(job(NIGHTLY), T0)
    state = core.reschedule(state, RuleLayer(expression="0 0 6 * * *"), T0)
    state = core.set_host(state, RuleLayer(expression="0 0 7 * * *"), T0)
    assert state.rule.expression == "0 0 6 * * *" and state.source("expression") == "operator"
    (line,) = core.shadowed(state)
    assert line.startswith("host says 0 0 7 * * *, overridden by operator's 0 0 6 * * *;")
    assert "schedule reset" in line and f"shadowed: {line}" in core.details(state, T0)
    now = T0 + timedelta(days=2, hours=6, minutes=30)  # 06:30: the host says 07:00 today
    state = core.reset(state, None, now)
    assert state.own == RuleLayer() and core.shadowed(state) == []
    assert state.rule.expression == "0 0 7 * * *" and state.source("expression") == "host"
    _, next_step = core.step(state, now)
    assert next_step == Sleep(until=now.replace(hour=7, minute=0))
    assert state.next_slot == 1, "slots keep counting (none taken yet)"


def test_reset_of_some_fields_keeps_the_others_and_nothing_to_reset_is_no_change() -> None:
    state = core.reschedule(
        job(EVERY_MINUTE), RuleLayer(expression=EVERY_5S, zone="Asia/Tokyo"), T0
    )
    some = core.reset(state, ["zone"], T0)
    assert some.own == RuleLayer(expression=EVERY_5S)
    assert [some.source(f) for f in FIELDS] == ["operator", "code", "code"]
    assert core.reset(some, ["zone", "misfire"], T0) == some, "idempotent"
    bare = core.reset(some, None, T0)
    assert core.reset(bare, None, T0) == bare
    assert core.shadowed(bare) == []


def test_reset_keeps_the_misfires_when_the_rule_does_not_change() -> None:
    """Removing an own field equal to the host's is no change of rule: missed slots count."""
    state = core.set_host(core.enable(job(EVERY_5S), T0), RuleLayer(expression=EVERY_MINUTE), T0)
    state = core.reschedule(state, RuleLayer(expression=EVERY_MINUTE), T0)
    now = T0 + timedelta(minutes=5, seconds=1)
    _, tick = take(core.reset(state, None, now), now)
    assert (tick.slot, tick.skipped) == (5, 4)


def test_a_reset_counts_from_now_when_the_rule_changes() -> None:
    """No worker for an hour, then a reset to another rule: no past slot runs; slots go on."""
    state = core.enable(job(EVERY_MINUTE), T0)
    state, _ = run_until(state, T0, T0 + timedelta(minutes=1))
    state = core.reschedule(state, RuleLayer(expression=EVERY_5S), T0 + timedelta(minutes=1))
    now = T0 + timedelta(hours=1, seconds=1)
    state = core.reset(state, ["expression"], now)
    state, next_step = core.step(state, now)
    assert next_step == Sleep(until=T0 + timedelta(hours=1, minutes=1))
    _, tick = take(state, T0 + timedelta(hours=1, minutes=1))
    assert (tick.slot, tick.skipped) == (2, 0)


def test_a_reschedule_null_removes_the_field_and_absent_keeps_it() -> None:
    state = core.reschedule(job(EVERY_MINUTE), RuleLayer(expression=EVERY_5S, zone="UTC"), T0)
    change = core.read_change({"expression": None, "misfire": "catch_up"})
    assert change.remove == ("expression",) and change.layer.misfire is Misfire.CATCH_UP
    state = core.reschedule(state, change, T0)
    assert state.own == RuleLayer(zone="UTC", misfire=Misfire.CATCH_UP)
    assert core.reschedule_refusal(core.read_change({"zone": None})) is None
    assert core.reschedule_refusal(core.read_change({})) is not None
    kept = core.read_change({"expression": None, "zone": "UTC"}, null_removes=False)
    assert kept.remove == () and core.reschedule(state, kept, T0).own.misfire is Misfire.CATCH_UP
    for bad in ("not an object", {"zon": "UTC"}, {"misfire": "SOMETIMES"}):
        with pytest.raises(ValueError):
            core.read_change(bad)


@pytest.mark.parametrize("spelling", ["CATCH_UP", "catch_up", "Catch-Up", " catch_up "])
def test_a_misfire_is_read_in_any_case(spelling: str) -> None:
    assert RuleLayer.model_validate({"misfire": spelling}).misfire is Misfire.CATCH_UP


def test_read_fields_takes_nothing_or_a_list_of_rule_fields() -> None:
    assert core.read_fields(None) is None
    assert core.read_fields({}) is None
    assert core.read_fields({"fields": None}) is None
    assert core.read_fields({"fields": ["misfire", "expression"]}) == ("expression", "misfire")
    assert core.read_fields({"fields": []}) == ()
    for bad, words in [
        ({"fields": ["expresion"]}, "no rule field 'expresion'"),
        ({"fields": "zone"}, "a list"),
        ({"field": ["zone"]}, "send nothing"),
        (["zone"], "send nothing"),
    ]:
        with pytest.raises(ValueError, match=words):
            core.read_fields(bad)


def test_a_tenant_shadowing_the_host_is_named_the_tenant() -> None:
    state = core.set_host(job(scope=JobScope.TENANT, tenant="acme"), RuleLayer(zone="UTC"), T0)
    state = core.reschedule(state, RuleLayer(zone="Asia/Tokyo", misfire=Misfire.CATCH_UP), T0)
    (line,) = core.shadowed(state)
    assert line.startswith("host says zone UTC, overridden by tenant's Asia/Tokyo;")
    assert "--field zone" in line


# ---------------------------------------------------------------- reschedule_error


@pytest.mark.parametrize(
    "layer",
    [
        RuleLayer(expression="* * * *"),
        RuleLayer(expression="61 * * * * *"),
        RuleLayer(expression="0 0 25 * * *"),
        RuleLayer(expression="not a cron"),
        RuleLayer(expression=""),
        RuleLayer(zone="Mars/Olympus_Mons"),
        RuleLayer(zone="localtime"),
        RuleLayer(zone="Factory"),
        RuleLayer(zone=""),
        RuleLayer(expression=EVERY_MINUTE, zone="Nowhere/Special"),
        RuleLayer(expression="0 0 0 32 * *", zone="UTC"),
        RuleLayer(expression=NEVER),
        RuleLayer(expression="0 0 0 31 4 *"),
    ],
)
def test_reschedule_error_names_a_bad_cron_or_zone(layer: RuleLayer) -> None:
    """A bad expression or zone, or one that never fires, gives a message."""
    error = core.reschedule_error(layer)
    assert isinstance(error, str) and error
    if layer.expression in (NEVER, "0 0 0 31 4 *"):
        assert "never fires" in error


@pytest.mark.parametrize(
    "layer",
    [
        RuleLayer(),
        RuleLayer(expression=EVERY_MINUTE),
        RuleLayer(expression="@daily"),
        RuleLayer(expression="0 0 9 * * MON-FRI", zone="Europe/Berlin"),
        RuleLayer(zone="America/New_York"),
        RuleLayer(misfire=Misfire.CATCH_UP),
        RuleLayer(expression=NIGHTLY, zone="UTC", misfire=Misfire.COALESCE),
    ],
)
def test_reschedule_error_is_none_for_a_good_layer(layer: RuleLayer) -> None:
    """Good expressions and zones (or none at all) give None."""
    assert core.reschedule_error(layer) is None


cron_field = st.one_of(
    st.sampled_from(["*", "?", "0", "59", "60", "*/5", "1-3", "3-1", "L", "W", "1#2", "MON"]),
    st.text(alphabet="0123456789*/-,?LW#", min_size=1, max_size=5),
)


@settings(max_examples=300, deadline=None)
@given(
    text=st.one_of(
        st.lists(cron_field, min_size=4, max_size=7).map(" ".join),
        st.text(max_size=30),
    )
)
def test_reschedule_error_agrees_with_the_cron_parser(text: str) -> None:
    """Any text: a message exactly when the cron parser refuses it (or no time ever matches
    it), and never an exception."""
    error = core.reschedule_error(RuleLayer(expression=text))
    fires = CronExpression.is_valid(text) and CronExpression.parse(text).ever_matches()
    assert (error is None) == fires


# ---------------------------------------------------------------- details, summary, upcoming


def test_summary_and_details_name_the_job_and_the_rule() -> None:
    """Every status's summary and details name the label and the rule in force."""
    state = job(EVERY_MINUTE, "Europe/Berlin")
    for text in (core.summary(state, T0), core.details(state, T0)):
        assert "receive-deliveries (0)" in text and EVERY_MINUTE in text
        assert "Europe/Berlin" in text
    assert "disabled" in core.summary(state, T0)
    assert "Disabled" in core.details(state, T0)

    state = core.enable(state, T0)
    assert "next 2026-01-05T01:01:00.000+01:00" in core.summary(state, T0)  # in its zone
    assert "Enabled" in core.details(state, T0)
    state, tick = take(state, T0 + timedelta(minutes=1))
    assert "slot 1" in core.summary(state, T0 + timedelta(minutes=1))
    state = handled(state, tick, T0 + timedelta(minutes=1, seconds=3))
    details = core.details(state, T0 + timedelta(minutes=1, seconds=3))
    assert (
        "last ticks, latest first:\n- slot 1 · due 2026-01-05T01:01:00.000+01:00 · skipped 0 · "
        "handled · "
        "1 command (1 ok, 0 rejected)"
    ) in details
    assert "eshop-deliveries.receive" in details

    state = core.reschedule(state, RuleLayer(expression=EVERY_5S), T0 + timedelta(minutes=2))
    for text in (core.summary(state, T0), core.details(state, T0)):
        assert "receive-deliveries (0)" in text and EVERY_5S in text
    assert "(operator)" in core.details(state, T0)


def test_upcoming_lists_increasing_future_dues() -> None:
    """The next five due times, increasing and after now; none while disabled."""
    state = core.enable(job(EVERY_MINUTE), T0 + 30 * SECOND)
    now = T0 + 30 * SECOND
    assert core.upcoming(state, now) == [T0 + timedelta(minutes=i) for i in range(1, 6)]
    assert core.upcoming(state, now, 2) == [T0 + timedelta(minutes=i) for i in range(1, 3)]
    assert core.upcoming(core.disable(state), now) == []


@pytest.mark.parametrize("situation", ["parked", "running", "no worker"])
def test_upcoming_dues_are_in_the_future(situation: str) -> None:
    """Ten minutes after the last look, upcoming() lists only due times after now."""
    state = core.enable(job(EVERY_MINUTE), T0)
    if situation != "no worker":
        state, tick = take(state, T0 + timedelta(minutes=1))
        if situation == "parked":
            state = core.on_failed(state, tick, T0 + timedelta(minutes=1), "boom")
    now = T0 + timedelta(minutes=11, seconds=30)
    nexts = core.upcoming(state, now)
    assert nexts, "enabled with a matching rule: something is due"
    assert all(due > now for due in nexts), [d.isoformat() for d in nexts]


# ---------------------------------------------------------------- DST


@pytest.mark.parametrize(
    ("zone", "gap_day"),
    [("Europe/Berlin", (2026, 3, 29)), ("America/New_York", (2026, 3, 8))],
)
@pytest.mark.parametrize("expression", [NIGHTLY, "0 0/20 1-3 * * *"])
def test_a_year_in_a_dst_zone(zone: str, gap_day: tuple[int, int, int], expression: str) -> None:
    """A year of a 02:30 rule: no due in the spring gap; slots count every real due time."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    end = datetime(2027, 1, 1, tzinfo=UTC)
    state = core.enable(job(expression, zone), start)
    state, ticks = run_until(state, start, end)
    dues = [t.due for t in ticks]
    assert dues == ref_dues(expression, zone, start, end)
    assert [t.slot for t in ticks] == list(range(1, len(ticks) + 1))
    assert all(t.skipped == 0 for t in ticks)
    tz = ZoneInfo(zone)
    for due in dues:
        local = due.astimezone(tz)
        assert wall_matches(expression, zone, due), local.isoformat()
        if local.timetuple()[:3] == gap_day:
            assert not 2 <= local.hour < 3, f"{local.isoformat()} is in the DST gap"
    if expression == NIGHTLY:
        days = {d.astimezone(tz).date() for d in dues}
        assert datetime(*gap_day).date() not in days
        assert all(d.astimezone(tz).time().isoformat() == "02:30:00" for d in dues)
        assert len(days) == 364


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    zone=st.sampled_from(["Europe/Berlin", "America/New_York", "Australia/Lord_Howe"]),
    expression=st.sampled_from([NIGHTLY, "0 0/30 1-3 * * *", "0 15 * * * *"]),
    misfire=st.sampled_from(list(Misfire)),
    start_hours=st.integers(0, 365 * 24),
    gaps=st.lists(st.integers(1, 24 * 20), min_size=1, max_size=40),
)
def test_slots_over_a_dst_year_match_the_cron(
    zone: str, expression: str, misfire: Misfire, start_hours: int, gaps: list[int]
) -> None:
    """A worker that looks at random times: each tick's slot is its due's place among the dues."""
    start = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=start_hours, minutes=7)
    state = core.enable(job(expression, zone, misfire), start)
    now = start
    reference: list[datetime] = []
    last_slot = 0
    for gap in gaps:
        now += timedelta(hours=gap, minutes=gap % 60)
        reference += ref_dues(expression, zone, reference[-1] if reference else start, now)
        while True:
            state, next_step = core.step(state, now)
            if not isinstance(next_step, Handle):
                assert isinstance(next_step, Sleep) and next_step.until is not None
                assert next_step.until > now
                break
            tick = next_step.tick
            assert tick.due <= now
            assert wall_matches(expression, zone, tick.due)
            assert reference[tick.slot - 1] == tick.due, "slot = place of the due among dues"
            if misfire is Misfire.CATCH_UP:
                assert (tick.slot, tick.skipped) == (last_slot + 1, 0)
            else:
                assert tick.skipped == tick.slot - last_slot - 1
                assert tick.slot == len(reference), "COALESCE runs the latest"
            last_slot = tick.slot
            state = handled(state, tick, now)
    assert state.next_slot == len(reference) + 1


# ---------------------------------------------------------------- the model-based test


CRONS = [EVERY_5S, "*/7 * * * * *", EVERY_MINUTE, "30 */2 * * * *", "0/20 * 0-23 * * *"]
ZONES = ["UTC", "Europe/Berlin", "Asia/Kathmandu", "America/St_Johns", "America/New_York"]
STARTS = [
    T0,
    datetime(2026, 3, 29, 0, 50, tzinfo=UTC),  # Berlin springs forward at 01:00Z
    datetime(2026, 10, 25, 0, 50, tzinfo=UTC),  # Berlin falls back at 01:00Z
    datetime(2026, 3, 8, 6, 50, tzinfo=UTC),  # New York springs forward at 07:00Z
    datetime(2026, 11, 1, 5, 50, tzinfo=UTC),  # New York falls back at 06:00Z
]
CODE = JobRule(expression=EVERY_MINUTE, zone="Europe/Berlin", misfire=Misfire.COALESCE)

model_layers = st.builds(
    RuleLayer,
    expression=st.none() | st.sampled_from(CRONS),
    zone=st.none() | st.sampled_from(ZONES),
    misfire=st.none() | st.sampled_from(list(Misfire)),
)


@dataclass
class ModelTick:
    """The model's pending tick."""

    slot: int
    due: datetime
    skipped: int
    parked: bool = False
    retries: int = 0


@dataclass
class Model:
    """What the requirements say the instance is: a plain restatement, dues from the cron."""

    scope: JobScope
    enabled: bool = False
    cursor: datetime | None = None
    next_slot: int = 1
    pending: ModelTick | None = None
    own: dict[str, object] = field(default_factory=dict)
    host: dict[str, object] = field(default_factory=dict)

    def value(self, name: Field) -> object:
        return self.own.get(name, self.host.get(name, getattr(CODE, name)))

    def rule(self) -> tuple[str, str, Misfire]:
        return (
            str(self.value("expression")),
            str(self.value("zone")),
            Misfire(self.value("misfire")),
        )

    def source(self, name: Field) -> str:
        if name in self.own:
            return "tenant" if self.scope is JobScope.TENANT else "operator"
        return "host" if name in self.host else "code"


class JobMachine(RuleBasedStateMachine):
    """The core against the model, through any sequence of operations and outages."""

    def __init__(self) -> None:
        super().__init__()
        self.model = Model(scope=JobScope.SYSTEM)
        self.state = job()
        self.now = T0
        self.in_hand: PendingTick | None = None
        self.last_slot = 0
        self.floor = T0
        """No tick first handed out from now on may be due at or before this instant."""

    @initialize(start=st.sampled_from(STARTS), scope=st.sampled_from(list(JobScope)))
    def start(self, start: datetime, scope: JobScope) -> None:
        self.now = start
        self.model = Model(scope=scope)
        self.state = core.initial(
            "eshop", "receive-deliveries", CODE, scope=scope, tenant="acme",
            processor="p.f",
        )

    # -------------------------------------------------------- time

    @step_rule(seconds=st.integers(0, 90))
    def wait(self, seconds: int) -> None:
        self.now += timedelta(seconds=seconds, microseconds=seconds % 7)

    @step_rule(seconds=st.integers(90, 1800))
    def outage(self, seconds: int) -> None:
        self.now += timedelta(seconds=seconds)

    # -------------------------------------------------------- the workflow's loop

    @step_rule()
    def step(self) -> None:
        m = self.model
        self.state, next_step = core.step(self.state, self.now)
        pending = m.pending
        if pending is not None and pending.parked:
            assert next_step == AwaitOperator()
            return
        if pending is not None:
            if not m.enabled:
                assert next_step == Sleep(until=None)
                return
            assert isinstance(next_step, Handle)
            tick = next_step.tick
            assert (tick.slot, tick.due, tick.skipped, tick.parked, tick.retries) == (
                pending.slot, pending.due, pending.skipped, False, pending.retries,
            ), "the pending tick again, unchanged"
            self.in_hand = tick
            return
        if not m.enabled:
            assert next_step == Sleep(until=None)
            return
        expression, zone, misfire = m.rule()
        assert m.cursor is not None
        if misfire is Misfire.CATCH_UP:
            first = ref_next(expression, zone, m.cursor)
            dues = [first] if first is not None and first <= self.now else []
        else:
            dues = ref_dues(expression, zone, m.cursor, self.now)
        if not dues:
            assert next_step == Sleep(until=ref_next(expression, zone, m.cursor))
            assert next_step.until is None or next_step.until > self.now
            return
        assert isinstance(next_step, Handle), next_step
        tick = next_step.tick
        if misfire is Misfire.CATCH_UP:
            expected = ModelTick(slot=m.next_slot, due=dues[0], skipped=0)
        else:
            expected = ModelTick(
                slot=m.next_slot + len(dues) - 1, due=dues[-1], skipped=len(dues) - 1
            )
        assert (tick.slot, tick.due, tick.skipped, tick.parked) == (
            expected.slot, expected.due, expected.skipped, False,
        )
        # The requirements, checked directly as well as through the model.
        assert tick.slot > self.last_slot, "request ids never repeat"
        assert tick.due <= self.now, "never early"
        assert tick.due > self.floor, "not a slot from before the enable or rule change"
        assert is_due(expression, zone, tick.due), "a real due time of the rule in force"
        assert wall_matches(expression, zone, tick.due), "not a wall time in a DST gap"
        self.last_slot = tick.slot
        m.next_slot = expected.slot + 1
        m.cursor = tick.due
        m.pending = expected
        self.in_hand = tick

    @precondition(lambda self: self.in_hand is not None)
    @step_rule(commands=st.integers(0, 3))
    def handle(self, commands: int) -> None:
        assert self.in_hand is not None
        before = self.state.handled
        self.state = core.on_handled(
            self.state, self.in_hand, self.now, commands=commands, delivered=commands,
            rejected=0,
        )
        assert self.state.handled == before + 1
        assert self.state.recent[-1].slot == self.in_hand.slot
        self.model.pending = None
        self.in_hand = None

    @precondition(lambda self: self.in_hand is not None)
    @step_rule()
    def fail(self) -> None:
        assert self.in_hand is not None and self.model.pending is not None
        self.state = core.on_failed(self.state, self.in_hand, self.now, "kept failing")
        self.model.pending.parked = True
        self.in_hand = None

    @precondition(lambda self: self.in_hand is not None and not self.model.enabled)
    @step_rule()
    def interrupt(self) -> None:
        assert self.in_hand is not None
        self.state = core.on_interrupted(self.state, self.in_hand, self.now, "disabled")
        self.model.pending = None
        self.in_hand = None

    # -------------------------------------------------------- operators and hosts

    @step_rule()
    def retry(self) -> None:
        self.state = core.retry(self.state)
        pending = self.model.pending
        if pending is not None and pending.parked:
            pending.parked = False
            pending.retries += 1

    @step_rule()
    def enable(self) -> None:
        before = self.state
        self.state = core.enable(self.state, self.now)
        m = self.model
        if m.enabled:
            assert self.state == before, "enable of an enabled instance changes nothing"
            return
        m.enabled = True
        m.cursor = self.now
        self.floor = max(self.floor, self.now)

    @step_rule()
    def disable(self) -> None:
        self.state = core.disable(self.state)
        self.model.enabled = False

    @step_rule(layer=model_layers)
    def reschedule(self, layer: RuleLayer) -> None:
        assert core.reschedule_error(layer) is None
        self.state = core.reschedule(self.state, layer, self.now)
        self._changed(
            lambda m: m.own.update(
                {f: getattr(layer, f) for f in FIELDS if getattr(layer, f) is not None}
            )
        )

    @step_rule(fields=st.none() | st.lists(st.sampled_from(FIELDS), max_size=3))
    def reset(self, fields: list[Field] | None) -> None:
        self.state = core.reset(self.state, fields, self.now)

        def remove(m: Model) -> None:
            for name in FIELDS if fields is None else fields:
                m.own.pop(name, None)

        self._changed(remove)

    @step_rule(layer=model_layers)
    def set_host(self, layer: RuleLayer) -> None:
        self.state = core.set_host(self.state, layer, self.now)

        def replace(m: Model) -> None:
            m.host = {f: getattr(layer, f) for f in FIELDS if getattr(layer, f) is not None}

        self._changed(replace)

    def _changed(self, change: object) -> None:
        m = self.model
        before = m.rule()
        change(m)  # type: ignore[operator]
        if m.rule() != before and m.enabled:
            m.cursor = self.now
            self.floor = max(self.floor, self.now)

    # -------------------------------------------------------- invariants

    @invariant()
    def agrees_with_the_model(self) -> None:
        state, m = self.state, self.model
        rule = state.rule
        assert (rule.expression, rule.zone, rule.misfire) == m.rule()
        assert all(state.source(f) == m.source(f) for f in FIELDS)
        assert state.enabled == m.enabled
        if m.pending is not None and m.pending.parked:
            assert state.status is JobStatus.PARKED
        else:
            assert state.status is (JobStatus.ENABLED if m.enabled else JobStatus.DISABLED)
        assert state.next_slot == m.next_slot
        assert (state.pending is None) == (m.pending is None)
        shadowed = [f for f in FIELDS if f in m.own and f in m.host and m.own[f] != m.host[f]]
        assert len(core.shadowed(state)) == len(shadowed)

    @invariant()
    def texts_and_upcoming(self) -> None:
        state, now = self.state, self.now
        nexts = core.upcoming(state, now)
        if not self.model.enabled:
            assert nexts == []
        else:
            assert len(nexts) == 5
            assert all(a < b for a, b in itertools.pairwise(nexts))
            expression, zone, _ = self.model.rule()
            assert all(is_due(expression, zone, due) for due in nexts)
            assert nexts[0] > now, "upcoming, not past (those are a misfire)"
            assert nexts == ref_dues(expression, zone, now, nexts[-1])
        for text in (core.summary(state, now), core.details(state, now)):
            assert state.label in text and state.rule.expression in text


JobMachine.TestCase.settings = settings(
    max_examples=120,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestJobMachine = JobMachine.TestCase


def test_slots_stay_strictly_increasing_past_the_missed_count_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past MAX_MISSED_COUNTED missed dues the latest still runs, never early, slots rising."""
    monkeypatch.setattr(engine_slots, "MAX_MISSED_COUNTED", 3)
    state = core.enable(job(EVERY_5S), T0)
    now = T0 + timedelta(minutes=1, seconds=2)
    state, tick = take(state, now)
    assert tick.due == T0 + timedelta(minutes=1)
    state = handled(state, tick, now)
    state, following = take(state, T0 + timedelta(minutes=1, seconds=5))
    assert following.slot > tick.slot


def test_apply_host_enables_a_new_instance_keeps_one_running_and_obeys_enabled_false() -> None:
    """A worker's settings: a never-enabled instance is enabled, an enabled one is not reset,
    `enabled: false` disables, and the override lands in the host layer."""
    rule = core.HostRule(layer=RuleLayer(zone="Asia/Tokyo"))
    fresh = core.apply_host(job(EVERY_MINUTE), rule, T0)
    assert fresh.enabled and fresh.cursor == T0 and fresh.host.zone == "Asia/Tokyo"
    later = T0 + timedelta(minutes=5)
    running, _ = take(core.enable(job(EVERY_MINUTE), T0), T0 + timedelta(minutes=1))
    again = core.apply_host(running, core.HostRule(), later)
    assert again.next_slot == running.next_slot and again.cursor == running.cursor
    off = core.apply_host(running, core.HostRule(enabled=False), later)
    assert not off.enabled
    assert core.reschedule_refusal(RuleLayer()) is not None
    assert core.reschedule_refusal(RuleLayer(zone="UTC")) is None


def test_a_long_outage_is_counted_quickly_and_the_latest_due_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Three days of a one-second rule missed (259,200 due times): one step asks the rule for
    at most MAX_MISSED_COUNTED due times and a few dozen probes (well under the SDK's 2 s task
    limit), the latest due time runs, at most MAX_MISSED_COUNTED counted."""
    calls = itertools.count()
    next_after = core.JobRule.next_after
    monkeypatch.setattr(core.JobRule, "next_after", lambda r, i: (next(calls), next_after(r, i))[1])
    state = core.enable(job("* * * * * *"), T0)
    _, step = core.step(state, T0 + timedelta(days=3, milliseconds=500))
    assert next(calls) < engine_slots.MAX_MISSED_COUNTED + 100
    assert isinstance(step, core.Handle)
    assert step.tick.due == T0 + timedelta(days=3)
    assert step.tick.skipped == engine_slots.MAX_MISSED_COUNTED


def test_the_host_enables_again_what_it_disabled_but_not_what_an_operator_did() -> None:
    """`enabled: false` removed from the settings: the host's disable ends; an operator's stays."""
    running = core.enable(job(EVERY_MINUTE), T0)
    later = T0 + timedelta(hours=1)
    off = core.apply_host(running, core.HostRule(enabled=False), later)
    assert not off.enabled and off.host_disabled
    back = core.apply_host(off, core.HostRule(), later + timedelta(hours=1))
    assert back.enabled and not back.host_disabled
    by_operator = core.disable(running)
    assert not core.apply_host(by_operator, core.HostRule(), later).enabled


def test_texts_kept_in_the_state_are_clipped_and_unknown_rule_keys_refused() -> None:
    """A huge error or notice cannot grow the state past Temporal's limits."""
    state, tick = take(core.enable(job(EVERY_MINUTE), T0), T0 + timedelta(minutes=1))
    parked = core.on_failed(state, tick, T0 + timedelta(minutes=1), "x" * 100_000)
    assert parked.pending is not None and len(parked.pending.reason) <= core.MAX_TEXT
    assert len(core.notice(state, "y" * 100_000).notices[-1]) <= core.MAX_TEXT
    with pytest.raises(ValueError, match="zon"):
        RuleLayer.model_validate({"expression": EVERY_MINUTE, "zon": "Europe/Paris"})
