"""Revisions and upcasters (`domain.upcasting`): a body written at an older revision is chained
up to the one its class declares now; a chain with a gap, or leading nowhere the app reads,
refuses the app at start, naming it."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wow_temporal import App, CommandBody, Decision, aggregate, on_command, upcaster
from wow_temporal.domain.decision import scheduled_command
from wow_temporal.domain.upcasting import FIRST_REVISION, UpcastError, Upcasting, revision_of
from wow_temporal.model import ScheduleRule

pytestmark = pytest.mark.unit


class Cancel(CommandBody):
    __wow_type__ = "shop.Cancel"
    __wow_revision__: ClassVar[int] = 3
    cause: dict[str, str]


class Ping(CommandBody):
    __wow_type__ = "shop.Ping"


@aggregate("order")
class Order:
    def __init__(self, state: object) -> None:
        self.state = state

    @on_command(create=True)
    def cancel(self, command: Cancel) -> Decision:
        return Decision.NoOp

    @on_command(create=True)
    def ping(self, command: Ping) -> Decision:
        return Decision.NoOp


@upcaster("shop.CancelOrder", revision=1, to_type=Cancel)  # renamed, and its reason moved
def renamed(body: dict[str, Any]) -> dict[str, Any]:
    return {"why": body.pop("reason", "")}


@upcaster(Cancel, revision=2)
def structured(body: dict[str, Any]) -> dict[str, Any]:
    return {"cause": {"code": body["why"]}}


def app(*upcasters: Any) -> App:
    return App("shop", aggregates=[Order], upcasters=upcasters)


def test_a_body_is_chained_up_to_the_revision_its_class_declares() -> None:
    upcasting = app(renamed, structured).upcasting
    read = upcasting.upcast("shop.CancelOrder", "1", {"reason": "TIMEOUT"})
    assert (read.type, read.body) == ("shop.Cancel", {"cause": {"code": "TIMEOUT"}})
    assert [str(step) for step in read.applied] == [
        "shop.CancelOrder revision 1 -> 2 as shop.Cancel",
        "shop.Cancel revision 2 -> 3",
    ]
    now = upcasting.upcast("shop.Cancel", "3", {"cause": {"code": "X"}})
    assert now.applied == () and now.body == {"cause": {"code": "X"}}
    assert upcasting.upcast("shop.Cancel", None, {"any": 1}).applied == ()  # as read now


def test_a_gap_or_a_chain_leading_nowhere_refuses_the_app_naming_it() -> None:
    gap = r"a gap .* reach shop.Cancel revision 2, .* reads revision 3"
    with pytest.raises(ValueError, match=gap):
        app(renamed)
    with pytest.raises(ValueError, match=r"lead to shop.Gone, which no aggregate"):
        app(upcaster("shop.Old", revision=1, to_type="shop.Gone")(lambda body: body))
    with pytest.raises(ValueError, match=r"two upcasters of shop.Cancel revision 2"):
        app(renamed, structured, upcaster(Cancel, revision=2)(lambda body: body))
    with pytest.raises(ValueError, match="not an upcaster"):
        app(lambda body: body)


def test_what_cannot_be_read_says_why() -> None:
    upcasting = app(renamed, structured).upcasting
    with pytest.raises(UpcastError, match=r"shop.Cancel revision 7: no upcaster reads it"):
        upcasting.upcast("shop.Cancel", "7", {})
    with pytest.raises(UpcastError, match=r"shop.Cancel revision 2 -> 3 failed: KeyError"):
        upcasting.upcast("shop.Cancel", "2", {})


def test_a_type_no_aggregate_lists_is_left_as_sent() -> None:
    """A system command (`wow.DeleteAggregate` scheduled for later), or a type the aggregate
    will refuse as unknown: nothing to upcast."""
    upcasting = app(renamed, structured).upcasting
    read = upcasting.upcast("wow.DeleteAggregate", "1", {})
    assert (read.type, read.body, read.applied) == ("wow.DeleteAggregate", {}, ())


def test_a_scheduled_command_carries_the_revision_its_class_declares() -> None:
    rule = ScheduleRule.after(__import__("datetime").timedelta(minutes=5))
    declared = frozenset({"shop.Cancel", "shop.Ping"})
    revised = scheduled_command("k", rule, Cancel(cause={}), declared, "f", "here")
    plain = scheduled_command("k", rule, Ping(), declared, "f", "here")
    assert (revised.revision, plain.revision) == ("3", None)
    assert "revision" not in plain.model_dump(mode="json")  # as before revisions: old workers
    assert revision_of(Ping) is None and FIRST_REVISION == "1"


def test_revisions_and_upcasters_refuse_what_they_cannot_be() -> None:
    with pytest.raises(ValueError, match="give `to=` for a string one"):
        upcaster(Cancel, revision="v1")
    with pytest.raises(ValueError, match="leads to itself"):
        upcaster(Cancel, revision="a", to="a")
    with pytest.raises(ValueError, match="is not 1 to 64"):
        upcaster(Cancel, revision="two words")


@given(st.integers(2, 12), st.integers(1, 11))
def test_an_integer_chain_from_any_revision_reaches_the_current_one(
    current: int, start: int
) -> None:
    chain = [
        upcaster("t.T", revision=n)(lambda body, n=n: {**body, "seen": [*body["seen"], n]})
        for n in range(1, current)
    ]
    upcasting = Upcasting(chain, {"t.T": str(current)})
    if start > current:
        with pytest.raises(UpcastError):
            upcasting.upcast("t.T", str(start), {"seen": []})
        return
    read = upcasting.upcast("t.T", str(start), {"seen": []})
    assert read.body == {"seen": list(range(start, current))}
