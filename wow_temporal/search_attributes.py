"""The project's custom search attributes, declared once (the keys timers and jobs set and
list by), and their registration on a namespace (by `wow-temporal setup`, and on the embedded
servers)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from datetime import timedelta

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.client import Client
from temporalio.common import SearchAttributeKey
from temporalio.service import RPCError, RPCStatusCode

from wow_temporal.errors import WowTemporalError

__all__ = [
    "SA_AGGREGATE",
    "SA_AGGREGATE_ID",
    "SA_DUE",
    "SA_JOB",
    "SA_KEY",
    "SA_STATUS",
    "SA_TENANT",
    "SEARCH_ATTRIBUTES",
    "SearchAttributeError",
    "indexed_value_types",
    "register_search_attributes",
]

SA_AGGREGATE = SearchAttributeKey.for_keyword("WowAggregate")
"""A timer's aggregate, `context.aggregate` (`eshop-order.order`)."""
SA_AGGREGATE_ID = SearchAttributeKey.for_keyword("WowAggregateId")
SA_TENANT = SearchAttributeKey.for_keyword("WowTenant")
"""A timer's aggregate's tenant, or a job instance's."""
SA_KEY = SearchAttributeKey.for_keyword("WowKey")
"""A timer's key within its aggregate."""
SA_JOB = SearchAttributeKey.for_keyword("WowJob")
"""A job instance's bare job name (`receive-deliveries`)."""
SA_STATUS = SearchAttributeKey.for_keyword("WowStatus")
SA_DUE = SearchAttributeKey.for_datetime("WowDue")
"""When a timer's next command, or a job's next tick, is due."""

_KEYS = (SA_AGGREGATE, SA_AGGREGATE_ID, SA_TENANT, SA_KEY, SA_JOB, SA_STATUS, SA_DUE)

_INDEXED_VALUE_TYPES: dict[str, IndexedValueType.ValueType] = {
    "Text": IndexedValueType.INDEXED_VALUE_TYPE_TEXT,
    "Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    "Int": IndexedValueType.INDEXED_VALUE_TYPE_INT,
    "Double": IndexedValueType.INDEXED_VALUE_TYPE_DOUBLE,
    "Bool": IndexedValueType.INDEXED_VALUE_TYPE_BOOL,
    "Datetime": IndexedValueType.INDEXED_VALUE_TYPE_DATETIME,
    "KeywordList": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
}


_TYPE_NAMES = {int(kind): name for name, kind in _INDEXED_VALUE_TYPES.items()}

SEARCH_ATTRIBUTES: dict[str, str] = {
    key.name: _TYPE_NAMES[key.indexed_value_type.value] for key in _KEYS
}
"""The project's custom search attributes (name -> Temporal type name, as the CLI spells it)."""

_PROBES = {
    "Text": "= ''",
    "Keyword": "= ''",
    "Int": "= 0",
    "Double": "= 0",
    "Bool": "= false",
    "Datetime": "= '2000-01-01T00:00:00Z'",
    "KeywordList": "= ''",
}
"""A condition each type takes in a visibility query, to ask whether the server uses a name."""


class SearchAttributeError(WowTemporalError, ValueError):
    """Search attributes that cannot be registered: a type Temporal does not have, or a name
    the namespace already has with another type (the message names them)."""


USABLE_WITHIN = 30.0
"""How long registration waits for the server to use what it added (seconds)."""


def indexed_value_types(
    attributes: Mapping[str, str] = SEARCH_ATTRIBUTES,
) -> dict[str, IndexedValueType.ValueType]:
    """`attributes` (name -> type name) as the operator service takes them;
    `SearchAttributeError` for a type name Temporal does not have."""
    unknown = sorted(kind for kind in attributes.values() if kind not in _INDEXED_VALUE_TYPES)
    if unknown:
        raise SearchAttributeError(
            f"unknown search attribute types {unknown}; use {list(_INDEXED_VALUE_TYPES)}"
        )
    return {name: _INDEXED_VALUE_TYPES[kind] for name, kind in attributes.items()}


async def register_search_attributes(
    client: Client,
    namespace: str,
    attributes: Mapping[str, str] = SEARCH_ATTRIBUTES,
) -> list[str]:
    """Register the custom search attributes on `namespace`; idempotent.

    Returns the names actually added (empty when all already existed), once a visibility query
    naming them is taken (a server that caches them, as production ones do, refuses them for a
    moment; waited for at most `USABLE_WITHIN` seconds). Raises `SearchAttributeError` if a name
    exists with a different type.
    """
    wanted = indexed_value_types(attributes)
    existing = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=namespace)
    )
    known = dict(existing.custom_attributes)
    known.update(existing.system_attributes)
    clashes = [n for n, t in wanted.items() if n in known and known[n] != t]
    if clashes:
        raise SearchAttributeError(
            f"search attributes already registered with another type in {namespace!r}: "
            + ", ".join(sorted(clashes))
        )
    missing = {n: t for n, t in wanted.items() if n not in known}
    if not missing:
        return []
    try:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=namespace, search_attributes=missing)
        )
    except RPCError as err:
        if err.status != RPCStatusCode.ALREADY_EXISTS:
            raise
    await _until_usable(client, {n: attributes[n] for n in missing})
    return sorted(missing)


async def _until_usable(client: Client, attributes: Mapping[str, str]) -> None:
    """Until a visibility query naming every one of `attributes` is taken (or the wait is up)."""
    query = " AND ".join(f"{name} {_PROBES[kind]}" for name, kind in attributes.items())
    deadline = time.monotonic() + USABLE_WITHIN
    while True:
        try:
            await client.count_workflows(query, rpc_timeout=timedelta(seconds=5))
            return
        except RPCError as err:
            if err.status != RPCStatusCode.INVALID_ARGUMENT or time.monotonic() > deadline:
                return
        await asyncio.sleep(0.2)
