"""The search attributes of job instances (the keys shared with the timers, plus `WowJob`)."""

from __future__ import annotations

from typing import Any

from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

from wow_temporal.timers.attributes import SA_DUE, SA_STATUS, SA_TENANT

__all__ = ["SA_DUE", "SA_JOB", "SA_STATUS", "SA_TENANT", "initial_search_attributes"]

SA_JOB = SearchAttributeKey.for_keyword("WowJob")
"""The bare job name (`receive-deliveries`)."""


def initial_search_attributes(job: str, tenant: str, status: str) -> TypedSearchAttributes:
    """What an instance starts with (free at start, unlike later upserts)."""
    pairs: list[SearchAttributePair[Any]] = [
        SearchAttributePair(SA_JOB, job),
        SearchAttributePair(SA_TENANT, tenant),
        SearchAttributePair(SA_STATUS, status),
    ]
    return TypedSearchAttributes(pairs)
