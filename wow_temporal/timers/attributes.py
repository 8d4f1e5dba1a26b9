"""The custom search attributes of timers and deletion records, and what a timer starts with.

Kept apart from the workflows so that ingest, the deletion records and the workflow share them
without importing one another.
"""

from __future__ import annotations

from typing import Any

from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

from wow_temporal.model import AggregateRef
from wow_temporal.timers.core import TimerState

__all__ = [
    "SA_AGGREGATE",
    "SA_AGGREGATE_ID",
    "SA_DUE",
    "SA_KEY",
    "SA_STATUS",
    "SA_TENANT",
    "aggregate_search_attributes",
    "initial_search_attributes",
]

SA_AGGREGATE = SearchAttributeKey.for_keyword("WowAggregate")
SA_AGGREGATE_ID = SearchAttributeKey.for_keyword("WowAggregateId")
SA_TENANT = SearchAttributeKey.for_keyword("WowTenant")
SA_KEY = SearchAttributeKey.for_keyword("WowKey")
SA_STATUS = SearchAttributeKey.for_keyword("WowStatus")
SA_DUE = SearchAttributeKey.for_datetime("WowDue")


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
