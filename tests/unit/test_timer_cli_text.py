"""What `timers list` and `timers show` print (issue #38: no header, cut silently at
`--limit`, a cancelled timer's old due time shown as if current, `show` raw JSON only with
`"applied": [3, 0]` unexplained and no delivery time)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from wow_temporal.cli.timers import LIST_HEADER, listing_lines, show_lines, truncated_line
from wow_temporal.model import AggregateRef, ScheduledCommand, ScheduleRule, Scope
from wow_temporal.timers.client import LIST_LIMIT, TimerInfo, TimerPage
from wow_temporal.timers.core import Delivery, Status, TimerSpec, TimerState

OWNER = AggregateRef(
    context_name="eshop-order", aggregate_name="order", tenant_id="t1", aggregate_id="42"
)
T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
ID = "wow-timer:eshop-order.order:t1:42:grace"
SPEC = TimerSpec(
    timer="c3:e0",
    key="grace",
    owner=OWNER,
    target=OWNER,
    rule=ScheduleRule.after(timedelta(minutes=30)),
    command=ScheduledCommand(type="eshop.order.CancelOrder", body={}),
    scope=Scope(tenant_id="t1"),
    upstream_id="c3",
    first_due=T0 + timedelta(minutes=30),
)


def _info(**changes: object) -> TimerInfo:
    fields: dict[str, object] = {
        "workflow_id": ID,
        "status": "Scheduled",
        "running": True,
        "aggregate": "eshop-order.order",
        "aggregate_id": "42",
        "tenant": "t1",
        "key": "grace",
        "due": T0 + timedelta(minutes=30),
    }
    return TimerInfo.model_validate({**fields, **changes})


def test_the_list_has_a_header_and_an_ended_timer_shows_when_it_ended() -> None:
    ended = T0 + timedelta(minutes=5, milliseconds=250)
    page = TimerPage(
        items=[
            _info(),
            _info(status="Cancelled", running=False, due=T0, ended=ended),
            _info(status="Scheduled", due=None),
        ],
        limit=100,
    )
    assert listing_lines(page) == [
        LIST_HEADER,
        f"Scheduled  due 2026-12-01T10:30:00.000Z   {ID}",
        f"Cancelled  ended 2026-12-01T10:05:00.250Z {ID}",
        f"Scheduled  never due{' ' * 22}{ID}",
    ]
    assert LIST_HEADER.split() == ["STATUS", "WHEN", "WORKFLOW", "ID"]


def test_a_cut_list_says_so_and_how_to_see_more() -> None:
    assert truncated_line(TimerPage(items=[], truncated=True, limit=100)) == (
        f"# … more: showing the first 100; use --limit up to {LIST_LIMIT:,}, or narrow the "
        "filters"
    )
    assert truncated_line(TimerPage(items=[], truncated=True, limit=LIST_LIMIT)) == (
        f"# … more: showing the first {LIST_LIMIT:,}; narrow the filters"
    )


def test_the_page_is_camel_case_in_json_as_the_api_answers() -> None:
    page = TimerPage(items=[_info(ended=T0)], truncated=True, limit=1)
    dumped = page.model_dump(mode="json")
    assert dumped["truncated"] is True
    (item,) = dumped["items"]
    assert item["workflowId"] == ID
    assert item["aggregateId"] == "42"
    assert item["due"] == "2026-12-01T10:30:00.000Z"
    assert item["ended"] == "2026-12-01T10:00:00.000Z"
    assert TimerPage.model_validate(dumped) == page  # read back by either name


def test_show_names_every_fact_and_count() -> None:
    state = TimerState(
        applied=(3, 0),
        spec=SPEC,
        status=Status.PARKED,
        pending=Delivery(timer="c3:e0", slot=1, due=T0 + timedelta(minutes=30)),
        delivered=2,
        rejected=1,
        last_outcome="slot 1 parked: host answered 500",
        parked_error="host answered 500",
    )
    lines = show_lines(_info(status="Parked", state=state))
    assert lines == [
        f"{ID}: Parked",
        "  aggregate   eshop-order.order 42, tenant t1",
        "  key         grace",
        "  command     eshop.order.CancelOrder → eshop-order.order 42",
        "  rule        after PT30M",
        "  set by      commit c3",
        "  due         2026-12-01T10:30:00.000Z (slot 1, request id c3:e0#1, 0 skipped)",
        "  delivered   2 command(s) the host decided Ok",
        "  rejected    1 command(s) the host refused",
        "  applied     commit version 3, schedule event 0 (the last change applied: an older "
        "or equal one changes nothing)",
        "  last        slot 1 parked: host answered 500",
        "  parked      host answered 500",
    ]


def test_show_of_an_ended_timer_says_when_it_ended() -> None:
    state = TimerState(applied=(1, 0), spec=SPEC, status=Status.DELIVERED, delivered=1)
    ended = T0 + timedelta(minutes=30, seconds=1)
    lines = show_lines(
        _info(status="Delivered", running=False, due=None, ended=ended, state=state)
    )
    assert "  due         - (ended)" in lines
    assert "  ended       2026-12-01T10:30:01.000Z" in lines


def test_show_without_a_state_says_why() -> None:
    lines = show_lines(_info(state=None, waiting=["1 change(s) handed over"]))
    assert lines[-2:] == [
        "  state       not known: no worker answered",
        "  waiting     1 change(s) handed over",
    ]


def test_the_states_own_times_are_written_as_every_time_is() -> None:
    """In the answer only: the state the workflow keeps is not changed (its payload keeps
    the microseconds)."""
    due = T0 + timedelta(minutes=30, microseconds=1500)
    state = TimerState(
        spec=SPEC,
        next_due=due,
        pending=Delivery(timer="c3:e0", slot=1, due=due),
    )
    shown = _info(state=state).model_dump(mode="json")["state"]
    assert shown["next_due"] == shown["pending"]["due"] == "2026-12-01T10:30:00.001Z"
    assert shown["spec"]["first_due"] == "2026-12-01T10:30:00.000Z"
    assert TimerState.model_validate_json(state.model_dump_json()) == state
