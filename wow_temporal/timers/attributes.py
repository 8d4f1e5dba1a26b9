"""The search attributes a timer and a deletion record start with (the keys are declared in
`wow_temporal.search_attributes`).

Kept apart from the workflows so that ingest, the deletion records and the workflow share them
without importing one another.
"""

from __future__ import annotations

from typing import Any

from temporalio.common import SearchAttributePair, TypedSearchAttributes

from wow_temporal.model import AggregateRef
from wow_temporal.search_attributes import (
    SA_AGGREGATE,
    SA_AGGREGATE_ID,
    SA_DUE,
    SA_KEY,
    SA_TENANT,
)
from wow_temporal.timers.core import TimerState

__all__ = ["aggregate_search_attributes", "initial_search_attributes"]


def aggregate_search_attributes(aggregate: AggregateRef) -> list[SearchAttributePair[Any]]:
    """`WowAggregate`, `WowAggregateId` and `WowTenant` of `aggregate`."""
    return [
        SearchAttributePair(SA_AGGREGATE, f"{aggregate.context_name}.{aggregate.aggregate_name}"),
        SearchAttributePair(SA_AGGREGATE_ID, aggregate.aggregate_id),
        SearchAttributePair(SA_TENANT, aggregate.tenant_id),
    ]


def initial_search_attributes(
    owner: AggregateRef, key: str, state: TimerState
) -> TypedSearchAttributes:
    """The search attributes a timer starts with (free at start, unlike later upserts)."""
    pairs = [*aggregate_search_attributes(owner), SearchAttributePair(SA_KEY, key)]
    if state.next_due is not None:
        pairs.append(SearchAttributePair(SA_DUE, state.next_due))
    return TypedSearchAttributes(pairs)
