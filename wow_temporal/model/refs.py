"""Who a schedule belongs to: aggregate references, named aggregates and command scopes."""

from __future__ import annotations

from typing import Any

from pydantic import (
    Field,
)

from wow_temporal.model._base import WireModel

__all__ = ["AggregateRef", "NamedAggregate", "Scope"]


class AggregateRef(WireModel):
    """One aggregate instance: context, aggregate name, tenant and id."""

    context_name: str = Field(min_length=1)
    aggregate_name: str = Field(min_length=1)
    tenant_id: str
    aggregate_id: str = Field(min_length=1)

    @property
    def named(self) -> NamedAggregate:
        return NamedAggregate(self.context_name, self.aggregate_name)

    def __str__(self) -> str:
        return f"{self.context_name}.{self.aggregate_name} {self.aggregate_id}"


class NamedAggregate(WireModel):
    """An aggregate type in its bounded context, as in `NamedAggregate("eshop-order", "order")`."""

    context_name: str = Field(min_length=1)
    aggregate_name: str = Field(min_length=1)

    def __init__(self, context: str | None = None, aggregate: str | None = None, /, **data: Any):
        if context is not None:
            data["context_name"] = context
        if aggregate is not None:
            data["aggregate_name"] = aggregate
        super().__init__(**data)

    def ref(self, tenant_id: str, aggregate_id: str) -> AggregateRef:
        """The instance of this aggregate with that id in that tenant."""
        return AggregateRef(
            context_name=self.context_name,
            aggregate_name=self.aggregate_name,
            tenant_id=tenant_id,
            aggregate_id=aggregate_id,
        )

    def __str__(self) -> str:
        return f"{self.context_name}.{self.aggregate_name}"


class Scope(WireModel):
    """Who a commit (and so every command it schedules) belongs to."""

    tenant_id: str = ""
    owner_id: str = ""
    space_id: str = ""
