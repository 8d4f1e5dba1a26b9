"""The search attributes a job instance starts with (the keys are declared in
`wow_temporal.search_attributes`)."""

from __future__ import annotations

from typing import Any

from temporalio.common import SearchAttributePair, TypedSearchAttributes

from wow_temporal.search_attributes import SA_JOB, SA_STATUS, SA_TENANT

__all__ = ["initial_search_attributes"]


def initial_search_attributes(job: str, tenant: str, status: str) -> TypedSearchAttributes:
    """What an instance starts with (free at start, unlike later upserts)."""
    pairs: list[SearchAttributePair[Any]] = [
        SearchAttributePair(SA_JOB, job),
        SearchAttributePair(SA_TENANT, tenant),
        SearchAttributePair(SA_STATUS, status),
    ]
    return TypedSearchAttributes(pairs)
