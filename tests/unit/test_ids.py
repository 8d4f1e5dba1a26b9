"""Temporal identities (`wow_temporal.ids`): readable, and never shared by two timers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wow_temporal.ids import (
    InvalidIdError,
    decode_part,
    deletion_record_id,
    encode_part,
    parse_timer_workflow_id,
    timer_workflow_id,
)
from wow_temporal.model import AggregateRef

OWNER = AggregateRef(
    context_name="eshop-order", aggregate_name="order", tenant_id="t1", aggregate_id="42"
)


def ref(context: str, aggregate: str, tenant: str, aggregate_id: str) -> AggregateRef:
    return AggregateRef(
        context_name=context, aggregate_name=aggregate, tenant_id=tenant, aggregate_id=aggregate_id
    )


def test_plain_ids_read_as_they_are() -> None:
    assert timer_workflow_id(OWNER, "cancel") == "wow-timer:eshop-order.order:t1:42:cancel"
    blank_tenant = OWNER.model_copy(update={"tenant_id": ""})
    assert timer_workflow_id(blank_tenant, "k") == "wow-timer:eshop-order.order::42:k"
    assert deletion_record_id(OWNER) == "wow-deleted:eshop-order.order:t1:42"


def test_the_tenant_collision_found_in_the_wild_is_gone() -> None:
    """Tenant t1 + aggregate x:y and tenant t1:x + aggregate y shared one timer."""
    first = timer_workflow_id(ref("eshop-order", "order", "t1", "x:y"), "k")
    second = timer_workflow_id(ref("eshop-order", "order", "t1:x", "y"), "k")
    assert first == "wow-timer:eshop-order.order:t1:x%3Ay:k"
    assert second == "wow-timer:eshop-order.order:t1%3Ax:y:k"
    assert first != second


def test_percent_and_dots_are_encoded_where_they_could_collide() -> None:
    assert encode_part("50%") == "50%25"
    assert encode_part("a.b") == "a.b", "a dot is harmless outside the context name"
    assert encode_part("a.b", dot=True) == "a%2Eb"
    dotted_context = timer_workflow_id(ref("a.b", "c", "t", "1"), "k")
    dotted_aggregate = timer_workflow_id(ref("a", "b.c", "t", "1"), "k")
    assert dotted_context == "wow-timer:a%2Eb.c:t:1:k"
    assert dotted_aggregate == "wow-timer:a.b.c:t:1:k"
    assert decode_part("x%3Ay%25%2e") == "x:y%."


parts = st.text(
    alphabet=st.sampled_from(["a", "b", ":", "%", ".", "3", "A", "2", "5", "E", "é", " "]),
    min_size=0,
    max_size=6,
)
names = parts.filter(bool)
keys = st.from_regex(r"[A-Za-z0-9_-]{1,6}", fullmatch=True)


@given(
    st.tuples(names, names, parts, names, keys),
    st.tuples(names, names, parts, names, keys),
)
def test_distinct_timers_never_share_a_workflow_id(
    a: tuple[str, str, str, str, str], b: tuple[str, str, str, str, str]
) -> None:
    id_a = timer_workflow_id(ref(*a[:4]), a[4])
    id_b = timer_workflow_id(ref(*b[:4]), b[4])
    assert (id_a == id_b) == (a == b)
    assert (deletion_record_id(ref(*a[:4])) == deletion_record_id(ref(*b[:4]))) == (a[:4] == b[:4])


@given(names, names, parts, names, keys)
def test_a_timer_id_parses_back_to_its_owner_and_key(
    context: str, aggregate: str, tenant: str, aggregate_id: str, key: str
) -> None:
    owner = ref(context, aggregate, tenant, aggregate_id)
    assert parse_timer_workflow_id(timer_workflow_id(owner, key)) == (owner, key)


@pytest.mark.parametrize(
    "text",
    ["wow-job:x:y", "wow-timer:nodot:t:1:k", "wow-timer:a.b:t:1", "wow-timer:a.b:t:1:k:extra"],
)
def test_what_is_not_a_timer_id_is_refused(text: str) -> None:
    with pytest.raises(InvalidIdError, match="not a timer id"):
        parse_timer_workflow_id(text)
